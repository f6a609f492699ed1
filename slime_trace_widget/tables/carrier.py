"""One pass over the raw records of every trace carrier, into flat columns.

This is the only place that touches record dicts one by one; everything after
it (depth, clipping, lanes, PD lanes, DataFrames) is vectorised in ``frames``.
It reads records as slime's viewer does: an end pairs with the earliest
unpaired start of its ``span_id`` (even one recorded later); a start or event
without a parent (none, or ``""``) takes the most recently started open span that
began no later; a named parent is the span of that id open when the record is read,
else the latest one recorded before it, else (named before it started) the first
one recorded; a record without ``attempt`` takes its carrier's; unmatched ends
become ``unmatched_end`` events; links to unknown ids count as ``unknown_parent``
and links that would close a cycle are cut. Unreadable
records are skipped and counted by kind, and the cost stays linear however a
file is crafted (:data:`PARENT_SCAN`, a union-find for late parents).
"""

from __future__ import annotations

from collections import Counter, OrderedDict, defaultdict, deque
from dataclasses import dataclass, field
from itertools import islice, repeat
from typing import Any

from ..schema import (
    EVENT,
    MAX_ATTEMPT,
    RECORD_ATTEMPT,
    RECORD_ATTRS,
    RECORD_NAME,
    RECORD_PARENT_SPAN_ID,
    RECORD_SPAN_ID,
    RECORD_TS,
    RECORD_TYPE,
    SPAN_END,
    SPAN_START,
)
from ..values import bounded_int, short_text

try:  # compiled where the package was built with a C compiler (see hatch_build.py)
    from . import _native_records
except ImportError:
    _native_records = None

#: The instant-event record type (the name this module has always used).
INSTANT = EVENT

#: Timestamps are kept only strictly inside ``±TS_LIMIT``: one test rejects NaN
#: (comparisons fail), inf and values float32 offsets could not hold.
TS_LIMIT = 1e15

#: Open spans parent inference looks back through. A real carrier finds the
#: parent at the first or second; a crafted one (thousands of open spans that
#: all begin after the record) would make every record scan all of them.
PARENT_SCAN = 256

#: Longest text kept for a name or id that was not a string.
_TEXT_LIMIT = 1000

# An end seen before any start of its id: (span_id, name, ts, attempt, attrs, parent_id).
_EarlyEnd = tuple[str, str, float, int, "dict | None", "str | None"]

#: What the native pass reads of a record, and the record types, in its order.
_NATIVE_FIELDS = (RECORD_TYPE, RECORD_NAME, RECORD_TS, RECORD_ATTEMPT, RECORD_ATTRS,
                  RECORD_SPAN_ID, RECORD_PARENT_SPAN_ID)
_NATIVE_KINDS = (SPAN_START, SPAN_END, INSTANT)


@dataclass
class RecordColumns:
    """Column lists filled by :func:`read_carrier` (appending to lists is the
    cheapest way to build columns from a Python loop; transposing tuples costs more).

    Span columns have one entry per ``span_start``; ``end_*`` columns one entry
    per paired ``span_end`` with ``end_span`` the span index it closes; event
    columns one entry per instant event or unmatched end (``event_span_id`` is
    the orphan's span id, None for instant events).
    """

    span_row: list[int] = field(default_factory=list)
    span_name: list[str] = field(default_factory=list)
    span_start: list[float] = field(default_factory=list)
    span_id: list[str] = field(default_factory=list)
    span_parent_id: list[str | None] = field(default_factory=list)
    span_parent: list[int] = field(default_factory=list)
    span_attempt: list[int] = field(default_factory=list)
    span_attrs: list[dict | None] = field(default_factory=list)
    end_span: list[int] = field(default_factory=list)
    end_ts: list[float] = field(default_factory=list)
    end_attempt: list[int] = field(default_factory=list)
    end_attrs: list[dict | None] = field(default_factory=list)
    event_row: list[int] = field(default_factory=list)
    event_name: list[str] = field(default_factory=list)
    event_ts: list[float] = field(default_factory=list)
    event_attempt: list[int] = field(default_factory=list)
    event_parent_id: list[str | None] = field(default_factory=list)
    event_parent: list[int] = field(default_factory=list)
    event_span_id: list[str | None] = field(default_factory=list)
    event_attrs: list[dict | None] = field(default_factory=list)
    raw_records: int = 0
    warnings: Counter[str] = field(default_factory=Counter)

    def add_end(self, index: int, ts: float, attempt: int, attrs: dict | None) -> None:
        self.end_span.append(index)
        self.end_ts.append(ts)
        self.end_attempt.append(attempt)
        self.end_attrs.append(attrs)

    def add_event(self, row: int, name: str, ts: float, attempt: int, parent_id: str | None,
                  parent: int, span_id: str | None, attrs: dict | None) -> None:
        self.event_row.append(row)
        self.event_name.append(name)
        self.event_ts.append(ts)
        self.event_attempt.append(attempt)
        self.event_parent_id.append(parent_id)
        self.event_parent.append(parent)
        self.event_span_id.append(span_id)
        self.event_attrs.append(attrs)


def read_carrier(row: int, records: list, out: RecordColumns, carrier_attempt: int = 0) -> None:
    """Append the spans and events of one carrier's ``events`` list to ``out``.

    A record without ``attempt`` takes ``carrier_attempt`` (the carrier's own, as
    slime's viewer reads it).

    The native pass (``_native_records.c``, where the package was built with a C
    compiler) reads a carrier whose records are all plain, by the same rules, into
    the same columns (the tests compare the two on every fixture and on crafted
    carriers); it leaves any other carrier, whole, to the Python pass below. Records
    that are the standard library's dicts (:data:`RECORD_DICT_TYPES`) read as the
    plain dicts of their items, in either pass.
    """
    if _native_records is not None and type(records) is list:
        read = _read_native(records, out, carrier_attempt)
        if read is None:  # not all plain: the same pass, once stdlib dicts are plain ones
            plain = _with_plain_dicts(records)
            if plain is not records:
                records = plain
                read = _read_native(records, out, carrier_attempt)
        if read is not None:
            _append_native(row, len(records), read, out)
            return
    _read_carrier_in_python(row, records, out, carrier_attempt)


#: The ``dict`` subclasses a record may be (the standard library's, which the safe
#: loader can make; their records read as plain dicts with the same items).
RECORD_DICT_TYPES = frozenset({OrderedDict, defaultdict, Counter})


def _with_plain_dicts(records: list) -> list:
    """``records`` with each record of :data:`RECORD_DICT_TYPES` as a plain dict (a new
    list), or ``records`` itself when none is."""
    if not any(type(record) in RECORD_DICT_TYPES for record in records):
        return records
    return [dict(record) if type(record) in RECORD_DICT_TYPES else record
            for record in records]


def _read_native(records: list, out: RecordColumns, carrier_attempt: int) -> tuple | None:
    """What the native pass reads of ``records``, or None when one is not plain."""
    return _native_records.read_records(
        records, _NATIVE_FIELDS, _NATIVE_KINDS, (TS_LIMIT, MAX_ATTEMPT, PARENT_SCAN),
        len(out.span_row), len(out.event_row), carrier_attempt)


#: The columns the native pass returns first, in its order.
_NATIVE_COLUMNS = ("span_name", "span_start", "span_id", "span_parent_id", "span_parent",
                   "span_attempt", "span_attrs", "end_span", "end_ts", "end_attempt",
                   "end_attrs", "event_name", "event_ts", "event_attempt", "event_parent_id",
                   "event_parent", "event_attrs")


def _append_native(row: int, record_count: int, read: tuple, out: RecordColumns) -> None:
    """Append what the native pass read of one carrier, then resolve what only the
    whole carrier could (parents named before they started)."""
    columns, rest = read[:len(_NATIVE_COLUMNS)], read[len(_NATIVE_COLUMNS):]
    deferred, inferred, deferred_events, first_by_id, unknown_types = rest
    first_index, first_event = len(out.span_row), len(out.event_row)
    for name, values in zip(_NATIVE_COLUMNS, columns, strict=True):
        getattr(out, name).extend(values)
    out.span_row.extend(repeat(row, len(out.span_name) - first_index))
    out.event_row.extend(repeat(row, len(out.event_name) - first_event))
    out.event_span_id.extend(repeat(None, len(out.event_name) - first_event))
    out.raw_records += record_count
    if unknown_types:
        out.warnings["unknown_record_type"] += unknown_types
    _resolve_late_links(out, first_by_id, deferred, set(inferred), deferred_events, first_index)


def _read_carrier_in_python(row: int, records: list, out: RecordColumns,
                            carrier_attempt: int = 0) -> None:
    """:func:`read_carrier` by the Python pass: every carrier, plain or not."""
    warn = out.warnings
    add_row, add_name = out.span_row.append, out.span_name.append
    add_start, add_id = out.span_start.append, out.span_id.append
    add_parent_id, add_parent = out.span_parent_id.append, out.span_parent.append
    add_attempt, add_attrs = out.span_attempt.append, out.span_attrs.append
    add_event = out.add_event
    end_span, end_ts = out.end_span.append, out.end_ts.append
    end_attempt, end_attrs = out.end_attempt.append, out.end_attrs.append
    starts = out.span_start
    first_index = len(out.span_row)
    # Per-carrier state. ``open_ids``: spans started and not yet ended, in
    # recording order (parent inference, FIFO pairing); ``first_by_id``: parent
    # lookup; ``extra_starts``: later starts reusing an open id; ``last_by_id``: the
    # latest start recorded of each id, for a parent named after its span ended.
    open_ids: dict[str, int] = {}
    first_by_id: dict[str, int] = {}
    last_by_id: dict[str, int] = {}
    extra_starts: dict[str, deque[int]] = {}
    deferred: list[int] = []
    inferred: set[int] = set()
    deferred_events: list[int] = []
    early_ends: list[_EarlyEnd] = []
    index = first_index

    for record in records:
        if type(record) is not dict:
            if type(record) not in RECORD_DICT_TYPES:
                warn["record_not_a_dict"] += 1
                continue
            record = dict(record)
        get = record.get
        ts = get(RECORD_TS)
        if type(ts) is not float:
            ts = _coerce_ts(ts)
        if not -TS_LIMIT < ts < TS_LIMIT:  # type: ignore[operator]
            warn["bad_ts"] += 1
            continue
        name = get(RECORD_NAME)
        if type(name) is not str:
            name = _coerce_name(name, warn)
        attempt = get(RECORD_ATTEMPT, carrier_attempt)
        if type(attempt) is not int or not 0 <= attempt <= MAX_ATTEMPT:
            attempt = _coerce_attempt(attempt, warn)
        attrs = get(RECORD_ATTRS)
        if attrs is not None and (type(attrs) is not dict or not attrs):
            attrs = _read_attrs(attrs, warn)
        kind = get(RECORD_TYPE)
        if type(kind) is not str and not isinstance(kind, str):
            kind = None  # an array here would compare element-wise below

        if kind == SPAN_START:
            sid = get(RECORD_SPAN_ID)
            if type(sid) is not str:
                sid = _coerce_span_id(sid, row, index, warn)
            pid = get(RECORD_PARENT_SPAN_ID)
            if pid is None or (isinstance(pid, str) and not pid):  # "": no parent, as slime
                pid = None
                if open_ids:
                    pid = _infer_parent(open_ids, starts, ts)
                    if pid is not None:
                        inferred.add(index)
            elif type(pid) is not str:
                pid = short_text(pid, _TEXT_LIMIT)
            parent = _parent_now(pid, open_ids, last_by_id)
            if parent < 0 and pid is not None:
                deferred.append(index)
            if sid in first_by_id:
                warn["duplicate_span_id"] += 1
                if sid in open_ids:
                    extra_starts.setdefault(sid, deque()).append(index)
                else:
                    open_ids[sid] = index
            else:
                first_by_id[sid] = index
                open_ids[sid] = index
            last_by_id[sid] = index
            add_row(row)
            add_name(name)
            add_start(ts)
            add_id(sid)
            add_parent_id(pid)
            add_parent(parent)
            add_attempt(attempt)
            add_attrs(attrs)
            index += 1
        elif kind == SPAN_END:
            sid = get(RECORD_SPAN_ID)
            if type(sid) is not str:
                sid = _end_span_id(sid, row, len(early_ends), warn)
            start_index = open_ids.pop(sid, -1)
            if start_index >= 0:
                end_span(start_index)
                end_ts(ts)
                end_attempt(attempt)
                end_attrs(attrs)
                waiting = extra_starts.get(sid)
                if waiting:
                    open_ids[sid] = waiting.popleft()
            else:
                pid = get(RECORD_PARENT_SPAN_ID)
                if isinstance(pid, str) and not pid:
                    pid = None
                if pid is None and open_ids:
                    pid = _infer_parent(open_ids, starts, ts)
                elif pid is not None and type(pid) is not str:
                    pid = short_text(pid, _TEXT_LIMIT)
                early_ends.append((sid, name, ts, attempt, attrs, pid))
        elif kind == INSTANT:
            pid = get(RECORD_PARENT_SPAN_ID)
            if pid is None or (isinstance(pid, str) and not pid):
                pid = None
                if open_ids:
                    pid = _infer_parent(open_ids, starts, ts)
                parent = _parent_now(pid, open_ids, last_by_id)
            else:
                if type(pid) is not str:
                    pid = short_text(pid, _TEXT_LIMIT)
                parent = _parent_now(pid, open_ids, last_by_id)
                if parent < 0:
                    deferred_events.append(len(out.event_row))
            add_event(row, name, ts, attempt, pid, parent, None, attrs)
        else:
            warn["unknown_record_type"] += 1

    out.raw_records += len(records)
    _pair_early_ends(out, row, open_ids, extra_starts, first_by_id, early_ends, deferred_events)
    _resolve_late_links(out, first_by_id, deferred, inferred, deferred_events, first_index)


def _parent_now(pid: str | None, open_ids: dict[str, int], last_by_id: dict[str, int]) -> int:
    """The span a record read now names by ``pid``: the span of that id open now,
    else the latest one recorded with that id, else -1 (none has started yet: the
    link is resolved once the carrier is read). Only a reused id makes these differ
    from the id's first span."""
    if pid is None:
        return -1
    index = open_ids.get(pid, -1)
    return index if index >= 0 else last_by_id.get(pid, -1)


def _infer_parent(open_ids: dict[str, int], starts: list[float], ts: float) -> str | None:
    """The most recently started open span that began at or before ``ts``.

    Recording order alone would adopt a span that starts later in a carrier
    whose records were shuffled; requiring the parent to have begun keeps the
    picture truthful there and costs one comparison in the common case. Only
    the last :data:`PARENT_SCAN` open spans are considered, so the cost per
    record is bounded.
    """
    for sid in islice(reversed(open_ids), PARENT_SCAN):
        if starts[open_ids[sid]] <= ts:
            return sid
    return None


def _pair_early_ends(
    out: RecordColumns,
    row: int,
    open_ids: dict[str, int],
    extra_starts: dict[str, deque[int]],
    first_by_id: dict[str, int],
    early_ends: list[_EarlyEnd],
    deferred_events: list[int],
) -> None:
    """Pair ends recorded before their start; the rest become unmatched-end events."""
    for sid, name, ts, attempt, attrs, parent_id in early_ends:
        index = open_ids.pop(sid, -1)
        if index >= 0:
            out.add_end(index, ts, attempt, attrs)
            waiting = extra_starts.get(sid)
            if waiting:
                open_ids[sid] = waiting.popleft()
            out.warnings["end_recorded_before_start"] += 1
            continue
        if sid in first_by_id:
            out.warnings["duplicate_span_end"] += 1
            continue
        deferred_events.append(len(out.event_row))
        out.add_event(row, name, ts, attempt, parent_id, -1, sid, attrs)


def _resolve_late_links(out: RecordColumns, first_by_id: dict[str, int], deferred: list[int],
                        inferred: set[int], deferred_events: list[int], first_index: int) -> None:
    """Once a carrier is read: the parents of spans and events (``deferred_events``,
    positions among all events) that were named before they started."""
    _resolve_deferred_parents(out, first_by_id, deferred, inferred, first_index)
    for position in deferred_events:
        out.event_parent[position] = first_by_id.get(out.event_parent_id[position], -1)


def _resolve_deferred_parents(
    out: RecordColumns, first_by_id: dict[str, int], deferred: list[int], inferred: set[int],
    first_index: int,
) -> None:
    """Resolve parents named before they started; break any cycle that closes.

    A cycle is broken at an *inferred* link when it has one (recorded data
    beats a guess), else at the link being resolved. A deferred span is still
    a root when its link is resolved, so the link closes a cycle exactly when
    the parent is already in its tree; :class:`_Trees` answers that without
    walking the chain, which made a crafted carrier quadratic.
    """
    if not deferred:
        return
    parents = out.span_parent
    trees = _Trees(parents, first_index)
    for index in deferred:
        parent = first_by_id.get(out.span_parent_id[index], -1)  # type: ignore[arg-type]
        if parent < 0:
            out.warnings["unknown_parent"] += 1
            continue
        parents[index] = parent
        if not trees.join(index, parent):
            out.warnings["parent_cycle"] += 1
            cycle = _cycle_from(parents, index)
            guessed = [node for node in cycle if node in inferred]
            cut = guessed[0] if guessed else index
            parents[cut] = -1
            if guessed:
                out.span_parent_id[cut] = None


class _Trees:
    """Union-find over one carrier's spans: which spans hang in the same tree.

    Cutting a cycle never splits a tree (the cycle's nodes and everything
    below them stay connected under the cut node), so sets only ever merge.
    """

    def __init__(self, parents: list[int], first_index: int) -> None:
        self._offset = first_index
        self._up = list(range(len(parents) - first_index))
        for child in range(first_index, len(parents)):
            if parents[child] >= 0:
                self.join(child, parents[child])

    def _root(self, node: int) -> int:
        up = self._up
        node -= self._offset
        while up[node] != node:
            up[node] = up[up[node]]  # path halving keeps later lookups short
            node = up[node]
        return node

    def join(self, child: int, parent: int) -> bool:
        """Merge the two trees; False when they already were one (a cycle closes)."""
        child_root, parent_root = self._root(child), self._root(parent)
        if child_root == parent_root:
            return False
        self._up[child_root] = parent_root
        return True


def _cycle_from(parents: list[int], start: int) -> list[int]:
    """The nodes of the parent cycle through ``start``, starting there.

    Only called when a cycle is known to exist; each span is on at most one
    such cycle, so these walks add up to the carrier's size.
    """
    cycle = [start]
    node = parents[start]
    while node != start:
        cycle.append(node)
        node = parents[node]
    return cycle


def _coerce_ts(value: Any) -> float:
    """Accept ints and numpy numbers; anything else (str, None, bool) is unreadable."""
    if value is None or isinstance(value, (bool, str, bytes)):
        return float("nan")
    try:
        return float(value)
    except Exception:  # any object a damaged record holds (tensors of many elements raise too)
        return float("nan")


def _coerce_name(value: Any, warn: Counter[str]) -> str:
    warn["bad_name"] += 1
    return "<unnamed>" if value is None else short_text(value, _TEXT_LIMIT)


def _coerce_attempt(value: Any, warn: Counter[str]) -> int:
    attempt = bounded_int(value, 0, MAX_ATTEMPT)
    if attempt is None:
        warn["bad_attempt"] += 1
        return 0
    return attempt


def _coerce_span_id(value: Any, row: int, index: int, warn: Counter[str]) -> str:
    if value is None:
        warn["span_start_without_id"] += 1
        return f"~missing-{row}-{index}"
    return short_text(value, _TEXT_LIMIT)


def _end_span_id(value: Any, row: int, position: int, warn: Counter[str]) -> str:
    """The id an end record names. An end without one (the ``position``-th end of its
    carrier not yet paired) closes nothing: it gets an id of the form a start without
    one gets, where the text "None" closed a span recorded with that id."""
    if value is None:
        warn["span_end_without_id"] += 1
        return f"~missing-end-{row}-{position}"
    return short_text(value, _TEXT_LIMIT)


def _read_attrs(attrs: Any, warn: Counter[str]) -> dict | None:
    """Empty dicts read as "no attrs"; non-dicts are dropped and counted."""
    if type(attrs) is dict or isinstance(attrs, dict):
        return dict(attrs) if attrs else None
    warn["attrs_not_a_dict"] += 1
    return None
