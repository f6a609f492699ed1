"""analysis.engine_breakdown and the engine columns of rollout_trends, against the
requests the engines were told to trace (tests/support/engine_traces.py)."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

from slime_trace_widget import analysis
from slime_trace_widget.demo import make_demo_samples
from slime_trace_widget.frames import build_frames
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.engine.join import join_engine
from slime_trace_widget.sources.engine.store import load_engine_traces
from slime_trace_widget.tracing import bind_trace, trace_span, use_clock
from tests.sources.test_engine_join import SKEWS, store_requests
from tests.support.engine_traces import Half, Request, Slice, requests_for


@pytest.fixture(scope="module")
def joined(tmp_path_factory: pytest.TempPathFactory) -> tuple[TraceFrames, list[Request]]:
    frames = build_frames(make_demo_samples(20, seed=6))
    requests = requests_for(frames, seed=2)
    folder = store_requests(requests, tmp_path_factory.mktemp("engine"), SKEWS)
    return join_engine(frames, load_engine_traces(folder)), requests


def truth(frames: TraceFrames, requests: list[Request]) -> dict[int, Counter]:
    """Seconds per phase and retractions per sample row, from the requests."""
    phase_of = {"prefill_waiting": "queue_s", "prefill_forward": "prefill_s",
                "decode_loop": "decode_s"}
    out: dict[int, Counter] = defaultdict(Counter)
    for request in requests:
        row = int(frames.span_core.at[request.span, "sample_row"])
        out[row]["requests"] += len(request.halves)
        for half in request.halves:
            for piece in half.slices:
                out[row][phase_of[piece.name]] += piece.end - piece.start
                out[row]["retractions"] += sum(1 for name, *_ in piece.events
                                               if name == "retract")
    return out


def test_per_sample_phases_match_what_the_engine_did(
        joined: tuple[TraceFrames, list[Request]]) -> None:
    frames, requests = joined
    table = analysis.engine_breakdown(frames)
    expected = truth(frames, requests)
    assert set(table.index) == set(frames.samples.index)
    assert sum(c["retractions"] for c in expected.values()) > 0  # the scene has some
    for row, wanted in expected.items():
        for column in ("queue_s", "prefill_s", "decode_s"):
            assert table.at[row, column] == pytest.approx(wanted[column], abs=1e-5)
        assert table.at[row, "requests"] == wanted["requests"]
        assert table.at[row, "retractions"] == wanted["retractions"]
        assert table.at[row, "pd_s"] == 0 and table.at[row, "other_s"] == 0
    with_retracts = table[table["retractions"] > 0]
    assert (with_retracts["retracted_s"] > 0).all()
    tokens = table["decode_tokens"] / table["decode_s"]
    busy = table["decode_s"] > 0
    assert np.allclose(table.loc[busy, "decode_tokens_per_s"].fillna(0),
                       tokens[busy].where(table.loc[busy, "decode_tokens"] > 0).fillna(0))


def test_per_rollout_sums_the_samples(joined: tuple[TraceFrames, list[Request]]) -> None:
    frames, _ = joined
    per_sample = analysis.engine_breakdown(frames)
    per_rollout = analysis.engine_breakdown(frames, by="rollout")
    assert list(per_rollout.index) == sorted(frames.samples["rollout_id"].dropna().unique())
    for column in ("queue_s", "prefill_s", "decode_s", "retractions", "requests"):
        assert per_rollout[column].sum() == pytest.approx(per_sample[column].sum())
    with pytest.raises(ValueError, match="by must be"):
        analysis.engine_breakdown(frames, by="host")


def test_rollout_trends_gain_engine_columns(joined: tuple[TraceFrames, list[Request]]) -> None:
    frames, _ = joined
    trends = analysis.rollout_trends(frames)
    per_rollout = analysis.engine_breakdown(frames, by="rollout")
    for phase in ("queue", "prefill", "decode", "pd", "other"):
        assert trends[f"engine_{phase}_s"].sum() == pytest.approx(
            per_rollout[f"{phase}_s"].sum(), abs=1e-4)
    assert trends["engine_retractions"].sum() == per_rollout["retractions"].sum()
    assert trends["engine_retracted_s"].sum() == pytest.approx(
        per_rollout["retracted_s"].sum(), abs=1e-4)
    by_rollout = trends.set_index("rollout_id")
    for rollout, rate in per_rollout["decode_tokens_per_s"].items():
        assert by_rollout.at[rollout, "engine_decode_tokens_per_s"] == pytest.approx(rate)
    # the heaviest-span columns stay the dump's own spans
    assert not any(column.startswith("sglang request") for column in trends.columns)


def test_critical_path_and_flame_count_engine_slices(tmp_path: Path) -> None:
    """A generation whose only children are the engine's: the critical path goes through
    the request and its last slice, the flame has their paths."""
    now = [1000.0]
    sample: dict = {"index": 0}
    bind_trace(sample)
    with use_clock(lambda: now[0]), trace_span(sample, "agent_step"):
        with trace_span(sample, "sglang_generate", {"sglang_request_id": "r1"}):
            now[0] += 10.0
        now[0] += 1.0
    frames = build_frames([sample])
    generation = int(frames.span_core.index[frames.span_core["name"] == "sglang_generate"][0])
    request = Request("r1", generation, [Half("", "engine-a", 7, [
        Slice("prefill_forward", 1000.5, 1003.0), Slice("decode_loop", 1003.0, 1009.5)])])
    joined = join_engine(frames, load_engine_traces(
        store_requests([request], tmp_path, {"engine-a": 0.0})))
    path = analysis.critical_path(joined, 0)
    assert list(path["name"].astype(str)) == ["agent_step", "sglang_generate", "sglang request",
                                              "prefill_forward", "decode_loop"]
    flame = analysis.flame(joined).set_index("path")
    assert flame.at["agent_step;sglang_generate;sglang request;decode_loop", "total"] == \
        pytest.approx(6.5, abs=1e-5)


def test_frames_without_engine_spans(tmp_path: Path) -> None:
    frames = build_frames(make_demo_samples(4, seed=1))
    table = analysis.engine_breakdown(frames)
    assert (table[["queue_s", "decode_s", "requests"]] == 0).all().all()
    assert table["decode_tokens_per_s"].isna().all()
    assert not any(c.startswith("engine_") for c in analysis.rollout_trends(frames).columns)
