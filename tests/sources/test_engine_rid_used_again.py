"""A rid that names one generation span of the frames, carried by several requests of one
role: a client that names rids after session and turn (``sess-17_turn-2``) sends it again
in the next rollout, whose request lands inside the 60 s the join reads around the
frames. The span made one of them: the one whose time overlaps it (after its host's
skew) is attached, the others are listed with :data:`RID_USED_AGAIN` and bound no skew.
Traces laid out as SGLang 0.5.23 writes them (``tests/support/engine_builder.py``)."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.schema import w3c_span_id, w3c_trace_id
from slime_trace_widget.sources.engine.join import NO_SPAN, join_engine
from slime_trace_widget.sources.engine.match import RID_USED_AGAIN, UNKNOWN_OFFSET
from tests.support.engine_builder import T0, Engine, frames_for, plain_slices


def _request_spans(frames: TraceFrames) -> pd.DataFrame:
    spans = frames.spans
    engine = spans[(spans["origin"] == "engine").to_numpy()]
    return engine[engine["name"].astype(str).str.endswith("request")]


def _placed(frames: TraceFrames) -> list[tuple[int, str, float]]:
    """Each attached request root: its sample, its rid, its start from T0 (dump clock)."""
    roots = _request_spans(frames)
    return sorted((int(row), str(rid), round(float(start) - T0, 3)) for row, rid, start in zip(
        roots["sample_row"], roots["attr.gen_ai.request.id"], roots["start"], strict=True))


def test_the_next_rollouts_request_of_a_rid_is_listed_not_attached() -> None:
    """Sample 0's generation runs 0-10 s; its request 1-9 s, and the next rollout's
    request of the same rid 40-48 s, on a host whose clock another request gives. The
    second is listed with its reason and left out of the skew, which stays consistent."""
    frames = frames_for(["sess-1_turn-0", "other"])
    engine = Engine()
    engine.request("other", T0 + 1, T0 + 9, slices=plain_slices(T0 + 1, T0 + 9))
    engine.request("sess-1_turn-0", T0 + 1, T0 + 9, slices=plain_slices(T0 + 1, T0 + 9))
    engine.request("sess-1_turn-0", T0 + 40, T0 + 48, slices=plain_slices(T0 + 40, T0 + 48))
    joined = join_engine(frames, engine.table())
    assert _placed(joined) == [(0, "sess-1_turn-0", 1.0), (1, "other", 1.0)]
    unmatched = joined.engine_unmatched
    assert unmatched[["rid", "reason"]].values.tolist() == [["sess-1_turn-0", RID_USED_AGAIN]]
    assert abs(unmatched["start"].iloc[0] - (T0 + 40)) < 1e-6
    skew = joined.engine_skew
    assert skew["requests"].tolist() == [2] and skew["consistent"].all()
    assert abs(skew["skew"].iloc[0]) < 1.0


def test_a_rid_used_again_is_placed_in_the_dump_clock_of_its_host() -> None:
    """The host's clock is 30 s behind the dump's: in engine time the next rollout's
    request (dump time 32-38 s) lies over the span (0-10 s) and the span's own request
    long before it. The skew the other request gives places each where it belongs."""
    frames = frames_for(["sess-1_turn-0", "other"])
    engine = Engine()
    for rid, start, end in (("other", 1, 9), ("sess-1_turn-0", 2, 8),
                            ("sess-1_turn-0", 32, 38)):
        engine.request(rid, T0 + start - 30, T0 + end - 30)
    joined = join_engine(frames, engine.table())
    assert [(row, rid) for row, rid, _ in _placed(joined)] == [(0, "sess-1_turn-0"),
                                                               (1, "other")]
    start = _placed(joined)[0][2]
    assert abs(start - 2.0) < 1.0
    unmatched = joined.engine_unmatched
    assert unmatched["reason"].tolist() == [RID_USED_AGAIN]
    assert abs(unmatched["start"].iloc[0] - (T0 + 2)) < 1e-6  # engine time: 32 - 30
    assert joined.engine_skew["consistent"].all()


def test_the_requests_of_a_rid_used_again_on_a_host_of_unknown_clock_attach_nowhere() -> None:
    """The host served nothing else: either request could be the span's, under some
    offset. Both are listed, and the span, its requests read, is not missing."""
    frames = frames_for(["sess-1_turn-0"])
    engine = Engine()
    engine.request("sess-1_turn-0", T0 + 1, T0 + 9)
    engine.request("sess-1_turn-0", T0 + 40, T0 + 48)
    calls: list[int] = []

    def beyond() -> pa.Table:  # reads no traces
        calls.append(1)
        return Engine().table()

    joined = join_engine(frames, engine.table(), beyond)
    assert _request_spans(joined).empty
    assert joined.engine_unmatched["reason"].tolist() == [UNKNOWN_OFFSET] * 2
    assert calls == [] and not joined.warnings


def test_requests_of_one_rid_on_two_hosts_of_unknown_clock_attach_nowhere() -> None:
    """Each host served one request of the rid and nothing else: each fits the span under
    some offset, and nothing tells which made it (their lengths do not)."""
    frames = frames_for(["sess-1_turn-0"])
    engine = Engine()
    engine.request("sess-1_turn-0", T0 + 1, T0 + 9, host="hostaaaa")
    engine.request("sess-1_turn-0", T0 + 40, T0 + 45, host="hostbbbb")
    joined = join_engine(frames, engine.table())
    assert _request_spans(joined).empty
    assert joined.engine_unmatched["reason"].tolist() == [UNKNOWN_OFFSET] * 2


def test_a_span_with_its_request_by_trace_context_keeps_it_alone() -> None:
    """The client sent ``traceparent``: the span's request hangs under it. The next
    rollout's request of the same rid hangs under a span of another dump: listed."""
    frames = frames_for(["sess-1_turn-0"])
    generation = frames.span_core.iloc[0]
    trace = w3c_trace_id(frames.samples["trace_id"].iloc[0])
    engine = Engine()
    engine.request("sess-1_turn-0", T0 + 1, T0 + 9, trace=trace,
                   parent=w3c_span_id(generation["span_id"]))
    engine.request("sess-1_turn-0", T0 + 3, T0 + 8, trace=f"{7:032x}", parent=f"{7:016x}")
    joined = join_engine(frames, engine.table())
    assert _placed(joined) == [(0, "sess-1_turn-0", 1.0)]
    assert joined.engine_unmatched["reason"].tolist() == [RID_USED_AGAIN]


def test_pd_halves_of_a_rid_used_again_keep_together() -> None:
    """Under PD with the rid on the decode half and the prefill half's own rid paired by
    bootstrap room: the decode half that overlaps the span is attached with its prefill
    half; the next rollout's decode half is listed, its prefill half with it."""
    frames = frames_for(["sess-1_turn-0", "other"])
    engine = Engine()
    engine.request("other", T0 + 1.5, T0 + 9, role="decode", room=0x10, host="decodehh")
    engine.request("prefill-other", T0 + 1, T0 + 1.5, role="prefill", room=0x10,
                   host="prefillh")
    for room, start in ((0x11, 1.0), (0x12, 40.0)):
        engine.request("sess-1_turn-0", T0 + start + 0.5, T0 + start + 8, role="decode",
                       room=room, host="decodehh")
        engine.request(f"prefill-{room}", T0 + start, T0 + start + 0.5, role="prefill",
                       room=room, host="prefillh")
    joined = join_engine(frames, engine.table())
    roots = _request_spans(joined)
    mine = roots[roots["sample_row"] == 0]
    assert sorted(mine["attr.bootstrap_room"]) == ["0x11", "0x11"]
    unmatched = joined.engine_unmatched.set_index("rid")["reason"].to_dict()
    assert unmatched == {"sess-1_turn-0": RID_USED_AGAIN, "prefill-18": NO_SPAN}
    assert joined.engine_skew["consistent"].all()
