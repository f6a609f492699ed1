"""TraceFrames: fixtures read as their README says, every reading rule, invariants."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slime_trace_widget.frames import TraceFrames, build_frames
from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.view.details import span_detail

FIXTURES = Path(__file__).parents[1] / "fixtures"
T0 = 1_700_000_000.0


def _readme_rows() -> dict[str, dict]:
    """Parse the fixture README's table into expectations per file."""
    rows = {}
    for line in (FIXTURES / "README.md").read_text().splitlines():
        match = re.match(r"\| `([^`]+\.pt)` \|(.*)\|\s*$", line)
        if not match:
            continue
        cells = [c.strip() for c in match.group(2).split("|")]
        if cells[1] == "—":
            continue
        samples, traced = re.match(r"(\d+) \((\d+)\)", cells[1]).groups()
        starts, ends = (int(x) for x in cells[2].split("/"))
        statuses = dict((s.split()[0], int(s.split()[1])) for s in cells[8].split(",") if s)
        rows[match.group(1)] = {
            "samples": int(samples), "traced": int(traced), "starts": starts, "ends": ends,
            "instant": int(cells[3]), "open": int(cells[4]), "unmatched": int(cells[5]),
            "pd_children": int(cells[6]), "flat_pd": int(cells[7]), "statuses": statuses,
        }
    return rows


README = _readme_rows()
# Files whose damaged records change what can be counted (asserted separately below).
DAMAGED = {"edge_malformed_events.pt"}


def test_readme_parsed() -> None:
    assert len(README) >= 14


@pytest.mark.parametrize("name", sorted(README))
def test_fixture_reads_as_readme_says(name: str) -> None:
    expected = README[name]
    frames = load_frames(FIXTURES / name)
    spans, events = frames.spans, frames.events
    real = spans[~spans["virtual"]]
    # entries that are not samples at all (None, 42, "text") are skipped and counted
    assert len(frames.samples) + frames.warnings["sample_not_a_dict"] == expected["samples"]
    assert int(frames.samples["traced"].sum()) == expected["traced"]
    assert len(real) == expected["starts"]
    assert frames.samples["status"].value_counts().to_dict() == {
        k: v for k, v in expected["statuses"].items()}
    if name in DAMAGED:
        return
    assert int((real["state"] == "open").sum()) == expected["open"]
    assert int((events["kind"] == "unmatched_end").sum()) == expected["unmatched"]
    assert int((events["kind"] == "instant").sum()) == expected["instant"]
    assert int(real["pd_detail"].sum()) == expected["pd_children"]
    virtual = spans[spans["virtual"]]
    if expected["pd_children"] or expected["flat_pd"]:
        assert virtual["name"].str.endswith(" [P]").any()
        assert virtual["name"].str.endswith(" [D]").any()
    else:
        assert virtual.empty
    if expected["flat_pd"]:
        assert set(virtual["pd_form"]) == {"attrs"}
        assert virtual["parent_index"].nunique() == expected["flat_pd"]
    # counts in samples equal rows in spans/events
    assert int(frames.samples["n_spans"].sum() + frames.samples["n_open_spans"].sum()) == len(real)
    assert int(frames.samples["n_events"].sum()) == int((events["kind"] == "instant").sum())
    # orphan ends leave children pointing at deleted parents (and edge_orphan_end's
    # late_cleanup end has no id); loader notes are allowed
    assert set(frames.warnings) <= {"unknown_parent", "unsafe_global_blocked",
                                    "placeholder_sample_object", "span_end_without_id"}


def test_malformed_fixture_counts_every_kind_of_damage() -> None:
    frames = load_frames(FIXTURES / "edge_malformed_events.pt")
    w = frames.warnings
    assert w["record_not_a_dict"] == 3
    assert w["bad_ts"] == 5  # missing, string, NaN, inf, non-numeric string
    assert w["unknown_record_type"] == 2
    assert w["span_start_without_id"] == 1
    assert w["duplicate_span_id"] == 1
    assert w["parent_cycle"] == 2  # cycle_a/cycle_b, and a guess in the shuffled carrier
    assert w["unknown_parent"] == 1
    assert w["attrs_not_a_dict"] == 2
    assert w["events_not_a_list"] == 1 and w["carrier_not_a_dict"] == 1
    assert w["end_recorded_before_start"] == 3
    assert w["end_before_start"] == 1
    spans = frames.spans
    cycle = spans[spans["name"].isin(["cycle_a", "cycle_b"])]
    assert sorted(cycle["depth"].tolist()) == [0, 1]
    assert (spans["display_end"] >= spans["start"]).all()
    # the shuffled carrier still pairs every start with its end
    shuffled = spans[spans["sample_row"] == 7]
    assert (shuffled["state"] == "closed").all()
    assert set(shuffled.loc[shuffled["name"] == "generate_and_rm_group", "depth"]) == {0}


def test_untraced_samples_keep_a_row() -> None:
    frames = load_frames(FIXTURES / "edge_untraced_mixed.pt")
    assert len(frames.samples) == 8
    untraced = frames.samples[~frames.samples["traced"]]
    assert len(untraced) >= 3
    assert (untraced["n_spans"] == 0).all()
    assert untraced["start"].isna().all()


def test_eval_dump_identifies_samples_by_position() -> None:
    frames = load_frames(FIXTURES / "rollout_eval_3.pt")
    assert frames.samples["sample_index"].duplicated().any()
    assert frames.samples.index.is_unique
    assert set(frames.samples["rollout_id"]) == {3}


def test_partial_rollout_gap_is_not_activity() -> None:
    frames = load_frames(FIXTURES / "edge_partial_rollout_gap.pt")
    spans = frames.spans
    for row, sample in frames.samples.iterrows():
        if sample["duration"] < 600:
            continue
        own = spans[spans["sample_row"] == row].sort_values("start")
        covered = _union_length(own["start"].to_numpy(), own["display_end"].to_numpy())
        assert covered < sample["duration"] - 600, "the 15-minute gap must stay uncovered"


def _union_length(starts: np.ndarray, ends: np.ndarray) -> float:
    total, cursor = 0.0, -math.inf
    for start, end in sorted(zip(starts, ends, strict=True)):
        start = max(start, cursor)
        if end > start:
            total += end - start
            cursor = end
    return total


def test_weird_values_stay_readable_and_json_safe() -> None:
    frames = load_frames(FIXTURES / "edge_weird_values.pt")
    names = set(frames.spans["name"])
    assert "工具调用/搜索" in names and "" in names
    for index in frames.span_core.index:
        json.dumps(span_detail(frames, index), allow_nan=False)
    temperature = frames.spans["attr.温度"].dropna()
    assert temperature.iloc[0] == pytest.approx(21.5)


def test_several_dumps_combine_with_rollout_ids() -> None:
    frames = load_frames([FIXTURES / "small.pt", FIXTURES / "rollout_eval_3.pt"])
    assert len(frames.samples) == 8 + 22
    assert set(frames.samples["rollout_id"]) == {0, 3}
    assert frames.samples.index.tolist() == list(range(30))
    assert frames.spans["sample_row"].max() == 29


# --------------------------------------------------------------------------- hand-built carriers


def rec(kind: str, name: str, ts: float, sid: str | None = None, pid: str | None = None,
        attempt: int = 0, attrs: dict | None = None) -> dict:
    record: dict = {"type": kind, "name": name, "ts": T0 + ts, "trace_id": "t", "sample_id": 0,
                    "group_id": 0, "attempt": attempt}
    if sid is not None:
        record["span_id"] = sid
    if pid is not None:
        record["parent_span_id"] = pid
    if attrs is not None:
        record["attrs"] = attrs
    return record


def sample(*records: dict, index: int = 0, **fields) -> dict:
    return {"index": index, "group_index": 0, "status": "completed",
            "trace": {"version": 1, "trace_id": f"trace{index}", "sample_id": index,
                      "group_id": 0, "attempt": 0, "events": list(records)}, **fields}


def frames_of(*samples: dict) -> TraceFrames:
    return build_frames(list(samples))


def test_pairs_by_span_id_regardless_of_order_and_nests() -> None:
    f = frames_of(sample(
        rec("span_start", "outer", 0, "a"),
        rec("span_end", "inner", 3, "b"),
        rec("span_start", "inner", 1, "b", "a"),
        rec("span_end", "outer", 5, "a"),
    ))
    spans = f.spans.set_index("name")
    assert spans.loc["inner", "duration"] == pytest.approx(2)
    assert spans.loc["inner", "depth"] == 1 and spans.loc["outer", "depth"] == 0
    assert spans.loc["inner", "parent_name"] == "outer"
    assert f.warnings["end_recorded_before_start"] == 1


def test_instant_event_parent_is_inferred_from_open_spans() -> None:
    f = frames_of(sample(
        rec("span_start", "gen", 0, "g"),
        rec("event", "tick", 1),
        rec("span_end", "gen", 2, "g"),
        rec("event", "after", 3),
    ))
    events = f.events.set_index("name")
    assert events.loc["tick", "parent_span_id"] == "g"
    assert events.loc["tick", "parent_name"] == "gen"
    assert events.loc["after", "parent_index"] == -1


def test_an_end_without_an_id_closes_nothing_and_names_no_span() -> None:
    """Its id was read as the text "None": the end closed a span recorded with that id,
    or became an unmatched end of span "None"."""
    f = frames_of(sample(rec("span_start", "tool", 0, "None"), {"type": "span_end",
                  "name": "lost", "ts": T0 + 2, "attrs": {}}))
    assert f.spans["state"].tolist() == ["open"]
    assert f.events["kind"].tolist() == ["unmatched_end"]
    assert f.events["span_id"].tolist() == ["~missing-end-0-0"]
    assert f.warnings["span_end_without_id"] == 1


def test_unmatched_end_becomes_event() -> None:
    f = frames_of(sample(rec("span_end", "lost", 2, "zz", attrs={"x": 1})))
    assert f.spans.empty
    assert f.events["kind"].tolist() == ["unmatched_end"]
    assert f.events["span_id"].tolist() == ["zz"]
    assert f.events["attr.x"].tolist() == [1]
    assert f.samples["n_unmatched_ends"].tolist() == [1]


@pytest.mark.parametrize(
    ("records", "reason", "display"),
    [
        ([rec("span_start", "root", 0, "r"), rec("span_start", "open", 1, "o", "r"),
          rec("event", "last", 4)], "row_end", 4.0),
        ([rec("span_start", "root", 0, "r"), rec("span_start", "open", 1, "o", "r"),
          rec("span_start", "next", 2, "n", "r"), rec("span_end", "next", 3, "n"),
          rec("span_end", "root", 9, "r")], "next_sibling", 2.0),
        ([rec("span_start", "root", 0, "r"), rec("span_start", "open", 1, "o", "r"),
          rec("span_end", "root", 1.5, "r"), rec("event", "late", 8)], "ancestor_end", 1.5),
    ],
)
def test_open_span_clipping(records: list[dict], reason: str, display: float) -> None:
    f = frames_of(sample(*records))
    span = f.spans.set_index("name").loc["open"]
    assert span["state"] == "open"
    assert math.isnan(span["end"]) and math.isnan(span["duration"])
    assert span["clip_reason"] == reason
    assert span["display_end"] - T0 == pytest.approx(display)


def test_open_span_display_end_never_before_start() -> None:
    f = frames_of(sample(rec("span_start", "root", 0, "r"), rec("span_end", "root", 1, "r"),
                         rec("span_start", "late_open", 5, "o", "r")))
    span = f.spans.set_index("name").loc["late_open"]
    assert span["display_end"] >= span["start"]


def test_attempts_follow_the_start_record() -> None:
    f = frames_of(sample(
        rec("span_start", "gen", 0, "g", attempt=0),
        rec("event", "attempt_start", 1, attempt=1, attrs={"attempt": 1}),
        rec("span_end", "gen", 2, "g", attempt=1),
        rec("span_start", "gen", 3, "h", attempt=1),
        rec("span_end", "gen", 4, "h", attempt=1),
    ))
    assert f.spans["attempt"].tolist() == [0, 1]
    assert f.spans["end_attempt"].tolist() == [1, 1]
    assert f.samples["attempts"].tolist() == [2]


def test_group_span_appears_in_every_member() -> None:
    members = [sample(rec("span_start", "group_rm", 0, f"g{i}"), rec("span_end", "group_rm", 2,
                                                                      f"g{i}"), index=i)
               for i in range(3)]
    f = frames_of(*members)
    assert f.spans["sample_row"].tolist() == [0, 1, 2]
    assert f.spans["span_id"].nunique() == 3
    assert f.spans["start"].nunique() == 1


def test_attr_columns_end_value_wins_and_both_kept() -> None:
    f = frames_of(sample(
        rec("span_start", "gen", 0, "g", attrs={"tokens": 5, "tool": "search"}),
        rec("span_end", "gen", 1, "g", attrs={"tokens": 9, "finish_reason": "length"}),
    ))
    span = f.spans.iloc[0]
    assert span["attr.tokens"] == 9
    assert span["start_attrs"]["tokens"] == 5
    assert span["attr.tool"] == "search"
    assert len(f.spans[f.spans["attr.finish_reason"] == "length"]) == 1
    assert len(f.spans.query("`attr.tokens` > 8")) == 1


def test_attr_values_numpy_and_tensor_are_comparable() -> None:
    f = frames_of(sample(
        rec("span_start", "a", 0, "a", attrs={"n": np.int64(3), "t": torch.tensor([1, 2])}),
        rec("span_end", "a", 1, "a"),
        rec("span_start", "b", 1, "b", attrs={"n": 4, "t": None}),
        rec("span_end", "b", 2, "b"),
    ))
    assert f.spans["attr.n"].tolist() == [3, 4]
    assert f.spans["attr.t"].iloc[0] == "[1, 2]"


def _pd_meta_children(gen: str, start: float) -> list[dict]:
    """Records as slime's PD child-span form writes them (see small.pt)."""
    out, t = [], start
    out.append(rec("span_start", "sglang_pd_prefill", t, "P", gen))
    for seg, duration in (("bootstrap_queue", 0.1), ("forward", 0.2)):
        out.append(rec("span_start", f"sglang_pd_prefill_{seg}", t, f"P{seg}", "P"))
        t += duration
        out.append(rec("span_end", f"sglang_pd_prefill_{seg}", t, f"P{seg}",
                       attrs={f"pd_prefill_{seg}_duration": duration}))
    out.append(rec("span_end", "sglang_pd_prefill", t, "P", attrs={"phase": "prefill",
                                                                    "duration_s": 0.3}))
    out.append(rec("span_start", "sglang_pd_decode", t, "D", gen))
    out.append(rec("span_start", "sglang_pd_decode_forward", t, "Dfwd", "D"))
    out.append(rec("span_end", "sglang_pd_decode_forward", t + 1.0, "Dfwd",
                   attrs={"pd_decode_forward_duration": 1.0}))
    out.append(rec("span_end", "sglang_pd_decode", t + 1.0, "D", attrs={"phase": "decode",
                                                                         "duration_s": 1.0}))
    out.append(rec("event", "sglang_pd_summary", t + 1.0, pid=gen,
                   attrs={"pd_transfer_speed_gb_s": 9.5}))
    return out


def test_pd_child_span_form_gives_virtual_lanes() -> None:
    f = frames_of(sample(rec("span_start", "sglang_generate", 0, "g"),
                         *_pd_meta_children("g", 0.0),
                         rec("span_end", "sglang_generate", 1.5, "g")))
    virtual = f.spans[f.spans["virtual"]].set_index("name")
    assert list(virtual.index) == ["sglang_generate [P]", "sglang_generate [D]"]
    p = virtual.loc["sglang_generate [P]"]
    assert p["end_attrs"]["prefill_forward_s"] == pytest.approx(0.2)
    assert p["end_attrs"]["pd_transfer_speed_gb_s"] == 9.5
    assert p["depth"] == 1 and p["parent_name"] == "sglang_generate"
    segments = f.segments[f.segments["span_index"] == virtual.index.get_indexer(
        ["sglang_generate [P]"])[0] + len(f.spans[~f.spans["virtual"]])]
    assert segments["name"].tolist() == ["prefill_bootstrap_queue", "prefill_forward"]
    lanes = f.spans.set_index("name")["lane"]
    assert lanes["sglang_pd_prefill_forward"] == lanes["sglang_generate [P]"]
    assert lanes["sglang_generate [D]"] == lanes["sglang_generate [P]"] + 1
    assert f.samples["n_lanes"].tolist() == [3]


def test_pd_attribute_form_gives_virtual_lanes() -> None:
    attrs = {"pd_prefill_forward_duration": 0.25, "pd_bootstrap_duration": 0.05,
             "pd_decode_forward_duration": 1.0, "pd_alloc_waiting_duration": 0.0,
             "pd_transfer_total_mb": 12.0}
    f = frames_of(sample(rec("span_start", "sglang_generate", 0, "g"),
                         rec("span_end", "sglang_generate", 2, "g", attrs=attrs)))
    virtual = f.spans[f.spans["virtual"]].set_index("name")
    p, d = virtual.loc["sglang_generate [P]"], virtual.loc["sglang_generate [D]"]
    assert p["start"] - T0 == pytest.approx(0.0)
    assert p["end"] - T0 == pytest.approx(0.30)
    assert d["start"] - T0 == pytest.approx(0.30) and d["end"] - T0 == pytest.approx(1.30)
    assert "decode_alloc_wait_s" not in d["end_attrs"]  # non-positive segments left out
    assert p["end_attrs"]["pd_transfer_total_mb"] == 12.0
    assert f.segments["name"].tolist() == ["prefill_bootstrap", "prefill_forward",
                                           "decode_forward"]



def test_the_first_releases_alloc_wait_is_the_prefills() -> None:
    """``pd_alloc_waiting_duration``, like ``pd_bootstrap_duration``, is a prefill-side
    time (slime's first viewer drew both under [P]); in [D] it pushed the decode's
    transfer and forward back by its length."""
    attrs = {"pd_prefill_forward_duration": 0.25, "pd_bootstrap_duration": 0.05,
             "pd_alloc_waiting_duration": 0.1, "pd_decode_prealloc_duration": 0.2,
             "pd_decode_forward_duration": 1.0}
    f = frames_of(sample(rec("span_start", "sglang_generate", 0, "g"),
                         rec("span_end", "sglang_generate", 2, "g", attrs=attrs)))
    virtual = f.spans[f.spans["virtual"]].set_index("name")
    p, d = virtual.loc["sglang_generate [P]"], virtual.loc["sglang_generate [D]"]
    assert p["end"] - T0 == pytest.approx(0.40) and d["end"] - T0 == pytest.approx(1.60)
    assert f.segments["name"].tolist() == ["prefill_bootstrap", "prefill_alloc_wait",
                                           "prefill_forward", "decode_prealloc",
                                           "decode_forward"]

def test_no_pd_timings_no_virtual_spans() -> None:
    f = frames_of(sample(rec("span_start", "sglang_generate", 0, "g"),
                         rec("span_end", "sglang_generate", 2, "g", attrs={"prompt_tokens": 3})))
    assert not f.spans["virtual"].any()


def test_damaged_values_never_raise() -> None:
    f = frames_of(
        sample(rec("span_start", "x" * 100_000, 0, "a", attrs={"big": "y" * 100_000}),
               {"type": "span_end", "span_id": "a", "ts": np.float32(5.0) + T0},
               {"type": "event", "name": 7, "ts": 1},
               {"type": "event", "name": "nan", "ts": float("nan")}),
        {"index": 1, "trace": "garbage"},
        {"index": 2, "trace": {"events": {"not": "a list"}}},
        {"index": 3, "trace": None, "reward": {"acc": 1.0}},
    )
    assert len(f.samples) == 4
    assert f.samples.loc[3, "reward_detail"] == {"acc": 1.0}
    assert math.isnan(f.samples.loc[3, "reward"])
    assert f.warnings["bad_ts"] == 1 and f.warnings["bad_name"] == 2


# --------------------------------------------------------------------------- properties

_names = st.sampled_from(["gen", "tool", "rm", "", "工具"])
_ids = st.sampled_from(["a", "b", "c", "d", "e", None])


@st.composite
def carriers(draw: st.DrawFn) -> list:
    records: list = []
    for _ in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["span_start", "span_end", "event", "bogus"]))
        record = {"type": kind, "name": draw(_names),
                  "ts": draw(st.one_of(st.floats(0, 100), st.none(), st.just(float("nan")),
                                       st.text(max_size=3)))}
        if draw(st.booleans()):
            record["span_id"] = draw(_ids)
        if draw(st.booleans()):
            record["parent_span_id"] = draw(_ids)
        if draw(st.booleans()):
            record["attrs"] = draw(st.one_of(st.dictionaries(st.text(max_size=3),
                                                             st.integers()), st.text()))
        record["attempt"] = draw(st.integers(0, 3))
        records.append(record if draw(st.integers(0, 20)) else draw(st.sampled_from(
            [None, 3, "junk", ["x"]])))
    return records


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(carriers(), min_size=1, max_size=4))
def test_invariants_hold_on_random_carriers(carrier_list: list[list]) -> None:
    f = build_frames([sample(*events, index=i) for i, events in enumerate(carrier_list)])
    spans, events, samples = f.spans, f.events, f.samples
    assert (spans["display_end"] >= spans["start"]).all()
    parents = spans["parent_index"].to_numpy()
    has_parent = parents >= 0
    depth = spans["depth"].to_numpy()
    assert (depth[has_parent] == depth[parents[has_parent]] + 1).all()
    assert (depth[~has_parent] == 0).all()
    real = spans[~spans["virtual"]]
    assert samples["n_spans"].sum() + samples["n_open_spans"].sum() == len(real)
    assert samples["n_events"].sum() + samples["n_unmatched_ends"].sum() == len(events)
    assert (spans["lane"] < samples.loc[spans["sample_row"], "n_lanes"].to_numpy()).all()
    for index in f.span_core.index[:5]:
        json.dumps(span_detail(f, index), allow_nan=False)
