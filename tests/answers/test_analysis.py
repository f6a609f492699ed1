"""Analysis helpers checked against values computed by hand on small frames."""

from __future__ import annotations

import pandas as pd
import pytest

from slime_trace_widget import analysis
from slime_trace_widget.frames import build_frames
from tests.frames.test_frames import rec, sample


@pytest.fixture
def frames():
    # sample 0 (source a): root 0-10; gen 0-4; tool 6-9 (idle inside root only: none)
    # sample 1 (source b): gen 0-2, then idle 2-5, gen 5-6 (two roots), open span from 7
    # sample 2 (source a): overlapping tools 1-3 and 2-5 under root 0-6
    s0 = sample(rec("span_start", "root", 0, "r0"), rec("span_start", "gen", 0, "g0", "r0"),
                rec("span_end", "gen", 4, "g0"), rec("span_start", "tool", 6, "t0", "r0"),
                rec("span_end", "tool", 9, "t0"), rec("span_end", "root", 10, "r0"),
                index=0, metadata={"source": "a"}, reward=1.0)
    s1 = sample(rec("span_start", "gen", 0, "g1"), rec("span_end", "gen", 2, "g1"),
                rec("span_start", "gen", 5, "g2"), rec("span_end", "gen", 6, "g2"),
                rec("span_start", "tool", 7, "t1"), rec("event", "last", 8),
                index=1, metadata={"source": "b"}, reward=0.0)
    s2 = sample(rec("span_start", "root", 0, "r2"), rec("span_start", "tool", 1, "t2", "r2"),
                rec("span_start", "tool", 2, "t3", "r2"), rec("span_end", "tool", 3, "t2"),
                rec("span_end", "tool", 5, "t3"), rec("span_end", "root", 6, "r2"),
                index=2, metadata={"source": "a"}, reward=0.5)
    return build_frames([s0, s1, s2])


def test_span_stats_by_hand(frames) -> None:
    stats = analysis.span_stats(frames)
    gen = stats.loc["gen"]
    assert gen["count"] == 3 and gen["total"] == pytest.approx(7.0)
    assert gen["mean"] == pytest.approx(7 / 3) and gen["max"] == pytest.approx(4.0)
    assert gen["p50"] == pytest.approx(2.0)
    tool = stats.loc["tool"]
    assert tool["count"] == 3 and tool["open"] == 1 and tool["total"] == pytest.approx(3 + 2 + 3)
    lifetimes = 10 + 8 + 6
    assert stats.loc["root", "share"] == pytest.approx(16 / lifetimes)


def test_span_stats_grouped_by_source(frames) -> None:
    stats = analysis.span_stats(frames, by="source")
    assert stats.loc[("a", "tool"), "count"] == 3
    assert stats.loc[("b", "gen"), "total"] == pytest.approx(3.0)
    assert stats.loc[("a", "root"), "share"] == pytest.approx(16 / 16)
    assert stats.loc[("b", "gen"), "share"] == pytest.approx(3 / 8)


def test_span_stats_of_a_sample_without_a_key_has_its_percentiles(frames) -> None:
    """A group whose key is missing (a sample without a source) gets every figure,
    its open spans counted."""
    stats = analysis.span_stats(build_frames([
        sample(rec("span_start", "gen", 0, "g"), rec("span_end", "gen", 5, "g"),
               rec("span_start", "tool", 6, "t"), rec("span_start", "tool", 6, "u"),
               rec("span_end", "tool", 7, "u"), index=0)]), by="source")
    gen = stats.xs("gen", level="name").iloc[0]
    assert gen["count"] == 1 and gen["p50"] == gen["p99"] == pytest.approx(5.0)
    tool = stats.xs("tool", level="name").iloc[0]
    assert tool["count"] == 1 and tool["open"] == 1 and tool["p90"] == pytest.approx(1.0)


@pytest.mark.parametrize("records", [[], [rec("span_start", "gen", 0, "g")]],
                         ids=["no spans", "only open spans"])
def test_span_stats_and_compare_of_frames_without_a_closed_span(records) -> None:
    frames = build_frames([sample(*records, index=0)])
    stats = analysis.span_stats(frames)
    assert stats.empty and list(stats.columns) == [
        "count", "total", "mean", "p50", "p90", "p99", "max", "open", "share",
        "end_before_start"]
    assert analysis.compare(frames, frames).empty


def test_sample_breakdown_idle_and_turns(frames) -> None:
    table = analysis.sample_breakdown(frames)
    assert table.loc[0, "idle"] == pytest.approx(0.0)
    # sample 1 lives 0-8: gen 0-2, gen 5-6, open tool 7-8 (clipped at the last record)
    assert table.loc[1, "busy"] == pytest.approx(4.0)
    assert table.loc[1, "idle"] == pytest.approx(4.0)
    assert table.loc[1, "turns"] == 0 and table.loc[0, "turns"] == 0
    assert table.loc[2, "time.tool"] == pytest.approx(5.0)  # depth-1 sum, overlaps included
    assert table.loc[0, "time.gen"] == pytest.approx(4.0)
    assert analysis.sample_breakdown(frames, turn_span="gen").loc[1, "turns"] == 2


def test_self_time_subtracts_union_of_children(frames) -> None:
    own = analysis.self_times(frames)
    spans = frames.span_core
    root2 = spans[(spans["sample_row"] == 2) & (spans["name"] == "root")].index[0]
    assert own[root2] == pytest.approx(6 - 4)  # children cover 1-5
    root0 = spans[(spans["sample_row"] == 0) & (spans["name"] == "root")].index[0]
    assert own[root0] == pytest.approx(10 - 7)


def test_long_tail(frames) -> None:
    tail = analysis.long_tail(frames, k=2)
    assert tail.index.tolist() == [0, 1]
    assert tail.loc[0, "x_median"] == pytest.approx(10 / 8)
    assert tail.loc[0, "top_name"] == "gen"
    assert tail.loc[1, "top_name"] == "gen"
    assert tail.loc[1, "idle"] == pytest.approx(4.0)


def test_concurrency_counts_samples_once(frames) -> None:
    steps = analysis.concurrency(frames)
    grid = analysis.resample_concurrency(steps, 0.5, start=frames.t0, end=frames.t0 + 10)
    at = lambda t: grid.iloc[int(t / 0.5)]  # noqa: E731
    assert at(2.5)["tool"] == 1  # sample 2's two overlapping tools count once
    assert at(0.5)["gen"] == 2 and at(5.5)["gen"] == 1
    assert at(7.5)["tool"] == 2  # sample 0 (6-9) and sample 1's open tool (7-8)
    assert at(0.5)[analysis.ALIVE] == 3 and at(9.5)[analysis.ALIVE] == 1


def test_concurrency_of_a_dump_without_spans_resamples_to_no_rows() -> None:
    """An empty dump's steps are empty: the grid's bounds were NaN, and numpy's arange
    failed with "cannot compute length"."""
    from slime_trace_widget import load_frames
    from tests.sources.runs import FIXTURES

    steps = analysis.concurrency(load_frames([FIXTURES / "edge_empty.pt"]))
    assert steps.empty
    grid = analysis.resample_concurrency(steps, 1.0)
    assert grid.empty and grid.index.name == "time"
    assert len(analysis.resample_concurrency(steps, 1.0, start=0.0, end=3.0)) == 4
    with pytest.raises(ValueError, match="positive number of seconds"):
        analysis.resample_concurrency(steps, 0.0, start=0.0, end=3.0)


def test_compare_side_by_side(frames) -> None:
    other = build_frames([sample(rec("span_start", "gen", 0, "g"), rec("span_end", "gen", 9, "g"))])
    table = analysis.compare(frames, other, labels=("old", "new"))
    assert table.loc["gen", "count_old"] == 3 and table.loc["gen", "count_new"] == 1
    assert table.loc["gen", "mean_ratio"] == pytest.approx(9 / (7 / 3))
    assert table.loc["gen", "total_diff"] == pytest.approx(9 - 7)
    assert "tool" in table.index and pd.isna(table.loc["tool", "count_new"])



def test_compare_has_no_ratio_to_a_mean_of_zero() -> None:
    """A name whose spans all last 0 s in the first rollout: its mean ratio is NaN, as
    ``rollout_diff``'s ``p50_ratio`` is, not inf (nor NaN only when both are 0)."""
    def rollout(log_end: float):
        return build_frames([sample(
            rec("span_start", "gen", 0, "g"), rec("span_end", "gen", 2, "g"),
            rec("span_start", "log", 2, "l"), rec("span_end", "log", log_end, "l"))])

    instant, lasting = rollout(2), rollout(3)
    table = analysis.compare(instant, lasting, labels=("old", "new"))
    assert table.loc["log", "mean_old"] == 0 and table.loc["log", "mean_new"] == 1
    assert pd.isna(table.loc["log", "mean_ratio"])
    assert table.loc["gen", "mean_ratio"] == 1
    assert analysis.compare(lasting, instant, labels=("old", "new")).loc["log", "mean_ratio"] == 0

def test_compare_counts_a_name_missing_from_one_side_as_zero(frames) -> None:
    """``root`` and ``tool`` are only in ``frames``: their count and total differences
    count the other side as zero, as ``rollout_diff`` does; mean and p90 stay NaN."""
    other = build_frames([sample(rec("span_start", "gen", 0, "g"), rec("span_end", "gen", 9, "g"))])
    table = analysis.compare(frames, other, labels=("old", "new"))
    assert table.loc["tool", "count_diff"] == -3 and table.loc["root", "count_diff"] == -2
    assert table.loc["tool", "total_diff"] == pytest.approx(-8)
    assert table.loc["root", "total_diff"] == pytest.approx(-16)
    for column in ("mean_diff", "p90_diff", "mean_ratio"):
        assert pd.isna(table.loc["tool", column])
    back = analysis.compare(other, frames, labels=("old", "new"))
    assert back.loc["tool", "count_diff"] == 3
    assert back.loc["tool", "total_diff"] == pytest.approx(8)
    assert back.loc["gen", "total_diff"] == pytest.approx(7 - 9)
