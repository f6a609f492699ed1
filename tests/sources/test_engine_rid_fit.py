"""Requests of a rid that names several generation spans, on an engine host that served
no other request (its clock offset unknown): they are placed only when exactly one way
of giving each its own span fits them all under one common offset, in any order, not
only the order of their starts. Two samples given one rid (an adapter naming rids after
their prompt or group) run at once, so their spans overlap and more than one way may fit.
Traces laid out as SGLang 0.5.23 writes them (``tests/support/engine_builder.py``)."""

from __future__ import annotations

import pandas as pd

from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.engine.join import join_engine
from slime_trace_widget.sources.engine.match import UNKNOWN_OFFSET
from tests.support.engine_builder import T0, Engine, generations


def _truth_rows(frames: TraceFrames) -> pd.DataFrame:
    """Each attached ``prefill_forward``: the sample it went under and the sample whose
    request it is (its ``truth`` attribute)."""
    spans = frames.spans
    slices = spans[(spans["origin"] == "engine").to_numpy() & (spans["name"] == "prefill_forward")]
    return slices[["sample_row", "attr.truth"]] if len(slices) else slices


def _assert_each_under_its_own_sample(joined: TraceFrames) -> None:
    """Both samples' requests are placed, each under the sample whose request it is,
    and none is left unmatched."""
    rows = _truth_rows(joined)
    assert sorted(rows["sample_row"].tolist()) == [0, 1]
    assert (rows["sample_row"] == rows["attr.truth"]).all()
    assert joined.engine_unmatched.empty


def _requests(times: list[tuple[float, float]], host: str = "hostA") -> Engine:
    """One request of rid ``group-0`` per (start, end) seconds from T0 in the host's
    clock, request ``k`` made by sample ``k`` (its slice's ``truth``)."""
    engine = Engine()
    for owner, (start, end) in enumerate(times):
        engine.request("group-0", T0 + start, T0 + end, host=host, slices=[
            ("prefill_forward", T0 + start + 0.1, T0 + end, {"truth": owner}, [], [])])
    return engine


def test_requests_that_fit_overlapping_spans_in_two_ways_attach_nowhere() -> None:
    """Sample 0's span 0-10 s, its request 2-8 s; sample 1's span 1-10 s, its request
    1.5-8 s. In the order of their starts the requests fit the spans under offset 0,
    and the other way round too (the truth): nothing tells which, so neither is placed."""
    frames = generations([("group-0", 0, 10), ("group-0", 1, 10)])
    joined = join_engine(frames, _requests([(2, 8), (1.5, 8)]).table())
    assert _truth_rows(joined).empty
    assert joined.engine_unmatched[["rid", "reason"]].values.tolist() == [
        ["group-0", UNKNOWN_OFFSET]] * 2
    assert joined.engine_skew.empty


def test_requests_that_fit_overlapping_spans_one_way_alone_are_placed() -> None:
    """Sample 0's span 0-10 s, sample 1's 5-10 s; the host's clock is 20 s ahead. The
    request starting first ends too late for sample 1's span under any offset that puts
    the other inside sample 0's: one way fits, and each goes under its own sample."""
    frames = generations([("group-0", 0, 10), ("group-0", 5, 10)])
    joined = join_engine(frames, _requests([(20.5, 29), (26, 29.5)]).table())
    _assert_each_under_its_own_sample(joined)
    assert abs(joined.engine_skew["skew"].iloc[0] + 20.0) < 0.6


def test_requests_of_overlapping_spans_fit_out_of_their_order() -> None:
    """Sample 0's span 0-10 s, sample 1's 1-5 s; sample 1's request (1.5-4.5 s) starts
    after sample 0's (1-9.5 s) would, yet the host sees it first: its clock reads sample
    0's request at 1.6 s. Only the way against the order of their starts fits; the rule
    that tried the order alone found none."""
    frames = generations([("group-0", 0, 10), ("group-0", 1, 5)])
    joined = join_engine(frames, _requests([(1.6, 9.5), (1.5, 4.5)]).table())
    _assert_each_under_its_own_sample(joined)
