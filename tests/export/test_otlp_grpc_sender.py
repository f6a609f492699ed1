"""The gRPC sender against receivers that refuse in ways a proxy or a busy receiver
does: what it retries, what it stops on, and that it never hangs doing so."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from slime_trace_widget.export.otlp import to_otlp
from slime_trace_widget.export.otlp_spans import exported_span_count
from slime_trace_widget.export.otlp_transport import GrpcSender, OtlpExportError
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.loading import load_frames
from tests.support.grpc_trace_service import serving

grpc = pytest.importorskip("grpc")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
#: Seconds an export may take before the test calls it hung (they take a few).
HANG_GUARD_SECONDS = 120


@pytest.fixture(scope="module")
def frames() -> TraceFrames:
    return load_frames([FIXTURES / "small.pt"])


class _Scripted:
    """A TraceService answering each request of spans from ``spans`` (a status code, or
    None to take it; then it takes all) and each empty request with ``empty`` (None:
    answered at once, as the OpenTelemetry Collector does)."""

    def __init__(self, spans: list, empty: Any = None) -> None:
        self.spans, self.empty = spans, empty
        self.taken: list[ExportTraceServiceRequest] = []

    def Export(self, request, context):  # the generated service's method name
        code = self.empty if not request.resource_spans else \
            (self.spans.pop(0) if self.spans else None)
        if code is not None:
            context.abort(code, "backend down, try later")
        if request.resource_spans:
            self.taken.append(request)
        return ExportTraceServiceResponse()


def _within_guard(call: Callable[[], Any]) -> Any:
    """``call()``'s result, or the exception it raised, failing the test if it hangs."""
    out: list = []

    def run() -> None:
        try:
            out.append(call())
        except Exception as exc:
            out.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(HANG_GUARD_SECONDS)
    assert not worker.is_alive(), f"still running after {HANG_GUARD_SECONDS} s"
    return out[0]


def test_a_receiver_refusing_every_request_unavailable_is_retried(frames) -> None:
    """A proxy answering every call UNAVAILABLE while its backend is down, the empty
    request after it too: the connection held (its state never changed), so the status
    was the receiver's and the request is sent again, never taken for a lost one."""
    unavailable = grpc.StatusCode.UNAVAILABLE
    service = _Scripted([unavailable, unavailable], empty=unavailable)
    with serving(service) as (address, _):
        report = _within_guard(lambda: to_otlp(frames, address, protocol="grpc",
                                               retry_seconds=60, progress=False))
    assert not isinstance(report, Exception), report
    assert report.retries == 2 and report.spans == exported_span_count(frames)
    assert len(service.taken) == 1


def test_an_export_refused_after_a_retry_ends_with_the_refusal(frames) -> None:
    """UNAVAILABLE (the empty request after it answered), then a refusal: the export
    stops with the receiver's words, and closing its channel does not hang."""
    service = _Scripted([grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INVALID_ARGUMENT])
    with serving(service) as (address, _):
        outcome = _within_guard(lambda: to_otlp(frames, address, protocol="grpc",
                                                retry_seconds=60, progress=False))
    assert isinstance(outcome, OtlpExportError)
    assert "refused the spans: gRPC INVALID_ARGUMENT" in str(outcome)


def test_a_receiver_that_stays_unavailable_is_given_up_on_in_time(frames) -> None:
    service = _Scripted([grpc.StatusCode.UNAVAILABLE] * 1_000)
    with serving(service) as (address, _):
        outcome = _within_guard(lambda: to_otlp(frames, address, protocol="grpc",
                                                retry_seconds=2, progress=False))
    assert isinstance(outcome, OtlpExportError) and "gave up after" in str(outcome)
    assert not service.taken


@pytest.mark.parametrize(("headers", "named"), [
    ({"API Key": "x"}, "'api key'"),
    ({"api-key": "caf\u00e9"}, "'api-key'"),
    ({"api-key": "a\nb"}, "'api-key'"),
    ({"x-token-bin": 5}, "'x-token-bin'"),
    ({"grpc-timeout": "1S"}, "'grpc-timeout'"),
    ({"Content-Type": "text/plain"}, "'content-type'"),
])
def test_a_header_grpc_would_refuse_is_a_one_line_error(headers, named) -> None:
    with pytest.raises(OtlpExportError, match=named) as caught:
        GrpcSender("127.0.0.1:4317", headers=headers)
    assert "\n" not in str(caught.value)


def test_a_binary_header_goes_as_its_bytes() -> None:
    seen: list = []

    class _Recording:
        def Export(self, request, context):
            seen.extend(context.invocation_metadata())
            return ExportTraceServiceResponse()

    with serving(_Recording()) as (address, _):
        sender = GrpcSender(address, headers={"Trace-Token-Bin": "\u00e9t\u00e9"})
        try:
            sender.send(ExportTraceServiceRequest())
        finally:
            sender.close()
    assert ("trace-token-bin", "\u00e9t\u00e9".encode()) in [tuple(item) for item in seen]


def test_a_closed_sender_refuses_to_send_and_closes_once() -> None:
    with serving(_Scripted([])) as (address, _):
        sender = GrpcSender(address)
        sender.send(ExportTraceServiceRequest())
        sender.close()
        sender.close()
        with pytest.raises(OtlpExportError, match="closed"):
            sender.send(ExportTraceServiceRequest())


def test_an_interrupted_close_still_closes_the_channel() -> None:
    """A Ctrl-C while the channel closes stops the caller's wait; the close goes on, as
    a second ``close()`` (a no-op) could not do it again."""
    import _thread
    import asyncio
    import signal
    import time

    # Ctrl-C as Python delivers it, whatever handler an earlier test left installed
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with serving(_Scripted([])) as (address, _):
            sender = GrpcSender(address)
            sender.send(ExportTraceServiceRequest())
            channel = sender.channel
            waiting, release, closed = threading.Event(), threading.Event(), threading.Event()
            real_close = channel.close

            async def slow_close(*args: Any) -> None:
                waiting.set()
                deadline = time.monotonic() + HANG_GUARD_SECONDS  # fails, never hangs
                while not release.is_set() and time.monotonic() < deadline:
                    await asyncio.sleep(0.01)
                await real_close(*args)
                closed.set()

            channel.close = slow_close
            interrupter = threading.Thread(
                target=lambda: waiting.wait(HANG_GUARD_SECONDS) and _thread.interrupt_main())
            interrupter.start()
            with pytest.raises(KeyboardInterrupt):
                sender.close()
            interrupter.join(HANG_GUARD_SECONDS)
            release.set()
            assert closed.wait(HANG_GUARD_SECONDS)
            sender.close()  # closed once: nothing more to do
    finally:
        signal.signal(signal.SIGINT, before)
