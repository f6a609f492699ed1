"""Joining engine traces into frames that hold engine requests already gives what their
first join gave. It happens whenever a run dataset converted with ``engine_traces=`` is
opened with them again (``load_frames(DATASET, engine_traces=…)``,
``TraceTimeline.from_dataset(…, engine_traces=…)``, ``slime-trace-viewer DATASET
--engine-traces …``). The requests the frames hold keep their spans and are not attached
twice, yet still count: another rollout's request of the same rid (a client naming rids
by session and turn) is listed as the first join listed it, not attached in its place,
and the hosts' skews and the join's warnings are the first join's
(``sources/engine/join.py``, ``sources/engine/match.py``: ``Held``). Traces laid out as
SGLang 0.5.23 writes them (``tests/support/engine_builder.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from slime_trace_widget import TraceTimeline, load_frames
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.dataset import convert, open_dataset
from slime_trace_widget.sources.dumps import save_dump
from slime_trace_widget.sources.engine.beyond import MISSING_WARNING
from slime_trace_widget.sources.engine.join import join_engine
from slime_trace_widget.sources.engine.match import REUSED_RID, RID_USED_AGAIN
from slime_trace_widget.sources.engine.store import SpanStore
from slime_trace_widget.tracing import bind_trace, trace_span, use_clock
from tests.frames.test_frames import frames_of, rec, sample
from tests.support.engine_builder import T0, Engine, plain_slices


def _samples(rids: list[str]) -> list[dict[str, Any]]:
    """One sample per rid, each a ``sglang_generate`` span over 0-10 s from T0."""
    samples = []
    for number, rid in enumerate(rids):
        sample_: dict[str, Any] = {"index": number, "group_index": number,
                                   "status": "completed"}
        now = [T0]
        bind_trace(sample_)
        with use_clock(lambda now=now: now[0]), trace_span(sample_, "sglang_generate") as span:
            now[0] = T0 + 10
            span.update({"sglang_request_id": rid})
        samples.append(sample_)
    return samples


def _request_roots(frames: TraceFrames) -> list[tuple[int, str, float]]:
    """Each attached request root: its sample, its rid, its start from T0 (dump clock)."""
    spans = frames.spans
    if "attr.gen_ai.request.id" not in spans:
        return []  # none attached
    roots = spans[(spans["origin"] == "engine").to_numpy()
                  & spans["name"].astype(str).str.endswith("request").to_numpy()]
    return sorted((int(row), str(rid), round(float(start) - T0, 3)) for row, rid, start in zip(
        roots["sample_row"], roots["attr.gen_ai.request.id"], roots["start"], strict=True))


def _reports(frames: TraceFrames) -> tuple[list, list, dict]:
    """What a join reports: the listed requests (rid, engine start, reason), each host's
    skew, the join's warnings."""
    unmatched = sorted((rid, round(start - T0, 3), reason) for rid, start, reason in zip(
        frames.engine_unmatched["rid"], frames.engine_unmatched["start"],
        frames.engine_unmatched["reason"], strict=True))
    skew = frames.engine_skew
    skews = sorted((host, round(value, 6), int(count)) for host, value, count in zip(
        skew["host"], skew["skew"], skew["requests"], strict=True))
    return unmatched, skews, {key: count for key, count in frames.warnings.items()
                              if key.startswith("engine_")}


def test_a_dataset_opened_with_its_engine_traces_again_lists_the_next_rollouts_request(
        tmp_path: Path) -> None:
    """Sample 0's generation (0-10 s) names ``sess-1_turn-0``; its request runs 1-9 s, and
    the next rollout's request of that rid 40-48 s, inside the 60 s read around the
    dump; sample 2's request is in no trace. The convert attaches the first, lists the
    second (RID_USED_AGAIN) and counts sample 2's missing. Opened with the same traces
    again, the join left out the requests held: the second was then the span's one
    request and went under it beside the first, the host's skew was reported empty and
    the missing span was counted twice. Now it gives what the convert gave."""
    dump = Path(save_dump(tmp_path / "rollout_0.pt",
                          _samples(["sess-1_turn-0", "other", "lost"]), rollout_id=0))
    engine = Engine()
    engine.request("other", T0 + 1, T0 + 9, slices=plain_slices(T0 + 1, T0 + 9))
    engine.request("sess-1_turn-0", T0 + 1, T0 + 9, slices=plain_slices(T0 + 1, T0 + 9))
    engine.request("sess-1_turn-0", T0 + 40, T0 + 48, slices=plain_slices(T0 + 40, T0 + 48))
    store = SpanStore(tmp_path / "engine")
    store.append(engine.table())
    store.close()
    traces = tmp_path / "engine"
    dataset = tmp_path / "dataset"
    assert convert([str(dump)], dataset, engine_traces=traces,
                   settle_seconds=0).converted == [str(dump)]
    first = open_dataset(dataset)
    assert _request_roots(first) == [(0, "sess-1_turn-0", 1.0), (1, "other", 1.0)]
    assert [(rid, reason) for rid, _, reason in _reports(first)[0]] == [
        ("sess-1_turn-0", RID_USED_AGAIN)]
    assert first.warnings[MISSING_WARNING] == 1
    for again in (load_frames(str(dataset), engine_traces=str(traces), progress=False),
                  TraceTimeline.from_dataset(dataset, engine_traces=traces).frames):
        assert _request_roots(again) == _request_roots(first)
        assert (again.span_core["origin"] == "engine").sum() == \
            (first.span_core["origin"] == "engine").sum()
        assert _reports(again) == _reports(first)


def _attempts() -> TraceFrames:
    """Sample 0's rid ``r`` sent twice: attempt 0 over 0-3 s, attempt 1 over 4-10 s;
    sample 1's generation 0-10 s names ``other``."""
    return frames_of(
        sample(rec("span_start", "sglang_generate", 0, "g0", attempt=0,
                   attrs={"sglang_request_id": "r"}),
               rec("span_end", "sglang_generate", 3, "g0", attempt=0),
               rec("span_start", "sglang_generate", 4, "g1", attempt=1,
                   attrs={"sglang_request_id": "r"}),
               rec("span_end", "sglang_generate", 10, "g1", attempt=1)),
        sample(rec("span_start", "sglang_generate", 0, "o",
                   attrs={"sglang_request_id": "other"}),
               rec("span_end", "sglang_generate", 10, "o"), index=1))


def _same_join(first: TraceFrames, again: TraceFrames) -> None:
    assert _request_roots(again) == _request_roots(first)
    spans = ["sample_row", "name", "start", "end", "attempt"]
    pd.testing.assert_frame_equal(again.span_core[spans], first.span_core[spans])
    assert _reports(again) == _reports(first)


def test_a_retried_rid_joined_again_keeps_each_attempts_request_and_lists_the_stranger(
        ) -> None:
    """Each attempt got its request (0.5-2.5 s, 4.5-9 s); a request of ``r`` from another
    rollout (40-45 s) overlaps neither, after the skew the host's request of ``other``
    gives, and is listed. Joined again without the requests held, it was alone on a host
    of no other request, fitted attempt 1 under one offset and went under it beside that
    attempt's own; and the skew was reported empty."""
    engine = Engine()
    engine.request("other", T0 + 1, T0 + 9, slices=plain_slices(T0 + 1, T0 + 9))
    for start, end in ((0.5, 2.5), (4.5, 9.0), (40.0, 45.0)):
        engine.request("r", T0 + start, T0 + end, slices=plain_slices(T0 + start, T0 + end))
    table = engine.table()
    first = join_engine(_attempts(), table)
    assert [root[:2] for root in _request_roots(first)] == [(0, "r"), (0, "r"), (1, "other")]
    assert [(rid, reason) for rid, _, reason in _reports(first)[0]] == [("r", REUSED_RID)]
    _same_join(first, join_engine(first, table))


def test_a_join_again_with_a_request_more_attaches_it_as_a_first_join_does() -> None:
    """The first join read sample 1's request only; the second reads sample 0's two
    attempts' requests too (a store that received them since): they attach as a first
    join of all three attaches them, the held one is not attached twice (it stays where
    the skew of its own join drew it), and the reports are a first join's."""
    engine = Engine()
    engine.request("other", T0 + 1, T0 + 9, slices=plain_slices(T0 + 1, T0 + 9))
    some = join_engine(_attempts(), engine.table())
    assert _request_roots(some) == [(1, "other", 1.0)]
    for start, end in ((0.5, 2.5), (4.5, 9.0)):
        engine.request("r", T0 + start, T0 + end, slices=plain_slices(T0 + start, T0 + end))
    first = join_engine(_attempts(), engine.table())
    assert [root[:2] for root in _request_roots(first)] == [(0, "r"), (0, "r"), (1, "other")]
    again = join_engine(some, engine.table())
    assert [root for root in _request_roots(again) if root[0] == 0] == \
        [root for root in _request_roots(first) if root[0] == 0]
    assert [root for root in _request_roots(again) if root[0] == 1] == \
        _request_roots(some)
    assert _reports(again) == _reports(first)
