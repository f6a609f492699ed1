"""The live stream (slime_trace_widget.tracing.live) against an OTLP sink in the test
process: records arrive exactly, in order, numbered; a receiver that is down, hung or
refusing never blocks or breaks recording, and what is lost is counted."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections import deque

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from slime_trace_widget.demo import make_demo_samples
from slime_trace_widget.schema import w3c_span_id, w3c_trace_id
from slime_trace_widget.tracing import (
    bind_trace,
    live,
    trace_event,
    trace_next_attempt,
    trace_span,
)
from slime_trace_widget.tracing.live import sender as live_sender
from slime_trace_widget.tracing.live.otlp import SCOPE_NAME, Encoder
from tests.support.live_sink import attributes

pytestmark = pytest.mark.usefixtures("no_stream_left")


def carrier_records(samples: list) -> list[dict]:
    return [record for sample in samples for record in sample["trace"]["events"]]


def record_a_little(samples: list[dict]) -> None:
    """Spans, events, a group span and a retry, through the recording API."""
    with trace_span(samples, "generate_and_rm_group", {"group_size": len(samples)}):
        for sample in samples:
            with trace_span(sample, "sglang_generate", {"turn": 0}) as span:
                trace_event(sample, "tool_result", {"chars": 12, "ok": True})
                span.set("completion_tokens", 7)
        trace_next_attempt(samples[0], {"reason": "retry"})
        with trace_span(samples[0], "reward_model") as span:
            span.set("reward", float("nan"))


def test_records_arrive_exactly_and_in_order(sink) -> None:
    stream = live.install(sink.endpoint)
    assert stream.enabled and live.install(sink.endpoint) is stream  # idempotent
    assert stream.slime_modules == ()  # slime is not installed here
    live.set_rollout(12)
    samples = [{"index": i, "group_index": 3} for i in range(4)]
    record_a_little(samples)
    stats = stream.close()
    records = carrier_records(samples)
    assert stats.sent == stats.seq == len(records) and stats.dropped == stats.queued == 0
    arrived = sink.records()
    assert [attrs["slime.seq"] for attrs, _ in arrived] == list(range(1, len(records) + 1))
    # The carriers' records interleave by time; per carrier, the stream keeps their order.
    for sample in samples:
        ours = [body for _, body in arrived if body["trace_id"] == sample["trace"]["trace_id"]]
        assert _same(ours, sample["trace"]["events"])
    for attrs, body in arrived:
        assert attrs["slime.record"] == body["type"]
        assert attrs["slime.sample_id"] == body["sample_id"]
        assert attrs["slime.group_id"] == 3 and attrs["slime.attempt"] == body["attempt"]
        assert attrs["slime.rollout_id"] == 12
    logs = sink.log_records()
    assert attributes(logs[-1])["slime.record"] == "close"
    assert attributes(logs[-1])["slime.seq"] == len(records)
    first = logs[0]
    body = arrived[0][1]
    assert first.trace_id.hex() == w3c_trace_id(body["trace_id"])
    assert first.span_id.hex() == w3c_span_id(body["span_id"])
    assert first.time_unix_nano == int(body["ts"] * 1e9)
    request = sink.taken()[0].resource_logs[0]
    resource = attributes(request.resource)
    assert resource["service.name"] == "slime-rollout"
    assert resource["process.pid"] == os.getpid()
    assert resource["slime.live.sender"] == stream.sender
    assert stream.sender.startswith(f"{socket.gethostname()}:{os.getpid()}:")
    assert request.scope_logs[0].scope.name == SCOPE_NAME
    # The last record of each batch says how many were dropped so far.
    for taken in sink.taken():
        batch = taken.resource_logs[0].scope_logs[0].log_records
        assert [("slime.dropped" in attributes(r)) for r in batch][-1]


def test_ended_spans_are_also_sent_as_spans(sink) -> None:
    stream = live.install(sink.endpoint)
    samples = [{"index": i, "group_index": 0} for i in range(2)]
    record_a_little(samples)
    stream.close()
    starts = {r["span_id"]: r for r in carrier_records(samples) if r["type"] == "span_start"}
    ends = {r["span_id"]: r for r in carrier_records(samples) if r["type"] == "span_end"}
    spans = {span.span_id.hex(): span for span in sink.spans()}
    assert len(spans) == len(ends) == stream.stats().spans_sent
    for span_id, end in ends.items():
        start = starts[span_id]
        span = spans[w3c_span_id(span_id)]
        assert span.name == start["name"]
        assert span.trace_id.hex() == w3c_trace_id(start["trace_id"])
        assert span.parent_span_id.hex() == (w3c_span_id(start["parent_span_id"])
                                             if "parent_span_id" in start else "")
        assert span.start_time_unix_nano == int(start["ts"] * 1e9)
        assert span.end_time_unix_nano == int(end["ts"] * 1e9)
        attrs = attributes(span)
        assert attrs["slime.sample_id"] == start["sample_id"]
        for key, value in {**start.get("attrs", {}), **end.get("attrs", {})}.items():
            assert attrs[key] == value or value != value  # NaN
    request = sink.taken("/v1/traces")[0]
    assert request.resource_spans[0].scope_spans[0].scope.name == SCOPE_NAME


def test_an_error_span_has_an_error_status(sink) -> None:
    stream = live.install(sink.endpoint)
    sample = {"index": 0, "group_index": 0}
    with pytest.raises(KeyError), trace_span(sample, "tool_call"):
        raise KeyError("no such tool")
    stream.close()
    (span,) = sink.spans()
    assert span.status.code == span.status.STATUS_CODE_ERROR
    assert "no such tool" in span.status.message


def test_records_go_while_the_stream_runs(sink) -> None:
    """Batches go out on their own (every ``interval``), not only at close."""
    stream = live.install(sink.endpoint, interval=0.1)
    sample = {"index": 0, "group_index": 0}
    for round_ in range(3):
        trace_event(sample, "tick", {"round": round_})
        sink.wait_for(lambda s, n=round_ + 1: len(s.records()) == stream.stats().sent == n)
    assert stream.stats().batches == 3 and stream.enabled


def test_an_idle_stream_sends_heartbeats(sink) -> None:
    stream = live.install(sink.endpoint, interval=0.05)
    trace_event({"index": 0}, "one")
    sink.wait_for(lambda s: any(attributes(r)["slime.record"] == "heartbeat"
                                for r in s.log_records()))
    beat = next(attributes(r) for r in sink.log_records()
                if attributes(r)["slime.record"] == "heartbeat")
    assert beat["slime.seq"] == 1 and beat["slime.dropped"] == 0 and beat["slime.queued"] == 0
    assert stream.enabled


def test_close_flushes_what_is_queued(sink) -> None:
    stream = live.install(sink.endpoint, interval=0.5)
    sample = {"index": 0, "group_index": 0}
    for k in range(500):
        trace_event(sample, "tick", {"k": k})
    stats = stream.close(timeout=60)
    assert stats.sent == 500 and stats.queued == 0 and not stream.enabled
    assert [body["attrs"]["k"] for _, body in sink.records()] == list(range(500))
    assert live.current_stream() is None
    trace_event(sample, "after close")  # recorded, not streamed
    assert stream.stats().seq == 500


def stream_ticks_to_a_mute_listener(listener: socket.socket, count: int) -> live.LiveStream:
    """A stream (queue of 100, batches of 10, posts that wait up to 600 s) to a listener
    that never answers, and ``count`` events recorded through it."""
    port = listener.getsockname()[1]
    stream = live.install(f"http://127.0.0.1:{port}", capacity=100, max_batch=10,
                          interval=0.05, timeout=600)
    sample = bind_trace({"index": 0, "group_index": 0})
    for k in range(count):
        trace_event(sample, "tick", {"k": k})
    return stream


def test_a_hung_receiver_never_blocks_recording(monkeypatch) -> None:
    """A receiver that takes the connection and never answers: the sender waits on it,
    the recording thread does not; the queue keeps its bound and counts the drops."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=8)
    try:
        stream = stream_ticks_to_a_mute_listener(listener, 5_000)
        stats = stream.stats()
        assert stats.sent == 0 and stats.seq == 5_000
        assert stats.queued <= 100 + 10
        assert stats.dropped + stats.queued == 5_000
    finally:
        listener.close()  # the hung request fails: the sender goes on
    stats = stream.close(timeout=1.0)
    assert stats.sent == 0 and stats.dropped == 5_000 and stats.queued == 0


def test_close_settles_the_counts_while_the_receiver_still_hangs() -> None:
    """The receiver takes the request and never answers, and is still there when the
    stream closes: close cuts the wait, and every record is sent or counted dropped."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=8)
    try:
        stream = stream_ticks_to_a_mute_listener(listener, 500)
        listener.settimeout(120)  # hang guard
        connection, _ = listener.accept()
        connection.settimeout(120)
        assert connection.recv(1)  # a post is on the wire, waiting for its answer
        stats = stream.close(timeout=1.0)
        assert stats.queued == 0 and stats.sent == 0
        assert stats.dropped == stats.seq == 500
        connection.close()
    finally:
        listener.close()


def test_close_settles_the_counts_when_ended_spans_wait_too() -> None:
    """With ended spans in the batch, the sender went on to post them after the close's
    deadline, on a new connection with the full per-request wait: close returned with
    hundreds of records still queued, settled only about ten seconds later."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def take_and_never_answer() -> None:
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:  # a look at ``stop`` now and then
                continue
            except OSError:
                return

    listener.settimeout(0.1)

    taker = threading.Thread(target=take_and_never_answer, daemon=True)
    taker.start()
    try:
        port = listener.getsockname()[1]
        stream = live.install(f"http://127.0.0.1:{port}", timeout=600)
        samples = [{"index": k, "group_index": k} for k in range(200)]
        for _ in range(3):
            for sample in samples:
                with trace_span(sample, "x"):
                    pass
            deadline = time.monotonic() + 120  # hang guard
            while not held:  # a post of this round is on the wire, never to be answered
                assert time.monotonic() < deadline
                time.sleep(0.01)
        stats = stream.close(timeout=1.0)
        assert stats.queued == 0 and stats.sent == 0
        assert stats.dropped == stats.seq == 1200
    finally:
        stop.set()
        listener.close()
        for connection in held:
            connection.close()
        taker.join(120)


def test_a_receiver_that_is_down_costs_nothing_but_the_records(sink) -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    stream = live.install(f"http://127.0.0.1:{port}", capacity=1_000, interval=0.05)
    sample = {"index": 0, "group_index": 0}
    for k in range(3_000):
        trace_event(sample, "tick", {"k": k})
    assert len(sample["trace"]["events"]) == 3_000
    stats = stream.close(timeout=0.5)
    assert stats.sent == 0 and stats.dropped == 3_000 and stats.seq == 3_000


def test_503_with_retry_after_is_retried_then_delivered(sink) -> None:
    sink.answers.extend([(503, {"Retry-After": "1"}), (503, {"Retry-After": "1"})])
    stream = live.install(sink.endpoint)
    sample = {"index": 0, "group_index": 0}
    for k in range(20):
        trace_event(sample, "tick", {"k": k})
    sink.wait_for(lambda s: stream.stats().sent == 20)
    stats = stream.stats()
    assert stats.retries >= 2 and stats.sent == 20 and stats.dropped == 0
    posts = [post for post in sink.posts if post.path == "/v1/logs"]
    assert [post.status for post in posts[:3]] == [503, 503, 200]
    # Retry-After honoured: each retry came at least a second after the refusal.
    assert posts[1].arrived - posts[0].arrived >= 0.9
    assert posts[2].arrived - posts[1].arrived >= 0.9
    assert [attrs["slime.seq"] for attrs, _ in sink.records()] == list(range(1, 21))


def test_a_429_storm_holds_a_bounded_number_of_records(sink) -> None:
    sink.default = (429, {"Retry-After": "0"})
    stream = live.install(sink.endpoint, capacity=300, max_batch=50, interval=0.05)
    sample = {"index": 0, "group_index": 0}
    most_held = 0
    for k in range(20_000):
        trace_event(sample, "tick", {"k": k})
        if k % 500 == 0:
            most_held = max(most_held, stream.stats().queued)
    sink.wait_for(lambda s: len(s.posts) >= 5)
    stats = stream.stats()
    assert most_held <= 300 + 50 and stats.queued <= 300 + 50
    assert stats.dropped >= 20_000 - 350 and stats.retries >= 4
    sink.default = (200, {})  # the storm ends: what was held arrives, the loss is counted
    final = stream.close(timeout=60)
    arrived = [attrs["slime.seq"] for attrs, _ in sink.records()]
    assert final.sent == len(arrived) and final.sent + final.dropped == 20_000
    assert len(set(arrived)) == len(arrived) and arrived == sorted(arrived)
    close = next(attributes(r) for r in sink.log_records()
                 if attributes(r)["slime.record"] == "close")
    assert close["slime.dropped"] == final.dropped and close["slime.seq"] == 20_000


def test_a_refused_batch_is_counted_and_the_stream_goes_on(sink) -> None:
    sink.answers.append((400, {}))
    stream = live.install(sink.endpoint, interval=0.05)
    sample = {"index": 0, "group_index": 0}
    trace_event(sample, "refused")
    sink.wait_for(lambda s: len(s.posts) >= 1)
    trace_event(sample, "taken")
    stats = stream.close()
    assert stats.dropped == 1 and stats.sent == 1
    ((attrs, body),) = sink.records()
    assert body["name"] == "taken" and attrs["slime.seq"] == 2


def test_a_record_that_cannot_be_encoded_is_counted_and_the_stream_goes_on(sink) -> None:
    """A trace id past Python's digit limit has no text, so no W3C trace id, which the
    receiver needs: that record is dropped and counted, and the sender keeps sending
    the records after it."""
    stream = live.install(sink.endpoint, interval=0.05)
    sample = {"index": 0, "group_index": 0}
    trace_event(sample, "before")
    trace_event({"index": 1, "group_index": 0, "trace": {"trace_id": 10**5000}}, "huge")
    trace_event(sample, "after")
    stats = stream.close(timeout=60)
    assert stats.dropped == 1 and stats.sent == 2 and stats.queued == 0
    assert [body["name"] for _, body in sink.records()] == ["before", "after"]


def test_a_real_rollout_on_a_real_clock_arrives_whole(sink) -> None:
    stream = live.install(sink.endpoint)
    live.set_rollout(5)
    samples = make_demo_samples(24, seed=3, rollout_id=5, real_time_scale=0.005)
    stats = stream.close(timeout=60)
    records = carrier_records(samples)
    assert stats.seq == stats.sent == len(records) and stats.dropped == 0
    arrived = sink.records()
    assert [attrs["slime.seq"] for attrs, _ in arrived] == list(range(1, len(records) + 1))
    for sample in samples:
        trace_id = sample["trace"]["trace_id"]
        ours = [body for _, body in arrived if body["trace_id"] == trace_id]
        assert _same(ours, sample["trace"]["events"])
    assert {attrs["slime.rollout_id"] for attrs, _ in arrived} == {5}
    assert stream.stats().batches >= 2  # it streamed while the rollout ran


def test_no_endpoint_means_off(monkeypatch) -> None:
    stream = live.install()
    assert not stream.enabled and live.ENV_VAR in stream.reason
    assert stream.stats() == live.LiveStats() and live.current_stream() is None
    stream.close()
    monkeypatch.setenv(live.ENV_VAR, "   ")
    assert not live.install().enabled


def test_the_environment_variable_turns_it_on(sink, monkeypatch) -> None:
    monkeypatch.setenv(live.ENV_VAR, f" {sink.endpoint} ")
    with live.install() as stream:  # the handle closes (and flushes) as a context manager
        assert stream.enabled and stream.endpoint == sink.endpoint
        trace_event({"index": 1}, "hello")
    assert not stream.enabled and stream.stats().sent == 1
    assert [body["name"] for _, body in sink.records()] == ["hello"]


def test_a_bad_endpoint_is_refused_at_install(monkeypatch) -> None:
    with pytest.raises(live.EndpointError, match="endpoint"):
        live.install("127.0.0.1:4318")
    monkeypatch.setenv(live.ENV_VAR, "ftp://collector")
    with pytest.raises(live.EndpointError, match=r"\$SLIME_TRACE_LIVE"):
        live.install()
    with pytest.raises(ValueError, match="interval"):
        live.install("http://127.0.0.1:1", interval=2.0)
    assert live.current_stream() is None


def test_set_rollout_takes_integers_only() -> None:
    with pytest.raises(TypeError):
        live.set_rollout("3")  # type: ignore[arg-type]
    live.set_rollout(4)
    assert live.current_rollout() == 4
    live.set_rollout(None)
    assert live.current_rollout() is None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_does_not_stream_its_parents_stream(sink) -> None:
    stream = live.install(sink.endpoint)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no stream, recording still works
        try:
            trace_event({"index": 9}, "in the child")
            ok = live.current_stream() is None
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    assert os.read(read, 1) == b"1"
    os.waitpid(pid, 0)
    os.close(read)
    trace_event({"index": 1}, "in the parent")
    stream.close()
    assert [body["name"] for _, body in sink.records()] == ["in the parent"]


def test_many_threads_record_at_once(sink) -> None:
    stream = live.install(sink.endpoint)
    samples = [{"index": i, "group_index": 0} for i in range(8)]

    def work(sample: dict) -> None:
        for k in range(300):
            trace_event(sample, "tick", {"k": k})

    threads = [threading.Thread(target=work, args=(s,)) for s in samples]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stats = stream.close(timeout=60)
    assert stats.sent == stats.seq == 2_400
    assert sorted(a["slime.seq"] for a, _ in sink.records()) == list(range(1, 2_401))


def _same(bodies: list[dict], records: list[dict]) -> bool:
    """Bodies equal the records (NaN equal to NaN, as the carrier holds it)."""
    import json

    return json.dumps(bodies) == json.dumps(records)


def test_a_batch_goes_in_requests_of_bounded_size(sink, monkeypatch) -> None:
    """A batch too big for one request goes in several, in order; a record that alone
    is over the bound is counted dropped, and the others still arrive."""
    monkeypatch.setattr(live_sender, "MAX_REQUEST_BYTES", 20_000)
    stream = live.install(sink.endpoint, interval=0.05, max_batch=5_000)
    sample = {"index": 0, "group_index": 0}
    for k in range(200):
        trace_event(sample, "padded", {"k": k, "pad": "x" * 400})
        if k == 100:
            trace_event(sample, "huge", {"pad": "y" * 50_000})
    stats = stream.close(timeout=60)
    assert stats.sent == 200 and stats.dropped == 1 and stats.queued == 0
    assert [body["attrs"]["k"] for _, body in sink.records()] == list(range(200))
    assert len(sink.taken()) >= 5  # 200 records of about 0.6 kB in 20 kB requests
    assert all(post.request.ByteSize() <= 21_000 for post in sink.posts
               if post.path == "/v1/logs")


def test_records_the_receiver_would_refuse_are_dropped_alone() -> None:
    """The receiver refuses a whole request holding a record without a 16-byte trace id
    or with a time outside (0, 2**63) ns: such a time is replaced by the queueing time
    (the body keeps its own), and a record without a trace id is left out, counted."""
    encoder = Encoder({"service.name": "t"})
    good = {"type": "event", "name": "e", "ts": 5.0, "trace_id": "a" * 32}
    batch = [(1, 77, None, {**good, "ts": 0.0}), (2, 78, None, {**good, "ts": 1e10}),
             (3, 79, None, {**good, "trace_id": None}), (4, 80, None, good),
             (5, 81, None, {**good, "ts": 5e-10}), (6, 82, None, {**good, "type": ""}),
             (7, 83, None, {**good, "type": "t" * 65}),
             (8, 84, None, {**good, "type": "receiver_start"})]
    records, _, unencodable = encoder.encode(batch, 0)
    assert unencodable == 4
    logs = ExportLogsServiceRequest()
    logs.ParseFromString(encoder.request(records))
    times = [r.time_unix_nano for r in logs.resource_logs[0].scope_logs[0].log_records]
    assert times == [77, 78, 5 * 10**9, 81]


def test_a_sender_thread_that_fails_counts_what_it_leaves(sink, monkeypatch) -> None:
    """A failure inside the sender thread (a bug) ends streaming: the handle says so,
    and every record queued or recorded later is counted dropped, never left queued."""
    def broken(records: list, limit: int) -> tuple:
        raise RuntimeError("a bug in the sender, with a batch in hand")

    monkeypatch.setattr(live_sender, "_pieces", broken)
    stream = live.install(sink.endpoint, interval=0.05)
    sample = {"index": 0, "group_index": 0}
    for _ in range(5):
        trace_event(sample, "first")
    deadline = time.monotonic() + 120
    while stream.enabled:
        assert time.monotonic() < deadline, "the sender thread never stopped"
        time.sleep(0.05)
    trace_event(sample, "after")
    stats = stream.close(timeout=1.0)
    assert stats.seq == 6 and stats.dropped == 6 and stats.queued == 0 and stats.sent == 0


def test_endpoints_and_timeouts_that_cannot_work_are_refused_at_install() -> None:
    for endpoint in ("http://" + "a" * 64 + ".example:4318", "http://a..b:4318"):
        with pytest.raises(live.EndpointError, match="endpoint"):
            live.install(endpoint)
    for timeout in (float("inf"), 1e10, float("nan")):
        with pytest.raises(ValueError, match="timeout"):
            live.install("http://127.0.0.1:1", timeout=timeout)
    with pytest.raises(ValueError, match="64-bit"):
        live.set_rollout(2**63)
    assert live.current_stream() is None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_s_copy_of_the_handle_is_closed_and_never_hangs(sink) -> None:
    """The child may still hold the parent's handle; a lock of its queue held by a
    parent's thread at the fork must not hang the child's stats() or close()."""
    stream = live.install(sink.endpoint)
    read, write = os.pipe()
    lock = stream._outbox._lock
    lock.acquire()  # as if a recording thread were queueing at the very moment
    try:
        pid = os.fork()
        if pid == 0:
            try:
                signal.alarm(60)  # hang guard: a hang ends the child, the parent sees "0"
                stream.offer({"type": "event", "name": "in the child"})
                stats = stream.close(timeout=1.0)
                ok = not stream.enabled and stats.seq == 0
                os.write(write, b"1" if ok else b"0")
            finally:
                os._exit(0)
    finally:
        lock.release()
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        assert answer.read(1) == b"1"
    os.waitpid(pid, 0)
    stream.close()


def test_a_traces_endpoint_asking_to_wait_long_never_holds_the_logs(sink) -> None:
    """Spans are a courtesy: a 429 asking to wait 10 s costs one try, not the stream."""
    sink.path_answers["/v1/traces"] = deque([(429, {"Retry-After": "10"})])  # then 200
    stream = live.install(sink.endpoint, interval=0.05)
    sample = bind_trace({"index": 0, "group_index": 0})
    with trace_span(sample, "generate"):
        pass
    sink.wait_for(lambda s: any(p.path == "/v1/traces" for p in s.posts))
    trace_event(sample, "later")
    sink.wait_for(lambda s: any(body["name"] == "later" for _, body in s.records()))
    assert [p.status for p in sink.posts if p.path == "/v1/traces"] == [429]
    stats = stream.close(timeout=5.0)
    assert stats.spans_dropped == 1 and stats.spans_sent == 0
