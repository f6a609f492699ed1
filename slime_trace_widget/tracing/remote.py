"""Carrying a trace to another process (a remote reward server) and merging its records back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..schema import (
    CARRIER_ATTEMPT,
    CARRIER_EVENTS,
    CARRIER_GROUP_ID,
    CARRIER_SAMPLE_ID,
    CARRIER_TRACE_ID,
    CARRIER_VERSION,
    EVENT,
    RECORD_TRACE_ID,
    RECORD_TYPE,
    TRACE_IMPORT_EVENT,
    TRACE_VERSION,
)
from .carriers import (
    TraceHandle,
    _active_span,
    _append,
    _handle,
    _new_carrier,
    _resolve_handles,
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
        parent = _active_span(one.key) or one.parent_span_id
        payload = _empty_payload()
        payload.update(
            {
                CARRIER_TRACE_ID: one.trace_id,
                CARRIER_SAMPLE_ID: one.sample_id,
                CARRIER_GROUP_ID: one.group_id,
                CARRIER_ATTEMPT: one.carrier.get(CARRIER_ATTEMPT, one.attempt),
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
        "attempt": int(payload.get(CARRIER_ATTEMPT) or 0),
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

    ``remote`` is a carrier, a :class:`TraceHandle`, a list of records, or a list of
    carriers/handles (one per group member). Each record goes to the local carrier
    with the same ``trace_id`` (others are skipped), so remote spans keep pointing
    at their local parents. The local attempt becomes the higher of the two. Not
    idempotent: merge each remote carrier once.
    """
    try:
        local = {handle.trace_id: handle for handle in _resolve_handles(target)}
        merged = 0
        for source in _remote_sources(remote):
            merged += _merge_source(local, source)
        return merged
    except Exception:
        _log_failure("merging a remote trace")
        return 0


def _remote_sources(remote: Any) -> list[tuple[Any, list]]:
    """(attempt or None, records) pairs from the shapes :func:`merge_trace` accepts."""
    if isinstance(remote, TraceHandle):
        remote = remote.carrier
    if isinstance(remote, Mapping):
        return [(remote.get(CARRIER_ATTEMPT), list(remote.get(CARRIER_EVENTS) or ()))]
    items = list(remote or ())
    if all(isinstance(item, Mapping) and RECORD_TYPE in item for item in items):
        return [(None, items)]
    sources: list[tuple[Any, list]] = []
    for item in items:
        sources.extend(_remote_sources(item))
    return sources


def _merge_source(local: dict[Any, TraceHandle], source: tuple[Any, list]) -> int:
    attempt, records = source
    merged = 0
    touched: set[Any] = set()
    for record in records:
        handle = local.get(record.get(RECORD_TRACE_ID)) if isinstance(record, Mapping) else None
        if handle is not None and _append(handle, record):
            merged += 1
            touched.add(handle.trace_id)
    if isinstance(attempt, int):
        for trace_id in touched:
            carrier = local[trace_id].carrier
            carrier[CARRIER_ATTEMPT] = max(attempt, int(carrier.get(CARRIER_ATTEMPT, 0)))
    return merged


