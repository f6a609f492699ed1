"""engine_breakdown's phases as a partition of wall time: on every shape the engine tests
build (SGLang 0.5.23's layout by hand, ``tests/support/engine_builder.py``; the older
"Bootstrap Room" layout through the OpenTelemetry SDK, ``tests/support/engine_traces.py``,
plain and PD), each sample's phases add up to exactly the wall time its engine slices
cover within their generation spans, so never to more than those spans; where the two
PD halves overlap, an instant counts in the first phase of ``PRIORITY``. Traces of
SGLang's own code: ``tests/sources/test_engine_kv_senders.py`` and
``test_engine_sglang.py``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from slime_trace_widget.answers.engine import (
    HOLDER_SPANS,
    PHASE_COLUMNS,
    PRIORITY,
    RETRACT_EVENT,
    dump_phase_seconds,
    engine_breakdown,
)
from slime_trace_widget.demo import make_demo_samples
from slime_trace_widget.frames import build_frames
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.engine.join import join_engine
from slime_trace_widget.sources.engine.store import load_engine_traces
from tests.sources.test_engine_join import SKEWS, store_requests
from tests.support.engine_builder import T0, Engine, frames_for, next_id, plain_slices
from tests.support.engine_traces import requests_for

#: Prefill half, then decode half, of one PD request as SGLang 0.5.23 orders them: the
#: decode server waits for the KV cache (decode_transferred) while the prefill server
#: queues, prefills and sends it.
PREFILL = [("prefill_bootstrap", T0 + 1.0, T0 + 1.5, {}, [], []),
           ("prefill_waiting", T0 + 1.5, T0 + 2.5, {}, [], []),
           ("prefill_forward", T0 + 2.5, T0 + 3.0, {}, [], []),
           ("prefill_transfer_kv_cache", T0 + 3.0, T0 + 3.4, {}, [], [])]
DECODE = [("decode_prepare", T0 + 1.0, T0 + 1.2, {}, [], []),
          ("decode_bootstrap", T0 + 1.2, T0 + 1.5, {}, [], []),
          ("decode_transferred", T0 + 1.5, T0 + 3.45, {}, [], []),
          ("decode_waiting", T0 + 3.45, T0 + 3.6, {}, [], []),
          ("decode_forward", T0 + 3.6, T0 + 9.0, {}, [], [])]


def pd_engine(rid: str, room: int, *, senders: tuple[int, ...] = ()) -> Engine:
    """One PD request: its halves on two hosts (the tokenizers' slices from T0+0.9), and a
    Mooncake sender trace per rank of ``senders`` as SGLang 0.5.23 writes them."""
    engine = Engine()
    engine.request(f"prefill-own-{room}", T0 + 0.9, T0 + 3.5, role="prefill", room=room,
                   host="prefillh", slices=PREFILL)
    engine.request(rid, T0 + 0.9, T0 + 9.0, role="decode", room=room, host="decodehh",
                   slices=DECODE)
    for rank in senders:
        add_sender(engine, room, rank, "prefillh")
    return engine


def add_sender(engine: Engine, room: int, rank: int, host: str) -> None:
    """A ``CommonKVSender``'s trace: its root, the scheduler rank's thread with
    ``mooncake_send``, a transfer worker's thread with ``mooncake_worker_send``."""
    trace = f"{0:016x}{next_id():016x}"
    root = engine.span(trace, None, f"Sender Req {hex(room)[:8]}", T0 + 1.0, T0 + 3.4,
                       {"rid": hex(room), "module": "sglang::mooncake",
                        "bootstrap_room": hex(room)})
    thread = engine.span(trace, root, f"Prefill Scheduler [TP {rank}] (host:{host[:8]} | pid:5)",
                         T0 + 1.0, T0 + 3.4, {"tp_rank": rank, "pp_rank": 0, "host_id": host,
                                              "pid": 5, "thread_label": "Prefill Scheduler"})
    engine.span(trace, thread, "mooncake_send", T0 + 3.0, T0 + 3.0)
    worker = engine.span(trace, root, f"mooncake transfer worker 0 [TP {rank}] (host:{host[:8]})",
                         T0 + 3.0, T0 + 3.38, {"tp_rank": rank, "dp_rank": 0, "host_id": host,
                                               "pid": 6, "thread_label":
                                                   "mooncake transfer worker 0"})
    engine.span(trace, worker, "mooncake_worker_send", T0 + 3.0, T0 + 3.38)


def covered_seconds(frames: TraceFrames) -> pd.Series:
    """Per sample row, the wall time its engine slices cover within the spans their
    requests hang under: the reference the partition must add up to (merged by hand)."""
    spans = frames.span_core
    engine = spans[(spans["origin"] == "engine").to_numpy()]
    owner = {}
    for index in engine.index:
        node = index
        while spans.at[node, "origin"] == "engine":
            node = int(spans.at[node, "parent_index"])
        owner[index] = node
    out: dict[int, float] = {}
    slices = engine[~engine["name"].isin(HOLDER_SPANS).to_numpy()]
    for row, part in slices.groupby("sample_row"):
        windows = spans.loc[[owner[i] for i in part.index]]
        starts = np.maximum(part["start"].to_numpy(), windows["start"].to_numpy())
        ends = np.minimum(part["end"].to_numpy(), windows["end"].to_numpy())
        total, reach = 0.0, -np.inf
        for start, end in sorted(zip(starts, ends, strict=True)):
            if end > max(start, reach):
                total += end - max(start, reach)
            reach = max(reach, end)
        out[int(row)] = total
    return pd.Series(out, dtype=float)


def generation_seconds(frames: TraceFrames) -> pd.Series:
    """Per sample row, the length of the spans its engine requests hang under."""
    spans = frames.span_core
    engine = spans[(spans["origin"] == "engine").to_numpy()]
    holders = engine[engine["name"].isin(HOLDER_SPANS[:3]).to_numpy()]["parent_index"]
    owners = spans.loc[holders.unique()]
    return (owners["end"] - owners["start"]).groupby(owners["sample_row"]).sum()


def assert_partition(frames: TraceFrames) -> None:
    """Each sample's phases add up to the wall time its slices cover, at most its
    generation spans' time."""
    phases = engine_breakdown(frames)[PHASE_COLUMNS].sum(axis=1)
    covered = covered_seconds(frames)
    assert len(covered) > 0
    assert phases.reindex(covered.index).to_numpy() == pytest.approx(covered.to_numpy(),
                                                                     abs=1e-6)
    assert (phases.drop(covered.index) == 0).all()
    generations = generation_seconds(frames)
    assert (phases.reindex(generations.index) <= generations + 1e-6).all()


def test_overlapping_pd_halves_count_each_instant_once_by_priority() -> None:
    assert PRIORITY == ("prefill", "decode", "queue", "pd", "other")
    frames = frames_for(["decode-rid"])
    joined = join_engine(frames, pd_engine("decode-rid", 0x51).table())
    row = engine_breakdown(joined).loc[0]
    assert row["requests"] == 2
    assert row["prefill_s"] == pytest.approx(0.5, abs=1e-6)
    assert row["decode_s"] == pytest.approx(9.0 - 3.6, abs=1e-6)
    # the prefill server's wait (the decode server waiting for KV meanwhile), the decode
    # server's batch wait, the tokenizers' dispatch once
    assert row["queue_s"] == pytest.approx(1.0 + 0.15 + 0.01, abs=1e-6)
    # the handshake, the KV transfer until the decode server has it
    assert row["pd_s"] == pytest.approx(0.5 + 0.45, abs=1e-6)
    assert row["other_s"] == pytest.approx(0.01, abs=1e-6)  # tokenize, once
    assert row[PHASE_COLUMNS].sum() == pytest.approx(0.02 + 8.0, abs=1e-6)
    assert_partition(joined)


def test_mooncake_senders_of_every_rank_nest_once_and_add_no_time() -> None:
    frames = frames_for(["decode-rid"])
    plain = engine_breakdown(join_engine(frames, pd_engine("decode-rid", 0x52).table()))
    joined = join_engine(frames, pd_engine("decode-rid", 0x52, senders=(1, 0)).table())
    spans = joined.spans
    engine = spans[(spans["origin"] == "engine").to_numpy()]
    senders = engine[(engine["name"] == "sglang kv sender").to_numpy()]
    assert len(senders) == 1
    parent = joined.span_core.loc[senders["parent_index"].iloc[0]]
    assert parent["name"] == "sglang prefill request"
    assert senders["attr.engine.tp_ranks"].tolist() == ["0,1"]
    below = engine[engine["parent_index"].isin(senders.index).to_numpy()]
    assert sorted(below["name"].astype(str)) == ["mooncake_send", "mooncake_worker_send"]
    assert (below["attr.tp_rank"] == 0).all()
    assert joined.engine_unmatched.empty
    pd.testing.assert_frame_equal(engine_breakdown(joined), plain)
    assert_partition(joined)


def test_a_sender_without_its_prefill_half_is_dropped_and_counted() -> None:
    frames = frames_for(["decode-rid"])
    engine = Engine()
    engine.request("decode-rid", T0 + 0.9, T0 + 9.0, role="decode", room=0x53,
                   host="decodehh", slices=DECODE)
    add_sender(engine, 0x53, 0, "prefillh")
    add_sender(engine, 0x54, 0, "prefillh")
    joined = join_engine(frames, engine.table())
    names = set(joined.spans["name"].astype(str))
    assert "sglang kv sender" not in names and "sglang request" not in names
    assert joined.engine_unmatched.empty
    assert joined.warnings["engine_kv_sender_dropped"] == 2
    assert engine_breakdown(joined).loc[0, "requests"] == 1


def test_a_retracted_request_partitions_its_time() -> None:
    frames = frames_for(["r-retract"])
    engine = Engine()
    rerun = [("prefill_forward", T0 + 5.5, T0 + 6.0, {}, [], []),
             ("decode_forward", T0 + 6.2, T0 + 9.0, {}, [], [])]
    engine.request("r-retract", T0 + 1, T0 + 9, tp=2, thread_events=[("retract", T0 + 5, {})],
                   slices=[("prefill_forward", T0 + 2.1, T0 + 3.1, {}, [], []),
                           ("decode_forward", T0 + 3.1, T0 + 9.0, {}, [], rerun)])
    joined = join_engine(frames, engine.table())
    row = engine_breakdown(joined).loc[0]
    assert row["queue_s"] == pytest.approx(0.01 + 0.5, abs=1e-6)  # dispatch, the requeue
    # the first decode_forward's own time: before the retraction, and between the re-run's
    # prefill and its decode (no slice there: the decode_forward's own)
    assert row["decode_s"] == pytest.approx(1.9 + 0.2 + 2.8, abs=1e-6)
    assert_partition(joined)


@pytest.mark.parametrize("pd_mode", [False, True])
def test_every_sample_of_the_sdk_shapes_is_partitioned(pd_mode: bool, tmp_path: Path) -> None:
    frames = build_frames(make_demo_samples(12, seed=4))
    requests = requests_for(frames, pd=pd_mode, seed=3)
    joined = join_engine(frames, load_engine_traces(store_requests(requests, tmp_path, SKEWS)))
    assert_partition(joined)
    if pd_mode:
        per_generation = joined.spans[(joined.spans["origin"] == "engine").to_numpy()]
        roots = per_generation[per_generation["name"].isin(HOLDER_SPANS[:3]).to_numpy()]
        assert set(roots.groupby("parent_index").size()) == {2}


@pytest.mark.parametrize("shape", ["plain", "tp", "loops"])
def test_every_sample_of_the_built_shapes_is_partitioned(shape: str) -> None:
    frames = frames_for(["r-1", "r-2"])
    engine = Engine()
    for number, rid in enumerate(["r-1", "r-2"]):
        engine.request(rid, T0 + 1 + number, T0 + 9, tp=2 if shape == "tp" else 1,
                       slices=plain_slices(T0 + 1.0 + number, T0 + 9,
                                           loops=40 if shape == "loops" else 0))
    assert_partition(join_engine(frames, engine.table()))


def _dump_tables(frames: TraceFrames) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A dump's spans and retract events as a run dataset's trends read them."""
    core, events = frames.span_core, frames.event_core
    spans = pd.DataFrame({
        "sample_row": core["sample_row"], "span_index": core.index,
        "parent_index": core["parent_index"], "name": core["name"].astype(str),
        "start": core["start"], "duration": core["duration"],
        "engine": core["origin"] == "engine"})
    retracts = events[(events["name"] == RETRACT_EVENT).to_numpy()]
    return spans, pd.DataFrame({"parent_index": retracts["parent_index"], "ts": retracts["ts"]})


def test_a_dump_s_phase_seconds_sum_the_breakdown_of_its_samples() -> None:
    """What the run dataset's trends call, one dump at a time: the same rules (one
    implementation) over the dump's own table, its span indexes its own."""
    frames = frames_for(["decode-rid", "r-retract"])
    engine = pd_engine("decode-rid", 0x71, senders=(0, 1))
    engine.request("r-retract", T0 + 1, T0 + 9, thread_events=[("retract", T0 + 5, {})],
                   slices=[("decode_forward", T0 + 3.1, T0 + 9.0, {}, [],
                            [("prefill_forward", T0 + 5.5, T0 + 6.0, {}, [], [])])])
    joined = join_engine(frames, engine.table())
    spans, retracts = _dump_tables(joined)
    expected = engine_breakdown(joined)[PHASE_COLUMNS].sum()
    assert expected["queue_s"] > 0.5 and expected["pd_s"] > 0
    seconds = dump_phase_seconds(spans, retracts)
    assert seconds is not None and list(seconds.index) == PHASE_COLUMNS
    assert seconds.to_numpy() == pytest.approx(expected.to_numpy(), abs=1e-9)
    shifted = dump_phase_seconds(spans.assign(span_index=spans["span_index"] + 1000,
                                              parent_index=spans["parent_index"] + 1000),
                                 retracts.assign(parent_index=retracts["parent_index"] + 1000))
    assert shifted is not None and shifted.to_numpy() == pytest.approx(seconds.to_numpy())


def test_a_dump_whose_engine_spans_hold_no_slice_has_no_phase_seconds() -> None:
    """The trends leave such a dump's phases missing, as for a dump with no engine spans."""
    frames = frames_for(["r-1"])
    engine = Engine()
    engine.request("r-1", T0 + 1, T0 + 9, slices=plain_slices(T0 + 1, T0 + 9))
    spans, retracts = _dump_tables(join_engine(frames, engine.table()))
    assert dump_phase_seconds(spans, retracts) is not None
    holders = spans[(~spans["engine"] | spans["name"].isin(HOLDER_SPANS)).to_numpy()]
    assert holders["engine"].any()
    assert dump_phase_seconds(holders, retracts) is None
