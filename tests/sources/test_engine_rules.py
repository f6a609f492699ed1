"""The join's rules one by one, on request traces laid out as SGLang 0.5.23 writes them
(``../shared/engine-traces.md``): the whole rid over the short one, PD halves paired by
bootstrap room, one TP rank's slices, thread events placed, decode loops as stretches,
``decode_waiting`` as queue. Tests driving SGLang's own code are in
``test_engine_sglang.py``; these pin each rule on the smallest trace that shows it."""

from __future__ import annotations

import json

import pandas as pd
import pyarrow as pa
import pytest

from slime_trace_widget.answers.engine import engine_breakdown
from slime_trace_widget.answers.trends import rollout_trends
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.engine.join import join_engine
from slime_trace_widget.sources.engine.match import SHORT_RID_ONLY
from tests.support.engine_builder import T0, Engine, frames_for, next_id, plain_slices


def _engine_spans(frames: TraceFrames) -> pd.DataFrame:
    spans = frames.spans
    return spans[(spans["origin"] == "engine").to_numpy()]


def test_rids_that_end_alike_match_by_the_whole_rid() -> None:
    frames = frames_for(["sess-17_turn-2", "sess-23_turn-2"])
    engine = Engine()
    engine.request("sess-17_turn-2", T0 + 1, T0 + 4, slices=plain_slices(T0 + 1.1, T0 + 4))
    engine.request("sess-23_turn-2", T0 + 2, T0 + 9, slices=plain_slices(T0 + 2.1, T0 + 9))
    joined = join_engine(frames, engine.table())
    spans = _engine_spans(joined)
    roots = spans[spans["name"] == "sglang request"]
    assert len(roots) == 2 and joined.engine_unmatched.empty
    by_row = roots.set_index("sample_row")["attr.gen_ai.request.id"]
    assert by_row.to_dict() == {0: "sess-17_turn-2", 1: "sess-23_turn-2"}


def test_a_short_rid_alone_never_picks_between_two_samples() -> None:
    """A root without ``gen_ai.request.id`` (its request never finished cleanly) has only
    the short rid, which both samples end with: it stays unmatched."""
    frames = frames_for(["sess-17_turn-2", "sess-23_turn-2"])
    engine = Engine()
    engine.request("sess-17_turn-2", T0 + 1, T0 + 4)
    engine.rows["attributes"][0] = json.dumps({"rid": "turn-2"})
    joined = join_engine(frames, engine.table())
    assert _engine_spans(joined).empty
    assert joined.engine_unmatched["rid"].tolist() == ["turn-2"]



@pytest.mark.parametrize("rids", [["sess-17_turn-2"], ["sess-17_turn-2", "sess-23_turn-2"]])
def test_a_request_read_by_its_short_rid_alone_is_not_missing(rids: list[str]) -> None:
    """The aborted request was read: it is listed with why it is not attached, and the
    one span it stands for is not counted as waiting for a request no trace holds (the
    other span, when two rids end alike, still is)."""
    frames = frames_for(rids)
    engine = Engine()
    engine.request("sess-17_turn-2", T0 + 1, T0 + 4, slices=plain_slices(T0 + 1.1, T0 + 4))
    root = json.loads(engine.rows["attributes"][0])
    del root["gen_ai.request.id"]  # as SGLang 0.5.23's abort path leaves the root
    engine.rows["attributes"][0] = json.dumps(root)
    table = engine.table()
    joined = join_engine(frames, table, beyond=lambda: table.slice(0, 0))
    assert _engine_spans(joined).empty
    (listed,) = joined.engine_unmatched.to_dict("records")
    assert listed["rid"] == "turn-2" and listed["reason"] == SHORT_RID_ONLY
    assert joined.warnings.get("engine_request_missing", 0) == len(rids) - 1

def test_pd_halves_pair_by_bootstrap_room_without_a_client_rid() -> None:
    frames = frames_for(["decode-rid-0001", "decode-rid-0002"])
    engine = Engine()
    for number, room in ((1, 0x1111), (2, 0x2222)):
        engine.request(f"prefill-own-{number}", T0 + 1, T0 + 3, role="prefill", room=room,
                       host="prefillh", slices=[("prefill_forward", T0 + 1.5, T0 + 3, {}, [],
                                                 [])])
        engine.request(f"decode-rid-000{number}", T0 + 1, T0 + 9, role="decode", room=room,
                       host="decodehh", slices=[("decode_forward", T0 + 3.1, T0 + 9, {}, [],
                                                 [])])
    engine.request("prefill-stray", T0 + 1, T0 + 2, role="prefill", room=0x3333)
    joined = join_engine(frames, engine.table())
    spans = _engine_spans(joined)
    roots = spans[spans["name"].isin(["sglang prefill request", "sglang decode request"])]
    assert len(roots) == 4
    assert sorted(roots.groupby("sample_row")["name"].apply(lambda n: sorted(n.astype(str)))
                  .tolist()) == [["sglang decode request", "sglang prefill request"]] * 2
    prefill = roots[roots["name"] == "sglang prefill request"]
    assert set(prefill["attr.bootstrap_room"]) == {"0x1111", "0x2222"}
    assert (prefill["attr.engine.host"] == "prefillh").all()
    assert joined.engine_unmatched["rid"].tolist() == ["prefill-stray"]


def test_a_room_whose_halves_disagree_attaches_no_prefill_half() -> None:
    frames = frames_for(["decode-a", "decode-b"])
    engine = Engine()
    engine.request("decode-a", T0 + 1, T0 + 9, role="decode", room=7)
    engine.request("decode-b", T0 + 1, T0 + 9, role="decode", room=7)
    engine.request("prefill-x", T0 + 1, T0 + 2, role="prefill", room=7)
    joined = join_engine(frames, engine.table())
    assert joined.engine_unmatched["rid"].tolist() == ["prefill-x"]


def test_tensor_parallel_ranks_count_once() -> None:
    frames = frames_for(["r-tp"])
    engine = Engine()
    engine.request("r-tp", T0 + 1, T0 + 9, tp=2, slices=plain_slices(T0 + 1.1, T0 + 9))
    joined = join_engine(frames, engine.table())
    slices = _engine_spans(joined)
    scheduler = slices[slices["attr.thread_label"] == "Scheduler"]
    assert scheduler["name"].astype(str).tolist().count("decode_forward") == 1
    assert (scheduler["attr.engine.tp_ranks"] == "0,1").all()
    assert (scheduler["attr.tp_rank"] == 0).all()
    breakdown = engine_breakdown(joined).loc[0]
    assert breakdown["decode_s"] == pytest.approx((9 - (T0 + 1.1 + 3 * 0.79 - T0)), abs=1e-6)


def test_a_retraction_on_the_thread_span_lands_on_the_slice_it_interrupted() -> None:
    """As SGLang 0.5.23 writes a retraction: a ``retract`` event on the thread span; the
    wait that follows has no slice; the re-run's prefill, decode_waiting and a second
    decode_forward nest inside the first decode_forward."""
    frames = frames_for(["r-retract"])
    engine = Engine()
    retract_at = T0 + 5.0
    rerun = [("prefill_forward", T0 + 5.5, T0 + 6.0, {}, [], []),
             ("decode_waiting", T0 + 6.0, T0 + 6.2, {}, [], []),
             ("decode_forward", T0 + 6.2, T0 + 9.0, {}, [], [])]
    engine.request("r-retract", T0 + 1, T0 + 9, tp=2, thread_events=[("retract", retract_at, {})],
                   slices=[("prefill_waiting", T0 + 1.1, T0 + 2.1, {}, [], []),
                           ("prefill_forward", T0 + 2.1, T0 + 3.1, {}, [], []),
                           ("decode_forward", T0 + 3.1, T0 + 9.0, {}, [], rerun)])
    joined = join_engine(frames, engine.table())
    events = joined.events[(joined.events["origin"] == "engine").to_numpy()]
    assert events["name"].astype(str).tolist() == ["retract"]  # once, though TP=2
    holder = joined.span_core.loc[events["parent_index"].iloc[0]]
    assert holder["name"] == "decode_forward"
    assert holder["start"] == pytest.approx(T0 + 3.1, abs=1e-6)
    breakdown = engine_breakdown(joined).loc[0]
    assert breakdown["retractions"] == 1
    assert breakdown["retracted_s"] == pytest.approx(5.0 - 3.1, abs=1e-6)
    # the re-run counts in its own phases, and the wait after the retraction as queue
    assert breakdown["queue_s"] == pytest.approx(1.0 + 0.01 + 0.5 + 0.2, abs=1e-6)
    assert breakdown["prefill_s"] == pytest.approx(1.0 + 0.5, abs=1e-6)
    assert breakdown["decode_s"] == pytest.approx((5.0 - 3.1) + (9.0 - 6.2), abs=1e-6)
    # the run dataset's trends (DuckDB) follow the same rules
    trends = rollout_trends(joined).iloc[0]
    for phase in ("queue", "prefill", "decode", "pd", "other"):
        assert trends[f"engine_{phase}_s"] == pytest.approx(breakdown[f"{phase}_s"], abs=1e-6)
    assert trends["engine_retracted_s"] == pytest.approx(breakdown["retracted_s"], abs=1e-6)


def test_decode_loops_become_one_stretch_with_their_counts() -> None:
    frames = frames_for(["r-loops"])
    engine = Engine()
    engine.request("r-loops", T0 + 1, T0 + 9, tp=2,
                   slices=plain_slices(T0 + 1.1, T0 + 9, loops=500))
    table = engine.table()
    assert len(table) > 1000
    joined = join_engine(frames, table)
    loops = _engine_spans(joined)
    loops = loops[loops["name"] == "decode_loop"]
    assert len(loops) == 1
    stretch = loops.iloc[0]
    assert stretch["attr.engine.decode_loops"] == 500
    assert stretch["attr.engine.decode_steps"] == 500
    forward = _engine_spans(joined).set_index("name").loc["decode_forward"]
    assert stretch["start"] == pytest.approx(forward["start"], abs=1e-6)
    assert stretch["end"] == pytest.approx(forward["end"], abs=1e-6)
    assert (joined.events["origin"] == "engine").sum() == 0
    assert len(_engine_spans(joined)) < 15


def test_decode_waiting_without_pd_is_queue() -> None:
    frames = frames_for(["r-plain"])
    engine = Engine()
    engine.request("r-plain", T0 + 1, T0 + 9, slices=plain_slices(T0 + 1.0, T0 + 9.0))
    breakdown = engine_breakdown(join_engine(frames, engine.table())).loc[0]
    assert breakdown["pd_s"] == 0.0
    # the waits; the tokenizer's dispatch (T0+1.01 to 1.02) lies in prefill_waiting here,
    # and an instant counts once
    assert breakdown["queue_s"] == pytest.approx(0.8 + 0.8, abs=1e-6)


def test_tokenizer_slices_are_kept() -> None:
    frames = frames_for(["r-tok"])
    engine = Engine()
    engine.request("r-tok", T0 + 1, T0 + 9, role="decode", room=9,
                   slices=plain_slices(T0 + 1.1, T0 + 9))
    names = set(_engine_spans(join_engine(frames, engine.table()))["name"].astype(str))
    assert {"tokenize", "api_server_dispatch"} <= names


def test_a_thread_span_left_under_an_older_bootstrap_room_joins_its_host_request() -> None:
    """Older SGLang put both PD halves under one "Bootstrap Room" trace root; a thread span
    hung under the room rather than a request root is read as its host's request's."""
    frames = frames_for(["r-old"])
    engine = Engine()
    trace = f"{next_id():032x}"
    room = engine.span(trace, None, "Bootstrap Room 0x5", T0 + 1, T0 + 9,
                       {"bootstrap_room": "0x5"})
    engine.request("r-old", T0 + 1, T0 + 9, role="decode", room=5, host="decodehh",
                   slices=plain_slices(T0 + 1.1, T0 + 9), parent=room, trace=trace)
    engine.request("prefill-own", T0 + 1, T0 + 3, role="prefill", host="prefillh",
                   parent=room, trace=trace)
    stray = engine.span(trace, room, "Tokenizer(host:prefillh | pid:3)", T0 + 1, T0 + 1.2,
                        {"host_id": "prefillh", "pid": 3, "thread_label": "Tokenizer"})
    engine.span(trace, stray, "dispatch", T0 + 1.0, T0 + 1.2)
    joined = join_engine(frames, engine.table())
    spans = _engine_spans(joined)
    assert joined.engine_unmatched.empty
    dispatch = spans[spans["name"] == "dispatch"]
    assert len(dispatch) == 1
    parent = joined.span_core.loc[dispatch["parent_index"].iloc[0]]
    assert parent["name"] == "sglang prefill request"


def test_an_export_stored_twice_counts_once() -> None:
    """A client that lost the receiver's answer sends the batch again: same ids."""
    frames = frames_for(["r-twice"])
    engine = Engine()
    engine.request("r-twice", T0 + 1, T0 + 9, tp=2, slices=plain_slices(T0 + 1.1, T0 + 9, loops=50))
    once = engine.table()
    joined = join_engine(frames, pa.concat_tables([once, once]))
    spans = _engine_spans(joined)
    assert len(spans) == len(_engine_spans(join_engine(frames, once)))
    loops = spans[spans["name"] == "decode_loop"]
    assert loops["attr.engine.decode_loops"].tolist() == [50]


def test_a_sibling_between_loops_breaks_the_stretch() -> None:
    frames = frames_for(["r-runs"])
    engine = Engine()
    loops = [("decode_loop", T0 + 2 + k * 0.1, T0 + 2.1 + k * 0.1, {"decode_ct": k},
              [("schedule", T0 + 2 + k * 0.1, {}), *([("custom", T0 + 2.05, {"n": 1})]
                                                     if k == 0 else [])], [])
             for k in range(10)]
    between = ("spec_verify", T0 + 2.45, T0 + 2.46, {}, [], [])
    engine.request("r-runs", T0 + 1, T0 + 9, slices=[
        ("decode_forward", T0 + 2, T0 + 3, {}, [], [*loops, between])])
    spans = _engine_spans(join_engine(frames, engine.table()))
    stretches = spans[spans["name"] == "decode_loop"].sort_values("start")
    assert stretches["attr.engine.decode_loops"].tolist() == [5, 5]
    assert stretches["attr.engine.decode_steps"].tolist() == [5, 5]
    assert stretches["end"].iloc[0] == pytest.approx(T0 + 2.5, abs=1e-6)
    joined = join_engine(frames, engine.table())
    kept = joined.events[(joined.events["origin"] == "engine").to_numpy()]
    assert kept["name"].astype(str).tolist() == ["custom"]  # a loop's schedule events go


def test_a_short_rid_alone_never_matches_by_its_tail() -> None:
    """A 0.5.x root that never finished has only ``rid``, the part after the last ``_``:
    it must not land on the one sample whose id ends the same way."""
    frames = frames_for(["sess-17_turn-2"])
    engine = Engine()
    engine.request("sess-23_turn-2", T0 + 1, T0 + 4)
    engine.rows["attributes"][0] = json.dumps({"rid": "turn-2", "module": "sglang::request"})
    joined = join_engine(frames, engine.table())
    assert _engine_spans(joined).empty
    assert joined.engine_unmatched["rid"].tolist() == ["turn-2"]


def test_a_retraction_no_slice_holds_counts_the_same_in_trends() -> None:
    frames = frames_for(["r-early"])
    engine = Engine()
    engine.request("r-early", T0 + 1, T0 + 9, thread_events=[("retract", T0 + 1.05, {})],
                   slices=plain_slices(T0 + 1.1, T0 + 9))
    joined = join_engine(frames, engine.table())
    breakdown = engine_breakdown(joined).loc[0]
    trends = rollout_trends(joined).iloc[0]
    for phase in ("queue", "prefill", "decode", "pd", "other"):
        assert trends[f"engine_{phase}_s"] == pytest.approx(breakdown[f"{phase}_s"], abs=1e-6)
