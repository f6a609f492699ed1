"""The critical path through a child that outlives its parent, on a dump recorded
with :mod:`slime_trace_widget.tracing`, saved with ``save_dump`` and read back by
the loader: a reward started as a task from a generation and still running after
the generation (and the rollout around it) ended decides the sample's end."""

from __future__ import annotations

from pathlib import Path

import pytest

from slime_trace_widget import analysis
from slime_trace_widget.sources.dumps import save_dump
from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.tracing import trace_span, use_clock
from tests.support.outliving import HandClock, outliving_child_dump


def test_a_child_outliving_its_parent_holds_the_time_past_the_parents_end(tmp_path):
    frames = load_frames(outliving_child_dump(tmp_path / "rollout_0.pt"))
    spans = frames.spans
    label = dict(zip(spans["name"].astype(str), spans.index, strict=True))
    assert spans.loc[label["reward"], "parent_index"] == label["generate"]
    assert spans.loc[label["reward"], "end"] > spans.loc[label["rollout"], "end"]

    path = analysis.critical_path(frames, 0)
    assert path["name"].astype(str).tolist() == ["rollout", "generate", "tool", "reward"]
    # generate's own time is 0-1 and 2-3; the reward holds 3-9; nothing ran idle.
    assert path["critical"].tolist() == pytest.approx([0, 2, 1, 6])
    assert path["critical"].sum() == pytest.approx(frames.samples.loc[0, "duration"])

    share = analysis.critical_path_share(frames)
    assert share.loc["reward", "critical"] == pytest.approx(6)
    assert share["critical"].sum() == pytest.approx(9)


def _jittered_dump(path: Path) -> Path:
    """rollout 0-20 > (generate 0-17 > decode 5-17.000001, reward 17-20): the decode
    step's end was stamped a microsecond after the generation's, as two calls stamp one
    moment, and the reward starts at the generation's end."""
    clock = HandClock()
    sample = {"index": 0, "group_index": 0}
    with use_clock(clock), trace_span(sample, "rollout"):
        generate = trace_span(sample, "generate")
        generate.__enter__()
        clock.now = 5.0
        decode = trace_span(sample, "decode")
        decode.__enter__()
        clock.now = 17.0
        generate.__exit__(None, None, None)
        clock.now = 17.000001
        decode.__exit__(None, None, None)
        clock.now = 17.0
        with trace_span(sample, "reward"):
            clock.now = 20.0
    save_dump(path, [sample], rollout_id=0)
    return path


def test_a_child_outliving_its_parent_by_a_microsecond_is_not_a_gap(tmp_path):
    """One instant is ``SAME_INSTANT_SECONDS`` wide: the generation finished when the
    reward started, so it holds its 17 s; exactly, it finished a microsecond after, and
    the walk skipped it and gave the 17 s to the rollout, which did nothing itself."""
    frames = load_frames(_jittered_dump(tmp_path / "rollout_0.pt"))
    path = analysis.critical_path(frames, 0)
    held = dict(zip(path["name"].astype(str), path["critical"], strict=True))
    assert held["rollout"] == pytest.approx(0, abs=1e-5)
    assert held["generate"] + held["decode"] == pytest.approx(17, abs=1e-5)
    assert held["reward"] == pytest.approx(3)
