"""Send frames to an OpenTelemetry backend over OTLP (Phoenix, Jaeger, Tempo, a Collector).

``to_otlp(frames, url)`` is the Python API and the CLI's ``--otlp URL``: the mapping is
:mod:`.otlp_spans` (one trace per sample), the sending :mod:`.otlp_transport`
(batches, retries that never send a request twice once it may have arrived). Both
need the ``otel`` extra, imported here on use so the package works without it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .otlp_spans import TraceFrames

#: Exports of more spans than this show a progress bar by default (in a terminal or kernel).
PROGRESS_SPANS = 20_000
_EXTRA_HINT = "OTLP export needs the otel extra: pip install 'slime-trace-widget[otel]'"


@dataclass
class OtlpReport:
    """What one export sent and what the receiver said."""

    endpoint: str
    protocol: str
    traces: int = 0
    spans: int = 0
    events: int = 0
    batches: int = 0
    retries: int = 0
    rejected_spans: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        rejected = (f", {self.rejected_spans} rejected by the receiver"
                    if self.rejected_spans else "")
        return (f"sent {self.spans} spans ({self.events} events) in {self.traces} traces to "
                f"{self.endpoint} over {self.protocol}: {self.batches} requests, "
                f"{self.retries} retries, {self.seconds:.1f} s{rejected}")


def to_otlp(frames: TraceFrames, endpoint: str, *, protocol: str = "http/protobuf",
            headers: Mapping[str, str] | None = None, service_name: str | None = None,
            batch_spans: int | None = None, include_text: bool = False,
            compression: str | None = None, timeout: float | None = None,
            retry_seconds: float | None = None, progress: bool | None = None) -> OtlpReport:
    """Send ``frames`` to the OTLP receiver at ``endpoint``: one trace per sample, one
    span per measured span under its parent (see :mod:`.otlp_spans` for the mapping).

    ``protocol`` is ``"http/protobuf"`` (``endpoint`` a URL; a bare
    ``http://host:port`` gets ``/v1/traces``) or ``"grpc"`` (``host:port``).
    ``headers`` go with every request (an API key: ``{"authorization": "Bearer ..."}``).
    ``service_name`` names the service (default ``slime-rollout``). Requests hold about
    ``batch_spans`` spans (default 1000); a request the receiver asks to be sent later
    (HTTP 429/502/503/504, gRPC ``UNAVAILABLE``) is retried with back-off for up to
    ``retry_seconds`` (60). Raises :class:`OtlpExportError` with a one-line reason
    when the receiver is unreachable or refuses the spans.
    """
    try:
        from .otlp_spans import (
            DEFAULT_BATCH_SPANS,
            DEFAULT_SERVICE,
            exported_span_count,
            otlp_batches,
        )
        from .otlp_transport import (
            DEFAULT_TIMEOUT_SECONDS,
            RETRY_SECONDS,
            send_with_retries,
            sender_for,
        )
    except ImportError as exc:
        raise ImportError(f"{_EXTRA_HINT} ({exc})") from exc

    report = OtlpReport(endpoint, protocol)
    sender = sender_for(endpoint, protocol, headers, timeout or DEFAULT_TIMEOUT_SECONDS,
                        compression)
    started = time.monotonic()
    total = exported_span_count(frames)
    bar = _progress_bar(total, progress)
    try:
        for batch in otlp_batches(frames, service_name=service_name or DEFAULT_SERVICE,
                                  batch_spans=batch_spans or DEFAULT_BATCH_SPANS,
                                  include_text=include_text):
            reply, retries = send_with_retries(
                lambda request=batch.request: sender.send(request), endpoint,
                retry_seconds=RETRY_SECONDS if retry_seconds is None else retry_seconds,
                confirmed=report.spans)
            report.batches += 1
            report.retries += retries
            report.rejected_spans += reply.rejected_spans
            report.traces += batch.traces
            report.spans += batch.spans
            report.events += batch.events
            if bar is not None:
                bar.update(batch.spans)
    finally:
        if bar is not None:
            bar.close()
        if hasattr(sender, "close"):
            sender.close()
    report.seconds = time.monotonic() - started
    return report


def _progress_bar(total: int, progress: bool | None) -> Any:
    """A tqdm bar of spans sent, shown by default for large exports someone watches."""
    if progress is None:
        isatty = getattr(sys.stderr, "isatty", None)
        watched = bool(isatty and isatty()) or "ipykernel" in sys.modules
        progress = watched and total > PROGRESS_SPANS
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="span", unit_scale=True, desc="OTLP", dynamic_ncols=True)
