"""Critical path and flame table on hand-built traces whose answers are known."""

from __future__ import annotations

import math
import random

import pytest

from slime_trace_widget import analysis
from tests.frames.test_frames import frames_of, rec, sample


def _agent(index: int = 0):
    """generate 0-4 with PD children; two concurrent tools 4-7 and 4-9; reward 9-10;
    a log span 1-3 concurrent with generate (never critical)."""
    return sample(
        rec("span_start", "rollout", 0, "r"),
        rec("span_start", "generate", 0, "g", "r"),
        rec("span_start", "sglang_pd_prefill", 0, "p", "g"),
        rec("span_end", "sglang_pd_prefill", 1, "p"),
        rec("span_start", "sglang_pd_decode", 1, "d", "g"),
        rec("span_end", "sglang_pd_decode", 4, "d"),
        rec("span_end", "generate", 4, "g"),
        rec("span_start", "log", 1, "l", "r"),
        rec("span_end", "log", 3, "l"),
        rec("span_start", "tool", 4, "t1", "r"),
        rec("span_end", "tool", 7, "t1"),
        rec("span_start", "tool", 4, "t2", "r"),
        rec("span_end", "tool", 9, "t2"),
        rec("span_start", "reward", 9, "w", "r"),
        rec("span_end", "reward", 10, "w"),
        rec("span_end", "rollout", 10, "r"),
        index=index)


def test_critical_path_walks_back_from_the_end() -> None:
    frames = frames_of(_agent())
    path = analysis.critical_path(frames, 0)
    assert path["span_id"].tolist() == ["r", "g", "p", "d", "t2", "w"]
    critical = dict(zip(path["span_id"], path["critical"], strict=True))
    assert critical == pytest.approx({"r": 0, "g": 0, "p": 1, "d": 3, "t2": 5, "w": 1})
    share = analysis.critical_path_share(frames)
    assert share.loc["tool", "critical"] == pytest.approx(5)
    assert share.loc["sglang_pd_decode", "share"] == pytest.approx(0.3)
    assert "log" not in share.index and share["share"].sum() == pytest.approx(1)


def test_critical_path_of_open_spans_and_retries() -> None:
    frames = frames_of(sample(
        rec("span_start", "generate", 0, "a"),
        rec("span_end", "generate", 2, "a", attrs={"error_type": "Timeout"}),
        rec("span_start", "generate", 2, "b", attempt=1),
        rec("event", "tick", 6, attempt=1),  # the row ends at 6: the open span is drawn to it
    ))
    path = analysis.critical_path(frames, 0)
    assert path["span_id"].tolist() == ["a", "b"]
    assert path["critical"].tolist() == pytest.approx([2, 4])



def test_overlapping_top_level_spans_hold_the_time_before_the_last_one() -> None:
    """No span over them: the sample's node has no time of its own, so the tool still
    running when the reward started holds the time before it (the path lost it)."""
    frames = frames_of(sample(
        rec("span_start", "tool", 0, "t"), rec("span_end", "tool", 3.7, "t"),
        rec("span_start", "reward", 1.6, "w"), rec("span_end", "reward", 6.5, "w"),
        rec("span_start", "log", 7, "l"), rec("span_end", "log", 8, "l"),
        rec("span_start", "setup", 7.5, "s"), rec("span_end", "setup", 9, "s")))
    path = analysis.critical_path(frames, 0)
    assert path["span_id"].tolist() == ["t", "w", "l", "s"]
    assert path["critical"].tolist() == pytest.approx([1.6, 4.9, 0.5, 1.5])
    # the latency less the half second when no span ran
    assert path["critical"].sum() == pytest.approx(frames.samples["duration"].iloc[0] - 0.5)


def test_a_child_running_when_its_parent_ended_holds_the_time_up_to_a_later_sibling() -> None:
    """The parent ends at 3, a child runs 2-6 and another starts at 5: the first child
    holds 3-5 (the path dropped it, leaving the parent 0-3 and the late child)."""
    frames = frames_of(sample(
        rec("span_start", "parent", 0, "p"),
        rec("span_start", "mid", 2, "m", "p"), rec("span_end", "parent", 3, "p"),
        rec("span_start", "late", 5, "l", "p"), rec("span_end", "mid", 6, "m"),
        rec("span_end", "late", 8, "l")))
    path = analysis.critical_path(frames, 0)
    assert path["span_id"].tolist() == ["p", "m", "l"]
    assert path["critical"].tolist() == pytest.approx([2, 3, 3])

def test_flame_paths_count_self_time_and_clip_to_a_window() -> None:
    frames = frames_of(_agent(0), _agent(1))
    table = analysis.flame(frames).set_index("path")
    assert table.loc["rollout", "count"] == 2 and table.loc["rollout", "total"] == pytest.approx(20)
    # rollout's children cover 0-10 (concurrent tools overlap): self time 0, not negative
    assert table.loc["rollout", "self"] == pytest.approx(0)
    assert table.loc["rollout;tool", "count"] == 4
    assert table.loc["rollout;tool", "total"] == pytest.approx(16)
    assert table.loc["rollout;generate;sglang_pd_decode", "p50"] == pytest.approx(3)
    assert table.loc["rollout;generate", "self"] == pytest.approx(0)
    assert set(table["depth"]) == {0, 1, 2}
    one = analysis.flame(frames, samples=[1]).set_index("path")
    assert one.loc["rollout", "count"] == 1
    t0 = frames.t0
    windowed = analysis.flame(frames, window=(t0 + 5, t0 + 8)).set_index("path")
    assert windowed.loc["rollout;tool", "total"] == pytest.approx(2 * (2 + 3))
    assert windowed.loc["rollout", "self"] == pytest.approx(0)
    assert "rollout;reward" not in windowed.index


def test_flame_takes_the_samples_as_a_boolean_series() -> None:
    """A pandas mask names the rows where it holds (here the third sample only), as
    the other answers read a selection: its True and False were read as rows 1 and 0."""
    frames = frames_of(_agent(0), _agent(1), sample(rec("span_start", "solo", 0, "s"),
                                                    rec("span_end", "solo", 2, "s"), index=2))
    mask = frames.samples["sample_index"] == 2
    assert frames.samples.index[mask].tolist() == [2]
    table = analysis.flame(frames, samples=mask)
    assert table["path"].tolist() == ["solo"] and table["total"].tolist() == pytest.approx([2])
    assert table.equals(analysis.flame(frames, samples=frames.samples[mask]))
    assert table.equals(analysis.flame(frames, samples=[2]))
    with pytest.raises(TypeError, match="boolean array"):
        analysis.flame(frames, samples=mask.to_numpy())


def test_pd_phases_count_once() -> None:
    """Child-form PD: the [P]/[D] virtual spans mirror the real ones and are not counted."""
    frames = frames_of(_agent())
    names = set(analysis.flame(frames)["name"])
    assert not any(name.endswith(("[P]", "[D]")) for name in names)
    assert analysis.critical_path_share(frames)["critical"].sum() == pytest.approx(10)


def test_a_chain_thousands_deep_walks_without_exhausting_the_stack() -> None:
    """Span k covers [k, 2N - k] inside span k - 1: each holds 2 s of its own."""
    n = 3000
    records = [rec("span_start", "nest", k, f"s{k}", f"s{k - 1}" if k else None)
               for k in range(n)]
    records += [rec("span_end", "nest", 2 * n - k, f"s{k}") for k in range(n)]
    frames = frames_of(sample(*records))
    path = analysis.critical_path(frames, 0)
    assert len(path) == n and path["critical"].to_numpy() == pytest.approx(2)
    assert analysis.critical_path_share(frames).loc["nest", "critical"] == pytest.approx(2 * n)
    table = analysis.flame(frames)
    assert len(table) == n and table["depth"].max() == n - 1


def test_flame_names_holding_the_path_separator() -> None:
    """A name with ';' or a backslash is one frame: escaped in ``path`` as the widget
    writes it, ``name`` and ``depth`` as recorded."""
    frames = frames_of(sample(
        rec("span_start", "a;b", 0, "p"),
        rec("span_start", "c\\d", 1, "c", "p"),
        rec("span_end", "c\\d", 2, "c"),
        rec("span_end", "a;b", 4, "p"),
    ))
    table = analysis.flame(frames).set_index("path")
    assert list(table.index) == ["a\\;b", "a\\;b;c\\\\d"]
    assert table["name"].tolist() == ["a;b", "c\\d"]
    assert table["depth"].tolist() == [0, 1]
    assert table.loc["a\\;b", "self"] == pytest.approx(3)


def _busy_seconds(starts: list[float], ends: list[float]) -> float:
    """The seconds at least one of the intervals covers."""
    busy, reach = 0.0, -math.inf
    for start, end in sorted(zip(starts, ends, strict=True)):
        busy += max(0.0, end - max(start, reach))
        reach = max(reach, end)
    return busy


@pytest.mark.parametrize("seed", range(200))
def test_the_critical_seconds_cover_every_instant_some_span_ran(seed: int) -> None:
    """Random trees (children start within their parents' lifetime or after, and may
    outlive them): the path's seconds add up to the time some span ran."""
    rng = random.Random(seed)
    spans: list[tuple[str, str | None, float, float]] = []
    for number in range(rng.randint(1, 9)):
        parent = rng.choice([None, *spans])
        earliest = parent[2] if parent else 0.0
        start = round(rng.uniform(earliest, earliest + 20), 1)
        spans.append((f"s{number}", parent[0] if parent else None, start,
                      round(start + rng.uniform(0.1, 8), 1)))
    records = [record for span_id, parent_id, start, end in spans for record in (
        rec("span_start", span_id, start, span_id, parent_id),
        rec("span_end", span_id, end, span_id))]
    frames = frames_of(sample(*sorted(records, key=lambda record: record["ts"])))
    path = analysis.critical_path(frames, 0)
    core = frames.span_core
    assert path["critical"].sum() == pytest.approx(
        _busy_seconds(core["start"].tolist(), core["display_end"].tolist()), abs=1e-6)
