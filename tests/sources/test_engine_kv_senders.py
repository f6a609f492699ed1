"""PD requests whose prefill server uses Mooncake (SGLang's default transfer backend), held
to what SGLang 0.5.23's own code wrote: every scenario of ``tests/support/sglang_driver.py``
with both PD halves on two TP ranks, and on each prefill rank SGLang's own
``MooncakeKVSender``, whose ``__init__`` opens a trace of its own per request ("Sender
Req 0x…", ``rid`` ``hex(room)``, module ``sglang::mooncake``). Driven on three hosts whose
clocks are off by up to 1.5 s, exported by SGLang's exporter into the receiver, loaded with
the dump.

A sender is KV-transfer detail of its prefill half, no request: a PD generation has two
requests, the senders are drawn under the prefill half once for all ranks, they are
never unmatched requests, and their time is not counted a second time. The engine
breakdown of every sample is a partition of wall time: its phases add up to at most
the wall time of the generation spans its requests hang under.
"""

from __future__ import annotations

from collections import Counter

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from slime_trace_widget.answers.engine import PHASE_COLUMNS, engine_breakdown
from slime_trace_widget.sources.engine.join import join_engine
from slime_trace_widget.sources.engine.store import read_spans
from slime_trace_widget.sources.loading import load_frames
from tests.support.engine_oracle import SKEWS, descendants, request_spans
from tests.support.sglang_driver import PD_SCENARIOS, SCENARIOS, Driven
from tests.support.sglang_joined import Joined, drive_and_join

#: SGLang's float stamps for durations; the join's bound on where a span may be placed.
DURATION_TOLERANCE = 2e-6
START_TOLERANCE = 0.05
SENDER_SLICES = {"mooncake_send", "mooncake_worker_send", "mooncake_worker_send_session"}
PD_TP = 2


@pytest.fixture(scope="module")
def mooncake(tmp_path_factory: pytest.TempPathFactory) -> Joined:
    return drive_and_join(tmp_path_factory.mktemp("mooncake"), 20, 11, SCENARIOS, strays=3,
                          decode_iterations=(5, 20), kv_senders=True, pd_tp_size=PD_TP)


def _pd_generations(driven: Driven) -> list[int]:
    return [request.span for request in driven.requests
            if request.span is not None and request.scenario in PD_SCENARIOS]


def _sender_roots(emitted: pd.DataFrame) -> pd.DataFrame:
    return emitted[emitted["name"].str.startswith("Sender Req ").to_numpy()]


def test_sglang_wrote_a_sender_trace_per_prefill_rank(mooncake: Joined) -> None:
    roots = _sender_roots(mooncake.driven.emitted)
    pd_requests = [r for r in mooncake.driven.requests if len(r.halves) == 2 and r.sampled]
    assert len(pd_requests) >= 3
    assert len(roots) == PD_TP * len(pd_requests)
    attrs = roots["attributes"].tolist()
    assert {a["module"] for a in attrs} == {"sglang::mooncake"}
    assert all(a["rid"] == a["bootstrap_room"] for a in attrs)


def test_each_pd_generation_has_two_requests(mooncake: Joined) -> None:
    frames = mooncake.frames
    generations = _pd_generations(mooncake.driven)
    roots = request_spans(frames)
    per_generation = roots.groupby("parent_index").size()
    assert [int(per_generation.get(span, 0)) for span in generations] == \
        [2] * len(generations)
    rows = frames.span_core["sample_row"]
    wanted = Counter()
    for request in mooncake.driven.requests:
        if request.span is not None and request.sampled:
            wanted[int(rows[request.span])] += len(request.halves)
    breakdown = engine_breakdown(frames)
    assert breakdown["requests"].to_dict() == {row: wanted.get(row, 0)
                                               for row in breakdown.index}


def test_senders_nest_under_their_prefill_half_once_for_all_ranks(mooncake: Joined) -> None:
    frames, driven = mooncake.frames, mooncake.driven
    spans = frames.spans
    prefill = request_spans(frames)
    prefill = prefill[(prefill["name"] == "sglang prefill request").to_numpy()]
    assert len(prefill) == len(_pd_generations(driven))
    emitted = _sender_roots(driven.emitted)
    by_room = {int(a["bootstrap_room"], 16): row for a, row in zip(
        emitted["attributes"], emitted.itertuples(), strict=True) if _rank(driven, row) == 0}
    for index, half in prefill.iterrows():
        below = spans[(spans["parent_index"] == index).to_numpy()]
        senders = below[(below["name"] == "sglang kv sender").to_numpy()]
        assert len(senders) == 1, half["attr.engine.name"]
        sender = senders.iloc[0]
        assert sender["attr.engine.name"].startswith("Sender Req 0x")
        assert sender["attr.bootstrap_room"] == half["attr.bootstrap_room"]
        assert sender["attr.engine.tp_ranks"] == "0,1"
        slices = descendants(spans, int(senders.index[0]))
        assert set(slices["name"].astype(str)) == SENDER_SLICES
        assert (slices["attr.tp_rank"] == 0).all()
        truth = by_room[int(half["attr.bootstrap_room"], 16)]
        skew = SKEWS[truth.host]
        assert abs((sender["end"] - sender["start"]) - (truth.end_ns - truth.start_ns) / 1e9
                   ) <= DURATION_TOLERANCE
        assert abs(sender["start"] - (truth.start_ns / 1e9 + skew)) <= START_TOLERANCE


def _rank(driven: Driven, root: object) -> int:
    """The TP rank of a sender root: its scheduler thread span's."""
    emitted = driven.emitted
    threads = emitted[((emitted["trace_id"] == root.trace_id)
                       & (emitted["parent_id"] == root.span_id)).to_numpy()]
    return min(int(attrs.get("tp_rank", 0)) for attrs in threads["attributes"])


def test_senders_are_never_unmatched_requests(mooncake: Joined) -> None:
    frames, driven = mooncake.frames, mooncake.driven
    strays = {half.server_rid for request in driven.requests if request.span is None
              and request.sampled for half in request.halves}
    assert any(len(r.halves) == 2 for r in driven.requests if r.span is None)
    assert set(frames.engine_unmatched["rid"]) == strays
    assert frames.warnings.get("engine_kv_sender_dropped", 0) == 0


def test_sender_time_is_not_counted_again(mooncake: Joined) -> None:
    """The breakdown with the senders' traces equals the breakdown without them: they lie
    inside their prefill half's own slices."""
    table = read_spans(mooncake.store)
    senders = pc.starts_with(table["name"], "Sender Req ")
    traces = pa.array(set(table["trace_id"].filter(senders).to_pylist()))
    without = table.filter(pc.invert(pc.is_in(table["trace_id"], traces)))
    assert len(without) < len(table)
    frames = load_frames(str(mooncake.dump), progress=False)
    alone = engine_breakdown(join_engine(frames, without))
    together = engine_breakdown(mooncake.frames)
    for column in (*PHASE_COLUMNS, "requests"):
        assert together[column].to_numpy() == pytest.approx(alone[column].to_numpy(),
                                                             abs=1e-9), column


def test_phases_of_each_sample_add_up_to_no_more_than_its_generations(
        mooncake: Joined) -> None:
    frames = mooncake.frames
    core = frames.span_core
    holders = request_spans(frames)["parent_index"].unique()
    generations = core.loc[holders]
    covered = (generations["end"] - generations["start"]).groupby(
        generations["sample_row"]).sum()
    breakdown = engine_breakdown(frames)
    phases = breakdown[PHASE_COLUMNS].sum(axis=1)
    assert (phases.reindex(covered.index) > 0).all()
    assert (phases.reindex(covered.index) <= covered + 1e-6).all(), \
        pd.DataFrame({"phases": phases, "generations": covered})
    assert (phases.drop(covered.index) == 0).all()
