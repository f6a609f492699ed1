"""Join the engines' request traces into the frames: each request under the span that made it.

:mod:`.requests` reads the stored spans as requests (one TP rank's slices,
decode iterations as stretches, thread events placed), :mod:`.match` finds
the span that made each one. Attached, a request root becomes a span under that
span (named by its role, ``sglang prefill request``; its own name kept in
``engine.name``, its host in ``engine.host``) with its slices under it, keeping their
nesting; a thread span is not drawn, its attributes go onto its slices. Every such
span and event has ``origin == "engine"``.

A KV sender's trace (SGLang's Mooncake sender, one per prefill TP rank, see
:mod:`.requests`) is no request: it is drawn under the prefill half of its
bootstrap room as a ``sglang kv sender`` span (:data:`KV_SENDER_SPAN`), its TP ranks
counted once (:func:`.requests.with_kv_senders`), attached or listed unmatched with that
half. A sender whose room has no single prefill half in the traces is not drawn; it is
counted in ``frames.warnings["engine_kv_sender_dropped"]``.

Engine hosts keep their own clocks: each request is shifted by its host's skew
(:mod:`.skew`), which ``frames.engine_skew`` reports.
Requests attached nowhere are listed in ``frames.engine_unmatched``, each with its
``reason``: no span made it (:data:`NO_SPAN`), its reused rid placed it on no single
span (:mod:`.match`), or it lies beyond the window read (:mod:`.beyond`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ...frames.model import TraceFrames
from ...tables.attr_columns import AttrTable
from ...tables.build import event_placement, row_counts
from ...tables.core_concat import APPENDED, concatenated
from ...tables.core_tables import CoreTables, filled_table
from ...tables.names import Names
from ...tables.pd_lanes import LANE_SUFFIX
from ...tables.span_geometry import ENGINE_LANE_KINDS, span_lanes
from ...vocabularies import INSTANT_EVENT, UNMATCHED_END
from .beyond import BEYOND_WARNING, BEYOND_WINDOW, MISSING_WARNING, requests_beyond, waiting_spans
from .match import REQUEST_ID_ATTR, Held, attr_values, placed_matches
from .requests import KV_SENDER, KV_SENDER_SPAN, Request, read_requests, with_kv_senders
from .skew import SpanColumns, host_skews

__all__ = ["KV_SENDER_SPAN", "REQUEST_ID_ATTR", "REQUEST_SPAN_NAMES", "attr_values",
           "join_engine"]

RID_ATTR = "rid"
#: The span a request root becomes, by its role ("" without PD).
REQUEST_SPAN_NAMES = {"": "sglang request", "prefill": "sglang prefill request",
                      "decode": "sglang decode request"}
#: ``frames.warnings`` key: KV senders whose room has no single prefill half.
SENDERS_DROPPED = "engine_kv_sender_dropped"
UNMATCHED_COLUMNS = ["rid", "trace_id", "span_id", "name", "host", "start", "end", "spans",
                     "reason"]
#: ``engine_unmatched.reason`` of a request that no span of the frames made.
NO_SPAN = "no span of the frames made it"


def join_engine(frames: TraceFrames, engine: pd.DataFrame | pa.Table,
                beyond: Callable[[], pa.Table] | None = None) -> TraceFrames:
    """``frames`` with the requests of ``engine`` attached: a ``load_engine_traces``
    DataFrame, or the store's table (``read_spans``), which is read faster since only
    the spans that are drawn have their attributes parsed. ``engine`` holds a time
    window's spans; ``beyond`` reads those around it, called only when a span waits for
    a request the window lacks (:mod:`.beyond`). Without ``beyond`` the waiting spans are
    counted as missing, unsearched.

    Frames joined before (a run dataset converted with engine traces, opened with them
    again) give what their first join gave: the requests they hold keep their spans and
    are not attached twice, yet count as the first join counted them (a request of their
    rid that another rollout sent is listed, not attached in their place; their hosts'
    skews are estimated from them too), and the join's reports and warnings are this
    join's, not added to the first's."""
    requests = read_requests(engine)
    held, full = _held(frames, requests)
    columns = SpanColumns(frames)
    matches = placed_matches(frames, requests, columns, held)
    reasons = {requests[number].root: reason for number, reason in matches.reasons.items()}
    placed, dropped = _nest_kv_senders(requests, matches.owners)
    present = {requests[number].span_id for number in held.owners}
    matched = [(request, owner) for request, owner in placed if owner >= 0]
    skew = host_skews(columns, matched, matches.reaches)
    shift = dict(zip(skew["host"], skew["skew"], strict=True))
    attached = [(request, owner) for request, owner in matched
                if request.span_id not in present]
    left = [(request, reasons.get(request.root, NO_SPAN)) for request, owner in placed
            if owner < 0]
    warnings = Counter(frames.warnings)
    for key in (SENDERS_DROPPED, BEYOND_WARNING, MISSING_WARNING):
        # only a join counts these: frames joined before count them again, here
        warnings.pop(key, None)
    if dropped:
        warnings[SENDERS_DROPPED] += dropped
    waiting = waiting_spans(frames, matches, requests, full)
    far, missing = ([], len(waiting)) if not waiting or beyond is None else \
        requests_beyond(frames, requests, matches, waiting, beyond)
    left += [(request, BEYOND_WINDOW) for request in far]
    for key, count in ((BEYOND_WARNING, len(far)), (MISSING_WARNING, missing)):
        if count:
            warnings[key] += count
    unmatched = _unmatched(left)
    if not attached:
        return replace(frames, engine_skew=skew, engine_unmatched=unmatched, warnings=warnings)
    built = _Built()
    for request, owner in sorted(attached, key=lambda pair: (pair[1], pair[0].start_ns)):
        _attach(columns, request, owner, shift, built)
    joined = _append(replace(frames, warnings=warnings), built)
    return replace(joined, engine_skew=skew, engine_unmatched=unmatched)


def _held(frames: TraceFrames, requests: list[Request]) -> tuple[Held, set[int]]:
    """What the frames hold of the engine already (joined before): the requests drawn
    under their generation spans (:class:`.match.Held`: those of ``requests`` by number
    with their span, and each span's roles), and the spans that want no other request
    (one holds a request without PD, or both PD halves), which wait for none."""
    core = frames.tables.span_core
    engine_spans = pc.equal(core.column("origin"), "engine").to_numpy(zero_copy_only=False)
    if not engine_spans.any():
        return Held(), set()
    role_of = {name: role for role, name in REQUEST_SPAN_NAMES.items()}
    parents = _numbers(core, "parent_index")
    picked = np.flatnonzero(engine_spans & (parents >= 0))
    picked = picked[~engine_spans[parents[picked]]]  # hung under a span of the dump
    by_id: dict[str, tuple[int, str]] = {}
    roles: dict[int, set[str]] = {}
    for span_id, name, parent in zip(core.column("span_id").take(picked).to_pylist(),
                                     core.column("name").take(picked).to_pylist(),
                                     parents[picked].tolist(), strict=True):
        if name in role_of:
            by_id[span_id] = (parent, role_of[name])
            roles.setdefault(parent, set()).add(role_of[name])
    owners = {number: by_id[request.span_id][0] for number, request in enumerate(requests)
              if request.span_id in by_id and by_id[request.span_id][1] == request.role}
    full = {span for span, have in roles.items() if "" in have or {"prefill", "decode"} <= have}
    return Held(owners, {(span, role) for span, have in roles.items() for role in have}), full


def _nest_kv_senders(requests: list[Request], owners: list[int]
                     ) -> tuple[list[tuple[Request, int]], int]:
    """Every request but the KV senders, with its owner (-1: unmatched), each prefill half
    carrying the senders of its bootstrap room (:func:`.requests.with_kv_senders`); and
    how many senders found no single prefill half of their room (not drawn)."""
    halves: dict[int, list[int]] = {}
    for number, request in enumerate(requests):
        if request.role == "prefill" and request.room is not None:
            halves.setdefault(request.room, []).append(number)
    senders: dict[int, list[Request]] = {}
    dropped = 0
    for request in requests:
        if request.role != KV_SENDER:
            continue
        found = halves.get(request.room, []) if request.room is not None else []
        if len(found) == 1:
            senders.setdefault(found[0], []).append(request)
        else:
            dropped += 1
    placed = [(with_kv_senders(request, senders.get(number, [])), owner)
              for number, (request, owner) in enumerate(zip(requests, owners, strict=True))
              if request.role != KV_SENDER]
    return placed, dropped


def _unmatched(requests: list[tuple[Request, str]]) -> pd.DataFrame:
    """Requests attached nowhere, each with why (``reason``)."""
    rows = [(r.whole_rid, r.trace_id, r.span_id, r.name, r.host, r.start_ns / 1e9,
             r.end_ns / 1e9, len(r.pieces), reason) for r, reason in requests]
    return pd.DataFrame(rows, columns=UNMATCHED_COLUMNS)


# --------------------------------------------------------------------------- attaching


#: The span columns ``_attach`` fills besides ``span_id`` and ``depth``, and the events'.
_SPAN_VALUES = ("sample_row", "parent_span_id", "parent", "name", "start", "end", "attempt",
                "lane_kind", "error")
_EVENT_VALUES = ("sample_row", "name", "ts", "attempt", "parent_span_id", "parent")


class _Built:
    """The new spans and events, column by column, before they join the frames."""

    def __init__(self) -> None:
        self.spans: dict[str, list] = {name: [] for name in (
            "sample_row", "span_id", "parent_span_id", "parent", "name", "start", "end",
            "depth", "attempt", "lane_kind", "error")}
        self.span_attrs: list[dict | None] = []
        self.events: dict[str, list] = {name: [] for name in (
            "sample_row", "name", "ts", "attempt", "parent_span_id", "parent")}
        self.event_attrs: list[dict | None] = []


def _attach(frames_spans: SpanColumns, request: Request, owner: int, shift: dict[str, float],
            built: _Built) -> None:
    """Append one request's pieces (parents first) to ``built``."""
    base = frames_spans.count
    at = frames_spans.position[owner]
    row = int(frames_spans.sample_row[at])
    attempt = int(frames_spans.attempt[at])
    kind = ENGINE_LANE_KINDS.get(request.role, 0)
    spans, events = built.spans, built.events
    span_ids, depths = spans["span_id"], spans["depth"]
    placed: list[int] = []
    for piece in request.pieces:
        if piece.parent < 0:
            parent, parent_id = owner, str(frames_spans.span_id[at])
            depth = int(frames_spans.depth[at]) + 1
            name = REQUEST_SPAN_NAMES[request.role]
            attrs = {**piece.attrs, "engine.name": piece.name}
        else:
            parent = placed[piece.parent]
            parent_id = span_ids[parent - base]
            depth = depths[parent - base] + 1
            name = piece.name
            attrs = dict(piece.attrs)
        if request.rid is not None:
            attrs.setdefault(RID_ATTR, request.rid)
        attrs["engine.host"] = piece.host
        offset = shift.get(piece.host, 0.0)
        index = base + len(built.span_attrs)
        placed.append(index)
        span_ids.append(piece.span_id)
        depths.append(depth)
        for column, value in zip(_SPAN_VALUES, (row, parent_id, parent, name,
                                                piece.start_ns / 1e9 + offset,
                                                piece.end_ns / 1e9 + offset, attempt, kind,
                                                piece.error), strict=True):
            spans[column].append(value)
        built.span_attrs.append(attrs)
        for event in piece.events:
            for column, value in zip(_EVENT_VALUES, (
                    row, str(event.get("name", "")), event["time_ns"] / 1e9 + offset, attempt,
                    piece.span_id, index), strict=True):
                events[column].append(value)
            event_attrs = event.get("attributes")
            built.event_attrs.append(event_attrs if isinstance(event_attrs, dict) and event_attrs
                                     else None)


def _append(frames: TraceFrames, built: _Built) -> TraceFrames:
    """The frames with ``built``'s spans and events added, in Arrow: lanes, counts and
    attributes recomputed for the rows that changed shape."""
    tables = frames.tables
    added = built.spans
    n_new = len(built.span_attrs)
    new_spans = filled_table("span_core", n_new, {
        "sample_row": added["sample_row"], "span_id": added["span_id"],
        "parent_span_id": added["parent_span_id"], "parent_index": added["parent"],
        "name": added["name"], "start": added["start"], "end": added["end"],
        "display_end": added["end"],
        "duration": np.subtract(added["end"], added["start"], dtype=np.float64),
        "state": ["closed"] * n_new, "depth": added["depth"], "attempt": added["attempt"],
        "end_attempt": added["attempt"], "error": added["error"],
        "origin": ["engine"] * n_new})
    spans = concatenated("span_core", [tables.span_core, new_spans], APPENDED)
    names = _names(spans.column("name"))
    parents = _numbers(spans, "parent_index")
    spans = _with(spans, "parent_name", _names_column(
        np.where(parents >= 0, names.codes[np.maximum(parents, 0)], -1), spans, "name"))
    kinds = _lane_kinds(tables.span_core, np.asarray(added["lane_kind"], dtype=np.int64))
    lanes = span_lanes(_numbers(spans, "sample_row"), _numbers(spans, "depth").astype(np.int64),
                       parents, names, _numbers(spans, "pd_detail"), kinds)
    spans = _with(spans, "lane", pa.array(lanes.astype(np.int32)))
    events = _events(tables.event_core, built, spans, names)
    warnings = Counter(frames.warnings)
    return replace(
        frames,
        tables=CoreTables(_recount(tables.samples, spans, events), spans, events,
                          tables.segments),
        span_start_attrs=AttrTable.concat([frames.span_start_attrs,
                                           AttrTable.from_dicts([None] * n_new)]),
        span_end_attrs=AttrTable.concat([frames.span_end_attrs,
                                         AttrTable.from_dicts(built.span_attrs, warnings)]),
        event_attrs=AttrTable.concat([frames.event_attrs,
                                      AttrTable.from_dicts(built.event_attrs, warnings)]),
        warnings=warnings,
    )


def _numbers(table: pa.Table, column: str) -> np.ndarray:
    return table.column(column).to_numpy()


def _names(column: pa.ChunkedArray) -> Names:
    """A names column (one chunk, as concatenated) as codes (-1 missing) and names."""
    array = column.chunk(0)
    return Names(array.indices.fill_null(-1).to_numpy(zero_copy_only=False),
                 array.dictionary.to_pylist())


def _names_column(codes: np.ndarray, table: pa.Table, names_of: str) -> pa.DictionaryArray:
    """``codes`` (-1 missing) into the names of ``table``'s column ``names_of``."""
    codes = np.asarray(codes, dtype=np.int32)
    return pa.DictionaryArray.from_arrays(pa.array(codes, mask=codes < 0),
                                          table.column(names_of).chunk(0).dictionary)


def _with(table: pa.Table, column: str, values: pa.Array) -> pa.Table:
    return table.set_column(table.schema.get_field_index(column), column, values)


def _lane_kinds(core: pa.Table, engine_kinds: np.ndarray) -> np.ndarray:
    """The lane kind of every span: 0 real, 1/2 virtual [P]/[D], engine roles their own."""
    names = core.column("name").chunk(0)
    virtual = _numbers(core, "virtual")
    codes = names.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    kinds = np.zeros(len(codes), dtype=np.int64)
    for kind, phase in ((1, "prefill"), (2, "decode")):
        of_name = np.append(pc.ends_with(names.dictionary, LANE_SUFFIX[phase])
                            .to_numpy(zero_copy_only=False), False)  # -1: no name
        kinds[virtual & of_name[codes]] = kind
    return np.concatenate([kinds, engine_kinds])


def _events(core: pa.Table, built: _Built, spans: pa.Table, span_names: Names) -> pa.Table:
    """The events table with the engine's events after the dump's; every event's lane and
    depth read again from its parent span (lanes of a row may have moved)."""
    added = built.events
    n_new = len(built.event_attrs)
    new = filled_table("event_core", n_new, {
        "sample_row": added["sample_row"], "name": added["name"], "ts": added["ts"],
        "attempt": added["attempt"], "parent_span_id": added["parent_span_id"],
        "parent_index": added["parent"], "kind": [INSTANT_EVENT] * n_new,
        "origin": ["engine"] * n_new})
    events = concatenated("event_core", [core, new], APPENDED)
    parent_codes, depth, lane = event_placement(
        _numbers(events, "parent_index"), span_names.codes, _numbers(spans, "depth"),
        _numbers(spans, "lane"))
    events = _with(events, "parent_name", _names_column(parent_codes, spans, "name"))
    events = _with(events, "depth", pa.array(np.asarray(depth, dtype=np.int32)))
    return _with(events, "lane", pa.array(np.asarray(lane, dtype=np.int32)))


def _recount(samples: pa.Table, spans: pa.Table, events: pa.Table) -> pa.Table:
    """The per-sample counts that depend on spans and events, computed again."""
    counts = row_counts(
        samples.num_rows, _numbers(spans, "sample_row"), _numbers(spans, "virtual"),
        pc.equal(spans.column("state"), "open").to_numpy(), _numbers(spans, "lane"),
        _numbers(events, "sample_row"),
        pc.equal(events.column("kind"), UNMATCHED_END).to_numpy())
    for column, values in counts.items():
        samples = _with(samples, column, pa.array(np.asarray(values, dtype=np.int64)))
    return samples
