"""Join the engines' request traces into the frames: each request under the span that made it.

SGLang traces a request as a request root (``rid`` attribute; "prefill Req …" and
"decode Req …" under PD, each from its own server) over one span per server
thread (``tp_rank``, ``host_id``, ``pid``) over the work itself, the *slices*
(``prefill_waiting``, ``prefill_forward``, ``decode_loop``, ``decode_bootstrap``
…), whose events say when a batch ran (``schedule``) or the request was put back
(``retract``). A request belongs to the generation span whose
``sglang_request_id`` is its ``rid`` (whole, or the part after a worker prefix
``<worker>_``), or to the dump span whose W3C context it carried
(:func:`schema.w3c_span_id`). A ``rid`` that names two generation spans names
none: a request is never attached to a sample it might not belong to.

Attached, a request root becomes a span under the generation span (named by its
role, ``sglang prefill request``; its own name kept in ``engine.name``) and the
slices spans under it, keeping their nesting; a thread span is not drawn, its
attributes go onto its slices. Every such span and event has ``origin ==
"engine"``.

Engine hosts keep their own clocks. The engine's work on a request lies inside
the generation span that waited for it, so each request bounds its host's skew
``d`` (engine time + d = dump time): ``start(gen) - first(engine) <= d <= end(gen)
- last(engine)``; all of a host's requests narrow it to ``[low, high]``. Every
engine host receives its requests as they are sent, so ``low`` is tight; only the
host that answers (the decode server under PD) has a tight ``high`` too. The
narrowest host's window is twice the network's one-way time, so each host's skew
is its ``low`` plus that time (within its window); a host whose requests disagree
(a request cut short on the client's side, for instance) takes the median of their
``low`` instead. ``frames.engine_skew`` reports each host's.
Requests no span made are listed in ``frames.engine_unmatched``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from ..schema import w3c_span_id, w3c_trace_id
from .attr_columns import AttrTable
from .build import event_placement, row_counts
from .model import ORIGINS, TraceFrames
from .pd_lanes import LANE_SUFFIX
from .span_geometry import ENGINE_LANE_KINDS, span_lanes

REQUEST_ID_ATTR = "sglang_request_id"
RID_ATTR = "rid"
#: Attributes that mark a span as one server thread's share of a request.
THREAD_KEYS = ("thread_label", "host_id", "pid", "tp_rank", "dp_rank")
ROLES = ("prefill", "decode")
#: The span a request root becomes, by its role ("" without PD).
REQUEST_SPAN_NAMES = {"": "sglang request", "prefill": "sglang prefill request",
                      "decode": "sglang decode request"}
ENGINE_ORIGIN = ORIGINS.index("engine")
SKEW_COLUMNS = ["host", "skew", "requests", "low", "high", "consistent"]
UNMATCHED_COLUMNS = ["rid", "trace_id", "span_id", "name", "host", "start", "end", "spans"]
_AMBIGUOUS = -2


def join_engine(frames: TraceFrames, engine: pd.DataFrame) -> TraceFrames:
    """``frames`` with the requests of ``engine`` (``load_engine_traces``) attached."""
    spans = engine.drop_duplicates(["trace_id", "span_id"]).reset_index(drop=True)
    core = frames.span_core
    if "origin" in core.columns and (core["origin"] == "engine").any():
        # frames that already hold engine spans (a dataset converted with them): those
        # requests are not attached twice
        present = set(core.loc[(core["origin"] == "engine").to_numpy(), "span_id"])
        spans = spans[~spans["span_id"].isin(present)].reset_index(drop=True)
    tree = _EngineTree(spans)
    owners = _match(frames, tree)
    attached = [part for part in tree.parts if owners.get(part, -1) >= 0]
    columns = _Spans(frames)
    skew = _skews(columns, tree, {part: owners[part] for part in attached})
    shift = dict(zip(skew["host"], skew["skew"], strict=True))
    unmatched = _unmatched(tree, [part for part in tree.parts if owners.get(part, -1) < 0])
    if not attached:
        return replace(frames, engine_skew=skew, engine_unmatched=unmatched)
    built = _Built()
    for part in sorted(attached, key=lambda p: (owners[p], tree.start_ns[p])):
        _attach_part(columns, tree, part, owners[part], shift, built)
    joined = _append(frames, built)
    return replace(joined, engine_skew=skew, engine_unmatched=unmatched)


class _EngineTree:
    """The engine spans' structure: parents, request roots, threads, hosts."""

    def __init__(self, spans: pd.DataFrame) -> None:
        n = len(spans)
        self.start_ns = spans["start_ns"].to_numpy(dtype=np.int64)
        self.end_ns = spans["end_ns"].to_numpy(dtype=np.int64)
        self.attrs: list[dict] = [a if isinstance(a, dict) else {} for a in spans["attributes"]]
        self.names: list[str] = [str(name) for name in spans["name"].tolist()]
        self.span_ids: list[str] = [str(span_id) for span_id in spans["span_id"].tolist()]
        self.trace_ids: list[str] = [str(trace) for trace in spans["trace_id"].tolist()]
        self.parent_ids: list[Any] = spans["parent_id"].tolist()
        self.events: list[Any] = spans["events"].tolist()
        self.services: list[Any] = spans["service"].tolist()
        keys = (spans["trace_id"].astype(str) + ":" + spans["span_id"].astype(str)).to_numpy()
        position = pd.Series(np.arange(n), index=keys)
        parent_ids = spans["parent_id"].where(spans["parent_id"].notna(), "").astype(str)
        parent_keys = (spans["trace_id"].astype(str) + ":" + parent_ids).to_numpy()
        self.parent = position.reindex(parent_keys).fillna(-1).to_numpy(dtype=np.int64)
        self.rid = [_text(a.get(RID_ATTR)) for a in self.attrs]
        self.is_root = np.array([r is not None for r in self.rid], dtype=bool)
        self.is_thread = np.array(
            [not self.is_root[i] and self.parent[i] >= 0 and self.is_root[self.parent[i]]
             and any(k in self.attrs[i] for k in THREAD_KEYS) for i in range(n)], dtype=bool)
        self.owner = self._nearest(self.is_root)
        self.thread = self._nearest(self.is_thread, stop=self.is_root)
        resources = [r if isinstance(r, dict) else {} for r in spans["resource"]]
        self.host = [self._host(i, resources[i]) for i in range(n)]
        self.parts = [int(i) for i in np.flatnonzero(self.is_root)]
        self.members: dict[int, list[int]] = {part: [] for part in self.parts}
        for i in np.flatnonzero((self.owner >= 0) & ~self.is_root & ~self.is_thread):
            self.members[int(self.owner[i])].append(int(i))
        self.part_host = {part: self._part_host(part) for part in self.parts}

    def _nearest(self, mark: np.ndarray, stop: np.ndarray | None = None) -> np.ndarray:
        """Each span's nearest ancestor-or-self with ``mark`` (-1: none, or a ``stop`` first)."""
        found = np.where(mark, np.arange(len(mark)), -1)
        cursor = self.parent.copy()
        for _ in range(256):  # deeper than any engine trace; a parent cycle ends here too
            open_ = (found < 0) & (cursor >= 0)
            if not open_.any():
                break
            at = cursor[open_]
            hit = mark[at]
            blocked = stop[at] if stop is not None else np.zeros(len(at), dtype=bool)
            chosen = np.where(hit, at, -1)
            found[open_] = chosen
            cursor[open_] = np.where(hit | blocked, -1, self.parent[at])
        return found

    def _host(self, i: int, resource: dict) -> str:
        thread = self.thread[i] if self.thread[i] >= 0 else (i if self.is_thread[i] else -1)
        for attrs in ((self.attrs[thread],) if thread >= 0 else ()) + (self.attrs[i],):
            if _text(attrs.get("host_id")):
                return str(attrs["host_id"])
        for key in ("host.name", "host.id", "service.instance.id"):
            if _text(resource.get(key)):
                return str(resource[key])
        return str(self.services[i] or "engine")

    def _part_host(self, part: int) -> str:
        hosts = Counter(self.host[i] for i in self.members[part])
        return hosts.most_common(1)[0][0] if hosts else self.host[part]

    def role(self, part: int) -> str:
        word = self.names[part].split(" ", 1)[0].lower()
        return word if word in ROLES else ""

    def top(self, part: int) -> int:
        """The outermost engine span above a request root (its trace's root here)."""
        node, seen = part, 0
        while self.parent[node] >= 0 and seen < 256:
            node, seen = int(self.parent[node]), seen + 1
        return node


def _text(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (str, int)):
        text = str(value)
        return text or None
    return None


# --------------------------------------------------------------------------- matching


def _match(frames: TraceFrames, tree: _EngineTree) -> dict[int, int]:
    """Request root -> the span index it belongs to (-1: none, or ambiguous)."""
    owners: dict[int, int] = {}
    by_context = _context_owners(frames, tree)
    whole, tail = _request_ids(frames)
    for part in tree.parts:
        if part in by_context:
            owners[part] = by_context[part]
            continue
        rid = str(tree.rid[part])
        owner = -1
        for key in dict.fromkeys((rid, rid.rsplit("_", 1)[-1])):
            for table in (whole, tail):
                hit = table.get(key, -1)
                if hit != -1:
                    owner = hit
                    break
            if owner != -1:
                break
        owners[part] = owner if owner >= 0 else -1
    return owners


def _request_ids(frames: TraceFrames) -> tuple[dict[str, int], dict[str, int]]:
    """Generation spans by whole ``sglang_request_id`` and by its part after the last ``_``
    (:data:`_AMBIGUOUS` where two spans share one)."""
    values = attr_values(frames, REQUEST_ID_ATTR)
    whole: dict[str, int] = {}
    tail: dict[str, int] = {}
    for index, value in values.items():
        text = _text(value)
        if text is None:
            continue
        for table, key in ((whole, text), (tail, text.rsplit("_", 1)[-1] if "_" in text else None)):
            if key is None:
                continue
            table[key] = index if table.get(key, index) == index else _AMBIGUOUS
    return whole, tail


def attr_values(frames: TraceFrames, key: str) -> dict[int, Any]:
    """Span index -> the value of attribute ``key`` (end value, else start value)."""
    out: dict[int, Any] = {}
    index = frames.span_core.index.to_numpy()
    for table in (frames.span_start_attrs, frames.span_end_attrs):
        if key not in table.keys:
            continue
        column = table.column(key).to_pylist()
        for position, value in enumerate(column):
            if value is not None:
                out[int(index[position])] = value
    return out


def _context_owners(frames: TraceFrames, tree: _EngineTree) -> dict[int, int]:
    """Request roots whose trace nests under a dump span by W3C context."""
    wanted: dict[str, list[int]] = {}
    for part in tree.parts:
        top = tree.top(part)
        parent_id = tree.parent_ids[top]
        if isinstance(parent_id, str) and parent_id:
            wanted.setdefault(f"{tree.trace_ids[top]}:{parent_id}", []).append(part)
    if not wanted:
        return {}
    core = frames.span_core
    real = core[~core["virtual"].to_numpy()]
    trace_of_row = frames.samples["trace_id"].reindex(real["sample_row"]).to_numpy()
    owners: dict[int, int] = {}
    for index, trace_id, span_id in zip(real.index, trace_of_row, real["span_id"], strict=True):
        if trace_id is None or span_id is None:
            continue
        parts = wanted.get(f"{w3c_trace_id(trace_id)}:{w3c_span_id(span_id)}")
        for part in parts or ():
            owners[part] = int(index)
    return owners


# --------------------------------------------------------------------------- skew


def _skews(spans: _Spans, tree: _EngineTree, owners: dict[int, int]) -> pd.DataFrame:
    """Per engine host, the shift into the dump's clock and what bounded it."""
    bounds: dict[str, list[tuple[float, float]]] = {}
    for part, owner in owners.items():
        gen_start = float(spans.start[spans.position[owner]])
        gen_end = float(spans.display_end[spans.position[owner]])
        by_host: dict[str, list[int]] = {}
        for i in [part, *tree.members[part]]:
            by_host.setdefault(tree.host[i] if i != part else tree.part_host[part], []).append(i)
        for host, members in by_host.items():
            first = min(int(tree.start_ns[i]) for i in members) / 1e9
            last = max(int(tree.end_ns[i]) for i in members) / 1e9
            bounds.setdefault(host, []).append((gen_start - first, gen_end - last))
    spans = {host: (max(lo for lo, _ in pairs), min(hi for _, hi in pairs))
             for host, pairs in bounds.items()}
    widths = [high - low for low, high in spans.values() if low <= high]
    latency = min(widths) / 2 if widths else 0.0
    rows = []
    for host, pairs in sorted(bounds.items()):
        low, high = spans[host]
        consistent = low <= high
        if consistent:
            skew = low + min(latency, (high - low) / 2)
        else:
            skew = float(np.median([lo for lo, _ in pairs])) + latency
        rows.append((host, skew, len(pairs), low, high, consistent))
    return pd.DataFrame(rows, columns=SKEW_COLUMNS).astype(
        {"host": object, "skew": float, "requests": int, "low": float, "high": float,
         "consistent": bool})


def _unmatched(tree: _EngineTree, parts: list[int]) -> pd.DataFrame:
    rows = [(tree.rid[p], tree.trace_ids[p], tree.span_ids[p], tree.names[p],
             tree.part_host[p], tree.start_ns[p] / 1e9, tree.end_ns[p] / 1e9,
             1 + len(tree.members[p])) for p in parts]
    return pd.DataFrame(rows, columns=UNMATCHED_COLUMNS)


# --------------------------------------------------------------------------- attaching


class _Built:
    """The new spans and events, column by column, before they join the frames."""

    def __init__(self) -> None:
        self.spans: dict[str, list] = {name: [] for name in (
            "sample_row", "span_id", "parent_span_id", "parent", "name", "start", "end",
            "depth", "attempt", "lane_kind")}
        self.span_attrs: list[dict | None] = []
        self.events: dict[str, list] = {name: [] for name in (
            "sample_row", "name", "ts", "attempt", "parent_span_id", "parent")}
        self.event_attrs: list[dict | None] = []


class _Spans:
    """The frames' span columns the join reads span by span, as plain arrays."""

    def __init__(self, frames: TraceFrames) -> None:
        core = frames.span_core
        self.count = len(core)
        self.position = dict(zip(core.index.tolist(), range(len(core)), strict=True))
        self.sample_row = core["sample_row"].to_numpy()
        self.attempt = core["attempt"].to_numpy()
        self.depth = core["depth"].to_numpy()
        self.span_id = core["span_id"].to_numpy(dtype=object)
        self.start = core["start"].to_numpy()
        self.display_end = core["display_end"].to_numpy()


def _attach_part(frames_spans: _Spans, tree: _EngineTree, part: int, owner: int,
                 shift: dict[str, float], built: _Built) -> None:
    """Append one request root and its slices (parents first) to ``built``."""
    base = frames_spans.count
    at = frames_spans.position[owner]
    row = int(frames_spans.sample_row[at])
    attempt = int(frames_spans.attempt[at])
    role = tree.role(part)
    kind = ENGINE_LANE_KINDS.get(role, 0)
    new_index: dict[int, int] = {}
    slices = sorted(tree.members[part], key=lambda i: (_depth_below(tree, i, part),
                                                       tree.start_ns[i]))
    for i in [part, *slices]:
        if i == part:
            parent, parent_id = owner, str(frames_spans.span_id[at])
            depth = int(frames_spans.depth[at]) + 1
            name = REQUEST_SPAN_NAMES[role]
            attrs = {**tree.attrs[i], "engine.name": tree.names[i]}
            host = tree.part_host[part]
        else:
            above = _drawn_parent(tree, i, part)
            parent = new_index[above]
            parent_id = tree.span_ids[above]
            depth = built.spans["depth"][parent - base] + 1
            name = tree.names[i]
            thread = int(tree.thread[i])
            attrs = {**(tree.attrs[thread] if thread >= 0 else {}), **tree.attrs[i]}
            host = tree.host[i]
        attrs.setdefault(RID_ATTR, tree.rid[part])
        attrs["engine.host"] = host
        offset = shift.get(host, 0.0)
        new_index[i] = base + len(built.span_attrs)
        built.spans["sample_row"].append(row)
        built.spans["span_id"].append(tree.span_ids[i])
        built.spans["parent_span_id"].append(parent_id)
        built.spans["parent"].append(parent)
        built.spans["name"].append(name)
        built.spans["start"].append(tree.start_ns[i] / 1e9 + offset)
        built.spans["end"].append(tree.end_ns[i] / 1e9 + offset)
        built.spans["depth"].append(depth)
        built.spans["attempt"].append(attempt)
        built.spans["lane_kind"].append(kind)
        built.span_attrs.append(attrs)
        events = tree.events[i]
        for event in events if isinstance(events, list) else ():
            if not isinstance(event, dict) or not isinstance(event.get("time_ns"), int):
                continue
            built.events["sample_row"].append(row)
            built.events["name"].append(str(event.get("name", "")))
            built.events["ts"].append(event["time_ns"] / 1e9 + offset)
            built.events["attempt"].append(attempt)
            built.events["parent_span_id"].append(tree.span_ids[i])
            built.events["parent"].append(new_index[i])
            event_attrs = event.get("attributes")
            built.event_attrs.append(event_attrs if isinstance(event_attrs, dict) and event_attrs
                                     else None)


def _drawn_parent(tree: _EngineTree, i: int, part: int) -> int:
    """The nearest ancestor of slice ``i`` that is drawn: a slice, else the request root."""
    node = int(tree.parent[i])
    while node >= 0 and node != part and tree.is_thread[node]:
        node = int(tree.parent[node])
    return node if node >= 0 else part


def _depth_below(tree: _EngineTree, i: int, part: int) -> int:
    depth, node = 0, i
    while node >= 0 and node != part and depth < 256:
        node = int(tree.parent[node])
        depth += 1
    return depth


def _append(frames: TraceFrames, built: _Built) -> TraceFrames:
    """The frames with ``built``'s spans and events added: lanes, counts and attributes
    recomputed for the rows that changed shape."""
    core = frames.span_core
    added = pd.DataFrame(built.spans)
    n_new = len(added)
    index = pd.RangeIndex(len(core), len(core) + n_new)
    parent_names = core["name"].astype(object).to_numpy()
    new_names = added["name"].to_numpy(dtype=object)
    parent_name = [parent_names[p] if p < len(core) else new_names[p - len(core)]
                   for p in added["parent"]]
    new_core = pd.DataFrame({
        "sample_row": added["sample_row"].to_numpy(dtype=np.int64),
        "span_id": added["span_id"].to_numpy(dtype=object),
        "parent_span_id": added["parent_span_id"].to_numpy(dtype=object),
        "parent_index": added["parent"].to_numpy(dtype=np.int64),
        "parent_name": pd.Categorical(parent_name),
        "name": pd.Categorical(new_names),
        "start": added["start"].to_numpy(dtype=np.float64),
        "end": added["end"].to_numpy(dtype=np.float64),
        "display_end": added["end"].to_numpy(dtype=np.float64),
        "duration": (added["end"] - added["start"]).to_numpy(dtype=np.float64),
        "state": pd.Categorical(["closed"] * n_new, categories=core["state"].cat.categories),
        "clip_reason": pd.Categorical([None] * n_new,
                                      categories=core["clip_reason"].cat.categories),
        "depth": added["depth"].to_numpy(dtype=np.int32),
        "lane": np.zeros(n_new, dtype=np.int32),
        "attempt": added["attempt"].to_numpy(dtype=np.int32),
        "end_attempt": added["attempt"].to_numpy(dtype=np.int32),
        "virtual": np.zeros(n_new, dtype=bool),
        "pd_detail": np.zeros(n_new, dtype=bool),
        "pd_form": pd.Categorical([None] * n_new, categories=core["pd_form"].cat.categories),
        "error": np.zeros(n_new, dtype=bool),
        "origin": pd.Categorical.from_codes(np.full(n_new, ENGINE_ORIGIN, dtype=np.int8),
                                            categories=ORIGINS),
    }, index=index)
    spans = pd.concat([core, new_core[core.columns]])
    spans["name"] = _extended(core["name"].array, new_names)
    codes = np.asarray(spans["name"].array.codes)
    parents = spans["parent_index"].to_numpy()
    spans["parent_name"] = pd.Categorical.from_codes(
        np.where(parents >= 0, codes[np.maximum(parents, 0)], -1), dtype=spans["name"].dtype)
    kinds = _lane_kinds(core, added["lane_kind"].to_numpy(dtype=np.int64))
    spans["lane"] = span_lanes(
        spans["sample_row"].to_numpy(), spans["depth"].to_numpy().astype(np.int64),
        spans["parent_index"].to_numpy(), spans["name"].array, spans["pd_detail"].to_numpy(),
        kinds).astype(np.int32)
    events = _events(frames, built, spans)
    warnings = Counter(frames.warnings)
    return replace(
        frames,
        samples=_recount(frames.samples, spans, events),
        span_core=spans,
        event_core=events,
        span_start_attrs=AttrTable.concat([frames.span_start_attrs,
                                           AttrTable.from_dicts([None] * n_new)]),
        span_end_attrs=AttrTable.concat([frames.span_end_attrs,
                                         AttrTable.from_dicts(built.span_attrs, warnings)]),
        event_attrs=AttrTable.concat([frames.event_attrs,
                                      AttrTable.from_dicts(built.event_attrs, warnings)]),
        warnings=warnings,
        _spans=None,
        _events=None,
    )


def _lane_kinds(core: pd.DataFrame, engine_kinds: np.ndarray) -> np.ndarray:
    """The lane kind of every span: 0 real, 1/2 virtual [P]/[D], engine roles their own."""
    names = core["name"].astype(str)
    virtual = core["virtual"].to_numpy()
    kinds = np.zeros(len(core), dtype=np.int64)
    kinds[virtual & names.str.endswith(LANE_SUFFIX["prefill"]).to_numpy()] = 1
    kinds[virtual & names.str.endswith(LANE_SUFFIX["decode"]).to_numpy()] = 2
    return np.concatenate([kinds, engine_kinds])


def _events(frames: TraceFrames, built: _Built, spans: pd.DataFrame) -> pd.DataFrame:
    """The events table with the engine's events after the dump's; every event's lane and
    depth read again from its parent span (lanes of a row may have moved)."""
    core = frames.event_core
    added = pd.DataFrame(built.events)
    n_new = len(added)
    new = pd.DataFrame({
        "sample_row": added["sample_row"].to_numpy(dtype=np.int64),
        "name": pd.Categorical(added["name"].to_numpy(dtype=object)),
        "ts": added["ts"].to_numpy(dtype=np.float64),
        "attempt": added["attempt"].to_numpy(dtype=np.int32),
        "parent_span_id": added["parent_span_id"].to_numpy(dtype=object),
        "parent_index": added["parent"].to_numpy(dtype=np.int64),
        "parent_name": pd.Categorical([None] * n_new),
        "kind": pd.Categorical(["instant"] * n_new, categories=core["kind"].cat.categories),
        "span_id": np.full(n_new, None, dtype=object),
        "depth": np.zeros(n_new, dtype=np.int32),
        "lane": np.zeros(n_new, dtype=np.int32),
        "origin": pd.Categorical.from_codes(np.full(n_new, ENGINE_ORIGIN, dtype=np.int8),
                                            categories=ORIGINS),
    }, index=pd.RangeIndex(len(core), len(core) + n_new))
    events = pd.concat([core, new[core.columns]])
    events["name"] = _extended(core["name"].array, added["name"].to_numpy(dtype=object))
    span_names: pd.Categorical = spans["name"].array  # type: ignore[assignment]
    parent_codes, depth, lane = event_placement(
        events["parent_index"].to_numpy(), np.asarray(span_names.codes),
        spans["depth"].to_numpy(), spans["lane"].to_numpy())
    events["parent_name"] = pd.Categorical.from_codes(parent_codes, dtype=span_names.dtype)
    events["depth"], events["lane"] = depth, lane
    return events


def _extended(existing: pd.Categorical, values: np.ndarray) -> pd.Categorical:
    """``existing`` followed by ``values``: the categories kept in their order (as the
    build made them), new names appended."""
    known = existing.categories
    extra = pd.Index(pd.unique(values), dtype=object).difference(known, sort=False)
    categories = known.append(extra) if len(extra) else known
    codes = np.concatenate([np.asarray(existing.codes, dtype=np.int64),
                            categories.get_indexer(values)])
    return pd.Categorical.from_codes(codes, categories=pd.Index(categories, dtype=object))


def _recount(samples: pd.DataFrame, spans: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """The per-sample counts that depend on spans and events, computed again."""
    counts = row_counts(
        len(samples), spans["sample_row"].to_numpy(), spans["virtual"].to_numpy(),
        (spans["state"] == "open").to_numpy(), spans["lane"].to_numpy(),
        events["sample_row"].to_numpy(), (events["kind"] == "unmatched_end").to_numpy())
    return samples.assign(**counts)
