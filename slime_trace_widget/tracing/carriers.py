"""Carriers and handles: binding a sample to its trace, and the per-context scope of open spans.

A handle points at one carrier dict; every record is written through one. A
trace is told apart by its id *and* its carrier object, because ``copy.deepcopy``
of a bound sample (how slime fans a prompt out into a group) gives carriers that
share a ``trace_id``. A copy taken while a span of its trace is open holds that
span's start, so it nests under that span as the original does. Open spans live
in one ``ContextVar`` holding a chain of scopes, so each asyncio task and thread
sees its own parents. A record is
written into a carrier here too (``_write``), through the handle that points at it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from ..schema import (
    CARRIER_ATTEMPT,
    CARRIER_EVENTS,
    CARRIER_GROUP_ID,
    CARRIER_SAMPLE_ID,
    CARRIER_TRACE_ID,
    CARRIER_VERSION,
    MAX_ATTEMPT,
    RECORD_ATTEMPT,
    RECORD_ATTRS,
    RECORD_GROUP_ID,
    RECORD_NAME,
    RECORD_PARENT_SPAN_ID,
    RECORD_SAMPLE_ID,
    RECORD_SPAN_ID,
    RECORD_TRACE_ID,
    RECORD_TS,
    RECORD_TYPE,
    SAMPLE_TRACE_KEY,
    TRACE_VERSION,
)
from ..values import bounded_int, describe
from .records import _log_failure, _new_id, logger

# (trace_id, id(carrier)): deep-copied samples share a trace_id but not a carrier.
_TraceKey = tuple[Any, int]
# Longest scope chain a parent lookup walks; a deeper scope links to a flattened copy instead.
_MAX_SCOPE_CHAIN = 16

_ACTIVE: ContextVar[_Scope | None] = ContextVar("slime_trace_widget_active", default=None)
# Serialises creating/repairing carriers and bumping attempts: two threads binding one fresh
# sample must share a carrier. Read where used (never imported by name): a forked child
# gets a new one.
_CARRIER_LOCK = threading.RLock()
# Called with every record ``_write`` appends (the live stream's hook); None costs one check.
# What it returns is the record's tag (the live stream's: the rollout id it was sent with).
_record_listener: Callable[[dict[str, Any]], Any] | None = None
# Called with a written end record whose attributes were added to afterwards, and the tag
# the record listener gave it (the live stream's hook: it sends the record again, with
# that rollout id); None costs one check.
_end_listener: Callable[[dict[str, Any], Any], None] | None = None

#: The tag of a record written while no listener was set (or by slime's own API).
NO_TAG = object()


def _fresh_lock_after_fork() -> None:
    """Give a forked child its own unlocked carriers' lock.

    A thread of the parent may have held the lock at the fork; that thread does not
    exist in the child, so the inherited lock would never be released and the
    child's first new carrier or retry would wait forever.
    """
    global _CARRIER_LOCK
    _CARRIER_LOCK = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_lock_after_fork)


def set_record_listener(listener: Callable[[dict[str, Any]], Any] | None,
                        changed_end: Callable[[dict[str, Any], Any], None] | None = None
                        ) -> None:
    """Have ``listener`` called with each record written from now on, after it is in its
    carrier, and ``changed_end`` with each ``span_end`` record given end attributes after
    it was written and the tag ``listener`` returned for that record (:data:`NO_TAG`
    when it was written with no listener set) (None: no one). Both must return at once
    and should never raise (a ``listener`` that does is logged, and its record keeps
    :data:`NO_TAG`); the live stream (:mod:`.live`) is the one user."""
    global _record_listener, _end_listener
    _record_listener = listener
    _end_listener = changed_end


def _end_changed(record: dict[str, Any], tag: Any) -> None:
    """Tell the listener, if any, that this written end record (tagged ``tag`` when it was
    written) got attributes added."""
    listener = _end_listener  # read once: a stream may close on another thread
    if listener is not None:
        listener(record, tag)


# --------------------------------------------------------------------------- scopes


class _Scope:
    """The spans one open ``with`` block started, linked to the scope it is nested in.

    ``ids`` maps each target's trace key to the span id written into it;
    ``handles`` are those targets (what an undecorated helper called inside
    records into). Opening a span costs its own targets only; a parent lookup
    walks at most :data:`_MAX_SCOPE_CHAIN` links, because a scope nested deeper
    than that links to a flattened copy of the chain, made once per outer scope.
    A chain rather than one flat map copied at every span: opening a nested span
    then costs the same however many targets its outer scopes hold (a span over a
    whole rollout's samples holds thousands).
    """

    __slots__ = ("_by_trace", "_collapsed", "_copies", "depth", "handles", "ids", "outer")

    def __init__(
        self, ids: dict[_TraceKey, str], handles: tuple[TraceHandle, ...], outer: _Scope | None
    ) -> None:
        if outer is not None and outer.depth >= _MAX_SCOPE_CHAIN:
            outer = outer.collapsed()
        self.ids = ids
        self.handles = handles
        self.outer = outer
        self.depth = 1 if outer is None else outer.depth + 1
        self._collapsed: _Scope | None = None
        self._by_trace: dict[Any, list[str]] | None = None
        #: What :meth:`parent_of` found for each carrier not in the chain, by its id
        #: (with the carrier, so a reused id is not taken for it): a copy gains no
        #: span's start while the spans of this chain stay open, so its records are
        #: read once per scope, not once per record written into it.
        self._copies: dict[int, tuple[Any, str | None]] = {}

    def parent_of(self, handle: TraceHandle) -> str | None:
        """The span ``handle``'s next record nests under, None when no span of it is open.

        That is the innermost open span of its own carrier, else the innermost open
        span of its trace whose start its carrier holds: the carrier is a deep copy
        taken inside that span (slime's way of fanning a sample out), and slime,
        which tracks nesting by trace id, nests the copy's records under it too. A
        carrier sharing the trace id without that start (a copy taken before the span
        opened) gets no parent from it: that id would name a span its carrier lacks.
        """
        own = self.span_of(handle.key)
        if own is not None:
            return own
        carrier = handle.carrier
        known = self._copies.get(id(carrier))
        if known is not None and known[0] is carrier:
            return known[1]
        open_ids = self._open_ids_of(handle.trace_id)
        parent = _first_held(carrier, open_ids) if open_ids else None
        self._copies[id(carrier)] = (carrier, parent)
        return parent

    def span_of(self, key: _TraceKey) -> str | None:
        """The innermost open span of trace ``key`` here or in an enclosing scope."""
        scope: _Scope | None = self
        while scope is not None:
            span_id = scope.ids.get(key)
            if span_id is not None:
                return span_id
            scope = scope.outer
        return None

    def _open_ids_of(self, trace_id: Any) -> list[str]:
        """The span ids of ``trace_id`` open here or in enclosing scopes, innermost first."""
        found: list[str] = []
        scope: _Scope | None = self
        while scope is not None:
            found.extend(scope._ids_by_trace().get(trace_id, ()))
            scope = scope.outer
        return found

    def _ids_by_trace(self) -> dict[Any, list[str]]:
        """This scope's span ids by trace id, built on first use: only a carrier missing
        from the chain asks, so a scope over thousands of targets is indexed once at most."""
        if self._by_trace is None:
            by_trace: dict[Any, list[str]] = {}
            for (trace_id, _), span_id in self.ids.items():
                by_trace.setdefault(trace_id, []).append(span_id)
            self._by_trace = by_trace
        return self._by_trace

    def collapsed(self) -> _Scope:
        """This chain as one scope without links (inner spans win), built once."""
        if self._collapsed is None:
            chain = []
            scope: _Scope | None = self
            while scope is not None:
                chain.append(scope.ids)
                scope = scope.outer
            merged: dict[_TraceKey, str] = {}
            for ids in reversed(chain):
                merged.update(ids)
            self._collapsed = _Scope(merged, self.handles, None)
        return self._collapsed


def _first_held(carrier: Any, span_ids: list[str]) -> str | None:
    """The first of ``span_ids`` that a record of ``carrier`` names as its span, if any.

    Span ids are random, so a record with one means the carrier holds that span. A
    damaged carrier or record holds none: this never raises.
    """
    try:
        records = list(carrier.get(CARRIER_EVENTS) or ())
    except Exception:
        return None
    wanted = set(span_ids)
    held = set()
    for record in records:
        span_id = record.get(RECORD_SPAN_ID) if isinstance(record, dict) else None
        if type(span_id) is str and span_id in wanted:
            held.add(span_id)
    return next((span_id for span_id in span_ids if span_id in held), None)


def _active_parent(handle: TraceHandle) -> str | None:
    """The open span of the current context that ``handle``'s records nest under, if any
    (:meth:`_Scope.parent_of`)."""
    scope = _ACTIVE.get()
    return None if scope is None else scope.parent_of(handle)


# --------------------------------------------------------------------------- handles


@dataclass(init=False, eq=False, repr=False)
class TraceHandle:
    """A reference to one trace carrier; every recording call writes through one.

    The fields are slime's. Identity (``trace_id``, ``sample_id``, ``group_id``) is
    what records are stamped with; the attempt on a record is always the carrier's
    current one (``attempt`` is only the fallback for a carrier without it), because
    retries bump the carrier. ``parent_span_id`` is the parent that spans opened on
    this handle default to when no span of the trace is open in the current context;
    :func:`import_trace` sets it so remote work hangs under the exporting span.
    The older form ``TraceHandle(carrier[, parent_span_id])`` is still accepted.
    Handles compare by identity: comparing carriers by value would cost a walk of
    every record.
    """

    __slots__ = ("attempt", "carrier", "group_id", "parent_span_id", "sample_id", "trace_id")

    trace_id: Any
    carrier: dict[str, Any]
    sample_id: Any
    group_id: Any
    attempt: Any
    parent_span_id: str | None

    def __init__(
        self,
        trace_id: Any,
        carrier: Any = None,
        sample_id: Any = None,
        group_id: Any = None,
        attempt: int = 0,
        parent_span_id: str | None = None,
    ) -> None:
        if isinstance(trace_id, dict) and not isinstance(carrier, dict):
            # The older form: the identity comes from the carrier.
            carrier, parent_span_id = trace_id, carrier
            trace_id = carrier.get(CARRIER_TRACE_ID)
            sample_id = carrier.get(CARRIER_SAMPLE_ID)
            group_id = carrier.get(CARRIER_GROUP_ID)
            attempt = carrier.get(CARRIER_ATTEMPT, 0)
        self.trace_id = trace_id
        self.carrier = carrier
        self.sample_id = sample_id
        self.group_id = group_id
        self.attempt = attempt
        self.parent_span_id = parent_span_id

    @property
    def key(self) -> _TraceKey:
        """What nesting is tracked by: the trace id and the carrier object it writes into."""
        return (self.trace_id, id(self.carrier))

    def __repr__(self) -> str:
        return (
            f"TraceHandle(trace_id={self.trace_id!r}, sample_id={self.sample_id!r}, "
            f"group_id={self.group_id!r}, attempt={self.attempt!r}, "
            f"parent_span_id={self.parent_span_id!r})"
        )


def _handle(carrier: dict[str, Any], parent_span_id: str | None = None) -> TraceHandle:
    """The handle of ``carrier``, its identity read once (it never changes); its attempt
    made a whole number first (:func:`_carrier_attempt`), as slime's ``bind_trace`` does."""
    get = carrier.get
    return TraceHandle(
        get(CARRIER_TRACE_ID),
        carrier,
        get(CARRIER_SAMPLE_ID),
        get(CARRIER_GROUP_ID),
        _carrier_attempt(carrier),
        parent_span_id,
    )


# --------------------------------------------------------------------------- attempts


def _whole_attempt(value: Any) -> int | None:
    """``value`` as the attempt a reader of the dump makes of it, None when the reader
    would count it as a bad attempt (``tables.carrier`` reads with the same
    ``bounded_int``): numeric text, floats, numpy and tensor scalars holding a whole
    number from 0 to :data:`MAX_ATTEMPT` are that number; bools, None and the rest are
    not attempts."""
    return bounded_int(value, 0, MAX_ATTEMPT)


def _carrier_attempt(carrier: dict[str, Any], fallback: Any = 0) -> int:
    """The attempt a record written into ``carrier`` now carries: its ``attempt`` (else
    ``fallback``) as a whole number, so every record holds the value a reader reads.

    A carrier holding any other value gets the number written back, 0 for one a reader
    counts as bad (its fallback), logged at debug level once: records, retries and
    exports then agree, and a retry counts on from a number. Never raises for a dict.
    """
    value = carrier.get(CARRIER_ATTEMPT, fallback)
    if type(value) is int and 0 <= value <= MAX_ATTEMPT:
        return value
    with _CARRIER_LOCK:  # a concurrent retry's bump must not be overwritten
        value = carrier.get(CARRIER_ATTEMPT, fallback)
        attempt = _whole_attempt(value)
        if attempt is not None and type(value) is int:
            return attempt
        if CARRIER_ATTEMPT in carrier:
            carrier[CARRIER_ATTEMPT] = 0 if attempt is None else attempt
    logger.debug("tracing: attempt %s is not a whole number from 0 to %d; recorded as %d",
                 describe(value), MAX_ATTEMPT, 0 if attempt is None else attempt)
    return 0 if attempt is None else attempt


# --------------------------------------------------------------------------- carriers


def _new_carrier(sample_id: Any, group_id: Any, trace_id: Any = None, attempt: Any = 0) -> dict:
    """A fresh carrier, keys in the order slime writes them."""
    return {
        CARRIER_VERSION: TRACE_VERSION,
        CARRIER_TRACE_ID: trace_id or _new_id(),
        CARRIER_EVENTS: [],
        CARRIER_SAMPLE_ID: sample_id,
        CARRIER_GROUP_ID: group_id,
        CARRIER_ATTEMPT: attempt,
    }


def _complete_carrier(
    carrier: dict, sample_id: Any, group_id: Any, trace_id: Any = None, attempt: Any = 0
) -> None:
    """Fill in what a partial carrier lacks, never overwriting what it holds."""
    carrier.setdefault(CARRIER_VERSION, TRACE_VERSION)
    if not carrier.get(CARRIER_TRACE_ID):
        carrier[CARRIER_TRACE_ID] = trace_id or _new_id()
    if carrier.get(CARRIER_EVENTS) is None:
        carrier[CARRIER_EVENTS] = []
    carrier.setdefault(CARRIER_SAMPLE_ID, sample_id)
    carrier.setdefault(CARRIER_GROUP_ID, group_id)
    carrier.setdefault(CARRIER_ATTEMPT, attempt)


def _read_carrier(sample: Any, is_dict: bool) -> Any:
    return sample.get(SAMPLE_TRACE_KEY) if is_dict else getattr(sample, SAMPLE_TRACE_KEY, None)


def _identity(sample: Any, is_dict: bool) -> tuple[Any, Any]:
    if is_dict:
        return sample.get("index"), sample.get("group_index")
    return getattr(sample, "index", None), getattr(sample, "group_index", None)


def _bind(sample: Any) -> TraceHandle | None:
    """The handle of a sample's carrier, creating the carrier when there is none.

    Returns None when the sample holds something other than a dict at ``trace``
    (its data is left alone). Raises when the carrier cannot be attached, e.g. on
    a ``__slots__`` object; callers log that.
    """
    is_dict = isinstance(sample, dict)
    if is_dict and CARRIER_EVENTS in sample and CARRIER_TRACE_ID in sample:
        return _handle(sample)  # a carrier passed directly; never nest a carrier in it
    carrier = _read_carrier(sample, is_dict)
    if (
        type(carrier) is dict
        and CARRIER_TRACE_ID in carrier
        and type(carrier.get(CARRIER_EVENTS)) is list
    ):
        _stamp_identity(carrier, *_identity(sample, is_dict))
        return _handle(carrier)
    with _CARRIER_LOCK:
        return _bind_slow(sample, is_dict)


def _stamp_identity(carrier: dict, sample_id: Any, group_id: Any) -> None:
    """As slime's ``bind_trace``: a sample's ``index`` and ``group_index``, where set, are
    its carrier's ids, so a copy re-indexed into a group (slime deep-copies a prompt's
    sample, carrier and all) records under its own ids, not the sample's it came from."""
    if sample_id is not None and carrier.get(CARRIER_SAMPLE_ID) != sample_id:
        carrier[CARRIER_SAMPLE_ID] = sample_id
    if group_id is not None and carrier.get(CARRIER_GROUP_ID) != group_id:
        carrier[CARRIER_GROUP_ID] = group_id


def _bind_slow(sample: Any, is_dict: bool) -> TraceHandle | None:
    carrier = _read_carrier(sample, is_dict)
    sample_id, group_id = _identity(sample, is_dict)
    if carrier is None:
        carrier = _new_carrier(sample_id, group_id)
        if is_dict:
            sample[SAMPLE_TRACE_KEY] = carrier
        else:
            setattr(sample, SAMPLE_TRACE_KEY, carrier)
    elif isinstance(carrier, dict):
        _complete_carrier(carrier, sample_id, group_id)
        _stamp_identity(carrier, sample_id, group_id)
    else:
        logger.debug(
            "tracing: %s.trace is a %s, not a carrier; not recording",
            type(sample).__name__,
            type(carrier).__name__,
        )
        return None
    return _handle(carrier)


def _is_sample_box(value: Any) -> bool:
    """slime's ``SampleBox`` (a prompt sample and its generations), told apart by duck type."""
    return (
        type(value).__name__ == "SampleBox"
        and hasattr(value, "prompt_sample")
        and hasattr(value, "generation")
    )


def _unbox(box: Any) -> Any:
    """What a ``SampleBox`` records into: its generations, else its prompt sample."""
    return box.generation or box.prompt_sample


def _resolve_handles(target: Any) -> list[TraceHandle]:
    """Handles for a sample, a dict sample, a handle, a ``SampleBox`` or a (nested) list/tuple."""
    if type(target) is TraceHandle:
        return [target]
    if isinstance(target, (list, tuple)):
        handles: list[TraceHandle] = []
        for item in target:
            handles.extend(_resolve_handles(item))
        return handles
    if target is None:
        return []
    if isinstance(target, TraceHandle):
        return [target]
    try:
        if _is_sample_box(target):
            return _resolve_handles(_unbox(target))
        handle = _bind(target)
    except Exception:
        _log_failure("binding a %s", type(target).__name__)
        return []
    return [] if handle is None else [handle]


def bind_trace(sample: Any) -> TraceHandle:
    """Ensure ``sample`` has a trace carrier and return its handle.

    Call it before handing a sample to helpers or other tasks so they all write
    into one carrier. ``sample`` is a slime ``Sample`` (or any object with
    ``index``/``group_index``), a dict sample (carrier at ``sample["trace"]``) or
    a handle (returned as is). When no carrier can be attached, the handle points
    at a detached carrier so the caller's code still runs; a debug log says why.
    """
    if isinstance(sample, TraceHandle):
        return sample
    try:
        handle = _bind(sample)
    except Exception:
        _log_failure("binding a %s", type(sample).__name__)
        handle = None
    return handle if handle is not None else _handle(_new_carrier(None, None))


def bind_trace_carrier(
    carrier: dict[str, Any] | None,
    parent_span_id: str | None = None,
    *,
    trace_id: str | None = None,
    sample_id: Any = None,
    group_id: Any = None,
    attempt: int = 0,
) -> TraceHandle:
    """Wrap an existing carrier dict (e.g. one received from another process) in a handle.

    ``None`` gives a fresh carrier. Missing carrier keys are filled in, from the
    keyword arguments when given: ``trace_id`` and ``attempt`` only where the
    carrier has none, while a ``sample_id`` or ``group_id`` that is not None
    replaces the carrier's (as slime does). Spans opened on the handle hang under
    ``parent_span_id`` when no span of the trace is open.
    """
    try:
        if carrier is None:
            carrier = _new_carrier(sample_id, group_id, trace_id, attempt)
        else:
            with _CARRIER_LOCK:
                _complete_carrier(carrier, sample_id, group_id, trace_id, attempt)
                if sample_id is not None:
                    carrier[CARRIER_SAMPLE_ID] = sample_id
                if group_id is not None:
                    carrier[CARRIER_GROUP_ID] = group_id
        return _handle(carrier, parent_span_id)
    except Exception:
        _log_failure("binding a carrier of type %s", type(carrier).__name__)
        return _handle(_new_carrier(sample_id, group_id, trace_id, attempt), parent_span_id)


def _bump_attempt(handle: TraceHandle) -> int:
    """Raise the attempt of ``handle``'s carrier by one and return it; raises on a damaged
    carrier (callers log that). Under the carriers' lock, so concurrent retries of one
    sample each get their own number."""
    with _CARRIER_LOCK:
        attempt = _carrier_attempt(handle.carrier) + 1
        handle.carrier[CARRIER_ATTEMPT] = attempt
    handle.attempt = attempt
    return attempt


def _raise_attempt(handle: TraceHandle, attempt: int) -> None:
    """Make the attempt of ``handle``'s carrier at least ``attempt`` (a whole number), under
    the carriers' lock so a concurrent retry's bump is kept; a damaged carrier keeps its own."""
    try:
        with _CARRIER_LOCK:
            carrier = handle.carrier
            carrier[CARRIER_ATTEMPT] = max(attempt, _carrier_attempt(carrier))
    except Exception:
        _log_failure("raising the attempt of trace %r", handle.trace_id)


def _append(handle: TraceHandle, record: dict[str, Any]) -> bool:
    """Append a finished record; a damaged carrier costs this record only, not the caller."""
    try:
        handle.carrier[CARRIER_EVENTS].append(record)
    except Exception:
        _log_failure("appending %s %r", record.get(RECORD_TYPE), record.get(RECORD_NAME))
        return False
    return True


def _write(
    handle: TraceHandle,
    kind: str,
    name: str,
    ts: float,
    span_id: str | None,
    parent: str | None,
    attrs: dict[str, Any] | None,
    tags: list[Any] | None = None,
) -> dict[str, Any] | None:
    """Build one record (keys in slime's order), append it to one carrier and return it.

    Absent parent/attrs leave their keys out. ``attrs`` is stored as given, so
    callers pass each group member its own copy. Building happens inside the
    guard too, because it reads the carrier (its attempt): a member whose carrier
    or handle was damaged loses its record (None is returned), and the loop over
    the other members of a group goes on. The record listener, when set, sees it;
    the tag it returns (else :data:`NO_TAG`) is appended to ``tags`` when given, for a
    record that is written.
    """
    try:
        carrier = handle.carrier
        record = {
            RECORD_TYPE: kind,
            RECORD_NAME: name,
            RECORD_TS: ts,
            RECORD_TRACE_ID: handle.trace_id,
            RECORD_SAMPLE_ID: handle.sample_id,
            RECORD_GROUP_ID: handle.group_id,
            RECORD_ATTEMPT: _carrier_attempt(carrier, handle.attempt),
        }
        if span_id is not None:
            record[RECORD_SPAN_ID] = span_id
        if parent is not None:
            record[RECORD_PARENT_SPAN_ID] = parent
        if attrs:
            record[RECORD_ATTRS] = attrs
        carrier[CARRIER_EVENTS].append(record)
    except Exception:
        _log_failure("appending %s %r", kind, name)
        return None
    listener = _record_listener  # read once: a stream may close on another thread
    try:
        tag = NO_TAG if listener is None else listener(record)
    except Exception:  # the record is in its carrier: a listener's failure costs its tag only
        _log_failure("telling the record listener of %s %r", kind, name)
        tag = NO_TAG
    if tags is not None:
        tags.append(tag)
    return record
