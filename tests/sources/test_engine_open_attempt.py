"""A reused rid whose last attempt is still open in the dump: that span's end is unknown
(it is only drawn to one: its row's last timestamp), so it bounds its request's time from
below only, by its start, as it bounds its host's skew (``sources/engine/skew.py``) and
as the engine band and ``engine_breakdown`` clip nothing after it
(``sources/engine/skew.py``: ``SpanColumns.time_of``; ``match.py``:
``attempt_reaches``). A request that starts after the drawn end is still that attempt's.
Traces laid out as SGLang 0.5.23 writes them (``tests/support/engine_builder.py``)."""

from __future__ import annotations

import pytest

from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.engine.join import join_engine
from slime_trace_widget.sources.engine.match import placed_matches
from slime_trace_widget.sources.engine.requests import read_requests
from tests.frames.test_frames import frames_of, rec, sample
from tests.support.engine_builder import T0, Engine, plain_slices


def _attempts(close_at: float | None) -> dict:
    """A sample whose rid ``r`` was sent twice: attempt 0 closed over 0-3 s, attempt 1
    from 4 s, closed at ``close_at`` or still open, drawn to 5 s (its row's last
    timestamp, an event there)."""
    records = [
        rec("span_start", "sglang_generate", 0, "g0", attempt=0,
            attrs={"sglang_request_id": "r"}),
        rec("span_end", "sglang_generate", 3, "g0", attempt=0),
        rec("span_start", "sglang_generate", 4, "g1", attempt=1,
            attrs={"sglang_request_id": "r"}),
    ]
    if close_at is None:
        records.append(rec("event", "tick", 5, attempt=1))
    else:
        records.append(rec("span_end", "sglang_generate", close_at, "g1", attempt=1))
    return sample(*records)


def _other() -> dict:
    """A second sample: a closed generation over 0-10 s naming rid ``other``."""
    return sample(rec("span_start", "sglang_generate", 0, "o",
                      attrs={"sglang_request_id": "other"}),
                  rec("span_end", "sglang_generate", 10, "o"), index=1)


def _engine(times: list[tuple[float, float]], other: bool = False) -> Engine:
    """One request of rid ``r`` per (start, end) seconds from T0 on one host, request
    ``k`` made by attempt ``k`` (its slice's ``truth``); with ``other``, that host's
    request of rid ``other`` over 1-9 s too, which gives the host its skew."""
    engine = Engine()
    if other:
        engine.request("other", T0 + 1, T0 + 9, slices=plain_slices(T0 + 1, T0 + 9))
    for attempt, (start, end) in enumerate(times):
        engine.request("r", T0 + start, T0 + end, slices=[
            ("prefill_forward", T0 + start + 0.1, T0 + end, {"truth": attempt}, [], [])])
    return engine


def _placed(frames: TraceFrames) -> list[tuple[int, int]]:
    """Each attached request of rid ``r``: the attempt of the span it went under and the
    attempt that made it (its slice's ``truth``)."""
    spans = frames.spans
    if "attr.truth" not in spans:
        return []  # none attached
    slices = spans[(spans["origin"] == "engine").to_numpy()
                   & (spans["name"] == "prefill_forward").to_numpy()
                   & spans["attr.truth"].notna().to_numpy()]
    return sorted((int(attempt), int(truth)) for attempt, truth
                  in zip(slices["attempt"], slices["attr.truth"], strict=True))


def _check_open(frames: TraceFrames, close_at: float | None) -> None:
    core = frames.span_core
    generation = core[core["attempt"] == 1].iloc[0]
    assert generation["state"] == ("open" if close_at is None else "closed")
    assert generation["display_end"] - T0 == pytest.approx(5.0 if close_at is None
                                                           else close_at)


@pytest.mark.parametrize("close_at", [None, 10.0], ids=["open", "closed"])
def test_an_open_last_attempt_takes_its_request_on_a_host_of_unknown_clock(
        close_at: float | None) -> None:
    """The reviewer's case: the requests run 0.5-2.5 s and 4.5-9 s on a host that served
    nothing else. Attempt 1's drawn end (5 s) made the second request fit it under no
    offset that fits the first to attempt 0, and both were listed with their reused rid's
    reason; closed at 10 s, both attached. Its end unknown, only its start bounds it:
    each request goes under its own attempt, open or closed."""
    frames = frames_of(_attempts(close_at))
    _check_open(frames, close_at)
    joined = join_engine(frames, _engine([(0.5, 2.5), (4.5, 9.0)]).table())
    assert _placed(joined) == [(0, 0), (1, 1)]
    assert joined.engine_unmatched.empty
    skew = joined.engine_skew
    assert skew["requests"].tolist() == [2] and skew["consistent"].all()


@pytest.mark.parametrize("close_at", [None, 10.0], ids=["open", "closed"])
def test_a_request_starting_after_an_open_attempts_drawn_end_is_placed_by_its_skew(
        close_at: float | None) -> None:
    """The host's skew is known (its request of ``other`` gives it, about 0): the second
    request of ``r`` runs 5.5-9 s, after attempt 1's drawn end. Its overlap with that
    attempt was measured up to the drawn end (none), and it was listed; an open span's
    end bounds nothing, so it overlaps attempt 1 alone and goes there."""
    frames = frames_of(_attempts(close_at), _other())
    _check_open(frames, close_at)
    engine = _engine([(0.5, 2.5), (5.5, 9.0)], other=True)
    joined = join_engine(frames, engine.table())
    assert _placed(joined) == [(0, 0), (1, 1)]
    assert joined.engine_unmatched.empty
    skew = joined.engine_skew
    assert skew["requests"].tolist() == [3] and skew["consistent"].all()
    # the live view's marks decide by the same placement
    requests = read_requests(engine.table())
    owners = placed_matches(frames, requests).owners
    attempts = frames.span_core["attempt"]
    assert sorted(int(attempts[owner]) for request, owner in zip(requests, owners, strict=True)
                  if request.whole_rid == "r") == [0, 1]
