"""The engines' stored spans read as requests: request roots, their thread spans, the slices.

SGLang traces a request as a *request root* (``rid``, and from 0.5.x ``gen_ai.*``
at its end) over one *thread span* per server thread (``host_id``, ``pid``,
``thread_label``, ``tp_rank``...) over the work itself, the *slices*. Every
tensor-parallel rank writes its own thread span with the same slices, and at trace
level 3 the decode phase is one ``decode_loop`` slice per scheduler iteration. This
module turns the stored columns (``span_schema.SCHEMA``) into what the join
draws, so that a rollout's frames grow with its requests, not with its iterations:

* each TP group (the thread spans of one request with the same thread label) is
  counted once: its lowest rank (pipeline rank first) carries the slices, the
  other ranks' spans are dropped and their ranks listed in ``engine.tp_ranks``;
* consecutive ``decode_loop`` siblings become one *decode stretch*
  (:mod:`slime_trace_widget.sources.engine.stretches`: the store folds each file as it
  finishes it, a read merges the files, and a raw table is folded here);
* events on a thread span (SGLang puts ``retract`` there) go to the innermost slice
  of that thread whose time holds them, else to the request root;
* a KV sender's trace is no request: SGLang 0.5.x's ``CommonKVSender`` (Mooncake, the
  default transfer backend) opens a trace of its own per PD request on every prefill TP
  rank, its root named ``"Sender Req {hex(room)[:8]}"`` with ``rid`` ``hex(room)``,
  ``module`` ``"sglang::mooncake"`` and the request's ``bootstrap_room``. It reads as a
  request of role :data:`KV_SENDER`, which the join never draws as a request:
  :func:`with_kv_senders` nests the senders of a room under that room's prefill half.

All of that is decided on whole columns before any attribute text is parsed: only the
spans that are drawn, and the threads and roots above them, have their JSON read.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .machines import machine_hosts
from .span_schema import END, JSON_COLUMNS, SCHEMA, START, attribute_text
from .stretches import (
    fold_decode_loops,
    json_value,
    stretch_figures,
    timed_events,
)

#: Attribute keys (as stored JSON text) that mark a request root or a thread span.
_ROOT_KEYS = ('"rid": ', '"gen_ai.request.id": ')
_THREAD_KEYS = ('"host_id": ', '"thread_label": ', '"pid": ')
THREAD_ATTRS = ("thread_label", "host_id", "pid", "tp_rank", "pp_rank", "dp_rank")
_RANK_SUFFIX = re.compile(r"\s*(\[[A-Z]+ \d+\]\s*)*(\(host:[^)]*\))?\s*$")
_MAX_DEPTH = 256
_NO_RANK = 1 << 30
#: ``Request.role`` of a KV sender's trace root (SGLang's role "Sender").
KV_SENDER = "sender"
#: What a KV sender's root is drawn as, under its prefill half (its name in ``engine.name``).
KV_SENDER_SPAN = "sglang kv sender"
#: The ``module`` attribute of SGLang's request roots (0.5.x); any other ``sglang::<name>``
#: root is a transfer backend's trace (``sglang::mooncake``).
_REQUEST_MODULE = "sglang::request"
_MODULE_PREFIX = "sglang::"


@dataclass
class Piece:
    """One drawn engine span: a request root or a slice (a stretch of loops included)."""

    row: int                      # its stored row (a stretch: its first loop's)
    span_id: str
    name: str
    start_ns: int
    end_ns: int
    attrs: dict[str, Any]
    parent: int                   # the drawn piece above it (-1: the request root itself)
    host: str
    thread: int                   # the stored thread span it ran on (-1: none)
    error: bool = False
    events: list[dict[str, Any]] = field(default_factory=list)
    #: The machine ``host`` is on (the sender's address, or the ``host.name`` of a span
    #: sent without one; "" when unknown): see :mod:`.machines`.
    machine: str = ""


@dataclass
class Request:
    """One request root with what is drawn under it."""

    root: int                     # stored row of the request root
    trace_id: str
    span_id: str
    name: str
    role: str                     # "", "prefill", "decode" or KV_SENDER (no request)
    rid: str | None               # the root's ``rid`` attribute
    whole_rid: str | None         # ``gen_ai.request.id`` (the whole rid), else ``rid``
    short_rid: bool               # ``rid`` alone on a 0.5.x root: only its last ``_`` part
    room: int | None              # the PD bootstrap room, when it has one (never 0)
    top: int                      # the outermost stored span above the root
    top_room: int | None          # the room of a "Bootstrap Room" span above it (older SGLang)
    host: str
    pieces: list[Piece]           # the root first, then slices, parents before children
    #: The span ids (hex) outside the store its trace hangs under: a client's W3C context.
    context_parents: list[str] = field(default_factory=list)

    @property
    def start_ns(self) -> int:
        return min(piece.start_ns for piece in self.pieces)

    @property
    def end_ns(self) -> int:
        return max(piece.end_ns for piece in self.pieces)


def engine_table(engine: pd.DataFrame | pa.Table) -> pa.Table:
    """The store's columns, from a store table or a ``load_engine_traces`` DataFrame."""
    if isinstance(engine, pa.Table):
        return engine
    columns = {}
    for column in SCHEMA:
        name = column.name
        if name in JSON_COLUMNS:
            empty = JSON_COLUMNS[name]
            values = engine[name] if name in engine else [empty] * len(engine)
            columns[name] = pa.array([v if isinstance(v, str) else json.dumps(
                v if v is not None else empty, ensure_ascii=False) for v in values], pa.string())
        elif pa.types.is_string(column.type):
            values = engine[name] if name in engine else pd.Series([None] * len(engine))
            columns[name] = pa.array([None if v is None or v != v else str(v) for v in values],
                                     type=pa.string())
        else:  # the times are required; a missing status is 0 (unset)
            required = name in (START, END)
            values = engine[name] if name in engine or required else np.zeros(len(engine))
            columns[name] = pa.array(np.asarray(values, dtype=column.type.to_pandas_dtype()))
    return pa.table(columns, schema=SCHEMA)


def read_requests(engine: pd.DataFrame | pa.Table) -> list[Request]:
    """Every request root of ``engine`` with its drawn pieces (see the module's rules)."""
    table = engine_table(engine)
    if not len(table):
        return []
    linked, parent, _ = _linked(fold_decode_loops(table).table)
    return _Rows(linked, parent, stretch_figures(linked)).requests()


def _linked(table: pa.Table) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """``table`` with one row per (trace id, span id) (an export retried after a lost
    answer repeats its spans), each row's parent row (-1: none stored), and the rows of
    ``table`` kept."""
    keys = _keys(table["trace_id"], table["span_id"])
    parent_keys = _keys(table["trace_id"], table["parent_id"])
    encoded = pa.chunked_array(keys.chunks + parent_keys.chunks).combine_chunks()
    codes = encoded.dictionary_encode().indices.to_numpy().astype(np.int64)
    key_codes, parent_codes = codes[:len(table)], codes[len(table):]
    _, first = np.unique(key_codes, return_index=True)
    if len(first) < len(table):
        kept = np.sort(first)
        linked, parent, again = _linked(table.take(pa.array(kept)))
        return linked, parent, kept[again]
    row_of_code = np.full(len(codes), -1, dtype=np.int64)
    row_of_code[key_codes] = np.arange(len(table))
    parent = row_of_code[parent_codes]
    parent[parent == np.arange(len(table))] = -1
    return table, parent, np.arange(len(table))


def _keys(trace: pa.ChunkedArray, span: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.binary_join_element_wise(pc.fill_null(trace, ""), pc.fill_null(span, ""), ":")


class _Rows:
    """The stored spans as whole columns, with structure found by vectorised walks."""

    def __init__(self, table: pa.Table, parent: np.ndarray,
                 stretches: dict[int, dict[str, int]]) -> None:
        self.table = table
        self.parent = parent
        self.stretches = stretches
        self.n = n = len(table)
        self.names = table["name"]
        self.start = table["start_ns"].to_numpy().astype(np.int64)
        self.end = table["end_ns"].to_numpy().astype(np.int64)
        self.status = table["status"].to_numpy().astype(np.int64)
        # after the loops are folded every row is drawn or above one: parse them together
        self._attrs = _parse_all(table["attributes"], dict)
        self._events = [timed_events(events) if events else events
                        for events in _parse_all(table["events"], list)]
        self._names = table["name"].to_pylist()
        self._span_ids = table["span_id"].to_pylist()
        self._trace_ids = table["trace_id"].to_pylist()
        self._parent_ids = table["parent_id"].to_pylist()
        # plain lists: the walk per request reads them one value at a time
        self._start, self._end = self.start.tolist(), self.end.tolist()
        self._errors = (self.status == 2).tolist()
        self._parents = parent.tolist()
        attributes = table["attributes"]
        maybe_root = _any_substring(attributes, _ROOT_KEYS)
        maybe_thread = _any_substring(attributes, _THREAD_KEYS)
        self.is_root = np.zeros(n, dtype=bool)
        self.is_thread = np.zeros(n, dtype=bool)
        for i in np.flatnonzero(maybe_root | maybe_thread):
            attrs = self.attrs(int(i))
            if (attribute_text(attrs.get("gen_ai.request.id"))
                    or attribute_text(attrs.get("rid"))):
                self.is_root[i] = True
            elif any(key in attrs for key in ("thread_label", "host_id", "pid")):
                self.is_thread[i] = True
        self.root_of = self._nearest(self.is_root)
        self.thread_of = self._nearest(self.is_thread, stop=self.is_root)
        self._thread_of = self.thread_of.tolist()

    def attrs(self, i: int) -> dict:
        """The attributes of stored row ``i``."""
        return self._attrs[i]

    def name(self, i: int) -> str:
        return str(self._names[i])

    def span_id(self, i: int) -> str:
        return str(self._span_ids[i])

    def events(self, i: int) -> list[dict]:
        """The events of stored row ``i`` that have a time (a list of its own)."""
        return list(self._events[i])

    def _nearest(self, mark: np.ndarray, stop: np.ndarray | None = None) -> np.ndarray:
        """Each row's nearest strict ancestor with ``mark`` (-1: none, or a ``stop`` first)."""
        found = np.full(self.n, -1, dtype=np.int64)
        cursor = self.parent.copy()
        for _ in range(_MAX_DEPTH):  # deeper than any engine trace; a cycle ends here too
            walking = (found < 0) & (cursor >= 0)
            if not walking.any():
                break
            at = cursor[walking]
            hit = mark[at]
            blocked = stop[at] if stop is not None else np.zeros(len(at), dtype=bool)
            found[walking] = np.where(hit, at, -1)
            cursor[walking] = np.where(hit | blocked, -1, self.parent[at])
        return found

    def _top(self, i: int) -> int:
        node, parents = i, self._parents
        for _ in range(_MAX_DEPTH):
            if parents[node] < 0:
                break
            node = parents[node]
        return node

    # ------------------------------------------------------------------ threads

    def _threads(self) -> tuple[np.ndarray, dict[int, dict[str, Any]], dict[int, str],
                                dict[str, str]]:
        """Each thread span's request root (-1: none), the carrier threads with the attrs
        their slices take, each thread's host, and each host's machine (where known)."""
        threads = np.flatnonzero(self.is_thread)
        owner = self.root_of.copy()
        hosts = {int(t): _host(self.attrs(int(t))) or _resource_host(self, int(t))
                 for t in threads}
        machines = self._tell_machines_apart(hosts)
        orphans = threads[owner[threads] < 0]
        if len(orphans):
            self._adopt(orphans, owner, hosts)
        groups: dict[tuple[int, str, int], list[int]] = {}
        for t in map(int, threads):
            if owner[t] >= 0:
                attrs = self.attrs(t)
                label = _thread_label(attrs, self.name(t))
                # ranks of one group fold together; a thread with no rank is its own
                alone = t if _rank(attrs, "tp_rank") == _NO_RANK else -1
                groups.setdefault((int(owner[t]), label, alone), []).append(t)
        carriers: dict[int, dict[str, Any]] = {}
        for members in groups.values():
            members.sort(key=lambda t: (_rank(self.attrs(t), "pp_rank"),
                                        _rank(self.attrs(t), "tp_rank"), self.start[t], t))
            carrier = members[0]
            attrs = {k: v for k, v in self.attrs(carrier).items() if k in THREAD_ATTRS}
            ranks = sorted({_rank(self.attrs(t), "tp_rank") for t in members} - {_NO_RANK})
            if len(members) > 1 and ranks:
                attrs["engine.tp_ranks"] = ",".join(str(rank) for rank in ranks)
            carriers[carrier] = attrs
        return owner, carriers, hosts, machines

    def _tell_machines_apart(self, hosts: dict[int, str]) -> dict[str, str]:
        """A ``host_id`` (SGLang's ``/etc/machine-id``) that thread spans from several
        machines share, as cloned VM images and containers do, becomes one host per
        machine, ``<host_id>@<machine>`` (:func:`.machines.machine_hosts`: a machine is
        the address the receiver got the export from, or a span's ``host.name`` where it
        has none). Changes ``hosts`` in place; returns each host's
        machine where its spans name one (a host_id kept plain too, so that a scrape
        target named ``<host_id>@<machine>`` finds it: ``frames.engine_load``)."""
        named = [t for t in hosts if _host(self.attrs(t))]
        if not named:
            return {}
        texts = self.table["resource"].take(pa.array(named, type=pa.int64())).to_pylist()
        parsed: dict[str | None, dict[str, Any]] = {}
        for text in texts:
            if text not in parsed:
                parsed[text] = json_value(text, dict)
        renamed, machines = machine_hosts({t: hosts[t] for t in named},
                                          {t: parsed[text] for t, text in zip(named, texts,
                                                                             strict=True)})
        hosts.update(renamed)
        return machines

    def _adopt(self, orphans: np.ndarray, owner: np.ndarray, hosts: dict[int, str]) -> None:
        """Thread spans with no request root above them (older SGLang hung some under the
        "Bootstrap Room" span) take the one request root of their trace on their host, or
        the trace's only request root."""
        roots_by_top: dict[int, list[int]] = {}
        for root in map(int, np.flatnonzero(self.is_root)):
            roots_by_top.setdefault(self._top(root), []).append(root)
        root_hosts: dict[int, set[str]] = {}
        for t, host in hosts.items():
            if owner[t] >= 0:
                root_hosts.setdefault(int(owner[t]), set()).add(host)
        for t in map(int, orphans):
            roots = roots_by_top.get(self._top(t), [])
            on_host = [r for r in roots if hosts[t] in root_hosts.get(r, ())]
            chosen = on_host if on_host else roots
            if len(chosen) == 1:
                owner[t] = chosen[0]

    # ------------------------------------------------------------------ requests

    def requests(self) -> list[Request]:
        owner, carriers, hosts, machines = self._threads()
        threaded = self.thread_of >= 0
        carried = np.zeros(self.n, dtype=bool)
        carried[list(carriers)] = True
        # a slice's thread: its carrier thread span, or -1 when no thread span is above it
        slice_owner = np.where(threaded, owner[np.maximum(self.thread_of, 0)], self.root_of)
        is_slice = ((~self.is_root) & (~self.is_thread) & (slice_owner >= 0)
                    & (~threaded | carried[np.maximum(self.thread_of, 0)]))
        drawn = is_slice
        by_root: dict[int, list[int]] = {}
        for i in np.flatnonzero(drawn):
            by_root.setdefault(int(slice_owner[i]), []).append(int(i))
        threads_of_root: dict[int, list[int]] = {}
        for carrier in carriers:
            threads_of_root.setdefault(int(owner[carrier]), []).append(carrier)
        context = _Context(self.thread_of, carriers, hosts, machines, self.stretches)
        return [self._request(root, by_root.get(root, []), threads_of_root.get(root, []),
                              context) for root in map(int, np.flatnonzero(self.is_root))]

    def _request(self, root: int, slices: list[int], threads: list[int], context: _Context
                 ) -> Request:
        attrs = self.attrs(root)
        thread_hosts = [context.hosts[t] for t in threads]
        found = {context.host_of(self._thread_of[i], "") for i in slices} - {""}
        if len(found) > 1:  # a request on several hosts is said to be on most slices'
            counts = Counter(context.host_of(self._thread_of[i], "") for i in slices)
            counts.pop("", None)
            found = {counts.most_common(1)[0][0]}
        host = (found.pop() if found else
                thread_hosts[0] if thread_hosts else _resource_host(self, root))
        pieces = [Piece(root, self.span_id(root), self.name(root), self._start[root],
                        self._end[root], dict(attrs), -1, host, -1, self._errors[root],
                        self.events(root), context.machines.get(host, ""))]
        position = {root: 0}
        slices.sort(key=lambda i: (self._depth_to(i, root), self._start[i], i))
        for i in slices:
            thread = self._thread_of[i]
            piece_attrs = {**context.carriers.get(thread, {}), **self.attrs(i),
                           **context.stretches.get(i, {})}
            above = self._drawn_parent(i, root, position)
            position[i] = len(pieces)
            on = context.host_of(thread, host)
            pieces.append(Piece(i, self._span_ids[i], self._names[i], self._start[i],
                                self._end[i], piece_attrs, above, on, thread,
                                self._errors[i], self.events(i), context.machines.get(on, "")))
        for thread in threads:
            for event in self.events(thread):
                _place_event(pieces, event, thread)
            if self._errors[thread]:
                pieces[0].error = True
        name = self.name(root)
        role = root_role(name, attrs)
        top = self._top(root)
        top_attrs = self.attrs(top) if top != root else {}
        return Request(
            root=root, trace_id=str(self._trace_ids[root]),
            span_id=self.span_id(root), name=name, role=role,
            rid=attribute_text(attrs.get("rid")),
            whole_rid=(attribute_text(attrs.get("gen_ai.request.id"))
                       or attribute_text(attrs.get("rid"))),
            # SGLang 0.5.x (module "sglang::...") keeps only the part after the last "_" in
            # ``rid``; older releases kept it whole
            short_rid=not attribute_text(attrs.get("gen_ai.request.id"))
            and str(attrs.get("module", "")).startswith("sglang::"),
            room=_room(attrs.get("bootstrap_room")), top=top,
            top_room=_room(top_attrs.get("bootstrap_room")), host=host, pieces=pieces,
            context_parents=[parent] if (parent := self._parent_ids[top]) else [])

    def _depth_to(self, i: int, root: int) -> int:
        depth, node, parents = 0, i, self._parents
        while node >= 0 and node != root and depth < _MAX_DEPTH:
            node = parents[node]
            depth += 1
        return depth

    def _drawn_parent(self, i: int, root: int, position: dict[int, int]) -> int:
        """The piece above slice ``i``: its nearest drawn ancestor, else the request root."""
        parents = self._parents
        node = parents[i]
        for _ in range(_MAX_DEPTH):
            if node < 0 or node == root:
                break
            if node in position:
                return position[node]
            node = parents[node]
        return 0


def root_role(name: str, attrs: dict[str, Any]) -> str:
    """The role of a request root named ``name``: "prefill" or "decode" (the name's first
    word), :data:`KV_SENDER` for a transfer backend's trace (first word "Sender", or a
    ``module`` ``sglang::<name>`` other than SGLang's request module), else ""."""
    words = name.split()
    first = words[0].lower() if words else ""
    if first in ("prefill", "decode"):
        return first
    module = attrs.get("module")
    backend = (isinstance(module, str) and module.startswith(_MODULE_PREFIX)
               and module not in (_REQUEST_MODULE, _MODULE_PREFIX))
    return KV_SENDER if first == "sender" or backend else ""


def with_kv_senders(half: Request, senders: list[Request]) -> Request:
    """``half`` (a prefill request) with the KV senders of its room drawn under its root.

    SGLang writes one sender per prefill TP rank; like a TP group of thread spans they
    count once: the lowest rank's sender (pipeline rank first, then its start) is kept,
    its root as a :data:`KV_SENDER_SPAN` piece (its own name in ``engine.name``) with its
    slices below it, and when there were several, every rank in ``engine.tp_ranks``
    ("0,1") on each of its pieces. The other ranks' senders are not drawn. ``half`` is
    not changed; with no senders it is returned as it is."""
    if not senders:
        return half
    orders = {id(sender): _sender_order(sender) for sender in senders}
    kept = min(senders, key=lambda sender: orders[id(sender)])
    ranks = sorted({order[1] for order in orders.values()} - {_NO_RANK})
    shared: dict[str, Any] = {}
    if len(senders) > 1 and ranks:
        shared["engine.tp_ranks"] = ",".join(str(rank) for rank in ranks)
    base = len(half.pieces)
    pieces = list(half.pieces)
    for piece in kept.pieces:
        attrs = {**piece.attrs, **shared}
        name = piece.name
        if piece.parent < 0:
            attrs["engine.name"], name = piece.name, KV_SENDER_SPAN
        pieces.append(replace(piece, name=name, attrs=attrs, events=list(piece.events),
                              parent=0 if piece.parent < 0 else base + piece.parent))
    return replace(half, pieces=pieces, context_parents=list(half.context_parents))


def _sender_order(sender: Request) -> tuple[int, int, int, int]:
    """A sender's (pipeline rank, TP rank, start, root row): its ranks are its threads',
    which SGLang copies onto the slices (``_NO_RANK`` where none is known)."""
    slices = [piece.attrs for piece in sender.pieces[1:]]
    pp = min((_rank(attrs, "pp_rank") for attrs in slices), default=_NO_RANK)
    tp = min((_rank(attrs, "tp_rank") for attrs in slices), default=_NO_RANK)
    return pp, tp, sender.start_ns, sender.root


def _place_event(pieces: list[Piece], event: dict, thread: int) -> None:
    """A thread span's event onto the innermost slice of that thread that holds its time,
    else onto the request root."""
    at = event["time_ns"]
    best, best_depth = 0, -1
    for position, piece in enumerate(pieces[1:], start=1):
        if piece.thread != thread or not piece.start_ns <= at <= piece.end_ns:
            continue
        depth, node = 0, position
        while pieces[node].parent > 0:
            node, depth = pieces[node].parent, depth + 1
        if depth > best_depth:
            best, best_depth = position, depth
    pieces[best].events.append(event)


@dataclass
class _Context:
    """What every request's reading shares: thread spans, carriers, hosts, stretches."""

    thread_of: np.ndarray
    carriers: dict[int, dict[str, Any]]
    hosts: dict[int, str]
    machines: dict[str, str]      # a host's machine, where known
    stretches: dict[int, dict[str, int]]

    def host_of(self, thread: int, default: str) -> str:
        return self.hosts.get(thread, default) or default


def _any_substring(column: pa.ChunkedArray, needles: tuple[str, ...]) -> np.ndarray:
    found = np.zeros(len(column), dtype=bool)
    for needle in needles:
        found |= pc.fill_null(pc.match_substring(column, needle), False).to_numpy(
            zero_copy_only=False)
    return found


def _parse_all(column: pa.ChunkedArray, kind: type) -> list[Any]:
    """Each JSON text of ``column`` as ``kind`` (an empty one where it is not): one parse
    of them all (the receiver writes each cell with ``json.dumps``, one value a cell), or
    one parse each when that does not give one value a cell."""
    texts = column.to_pylist()
    try:
        values = json.loads("[" + ",".join(t if isinstance(t, str) and t else "null"
                                            for t in texts) + "]")
    except (ValueError, RecursionError):
        values = []
    if len(values) != len(texts):
        values = [json_value(text, kind) for text in texts]
    return [value if isinstance(value, kind) else kind() for value in values]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _room(value: Any) -> int | None:
    """A bootstrap room as a number (SGLang writes hex text; older traces a number)."""
    if _is_int(value):
        number = value
    elif isinstance(value, str):
        try:
            number = int(value.strip(), 0)
        except ValueError:
            return None
    else:
        return None
    return number or None  # room 0: a request without PD


def _rank(attrs: dict, key: str) -> int:
    value = attrs.get(key)
    return int(value) if _is_int(value) else _NO_RANK


def _thread_label(attrs: dict, name: str) -> str:
    label = attrs.get("thread_label")
    return str(label) if isinstance(label, str) and label else _RANK_SUFFIX.sub("", name)


def _host(attrs: dict) -> str:
    host = attribute_text(attrs.get("host_id"))
    return host if host else ""


def _resource_host(rows: _Rows, i: int) -> str:
    resource = json_value(rows.table["resource"][i].as_py(), dict)
    for key in ("host.name", "host.id", "service.instance.id"):
        if attribute_text(resource.get(key)):
            return str(resource[key])
    service = rows.table["service"][i].as_py()
    return str(service or "engine")
