"""The join where the engines' side is not as the rules assume: a rid sent twice (a
retry), engine hosts that share one machine id, a host whose clock is off by more than
the window the join reads. Traces laid out as SGLang 0.5.23 writes them
(``tests/support/engine_builder.py``)."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from slime_trace_widget.frames import build_frames
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.engine.join import NO_SPAN, join_engine
from slime_trace_widget.sources.engine.match import REUSED_RID
from slime_trace_widget.tracing import bind_trace, trace_next_attempt, trace_span, use_clock
from tests.support.engine_builder import T0, Engine, plain_slices


def _request_spans(frames: TraceFrames) -> pd.DataFrame:
    spans = frames.spans
    engine = spans[(spans["origin"] == "engine").to_numpy()]
    return engine[engine["name"].astype(str).str.endswith("request")]


def _generations(attempts_by_rid: dict[str, list[tuple[float, float]]]) -> TraceFrames:
    """One sample per rid, its generation sent once per attempt with that same rid (a
    retry after an abort): one ``sglang_generate`` span per attempt, over the given
    (start, end) seconds from T0."""
    samples = []
    for index, (rid, attempts) in enumerate(attempts_by_rid.items()):
        sample = {"index": index, "group_index": index, "status": "completed"}
        now = [T0]
        bind_trace(sample)
        with use_clock(lambda now=now: now[0]):
            for number, (start, end) in enumerate(attempts):
                if number:
                    trace_next_attempt(sample)
                now[0] = T0 + start
                with trace_span(sample, "sglang_generate") as span:
                    now[0] = T0 + end
                    span.update({"sglang_request_id": rid})
        samples.append(sample)
    return build_frames(samples)


def test_a_rid_sent_again_attaches_each_request_to_its_attempt() -> None:
    frames = _generations({"same-rid": [(0, 5), (6, 12)]})
    engine = Engine()
    engine.request("other", T0 + 0.2, T0 + 1, host="hostbbbb")  # no span made it
    for start, end in ((0.5, 4.5), (6.5, 11.5)):  # the engine's clock is the dump's
        engine.request("same-rid", T0 + start, T0 + end,
                       slices=plain_slices(T0 + start + 0.1, T0 + end))
    engine.request("same-rid", T0 + 20, T0 + 22)  # a third: no attempt holds its time
    joined = join_engine(frames, engine.table())
    roots = _request_spans(joined)
    generations = frames.span_core[frames.span_core["name"] == "sglang_generate"]
    assert sorted(zip(roots["parent_index"], roots["attempt"], strict=True)) == sorted(
        zip(generations.index, generations["attempt"], strict=True))
    assert sorted(roots["attempt"]) == [0, 1]
    starts = roots.set_index("attempt")["start"]
    assert abs(starts[0] - (T0 + 0.5)) < 1e-6 and abs(starts[1] - (T0 + 6.5)) < 1e-6
    unmatched = joined.engine_unmatched.set_index("rid")
    assert unmatched["reason"].to_dict() == {"other": NO_SPAN, "same-rid": REUSED_RID}
    assert abs(unmatched.at["same-rid", "start"] - (T0 + 20)) < 1e-6


def test_a_retried_rid_is_placed_in_the_dump_clock_of_its_host() -> None:
    """The host's clock is 3 s ahead: in engine time the first attempt's request overlaps
    both attempts; the host's skew, estimated from its other request, places each."""
    frames = _generations({"same-rid": [(0, 5), (6, 12)], "known": [(20, 30)]})
    engine = Engine()
    for rid, start, end in (("same-rid", 0.5, 4.5), ("same-rid", 6.5, 11.5),
                            ("known", 20.5, 29.5)):
        engine.request(rid, T0 + start + 3, T0 + end + 3)
    joined = join_engine(frames, engine.table())
    roots = _request_spans(joined)
    placed = roots[roots["attr.gen_ai.request.id"] == "same-rid"].set_index("attempt")
    assert sorted(placed.index) == [0, 1] and joined.engine_unmatched.empty
    assert abs(placed.at[0, "start"] - (T0 + 0.5)) < 0.1
    assert abs(placed.at[1, "start"] - (T0 + 6.5)) < 0.1


def test_a_retried_rid_whose_time_fits_both_attempts_attaches_nowhere() -> None:
    """Two spans of one rid that overlap (two samples given the same rid) and a request
    inside both: nothing tells which made it, so it is listed, with the reason."""
    frames = _generations({"same-rid": [(0, 10)], "also": [(1, 9)]})
    ends = frames.span_end_attrs
    column = ends.table.column_names.index("sglang_request_id")
    table = ends.table.set_column(column, "sglang_request_id",
                                  [["same-rid"] * ends.table.num_rows])
    frames = replace(frames, span_end_attrs=type(ends)(table))
    engine = Engine()
    engine.request("same-rid", T0 + 2, T0 + 8)
    joined = join_engine(frames, engine.table())
    assert _request_spans(joined).empty
    assert joined.engine_unmatched[["rid", "reason"]].values.tolist() == [
        ["same-rid", REUSED_RID]]
