"""Sender health is a rollout's: through the real receiver, a process that died during an
earlier rollout and sent nothing to the one followed is not among that rollout's senders
(no red border on a later step), and is named apart as silent since its rollout, since
it never closed; one that closed, or that belongs to a dead run, is not named at all."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from slime_trace_widget.sources.live import LiveDelta, LiveReader, load_live
from tests.support.live_wire import Poster, Sender
from tests.support.receiver import start_receiver

#: Far enough after the posts for every sender not closed to count as silent.
LATER = 600.0


def span(trace: str, span_id: str, ts: float, end: bool = False) -> dict:
    return {"type": "span_end" if end else "span_start", "name": "generate", "ts": ts,
            "trace_id": trace, "span_id": span_id, "sample_id": 0, "group_id": 0}


@dataclass
class Steps:
    folder: Path
    before: LiveDelta
    after: LiveDelta
    reader: LiveReader
    at: float


@pytest.fixture(scope="module")
def steps(tmp_path_factory: pytest.TempPathFactory) -> Steps:
    """Rollout 5 from three processes: ``dies`` (its span never ends, no close), ``done``
    (closes cleanly) and ``worker``; a process of rollout 9 from a run that died before
    (resumed at 5 from a checkpoint); then ``worker`` alone runs rollouts 6 and 7 and
    closes. A reader follows the latest rollout from rollout 5 on."""
    folder = tmp_path_factory.mktemp("live") / "collector"
    t0 = time.time()
    dies, done = Sender(pid=11), Sender(pid=12)
    worker, old_run = Sender(pid=13), Sender(pid=10)
    with start_receiver(folder) as receiver:
        poster = Poster(receiver.http_port)

        def post(request: object) -> None:
            status, answer = poster.post(request)  # type: ignore[arg-type]
            assert status == 200, answer

        post(old_run.request([span("old", "o1", t0 - 100)], rollout_id=9))
        post(dies.request([span("a", "a1", t0)], rollout_id=5))
        post(dies.heartbeat(time.time_ns(), rollout_id=5))
        post(done.request([span("b", "b1", t0), span("b", "b1", t0 + 1, end=True)],
                          rollout_id=5))
        post(done.heartbeat(time.time_ns(), rollout_id=5, kind="close"))
        post(worker.request([span("c", "c1", t0), span("c", "c1", t0 + 1, end=True)],
                            rollout_id=5))
        reader = LiveReader(folder, engine_traces=False)
        before = reader.poll(now=t0 + 2)
        for rollout in (6, 7):
            post(worker.request([span(f"r{rollout}", f"s{rollout}", t0 + rollout),
                                 span(f"r{rollout}", f"s{rollout}", t0 + rollout + 1, end=True)],
                                rollout_id=rollout))
        post(worker.heartbeat(time.time_ns(), rollout_id=7, kind="close"))
        poster.close()
        at = time.time() + LATER
        after = reader.poll(now=at)
    return Steps(folder, before, after, reader, at)


def test_the_rollout_followed_lists_its_own_senders(steps: Steps) -> None:
    assert steps.before.rollout == 5
    assert [s.process for s in steps.before.health.senders] == [
        "rollout-0:11", "rollout-0:12", "rollout-0:13"]
    assert steps.after.rollout_changed and steps.after.rollout == 7
    # the process that died in rollout 5 sent nothing to rollout 7: not its sender
    assert [s.process for s in steps.after.health.senders] == ["rollout-0:13"]
    assert steps.after.health.silent == [] and steps.after.health.missing == 0
    assert [s.process for s in steps.reader.frames(now=steps.at).live.senders] == [
        "rollout-0:13"]


def test_a_silent_sender_of_an_earlier_rollout_is_named_apart(steps: Steps) -> None:
    absent = steps.after.health.absent
    # never closed, last heard in rollout 5, silent now; the closed one and the dead
    # run's (rollout 9, after the one followed) are not expected
    assert [(s.process, s.last_rollout, s.silent) for s in absent] == [
        ("rollout-0:11", 5, True)]
    assert "rollout-0:11: silent since rollout 5" in steps.after.health.summary()


def test_load_live_judges_health_by_the_rollout_read(steps: Steps) -> None:
    seventh = load_live(steps.folder, now=steps.at, engine_traces=False).live
    assert [s.process for s in seventh.senders] == ["rollout-0:13"]
    assert [s.process for s in seventh.absent] == ["rollout-0:11"]
    fifth = load_live(steps.folder, rollout=5, now=steps.at, engine_traces=False).live
    assert [s.process for s in fifth.senders] == ["rollout-0:11", "rollout-0:12",
                                                  "rollout-0:13"]
    assert fifth.silent == ["rollout-0:11"] and fifth.absent == []
