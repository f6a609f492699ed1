"""End attributes set after a span's end record was sent (``span.set`` after the block):
the stream sends the end again, and the live frames and deltas keep its latest
attributes, so the live view shows what the dump will hold. Through the real receiver,
with ``tracing.live`` installed, the dump saved as slime saves it and loaded through
torch.load."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.dumps import save_dump
from slime_trace_widget.sources.live import LiveDelta, LiveReader, load_live
from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.tracing import live as streaming
from slime_trace_widget.tracing import trace_span
from slime_trace_widget.view.live import LiveSession
from slime_trace_widget.view.live_feed import ReaderFeed
from tests.support.receiver import start_receiver

ROLLOUT = 3
#: Hang guard for the sender's batch, generous for a busy machine.
WAIT_SECONDS = 60.0


@dataclass
class Late:
    folder: Path
    dump: Path
    samples: list[dict]
    #: The reader's poll after the late attribute, and its frames of the moved samples.
    delta: LiveDelta
    moved: TraceFrames
    stats: streaming.LiveStats
    #: A live view's session on the same folder: the positions its poll after the late
    #: attribute changed, and the reward span's details then.
    view_moved: list[int]
    view_detail: dict


def _wait_sent(stream: streaming.LiveStream, count: int) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while stream.stats().sent < count:
        assert time.monotonic() < deadline, f"records not sent: {stream.stats()}"
        time.sleep(0.01)


@pytest.fixture(scope="module")
def late(tmp_path_factory: pytest.TempPathFactory) -> Late:
    """``reward`` ends with ``early``; once its records are on the receiver's disk a
    reader polls, then ``late`` is set on the span and another sample records a span."""
    work = tmp_path_factory.mktemp("late")
    folder = work / "collector"
    samples = [{"index": 0, "group_index": 0, "rollout_id": ROLLOUT},
               {"index": 1, "group_index": 0, "rollout_id": ROLLOUT}]
    with start_receiver(folder) as receiver:
        stream = streaming.install(receiver.endpoint_url)
        try:
            streaming.set_rollout(ROLLOUT)
            with trace_span(samples[0], "reward", {"model": "rm"}) as span:
                span.set("early", 1)
            _wait_sent(stream, 2)  # answered: on the receiver's disk
            reader = LiveReader(folder, engine_traces=False)
            reader.poll()
            session = LiveSession(ReaderFeed(folder))
            assert session.poll() == [0]
            span.set("late", 2)
            span.update({"early": 10})
            with trace_span(samples[1], "generate"):
                pass
        finally:
            streaming.set_rollout(None)
            stats = stream.close()
        delta = reader.poll()
        moved = reader.frames(keys=list(delta.samples["key"]))
        view_moved = session.poll()
        view_detail = session.detail("span", 0)
    dump = Path(save_dump(work / f"rollout_{ROLLOUT}.pt", samples, rollout_id=ROLLOUT))
    return Late(folder, dump, samples, delta, moved, stats, view_moved, view_detail)


def _reward(frames: TraceFrames) -> pd.DataFrame:
    spans = frames.spans
    attrs = ["start_attrs", "end_attrs",
             *sorted(c for c in spans.columns if c.startswith("attr."))]
    reward = spans[spans["name"] == "reward"]
    return reward[["name", "start", "end", "state", *attrs]].reset_index(drop=True)


def test_the_carrier_holds_the_late_attributes(late: Late) -> None:
    (end,) = [r for r in late.samples[0]["trace"]["events"] if r["type"] == "span_end"]
    assert end["attrs"] == {"early": 10, "late": 2}
    assert late.stats.dropped == 0 and late.stats.queued == 0


def test_live_frames_equal_the_dumps_for_a_late_attribute(late: Late) -> None:
    live = load_live(late.folder, now=time.time(), engine_traces=False)
    dump = load_frames(str(late.dump), progress=False)
    found, expected = _reward(live), _reward(dump)
    assert found.loc[0, "end_attrs"] == {"early": 10, "late": 2}
    assert found.loc[0, "attr.late"] == 2 and found.loc[0, "attr.early"] == 10
    pd.testing.assert_frame_equal(found, expected, check_categorical=False)
    assert live.warnings.get("unmatched_end", 0) == 0
    assert len(live.events) == len(dump.events)  # no second end read as an unmatched one
    (sender,) = live.live.senders
    assert (sender.records, sender.missing) == (late.stats.sent, 0)


def test_a_live_delta_moves_the_sample_whose_end_changed(late: Late) -> None:
    trace_ids = [s["trace"]["trace_id"] for s in late.samples]
    assert set(late.delta.samples["trace_id"]) == set(trace_ids)
    assert late.delta.closed["name"].tolist() == ["generate"]  # reward is not closed again
    assert late.delta.open_spans.empty
    found = _reward(late.moved)
    assert found.loc[0, "end_attrs"] == {"early": 10, "late": 2}
    pd.testing.assert_frame_equal(found, _reward(load_frames(str(late.dump), progress=False)),
                                  check_categorical=False)


def test_the_live_view_redraws_the_sample_whose_end_changed(late: Late) -> None:
    assert sorted(late.view_moved) == [0, 1]  # the reward's sample, and the new one
    assert late.view_detail["name"] == "reward"
    assert late.view_detail["end_attrs"] == {"early": 10, "late": 2}
