"""The join where the engines' side is not as the rules assume: a rid sent twice (a
retry), engine hosts that share one machine id, a host whose clock is off by more than
the margin the join reads around the frames. Traces laid out as SGLang 0.5.23 writes them
(``tests/support/engine_builder.py``)."""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from slime_trace_widget.frames import build_frames
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.engine.beyond import (
    BEYOND_WARNING,
    BEYOND_WINDOW,
    MISSING_WARNING,
    _named_as_window,
)
from slime_trace_widget.sources.engine.join import NO_SPAN, join_engine
from slime_trace_widget.sources.engine.machines import machine_hosts
from slime_trace_widget.sources.engine.match import REUSED_RID, UNKNOWN_OFFSET
from slime_trace_widget.sources.engine.otlp import json_message
from slime_trace_widget.sources.engine.receiver import GRPC_SERVICE, grpc_peer_address
from slime_trace_widget.sources.engine.requests import Piece, Request
from slime_trace_widget.sources.engine.span_schema import PEER_ADDRESS
from slime_trace_widget.sources.engine.store import SpanStore
from slime_trace_widget.sources.engine.window import with_engine_traces
from slime_trace_widget.tracing import bind_trace, trace_next_attempt, trace_span, use_clock
from tests.sources.test_engine_load import store_scrapes
from tests.support.engine_builder import T0, Engine, plain_slices
from tests.support.receiver import start_receiver


def _request_spans(frames: TraceFrames) -> pd.DataFrame:
    spans = frames.spans
    engine = spans[(spans["origin"] == "engine").to_numpy()]
    return engine[engine["name"].astype(str).str.endswith("request")]


def _generations(attempts_by_rid: dict[str, list[tuple[float, float]]]) -> TraceFrames:
    """One sample per rid, its generation sent once per attempt with that same rid (a
    retry after an abort): one ``sglang_generate`` span per attempt, over the given
    (start, end) seconds from T0."""
    return build_frames(_samples(attempts_by_rid))


def _samples(attempts_by_rid: dict[str, list[tuple[float, float]]]) -> list[dict]:
    """The samples of :func:`_generations`."""
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
    return samples


def test_a_rid_sent_again_attaches_each_request_to_its_attempt() -> None:
    frames = _generations({"same-rid": [(0, 5), (6, 12)], "known": [(30, 40)]})
    engine = Engine()
    engine.request("other", T0 + 0.2, T0 + 1, host="hostbbbb")  # no span made it
    engine.request("known", T0 + 30.5, T0 + 39.5)  # its host's clock: the dump's
    for start, end in ((0.5, 4.5), (6.5, 11.5)):  # the engine's clock is the dump's
        engine.request("same-rid", T0 + start, T0 + end,
                       slices=plain_slices(T0 + start + 0.1, T0 + end))
    engine.request("same-rid", T0 + 20, T0 + 22)  # a third: no attempt holds its time
    joined = join_engine(frames, engine.table())
    roots = _request_spans(joined)
    roots = roots[roots["attr.gen_ai.request.id"] == "same-rid"]
    generations = frames.span_core[frames.span_core["name"] == "sglang_generate"]
    generations = generations[generations["sample_row"] == 0]
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
    inside both: nothing tells which made it, so it is listed, with the reason (its
    host's clock known from another request, or not)."""
    frames = _generations({"same-rid": [(0, 10)], "also": [(1, 9)], "known": [(20, 30)]})
    ends = frames.span_end_attrs
    column = ends.table.column_names.index("sglang_request_id")
    table = ends.table.set_column(column, "sglang_request_id",
                                  [["same-rid", "same-rid", "known"]])
    frames = replace(frames, span_end_attrs=type(ends)(table))
    for host, reason in (("hostaaaa", REUSED_RID), ("hostbbbb", UNKNOWN_OFFSET)):
        engine = Engine()
        engine.request("known", T0 + 20.5, T0 + 29.5, host="hostaaaa")
        engine.request("same-rid", T0 + 2, T0 + 8, host=host)
        joined = join_engine(frames, engine.table())
        assert _request_spans(joined)["attr.gen_ai.request.id"].tolist() == ["known"]
        assert joined.engine_unmatched[["rid", "reason"]].values.tolist() == [
            ["same-rid", reason]]


def test_a_retried_rid_on_a_host_of_unknown_clock_is_placed_by_its_order() -> None:
    """The host's clock is 6 s ahead and it served no other request: its two requests of
    the rid fit the two attempts in order under one offset alone, so each goes to its
    own and the skew comes out right. A third request fits them in no single way: then
    none is placed, rather than placed by an absolute time that may be off."""
    frames = _generations({"same-rid": [(0, 5), (6, 12)]})
    engine = Engine()
    for start, end in ((0.5, 4.5), (6.5, 11.5)):  # dump-clock times
        engine.request("same-rid", T0 + start + 6, T0 + end + 6,
                       slices=plain_slices(T0 + start + 6.1, T0 + end + 6))
    joined = join_engine(frames, engine.table())
    starts = _request_spans(joined).set_index("attempt")["start"]
    assert sorted(starts.index) == [0, 1] and joined.engine_unmatched.empty
    # the aborted request's end bounds the skew by the retry's start, not its span's end
    assert joined.engine_skew["consistent"].all()
    assert abs(starts[0] - (T0 + 0.5)) < 0.2 and abs(starts[1] - (T0 + 6.5)) < 0.2
    assert abs(joined.engine_skew["skew"].iloc[0] + 6.0) < 0.6
    engine.request("same-rid", T0 + 7, T0 + 8)
    joined = join_engine(frames, engine.table())
    assert _request_spans(joined).empty
    assert joined.engine_unmatched["reason"].tolist() == [UNKNOWN_OFFSET] * 3


def test_an_aborted_request_running_past_its_attempt_is_placed_by_its_order() -> None:
    """The host's clock is 6 s ahead and unknown; the first attempt was aborted at 5 s and
    the engine ran its request 0.8 s longer, into the gap before the retry. It fits its
    attempt all the same, so both requests are placed. Alone (the retry's request not
    read), it fits either attempt: it is placed on neither, where requiring each request
    inside its span put it on the retry's."""
    frames = _generations({"same-rid": [(0, 5), (6, 12)]})
    engine = Engine()
    for start, end in ((0.5, 5.8), (6.5, 11.5)):  # dump-clock times
        engine.request("same-rid", T0 + start + 6, T0 + end + 6)
    joined = join_engine(frames, engine.table())
    starts = _request_spans(joined).set_index("attempt")["start"]
    assert sorted(starts.index) == [0, 1] and joined.engine_unmatched.empty
    # the aborted request's end bounds the skew by the retry's start, not its span's end
    assert joined.engine_skew["consistent"].all()
    assert abs(starts[0] - (T0 + 0.5)) < 0.2 and abs(starts[1] - (T0 + 6.5)) < 0.2
    frames = _generations({"same-rid": [(0, 5), (6, 20)]})
    engine = Engine()
    engine.request("same-rid", T0 + 0.5 + 6, T0 + 5.8 + 6)
    joined = join_engine(frames, engine.table())
    assert _request_spans(joined).empty
    assert joined.engine_unmatched["reason"].tolist() == [UNKNOWN_OFFSET]


def test_a_retried_rid_listed_with_its_reason_is_not_missing_too() -> None:
    """One request was placed, the other read and listed (its time overlaps both
    attempts): it stands for the attempt left, which waits for nothing, so it is not
    counted as missing and nothing beyond is read."""
    frames = _generations({"same-rid": [(0, 5), (6, 12)], "known": [(20, 30)]})
    engine = Engine()
    engine.request("known", T0 + 20.5, T0 + 29.5)
    engine.request("same-rid", T0 + 4, T0 + 7, slices=plain_slices(T0 + 4.1, T0 + 7))
    engine.request("same-rid", T0 + 8, T0 + 11.5)
    calls: list[int] = []
    joined = join_engine(frames, engine.table(), _read_beyond(calls))
    roots = _request_spans(joined)
    assert sorted(zip(roots["attr.gen_ai.request.id"], roots["attempt"], strict=True)) == [
        ("known", 0), ("same-rid", 1)]
    assert joined.engine_unmatched[["rid", "reason"]].values.tolist() == [
        ["same-rid", REUSED_RID]]
    assert calls == [] and MISSING_WARNING not in joined.warnings


@pytest.mark.parametrize(("attempts", "missing"), [
    ([(0, 5), (6, 12)], 0),  # one request listed, one found beyond: each attempt has one
    ([(0, 5), (6, 12), (13, 20)], 1),  # the third attempt's request is read nowhere
])
def test_each_request_read_of_a_retried_rid_stands_for_one_attempt_alone(
        tmp_path: Path, attempts: list[tuple[float, float]], missing: int) -> None:
    """A rid sent more than once: one request in the window, listed (its time overlaps
    two attempts), one lying 120 s off on a host far off, found beyond the window. Each
    request read stands for one attempt; an attempt left over is missing."""
    frames = _generations({"same-rid": attempts, "known": [(30, 40)]})
    engine = Engine()
    engine.request("known", T0 + 30.5, T0 + 39.5, host="hostaaaa")
    engine.request("same-rid", T0 + 4, T0 + 7, host="hostaaaa")
    engine.request("same-rid", T0 + 126.5, T0 + 131.5, host="hostbbbb")
    joined = with_engine_traces(frames, _stored(engine, tmp_path / "engine"))
    assert joined.engine_unmatched[["rid", "host", "reason"]].values.tolist() == [
        ["same-rid", "hostaaaa", REUSED_RID], ["same-rid", "hostbbbb", BEYOND_WINDOW]]
    assert joined.warnings[BEYOND_WARNING] == 1
    assert joined.warnings.get(MISSING_WARNING, 0) == missing


def test_a_listed_request_of_a_retried_rid_leaves_its_other_attempt_missing() -> None:
    """With no trace beyond the window, the attempt the listed request does not stand
    for is searched for and counted missing."""
    frames = _generations({"same-rid": [(0, 5), (6, 12)], "known": [(20, 30)]})
    window = Engine()
    window.request("known", T0 + 20.5, T0 + 29.5)
    window.request("same-rid", T0 + 4, T0 + 7)
    calls: list[int] = []
    joined = join_engine(frames, window.table(), _read_beyond(calls))
    assert calls == [1] and joined.warnings[MISSING_WARNING] == 1


def test_a_request_given_a_reason_then_attached_by_its_room_excuses_no_attempt() -> None:
    """A PD request of a rid sent twice: its decode half, on a host no other request
    gives a clock, is given a reason, then follows its prefill half's room onto the first
    attempt. Attached, it stands for that attempt only: the second attempt's request,
    read nowhere, is searched for beyond the window and counted missing."""
    frames = _generations({"R": [(100, 105), (106, 112)], "known": [(120, 130)]})
    engine = Engine()
    engine.request("known", T0 + 121, T0 + 129, role="decode", room=0x99, host="decodehh")
    engine.request("known", T0 + 120.5, T0 + 121, role="prefill", room=0x99, host="prefillh")
    engine.request("R", T0 + 100.5, T0 + 101, role="prefill", room=0x100, host="prefillh")
    engine.request("R", T0 + 131, T0 + 134.5, role="decode", room=0x100, host="decodeUU")
    calls: list[int] = []
    joined = join_engine(frames, engine.table(), _read_beyond(calls))
    roots = _request_spans(joined)
    assert sorted(zip(roots["name"].astype(str), roots["attr.gen_ai.request.id"],
                      roots["attempt"], strict=True)) == [
        ("sglang decode request", "R", 0), ("sglang decode request", "known", 0),
        ("sglang prefill request", "R", 0), ("sglang prefill request", "known", 0)]
    assert joined.engine_unmatched.empty
    assert calls == [1] and joined.warnings[MISSING_WARNING] == 1


# --------------------------------------------------------------------------- machine ids


def _on_machine(engine: Engine, trace: str, resource: dict) -> None:
    """Give the stored spans of ``trace`` the resource ``resource``."""
    for row, trace_id in enumerate(engine.rows["trace_id"]):
        if trace_id == trace:
            engine.rows["resource"][row] = json.dumps(resource)


#: Two cloned machines (one /etc/machine-id) whose clocks differ by 3 s; the first runs
#: two engines (two processes, each its own service.instance.id). Engine time + skew =
#: dump time.
_CLONES = (("10.0.0.1", "engine-1", 0.0), ("10.0.0.1", "engine-2", 0.0),
           ("10.0.0.2", "engine-3", -3.0))
_CLONED_ID = "0f9e8d7c6b5a49382716051f2e3d4c5b"


def _cloned_requests(engine: Engine, resource_of: dict[str, dict] | None = None,
                     engines: tuple[str, ...] | None = None) -> tuple[TraceFrames, list[str]]:
    """Four requests per engine of :data:`_CLONES` (of ``engines`` only when given), all
    with host_id ``_CLONED_ID``; the resource of each engine is ``resource_of[engine]``
    when given. The frames (every engine's generations) and the traces, in order."""
    rids = [f"{name}-rid-{k}" for _, name, _ in _CLONES for k in range(4)]
    frames = _generations({rid: [(3 * k, 3 * k + 8)] for k, rid in enumerate(rids)})
    traces = []
    for k, rid in enumerate(rids):
        _, name, skew = _CLONES[k // 4]
        if engines is not None and name not in engines:
            continue
        start, end = 3 * k + 0.5 - skew, 3 * k + 7.5 - skew
        trace = engine.request(rid, T0 + start, T0 + end, host=_CLONED_ID,
                               slices=plain_slices(T0 + start + 0.1, T0 + end))
        if resource_of is not None:
            _on_machine(engine, trace, resource_of[name])
        traces.append(trace)
    return frames, traces


def test_machines_sharing_a_machine_id_keep_their_own_skews() -> None:
    """The receiver keeps the address each export came from: two machines cloned from one
    image are two hosts, the two engines of one machine one host."""
    engine = Engine()
    frames, _ = _cloned_requests(engine, {
        name: {"service.name": "sglang", "service.instance.id": f"instance-{name}",
               PEER_ADDRESS: address} for address, name, _ in _CLONES})
    joined = join_engine(frames, engine.table())
    skew = joined.engine_skew.set_index("host")
    assert sorted(skew.index) == [f"{_CLONED_ID}@10.0.0.1", f"{_CLONED_ID}@10.0.0.2"]
    assert skew["consistent"].all() and skew["requests"].tolist() == [8, 4]
    assert abs(skew.at[f"{_CLONED_ID}@10.0.0.1", "skew"]) < 0.6
    assert abs(skew.at[f"{_CLONED_ID}@10.0.0.2", "skew"] + 3.0) < 0.6
    roots = _request_spans(joined).set_index("attr.gen_ai.request.id")
    assert roots.at["engine-3-rid-0", "attr.engine.host"] == f"{_CLONED_ID}@10.0.0.2"
    assert abs(roots.at["engine-3-rid-0", "start"] - (T0 + 24.5)) < 0.6
    assert joined.engine_unmatched.empty


def test_host_name_tells_machines_apart_and_one_machine_keeps_its_id() -> None:
    """``host.name`` (set by OTEL_RESOURCE_ATTRIBUTES; spans stored without an address)
    names machines too; a machine id that one machine alone sent stays as it is (scrape
    targets are named after it)."""
    engine = Engine()
    frames, _ = _cloned_requests(engine, {
        "engine-1": {"host.name": "node-7", PEER_ADDRESS: "10.0.0.1"},
        "engine-2": {"host.name": "node-7", PEER_ADDRESS: "10.0.0.1"},
        "engine-3": {"host.name": "node-8"}})
    skew = join_engine(frames, engine.table()).engine_skew.set_index("host")
    assert sorted(skew.index) == [f"{_CLONED_ID}@10.0.0.1", f"{_CLONED_ID}@node-8"]
    assert abs(skew.at[f"{_CLONED_ID}@node-8", "skew"] + 3.0) < 0.6
    engine = Engine()
    frames, _ = _cloned_requests(engine, {name: {PEER_ADDRESS: "10.0.0.1"}
                                          for _, name, _ in _CLONES})
    skew = join_engine(frames, engine.table()).engine_skew
    assert skew["host"].tolist() == [_CLONED_ID]  # one machine: its skew, as before


def test_one_address_is_one_machine_whatever_its_processes_host_names(tmp_path: Path
                                                                       ) -> None:
    """The tokenizer and the scheduler of one machine run in containers with host names
    of their own and send from one address: one host, its plain machine id (the scrape
    target named after it takes its skew), never a host per process."""
    rids = [f"r{k}" for k in range(6)]
    frames = _generations({rid: [(3 * k, 3 * k + 8)] for k, rid in enumerate(rids)})
    engine = Engine()
    for k, rid in enumerate(rids):  # the machine's clock is 3 s ahead of the dump's
        trace = engine.request(rid, T0 + 3 * k + 3.5, T0 + 3 * k + 10.5, host=_CLONED_ID,
                               slices=plain_slices(T0 + 3 * k + 3.6, T0 + 3 * k + 10.5))
        for row, (trace_id, name) in enumerate(zip(engine.rows["trace_id"],
                                                   engine.rows["name"], strict=True)):
            if trace_id == trace:
                container = "tokenizer-ctr" if "Tokenizer" in name else "scheduler-ctr"
                engine.rows["resource"][row] = json.dumps(
                    {"host.name": container, PEER_ADDRESS: "10.0.0.1"})
    skew = join_engine(frames, engine.table()).engine_skew
    assert skew[["host", "machine"]].values.tolist() == [[_CLONED_ID, "10.0.0.1"]]
    assert abs(skew["skew"].iloc[0] + 3.0) < 0.6
    shifts = _load_shifts(engine, frames, tmp_path, [_CLONED_ID, f"{_CLONED_ID}@10.0.0.1"])
    assert all(abs(shift + 3.0) < 0.6 for shift in shifts.values())


def test_a_machine_is_named_alike_in_the_window_and_beyond_it() -> None:
    """The window read a machine's tokenizer and scheduler containers (two host.names,
    one address) and a clone's; beyond it only the scheduler's spans were read. The
    requests found beyond name the window's host, whichever host.names each set held."""
    window_hosts, _ = machine_hosts(
        {0: _CLONED_ID, 1: _CLONED_ID, 2: _CLONED_ID},
        {0: {"host.name": "tok", PEER_ADDRESS: "10.0.0.1"},
         1: {"host.name": "sched", PEER_ADDRESS: "10.0.0.1"},
         2: {"host.name": "w2", PEER_ADDRESS: "10.0.0.2"}})
    far_hosts, far_machines = machine_hosts(
        {0: _CLONED_ID}, {0: {"host.name": "sched", PEER_ADDRESS: "10.0.0.1"}})

    def request(host: str, machine: str) -> Request:
        piece = Piece(0, "s", "n", 0, 1, {}, -1, host, -1, machine=machine)
        return Request(0, "t", "s", "n", "", "r", "r", False, None, 0, None, host, [piece])

    window = [request(window_hosts[0], "10.0.0.1")]
    found = _named_as_window([request(far_hosts[0], far_machines[far_hosts[0]])], window)
    assert window_hosts[0] == window_hosts[1] == f"{_CLONED_ID}@10.0.0.1"
    assert [r.host for r in found] == [f"{_CLONED_ID}@10.0.0.1"]
    assert [p.host for p in found[0].pieces] == [f"{_CLONED_ID}@10.0.0.1"]


def _load_shifts(engine: Engine, frames: TraceFrames, folder: Path, targets: list[str]
                 ) -> dict[str, float]:
    """How far the frames' load moves each scrape target: ``engine``'s spans and one
    scrape per target (named so) at T0 + 10 s of the collector's clock, stored in
    ``folder`` and read with the frames as a dump opened with them reads them."""
    _stored(engine, folder)
    for name in targets:
        store_scrapes(folder, name, np.array([T0 + 10.0]),
                      {"sglang:num_running_reqs": lambda _t: 1.0})
    load = with_engine_traces(frames, folder).engine_load
    return {str(name): ts - (T0 + 10.0) for name, ts in zip(load["engine"], load["ts"],
                                                             strict=True)}


def test_a_scrape_target_named_after_its_machine_takes_that_clones_skew(tmp_path: Path
                                                                        ) -> None:
    """A target named ``<host_id>@<address>`` is shifted by that clone's skew: when both
    clones sent requests (hosts ``<host_id>@<machine>``) and when only the other clone
    did (its host keeps the plain machine-id), it never takes the other clone's. The
    address names a machine that sent one: its ``host.name`` does not."""
    resource_of = {"engine-1": {PEER_ADDRESS: "10.0.0.1"}, "engine-2": {PEER_ADDRESS: "10.0.0.1"},
                   "engine-3": {"host.name": "node-8", PEER_ADDRESS: "10.0.0.2"}}
    targets = [f"{_CLONED_ID}@10.0.0.1", f"{_CLONED_ID}@10.0.0.2", f"{_CLONED_ID}@node-8",
               _CLONED_ID, "10.0.0.2:30000"]
    engine = Engine()
    frames, _ = _cloned_requests(engine, resource_of)
    shifts = _load_shifts(engine, frames, tmp_path / "both", targets)
    assert abs(shifts[f"{_CLONED_ID}@10.0.0.1"]) < 0.6
    assert abs(shifts[f"{_CLONED_ID}@10.0.0.2"] + 3.0) < 0.6
    assert shifts[f"{_CLONED_ID}@node-8"] == 0.0
    assert shifts[_CLONED_ID] == 0.0 and shifts["10.0.0.2:30000"] == 0.0  # which clone?
    engine = Engine()
    frames, _ = _cloned_requests(engine, resource_of, engines=("engine-3",))
    shifts = _load_shifts(engine, frames, tmp_path / "one", targets)
    assert abs(shifts[f"{_CLONED_ID}@10.0.0.2"] + 3.0) < 0.6
    assert shifts[f"{_CLONED_ID}@10.0.0.1"] == 0.0  # the clone with no request: unknown


def _otlp_value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": str(value)}


def _otlp_body(engine: Engine, traces: set[str], resource: dict[str, Any]) -> bytes:
    """The stored spans of ``traces`` as one OTLP/JSON export of ``resource``."""
    def attributes(values: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"key": key, "value": _otlp_value(value)} for key, value in values.items()]

    rows = engine.rows
    spans = [{"traceId": rows["trace_id"][i], "spanId": rows["span_id"][i],
              "parentSpanId": rows["parent_id"][i] or "", "name": rows["name"][i],
              "startTimeUnixNano": str(rows["start_ns"][i]),
              "endTimeUnixNano": str(rows["end_ns"][i]),
              "attributes": attributes(json.loads(rows["attributes"][i])),
              "events": [{"name": event["name"], "timeUnixNano": str(event["time_ns"]),
                          "attributes": attributes(event["attributes"] or {})}
                         for event in json.loads(rows["events"][i])]}
             for i in range(len(rows["span_id"])) if rows["trace_id"][i] in traces]
    return json.dumps({"resourceSpans": [{
        "resource": {"attributes": attributes(resource)},
        "scopeSpans": [{"scope": {"name": "sglang server"}, "spans": spans}]}]}).encode()


def test_the_receiver_keeps_each_machine_apart_by_its_address(tmp_path: Path) -> None:
    """Two machines cloned from one image send from 127.0.0.1 and 127.0.0.2 (the first's
    engines over OTLP/HTTP and OTLP/gRPC): the join gives each machine its skew."""
    import grpc

    engine = Engine()
    frames, traces = _cloned_requests(engine)
    by_engine = {name: set(traces[4 * k:4 * k + 4]) for k, (_, name, _) in enumerate(_CLONES)}
    with start_receiver(tmp_path / "engine") as receiver:
        for name, source in (("engine-1", "127.0.0.1"), ("engine-3", "127.0.0.2")):
            connection = http.client.HTTPConnection("127.0.0.1", receiver.http_port,
                                                    timeout=60, source_address=(source, 0))
            connection.request("POST", "/v1/traces", _otlp_body(
                engine, by_engine[name], {"service.name": "sglang",
                                          "service.instance.id": name}),
                {"Content-Type": "application/json"})
            assert connection.getresponse().status == 200
            connection.close()
        body = json_message(_otlp_body(engine, by_engine["engine-2"], {
            "service.name": "sglang", "service.instance.id": "engine-2"}),
            ExportTraceServiceRequest()).SerializeToString()
        with grpc.insecure_channel(receiver.endpoint("grpc")) as channel:
            export = channel.unary_unary(f"/{GRPC_SERVICE}/Export")
            export(body, timeout=60)
    joined = with_engine_traces(frames, tmp_path / "engine")
    skew = joined.engine_skew.set_index("host")
    assert sorted(skew.index) == [f"{_CLONED_ID}@127.0.0.1", f"{_CLONED_ID}@127.0.0.2"]
    assert skew["requests"].tolist() == [8, 4] and skew["consistent"].all()
    assert abs(skew.at[f"{_CLONED_ID}@127.0.0.2", "skew"] + 3.0) < 0.6
    assert joined.engine_unmatched.empty and len(_request_spans(joined)) == 12


@pytest.mark.parametrize(("peer", "address"), [
    ("ipv4:10.1.2.3:41234", "10.1.2.3"), ("ipv6:[fd00::7]:41234", "fd00::7"),
    ("ipv6:%5B::ffff:10.0.0.3%5D:41234", "10.0.0.3"), ("unix:/tmp/socket", None)])
def test_a_grpc_peer_is_its_ip_address(peer: str, address: str | None) -> None:
    assert grpc_peer_address(peer) == address


# --------------------------------------------------------------------------- clocks far off


def _stored(engine: Engine, folder: Path) -> Path:
    store = SpanStore(folder)
    store.append(engine.table())
    store.close()
    return folder


def test_a_request_whose_host_clock_is_far_off_is_listed_not_dropped(tmp_path: Path
                                                                       ) -> None:
    """A host 120 s ahead: its request lies past the 60 s read around the frames. It is
    listed with its reason and counted; the other host's request is attached."""
    frames = _generations({"near": [(0, 10)], "far": [(0, 10)], "lost": [(0, 10)]})
    engine = Engine()
    engine.request("near", T0 + 1, T0 + 9, host="hostaaaa", slices=plain_slices(T0 + 1.1, T0 + 9))
    engine.request("far", T0 + 121, T0 + 129, host="hostbbbb",
                   slices=plain_slices(T0 + 121.1, T0 + 129))
    engine.request("lost", T0 + 3600, T0 + 3608, host="hostcccc")  # beyond any search
    joined = with_engine_traces(frames, _stored(engine, tmp_path / "engine"))
    assert _request_spans(joined)["attr.gen_ai.request.id"].tolist() == ["near"]
    unmatched = joined.engine_unmatched
    assert unmatched[["rid", "host", "reason"]].values.tolist() == [
        ["far", "hostbbbb", BEYOND_WINDOW]]
    assert abs(unmatched["start"].iloc[0] - (T0 + 121)) < 1e-6
    assert joined.warnings[BEYOND_WARNING] == 1 and joined.warnings[MISSING_WARNING] == 1


def test_a_pd_half_on_a_host_far_off_is_listed_with_its_room(tmp_path: Path) -> None:
    """The prefill server (its own rid, paired by bootstrap room) is 90 s behind; the
    decode half is attached and the prefill half listed."""
    frames = _generations({"decode-rid": [(100, 110)]})
    engine = Engine()
    engine.request("decode-rid", T0 + 101, T0 + 109, role="decode", room=0x51, host="decodehh")
    engine.request("prefill-own", T0 + 11, T0 + 13, role="prefill", room=0x51, host="prefillh")
    engine.request("other-client", T0 + 12, T0 + 13, role="prefill", room=0x77, host="prefillh")
    joined = with_engine_traces(frames, _stored(engine, tmp_path / "engine"))
    assert _request_spans(joined)["name"].astype(str).tolist() == ["sglang decode request"]
    assert joined.engine_unmatched[["rid", "reason"]].values.tolist() == [
        ["prefill-own", BEYOND_WINDOW]]
    assert joined.warnings[BEYOND_WARNING] == 1 and MISSING_WARNING not in joined.warnings


def test_a_pd_half_far_off_follows_a_half_its_retried_rid_placed(tmp_path: Path) -> None:
    """A rid sent twice under PD: each attempt's decode half is placed by its time, and the
    second attempt's prefill half (its own rid) lies 90 s off, beyond the window. It
    follows its room to the span its decode half was placed on: listed, not missing."""
    frames = _generations({"R": [(100, 105), (106, 112)], "known": [(120, 130)]})
    engine = Engine()
    engine.request("known", T0 + 121, T0 + 129, role="decode", room=0x99, host="decodehh")
    engine.request("prefill-k", T0 + 120.5, T0 + 121, role="prefill", room=0x99,
                   host="prefillh")
    for attempt, (start, end) in enumerate(((100.5, 104.5), (106.5, 111.5))):
        room, far = 0x100 + attempt, 90 * attempt
        engine.request("R", T0 + start + 0.5, T0 + end, role="decode", room=room,
                       host="decodehh")
        engine.request(f"prefill-{attempt}", T0 + start - far, T0 + start + 0.4 - far,
                       role="prefill", room=room, host="farhosth" if attempt else "prefillh")
    joined = with_engine_traces(frames, _stored(engine, tmp_path / "engine"))
    roots = _request_spans(joined)
    assert sorted(zip(roots["name"].astype(str), roots["attempt"], strict=True)) == [
        ("sglang decode request", 0), ("sglang decode request", 0),
        ("sglang decode request", 1), ("sglang prefill request", 0),
        ("sglang prefill request", 0)]
    assert joined.engine_unmatched[["rid", "reason"]].values.tolist() == [
        ["prefill-1", BEYOND_WINDOW]]
    assert joined.warnings[BEYOND_WARNING] == 1 and MISSING_WARNING not in joined.warnings


def test_a_clones_request_beyond_the_window_is_named_as_its_clone(tmp_path: Path) -> None:
    """Both clones served requests in the window (hosts ``<host_id>@<address>``); the one
    request read beyond it, from the second clone alone, is listed under that clone's
    host too, as ``engine_skew`` names it."""
    frames = _generations({"a": [(0, 8)], "b": [(3, 11)], "far": [(6, 14)]})
    engine = Engine()
    for rid, start, address in (("a", 0.5, "10.0.0.1"), ("b", 3.5, "10.0.0.2"),
                                ("far", 156.5, "10.0.0.2")):
        trace = engine.request(rid, T0 + start, T0 + start + 7, host=_CLONED_ID,
                               slices=plain_slices(T0 + start + 0.1, T0 + start + 7))
        _on_machine(engine, trace, {PEER_ADDRESS: address})
    joined = with_engine_traces(frames, _stored(engine, tmp_path / "engine"))
    assert sorted(joined.engine_skew["host"]) == [f"{_CLONED_ID}@10.0.0.1",
                                                  f"{_CLONED_ID}@10.0.0.2"]
    assert joined.engine_unmatched[["rid", "host", "reason"]].values.tolist() == [
        ["far", f"{_CLONED_ID}@10.0.0.2", BEYOND_WINDOW]]


def _read_beyond(calls: list[int]) -> Callable[[], pa.Table]:
    def beyond() -> pa.Table:
        calls.append(1)
        return Engine().table()
    return beyond


def test_the_traces_beyond_the_window_are_read_only_when_a_span_waits() -> None:
    """Not when every span got its request, nor for frames that hold their requests
    already (a dataset converted with them)."""
    frames = _generations({"near": [(0, 10)]})
    engine = Engine()
    engine.request("near", T0 + 1, T0 + 9)
    calls: list[int] = []
    joined = join_engine(frames, engine.table(), _read_beyond(calls))
    again = join_engine(joined, engine.table(), _read_beyond(calls))
    assert calls == [] and not joined.warnings and not again.warnings
    assert len(_request_spans(again)) == 1


def test_a_request_of_a_running_rollout_may_still_be_on_its_way() -> None:
    """While some span is open, a generation that just ended is not yet missing its
    request; once the rollout is over it is."""
    samples = _samples({"late": [(0, 10)], "running": [(2, 12)]})
    finished = build_frames(samples)
    events = samples[1]["trace"]["events"]
    events[:] = [record for record in events if record["type"] != "span_end"]
    running = build_frames(samples)
    calls: list[int] = []
    joined = join_engine(running, Engine().table(), _read_beyond(calls))
    assert calls == [] and MISSING_WARNING not in joined.warnings
    joined = join_engine(finished, Engine().table(), _read_beyond(calls))
    assert calls == [1] and joined.warnings[MISSING_WARNING] == 2


def test_a_join_that_may_not_search_counts_the_waiting_spans_as_missing(
        tmp_path: Path) -> None:
    """The live view joins on every refresh and reads nothing beyond the window: a
    request that lies there is counted as missing, never left out without a word."""
    frames = _generations({"near": [(0, 10)], "far": [(0, 10)]})
    engine = Engine()
    engine.request("near", T0 + 1, T0 + 9, host="hostaaaa", slices=plain_slices(T0 + 1.1, T0 + 9))
    engine.request("far", T0 + 121, T0 + 129, host="hostbbbb")
    joined = with_engine_traces(frames, _stored(engine, tmp_path / "engine"),
                                search_beyond=False)
    assert _request_spans(joined)["attr.gen_ai.request.id"].tolist() == ["near"]
    assert joined.engine_unmatched.empty  # "far" was never read
    assert joined.warnings[MISSING_WARNING] == 1 and BEYOND_WARNING not in joined.warnings
