"""Which files a read of the live store walks, against a real collector
(``slime-trace-viewer collect``) restarted between its runs: a collector run that
received nothing does not end the walk back through a rollout, and a slow sender's late
record of the rollout before, arriving after the write-ahead file rolled, does not send
``LiveReader`` or ``load_live`` back to that rollout (``docs/live-store.md``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from slime_trace_widget.sources.live import LiveReader, load_live
from tests.support.live_wire import Poster, Sender
from tests.support.receiver import Receiver, start_receiver

#: Record times: a minute ago, so no span is judged by a clock of the future.
T0 = time.time() - 60


@pytest.fixture
def collector_runs(tmp_path: Path) -> Iterator[Callable[[], Receiver]]:
    """Starts collectors on one folder (``tmp_path/collector``), one run after another;
    any still running at the end is stopped."""
    started: list[Receiver] = []

    def start() -> Receiver:
        started.append(start_receiver(tmp_path / "collector"))
        return started[-1]

    yield start
    for receiver in started:
        receiver.kill()


def record(trace: str, kind: str, span: str | None, ts: float, sample: int = 0) -> dict:
    """A trace record as ``tracing.live`` sends it."""
    return {"type": kind, "name": "generate", "span_id": span, "trace_id": trace, "ts": ts,
            "sample_id": sample, "group_id": 0, "attempt": 0}


def post(receiver: Receiver, request: object) -> None:
    """Send ``request`` to ``receiver``; it answers once the rows are on disk."""
    poster = Poster(receiver.http_port)
    try:
        status, body = poster.post(request)  # type: ignore[arg-type]
        assert status == 200, (status, body)
    finally:
        poster.close()


def test_a_collector_run_that_received_nothing_does_not_cut_the_rollout(
        collector_runs: Callable[[], Receiver], tmp_path: Path) -> None:
    sender = Sender()
    first = collector_runs()
    post(first, sender.request([record("a" * 32, "span_start", "s1", T0),
                                record("a" * 32, "span_end", "s1", T0 + 1)], rollout_id=5))
    first.stop()
    collector_runs().stop()  # a run that received nothing: a file of its start and stop
    third = collector_runs()
    post(third, sender.request([record("b" * 32, "span_start", "s2", T0 + 2, sample=1),
                                record("b" * 32, "span_end", "s2", T0 + 3, sample=1)],
                               rollout_id=5))
    folder = tmp_path / "collector"
    for frames in (load_live(folder, engine_traces=False),
                   load_live(folder, rollout=5, engine_traces=False)):
        assert sorted(frames.samples["trace_id"]) == ["a" * 32, "b" * 32]
        assert [s.records for s in frames.live.senders] == [4]
        assert frames.live.missing == 0
        assert len(frames.live.restarts) == 2  # the empty run's start and stop are read
    reader = LiveReader(folder, engine_traces=False)
    assert reader.poll().records == 4


def test_a_late_record_after_a_roll_keeps_the_latest_rollout(
        collector_runs: Callable[[], Receiver], tmp_path: Path) -> None:
    slow, fast = Sender(host="actor-a", pid=1), Sender(host="actor-b", pid=2)
    first = collector_runs()
    post(first, slow.request([record("a" * 32, "span_start", "ra", T0)], rollout_id=4))
    post(first, fast.request([record("b" * 32, "span_start", "gb", T0),
                              record("b" * 32, "span_end", "gb", T0 + 1)], rollout_id=4))
    first.stop()  # the write-ahead file rolls (a restart here; the 60 s roll alike)
    second = collector_runs()
    post(second, fast.request([record("c" * 32, "span_start", "gc", T0 + 2, sample=1)],
                              rollout_id=5))
    folder = tmp_path / "collector"
    reader = LiveReader(folder, engine_traces=False)
    assert reader.poll().rollout == 5
    post(second, slow.request([record("a" * 32, "span_end", "ra", T0 + 3)], rollout_id=4))
    late = reader.poll()
    assert late.rollout == 5 and not late.rollout_changed and late.records == 0
    assert load_live(folder, engine_traces=False).rollout_ids == [5]
    second.stop()
    collector_runs()  # its file holds its start alone; the late record is a file back
    assert load_live(folder, engine_traces=False).rollout_ids == [5]
    assert LiveReader(folder, engine_traces=False).poll().rollout == 5
