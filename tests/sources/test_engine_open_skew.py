"""A generation span still open in the dump bounds its engine host's clock skew from
below only: its end is unknown, and the end it is drawn to (its row's last timestamp,
its next sibling's start) says nothing about when its request ended
(``sources/engine/skew.py``). The engine time the join attaches under it then agrees with
``engine_breakdown``, which clips nothing after an open span's start."""

from __future__ import annotations

import math

import pytest

from slime_trace_widget.answers.engine import engine_breakdown
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.engine.join import join_engine
from tests.frames.test_frames import frames_of, rec, sample
from tests.support.engine_builder import T0, Engine, plain_slices


def _generation(index: int, rid: str, *, open_until: float | None = None,
                start: float = 0.0, end: float = 10.0) -> dict:
    """A sample with one ``sglang_generate`` span naming ``rid``: closed over
    [``start``, ``end``], or, with ``open_until``, never closed and drawn to that time
    (an event of its row there is the row's last timestamp)."""
    records = [rec("span_start", "sglang_generate", start, "g", attrs={"sglang_request_id": rid})]
    if open_until is None:
        records.append(rec("span_end", "sglang_generate", end, "g"))
    else:
        records.append(rec("event", "tick", open_until))
    return sample(*records, index=index)


def _joined(frames: TraceFrames, requests: dict[str, tuple[float, float]],
            host: str = "hostaaaa") -> TraceFrames:
    """``frames`` joined with one request per rid over (start, end) seconds after T0,
    engine time, on ``host``."""
    engine = Engine()
    for rid, (start, end) in requests.items():
        engine.request(rid, T0 + start, T0 + end, host=host,
                       slices=plain_slices(T0 + start, T0 + end))
    return join_engine(frames, engine.table())


def _request_start(frames: TraceFrames, row: int) -> float:
    spans = frames.spans
    picked = spans[(spans["origin"] == "engine").to_numpy()
                   & (spans["name"] == "sglang request").to_numpy()
                   & (spans["sample_row"] == row).to_numpy()]
    assert len(picked) == 1
    return float(picked["start"].iloc[0]) - T0


def test_an_open_span_gives_no_upper_bound_beside_a_closed_one() -> None:
    """The reviewer's case: a closed span 0-10 s and an open one drawn to 4 s, each with
    a request 1-9 s on one host. The open span's drawn end would bound the skew by
    4 - 9 = -5, below the -1 the starts give: inconsistent, and a skew that shifts the
    closed sample's request too. Its end unknown, only the closed span bounds it above."""
    frames = frames_of(_generation(0, "r1"), _generation(1, "r2", open_until=4.0))
    core = frames.span_core
    assert core["state"].tolist() == ["closed", "open"]
    assert core["display_end"].iloc[1] - T0 == pytest.approx(4.0)
    joined = _joined(frames, {"r1": (1.0, 9.0), "r2": (1.0, 9.0)})
    skew = joined.engine_skew
    assert skew["host"].tolist() == ["hostaaaa"]
    assert skew["requests"].tolist() == [2]
    assert bool(skew["consistent"].iloc[0])
    assert skew["low"].iloc[0] == pytest.approx(-1.0)
    assert skew["high"].iloc[0] == pytest.approx(1.0)  # the closed span's: 10 - 9
    assert -1.0 <= skew["skew"].iloc[0] <= 1.0
    shift = float(skew["skew"].iloc[0])
    # each request lands where its host's skew puts it, inside its generation span
    for row in (0, 1):
        assert _request_start(joined, row) == pytest.approx(1.0 + shift, abs=1e-6)
        assert _request_start(joined, row) >= 0.0
    # what the band counts under the open span is the request's whole engine time
    breakdown = engine_breakdown(joined)
    assert breakdown.loc[1, "decode_s"] == pytest.approx(breakdown.loc[0, "decode_s"])
    assert breakdown.loc[1, "decode_s"] == pytest.approx(0.7 * 8.0)


def test_a_host_whose_requests_all_hang_under_open_spans_is_bounded_below_only() -> None:
    """No span bounds it above: ``high`` is inf, and the skew is its ``low`` (the starts
    bound a host's clock tightly), finite and consistent, not the drawn ends'."""
    frames = frames_of(_generation(0, "r1", open_until=3.0),
                       _generation(1, "r2", open_until=5.0, start=2.0))
    joined = _joined(frames, {"r1": (1.0, 9.0), "r2": (3.0, 8.0)})
    skew = joined.engine_skew
    assert bool(skew["consistent"].iloc[0])
    assert math.isinf(skew["high"].iloc[0]) and skew["high"].iloc[0] > 0
    assert skew["low"].iloc[0] == pytest.approx(-1.0)  # max(0 - 1, 2 - 3)
    assert skew["skew"].iloc[0] == pytest.approx(-1.0)
    assert _request_start(joined, 0) == pytest.approx(0.0, abs=1e-6)
    assert _request_start(joined, 1) == pytest.approx(2.0, abs=1e-6)


def test_an_open_span_on_one_host_leaves_another_hosts_window_alone() -> None:
    """The network time comes from the narrowest window bounded above; a host whose
    requests hang under open spans only takes it, within no upper bound."""
    frames = frames_of(_generation(0, "r1"), _generation(1, "r2", open_until=4.0))
    engine = Engine()
    engine.request("r1", T0 + 1.0, T0 + 9.0, host="hostaaaa",
                   slices=plain_slices(T0 + 1.0, T0 + 9.0))
    engine.request("r2", T0 + 1.5, T0 + 9.0, host="hostbbbb",
                   slices=plain_slices(T0 + 1.5, T0 + 9.0))
    skew = join_engine(frames, engine.table()).engine_skew.set_index("host")
    assert skew["consistent"].all()
    # hostaaaa: [-1, 1], so one way the network takes 1 s; hostbbbb: [-1.5, inf)
    assert skew.at["hostaaaa", "skew"] == pytest.approx(0.0)
    assert skew.at["hostbbbb", "low"] == pytest.approx(-1.5)
    assert math.isinf(skew.at["hostbbbb", "high"])
    assert skew.at["hostbbbb", "skew"] == pytest.approx(-0.5)
