"""Send frames to an OpenTelemetry backend over OTLP (Phoenix, Jaeger, Tempo, a Collector).

``to_otlp(frames, url)`` is the Python API and the CLI's ``--otlp URL``: the mapping is
:mod:`.otlp_spans` (one root span per sample, requests under a byte budget), the
sending :mod:`.otlp_transport` (retries that never send a request twice once it may
have arrived), and a stopped export's resume :mod:`.otlp_journal` (by span id). A
request the receiver finds too large is sent again in halves, down to single spans.
The first two need the ``otel`` extra, imported here on use so the package works
without it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .otlp_journal import SpanJournal
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
    #: Requests the receiver found too large, sent again in halves.
    splits: int = 0
    #: Spans not sent because the journal holds them as taken by an earlier export.
    resumed_spans: int = 0
    #: Spans not sent because an earlier request of them got no reply: they may have
    #: arrived, and none is sent twice.
    unanswered_spans: int = 0

    def summary(self) -> str:
        split = (f", {self.splits} split in halves as too large for the receiver"
                 if self.splits else "")
        resumed = (f", {self.resumed_spans} taken before and not sent again"
                   if self.resumed_spans else "")
        return (f"sent {self.spans} spans ({self.events} events) in {self.traces} traces to "
                f"{self.endpoint} over {self.protocol}: {self.batches} requests, "
                f"{self.retries} retries, {self.seconds:.1f} s"
                f"{rejected_note(self.rejected_spans)}{split}{resumed}"
                f"{unanswered_note(self.unanswered_spans)}")


def rejected_note(spans: int) -> str:
    """What a report adds for ``spans`` the receiver took but rejected as invalid (an
    OTLP partial success)."""
    return f", {spans} rejected by the receiver" if spans else ""


def unanswered_note(spans: int) -> str:
    """What a report adds for ``spans`` not sent because their request got no reply."""
    return (f"; {spans} spans not sent again: a request of them got no reply and may "
            "have arrived" if spans else "")


def to_otlp(frames: TraceFrames, endpoint: str, *, protocol: str = "http/protobuf",
            headers: Mapping[str, str] | None = None, service_name: str | None = None,
            batch_spans: int | None = None, include_text: bool = False,
            compression: str | None = None, timeout: float | None = None,
            retry_seconds: float | None = None, progress: bool | None = None,
            batch_bytes: int | None = None, journal: SpanJournal | None = None
            ) -> OtlpReport:
    """Send ``frames`` to the OTLP receiver at ``endpoint``: one trace per sample, one
    span per measured span under its parent (see :mod:`.otlp_spans` for the mapping).

    ``protocol`` is ``"http/protobuf"`` (``endpoint`` a URL; a bare
    ``http://host:port`` gets ``/v1/traces``) or ``"grpc"`` (``host:port``).
    ``headers`` go with every request (an API key: ``{"authorization": "Bearer ..."}``).
    ``service_name`` names the service (default ``slime-rollout``). ``compression``
    ``"gzip"`` compresses every request, over either protocol. Requests hold at
    most ``batch_spans`` spans (default 1000) and ``batch_bytes`` serialized bytes
    (default 3 MiB, :data:`~.otlp_spans.DEFAULT_BATCH_BYTES`); a request the receiver
    asks to be sent later (HTTP 429/502/503/504, gRPC ``UNAVAILABLE`` or
    ``RESOURCE_EXHAUSTED``) is retried with back-off for up to ``retry_seconds`` (60).
    A request the receiver finds too large (HTTP 413, gRPC "larger than max") is sent
    again as two halves, and so on down to one span. Raises :class:`OtlpExportError`
    with a one-line reason when the receiver is unreachable or refuses the spans, or
    refuses one span alone as too large (naming it).

    With a ``journal`` (:class:`~.otlp_journal.SpanJournal`, one per frames and
    endpoint), an export that stopped resumes: spans whose request was taken before
    are not sent, nor are those of a request that may have arrived (no reply, or a
    process stopped while it was out: counted in ``unanswered_spans``); each try of a
    request is recorded there before it goes out and when it is answered. The journal
    is locked for the call (ValueError naming it when another export holds it) and
    may serve later calls. Span ids are fixed by the frames, so the batch options may
    differ from one run to the next. The report counts what this call sent.
    """
    try:
        from .otlp_spans import batch_layout, exported_span_count, otlp_batches
        from .otlp_transport import DEFAULT_TIMEOUT_SECONDS, RETRY_SECONDS, sender_for
    except ImportError as exc:
        raise ImportError(f"{_EXTRA_HINT} ({exc})") from exc

    report = OtlpReport(endpoint, protocol)
    sender = sender_for(endpoint, protocol, headers, timeout or DEFAULT_TIMEOUT_SECONDS,
                        compression)
    started = time.monotonic()
    bar = None
    retry_for = RETRY_SECONDS if retry_seconds is None else retry_seconds
    try:
        if journal is not None:
            journal.begin()  # locked, and read again, for this export
        known = 0 if journal is None else len(journal.confirmed) + len(journal.uncertain)
        bar = _progress_bar(max(exported_span_count(frames) - known, 0), progress)
        for batch in otlp_batches(frames, **batch_layout(service_name, batch_spans,
                                                         batch_bytes, include_text)):
            unsent = batch if journal is None else _unsent(batch, journal, report)
            if unsent is not None:
                _send_in_pieces(sender, unsent, report, retry_for, bar, journal)
    finally:
        if bar is not None:
            bar.close()
        if hasattr(sender, "close"):
            sender.close()
        if journal is not None:
            journal.close()
    report.seconds = time.monotonic() - started
    return report


def _unsent(batch: Any, journal: SpanJournal, report: OtlpReport) -> Any:
    """``batch`` without the spans ``journal`` knows were sent (taken, or perhaps taken:
    counted in ``report``); None when none is left."""
    from .otlp_spans import keep_spans, span_ids

    confirmed, uncertain = journal.known(span_ids(batch))
    if not (confirmed.any() or uncertain.any()):
        return batch
    report.resumed_spans += int(confirmed.sum())
    report.unanswered_spans += int((uncertain & ~confirmed).sum())
    return keep_spans(batch, (~(confirmed | uncertain)).tolist())


def _send_in_pieces(sender: Any, batch: Any, report: OtlpReport, retry_seconds: float,
                    bar: Any, journal: SpanJournal | None) -> None:
    """Send ``batch`` (retried as :func:`~.otlp_transport.send_with_retries` says) and
    count it in ``report``, recording each request in ``journal`` before it goes out
    and when it is answered; when the receiver finds it too large, send its halves
    instead, in order, and theirs, down to one span, which fails naming the span."""
    from .otlp_spans import describe_span, span_ids, split_batch
    from .otlp_transport import (
        OtlpExportError,
        RequestTooLarge,
        RequestUnanswered,
        send_with_retries,
    )

    waiting = [batch]
    while waiting:
        piece = waiting.pop()
        # the span ids, only for the journal: each try is recorded before it goes out
        attempting = None if journal is None else partial(journal.sending, span_ids(piece))
        try:
            reply, retries = send_with_retries(
                lambda request=piece.request: sender.send(request), report.endpoint,
                retry_seconds=retry_seconds, confirmed=report.spans, attempting=attempting,
                retrying=None if journal is None else journal.not_taken)
        except RequestUnanswered:
            raise  # it may have arrived: its journal record says so
        except RequestTooLarge as exc:
            if journal is not None:
                journal.not_taken()
            if piece.spans < 2:
                raise OtlpExportError(
                    f"{describe_span(piece)} is too large for the receiver on its own "
                    f"({exc}; {report.spans} span(s) confirmed before)") from None
            first, second = split_batch(piece)
            waiting += [second, first]
            report.splits += 1
            continue
        except OtlpExportError:
            if journal is not None:
                journal.not_taken()
            raise
        if journal is not None:
            journal.taken()
        report.batches += 1
        report.retries += retries
        report.rejected_spans += reply.rejected_spans
        report.traces += piece.traces
        report.spans += piece.spans
        report.events += piece.events
        if bar is not None:
            bar.update(piece.spans)


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
