"""Carrying a trace to another process (a remote reward server) and merging its records back."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from typing import Any

from ..schema import (
    CARRIER_ATTEMPT,
    CARRIER_EVENTS,
    CARRIER_GROUP_ID,
    CARRIER_SAMPLE_ID,
    CARRIER_TRACE_ID,
    CARRIER_VERSION,
    EVENT,
    RECORD_ATTEMPT,
    RECORD_NAME,
    RECORD_PARENT_SPAN_ID,
    RECORD_SAMPLE_ID,
    RECORD_SPAN_ID,
    RECORD_TRACE_ID,
    RECORD_TS,
    RECORD_TYPE,
    SAMPLE_TRACE_KEY,
    TRACE_IMPORT_EVENT,
    TRACE_VERSION,
)
from ..values import describe
from .carriers import (
    TraceHandle,
    _active_parent,
    _append,
    _carrier_attempt,
    _handle,
    _new_carrier,
    _raise_attempt,
    _resolve_handles,
    _whole_attempt,
    _write,
    bind_trace_carrier,
)
from .records import _log_failure, _now, logger

# Keys of an export payload: the carrier identity plus the parent for remote spans.
_PAYLOAD_PARENT = "parent_span_id"


def _empty_payload() -> dict[str, Any]:
    return {
        CARRIER_VERSION: TRACE_VERSION,
        CARRIER_TRACE_ID: None,
        CARRIER_SAMPLE_ID: None,
        CARRIER_GROUP_ID: None,
        CARRIER_ATTEMPT: 0,
        _PAYLOAD_PARENT: None,
    }


def export_trace(handle: Any) -> dict[str, Any]:
    """A plain (JSON- and pickle-able) payload to continue ``handle``'s trace elsewhere.

    Holds the carrier identity, the current attempt, and the innermost open span of
    the trace in this context (else the handle's own ``parent_span_id``), so that
    spans opened remotely after :func:`import_trace` hang under it. ``handle`` is
    one handle or sample; export each member of a group separately.
    """
    try:
        handles = _resolve_handles(handle)
        if len(handles) != 1:
            logger.debug("tracing: export_trace needs one traced sample, got %d", len(handles))
            return _empty_payload()
        one = handles[0]
        parent = _active_parent(one) or one.parent_span_id
        payload = _empty_payload()
        payload.update(
            {
                CARRIER_TRACE_ID: one.trace_id,
                CARRIER_SAMPLE_ID: one.sample_id,
                CARRIER_GROUP_ID: one.group_id,
                CARRIER_ATTEMPT: _carrier_attempt(one.carrier, one.attempt),
                _PAYLOAD_PARENT: parent,
            }
        )
        return payload
    except Exception:
        _log_failure("exporting a trace")
        return _empty_payload()


def import_trace(payload: Mapping[str, Any], carrier: dict[str, Any] | None = None) -> TraceHandle:
    """Continue an exported trace: a handle with the payload's identity.

    The records go into ``carrier`` when given (completed as :func:`bind_trace_carrier`
    does, taking the payload's sample and group ids), else into a fresh carrier;
    either way into ``handle.carrier``. Send that carrier (or its ``events``) back
    and fold it in with :func:`merge_trace`. A payload naming a parent span first
    gets a ``trace_import`` event under it: merged back, it marks where that span
    was continued (slime's own ``import_trace`` records nothing). Without a parent
    there is nothing to mark: a parentless event would be given the span open at
    its time by readers, a link to the wrong span.
    """
    try:
        return _bind_payload(payload, carrier)
    except Exception:
        _log_failure("importing a trace payload")
        return bind_trace_carrier(carrier)


def _bind_payload(payload: Mapping[str, Any], carrier: dict[str, Any] | None) -> TraceHandle:
    identity = {
        "trace_id": payload.get(CARRIER_TRACE_ID),
        "sample_id": payload.get(CARRIER_SAMPLE_ID),
        "group_id": payload.get(CARRIER_GROUP_ID),
        "attempt": _remote_attempt(payload.get(CARRIER_ATTEMPT), "payload") or 0,
    }
    if carrier is None:
        handle = _handle(_new_carrier(**identity), payload.get(_PAYLOAD_PARENT))
    else:
        handle = bind_trace_carrier(carrier, payload.get(_PAYLOAD_PARENT), **identity)
    parent = payload.get(_PAYLOAD_PARENT)
    if identity["trace_id"] is not None and parent is not None:
        _mark_import(handle, parent)
    return handle


def _mark_import(handle: TraceHandle, parent: Any) -> None:
    """Record the ``trace_import`` event; a failing clock loses the event, not the handle."""
    try:
        _write(handle, EVENT, TRACE_IMPORT_EVENT, _now(), None, parent, None)
    except Exception:
        _log_failure("marking the import of trace %r", handle.trace_id)


def merge_trace(target: Any, remote: Any) -> int:
    """Append records made remotely into the local carriers of ``target``; returns how many.

    ``remote`` is a carrier, a :class:`TraceHandle`, a sample holding one (an object or
    its dict, as a server may send it back), a list of records, or a list of those (one
    per group member). Each record goes to one local carrier
    of its ``trace_id`` (records of other traces are skipped), so remote spans keep
    pointing at their local parents. Deep copies of one bound sample share a trace
    id, so when several local carriers hold it a record goes, in order, to the
    carrier holding the span it names: its own ``span_id`` (a span's end follows its
    start) or its ``parent_span_id`` (a local span, or a remote one merged before
    it), when no other of them holds that span (copies taken inside a span all hold
    its start); else to the only one of them with the record's ``sample_id``; else
    it is skipped. A trace id held by one local carrier needs none of that. A record the
    local carrier held before the merge (the same type, ids, name, time and attempt:
    the remote side continued the trace in a copy of this carrier, or in this very
    carrier, or was merged before) is not appended again, so merging a carrier twice
    adds nothing the second time. The local attempt becomes the higher of the two;
    a remote attempt that is no whole number (:func:`_whole_attempt`: a reader would
    count it as bad) raises nothing, and is logged at debug level.
    """
    try:
        router = _Router(_resolve_handles(target))
        merged = 0
        for source in _remote_sources(remote):
            merged += _merge_source(router, source)
        return merged
    except Exception:
        _log_failure("merging a remote trace")
        return 0


def _remote_sources(remote: Any) -> list[tuple[Any, list]]:
    """(attempt or None, records) pairs from the shapes :func:`merge_trace` accepts."""
    if isinstance(remote, TraceHandle):
        remote = remote.carrier
    if isinstance(remote, Mapping) and CARRIER_EVENTS not in remote:
        remote = remote.get(SAMPLE_TRACE_KEY)  # a sample's dict: its carrier
    elif not isinstance(remote, Mapping | list | tuple) and hasattr(remote, SAMPLE_TRACE_KEY):
        remote = getattr(remote, SAMPLE_TRACE_KEY)  # a sample object: its carrier
    if isinstance(remote, Mapping):
        return [(remote.get(CARRIER_ATTEMPT), list(remote.get(CARRIER_EVENTS) or ()))]
    items = list(remote or ())
    if all(isinstance(item, Mapping) and RECORD_TYPE in item for item in items):
        return [(None, items)]
    sources: list[tuple[Any, list]] = []
    for item in items:
        sources.extend(_remote_sources(item))
    return sources


class _Router:
    """Which local carrier each remote record goes to, by the rule of :func:`merge_trace`.

    Local carriers are grouped by trace id (a carrier given twice counts once).
    The span ids of a trace held by several carriers are indexed on its first
    ambiguous record, each mapped to the carrier holding it, or to None when more
    than one holds it (a span open while the sample was deep-copied): such an id
    names no carrier. A remote record routed somewhere adds its own span id, so the
    records nested under it follow it.
    """

    def __init__(self, handles: list[TraceHandle]) -> None:
        self._by_trace: dict[Any, list[TraceHandle]] = {}
        seen: set[Any] = set()
        for handle in handles:
            try:
                key = handle.key
                if key in seen:
                    continue
                seen.add(key)
                self._by_trace.setdefault(handle.trace_id, []).append(handle)
            except Exception:
                _log_failure("reading the identity of a local carrier")
        self._span_owners: dict[Any, TraceHandle | None] = {}
        self._indexed: set[Any] = set()

    def route(self, record: Mapping[str, Any]) -> TraceHandle | None:
        """The local carrier ``record`` belongs in, or None when no rule names exactly one."""
        trace_id = record.get(RECORD_TRACE_ID)
        members = self._by_trace.get(trace_id)
        if not members:
            return None
        if len(members) == 1:
            return members[0]
        self._index(trace_id, members)
        owner = self._span_owner(trace_id, record.get(RECORD_SPAN_ID)) or self._span_owner(
            trace_id, record.get(RECORD_PARENT_SPAN_ID)
        )
        return owner or _only_sample(members, record.get(RECORD_SAMPLE_ID))

    def routed(self, record: Mapping[str, Any], handle: TraceHandle) -> None:
        """Note where ``record`` went, so the records under its span follow it."""
        if handle.trace_id in self._indexed:
            self._own(record.get(RECORD_SPAN_ID), handle)

    def _span_owner(self, trace_id: Any, span_id: Any) -> TraceHandle | None:
        if span_id is None:
            return None
        owner = self._span_owners.get(span_id)
        return owner if owner is not None and owner.trace_id == trace_id else None

    def _index(self, trace_id: Any, members: list[TraceHandle]) -> None:
        """Map the span ids recorded in each of ``members`` to it, once per trace id."""
        if trace_id in self._indexed:
            return
        self._indexed.add(trace_id)
        for handle in members:
            try:
                records = list(handle.carrier.get(CARRIER_EVENTS) or ())
            except Exception:
                _log_failure("reading the records of trace %r", trace_id)
                continue
            for record in records:
                if isinstance(record, Mapping):
                    self._own(record.get(RECORD_SPAN_ID), handle)

    def _own(self, span_id: Any, handle: TraceHandle) -> None:
        """Map ``span_id`` to ``handle``, or to None once another carrier holds it too
        (nothing for an unusable id)."""
        if span_id is None:
            return
        with suppress(TypeError):  # an unhashable id in a damaged record names no span
            owner = self._span_owners.setdefault(span_id, handle)
            if owner is not None and owner is not handle:
                self._span_owners[span_id] = None


def _only_sample(members: list[TraceHandle], sample_id: Any) -> TraceHandle | None:
    """The one member whose sample id is ``sample_id``; None when none or several are."""
    if sample_id is None:
        return None
    matches = [handle for handle in members if handle.sample_id == sample_id]
    return matches[0] if len(matches) == 1 else None


#: The fields that tell a record from any other the same carrier holds.
_IDENTITY = (RECORD_TYPE, RECORD_SPAN_ID, RECORD_PARENT_SPAN_ID, RECORD_NAME, RECORD_TS,
             RECORD_ATTEMPT)


def _identity(record: Mapping[str, Any]) -> tuple | None:
    """What tells ``record`` apart in its carrier (None: an unhashable value, no identity)."""
    key = tuple(record.get(field) for field in _IDENTITY)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _held(handle: TraceHandle, held: dict[Any, set]) -> set:
    """The identities of the records ``handle``'s carrier holds, read once per remote
    carrier merged (``held`` keeps them), before any of that carrier's records go in."""
    found = held.get(handle.key)
    if found is None:
        records = list(handle.carrier.get(CARRIER_EVENTS) or ())
        found = held[handle.key] = {_identity(record) for record in records
                                    if isinstance(record, Mapping)}
    return found


def _merge_source(router: _Router, source: tuple[Any, list]) -> int:
    """Append one remote carrier's records where they belong, but those the carrier
    held already; a bad record costs itself only."""
    attempt, records = source
    merged = 0
    touched: dict[Any, TraceHandle] = {}
    held: dict[Any, set] = {}
    for record in records:
        try:
            handle = router.route(record) if isinstance(record, Mapping) else None
            identity = None if handle is None else _identity(record)
            known = identity is not None and identity in _held(handle, held)
        except Exception:
            _log_failure("routing a remote record")
            continue
        if known:
            continue
        if handle is not None and _append(handle, record):
            router.routed(record, handle)
            merged += 1
            touched[handle.key] = handle
    remote_attempt = _remote_attempt(attempt, "remote carrier") if touched else None
    if remote_attempt is not None:
        for handle in touched.values():
            _raise_attempt(handle, remote_attempt)
    return merged


def _remote_attempt(value: Any, where: str) -> int | None:
    """A remote attempt as the whole number a reader makes of it; None when there is none
    (None: a list of records carries no attempt) or it is no attempt (logged)."""
    if value is None:
        return None
    attempt = _whole_attempt(value)
    if attempt is None:
        logger.debug("tracing: the %s's attempt %s is not a whole number from 0; ignored",
                     where, describe(value))
    return attempt
