"""Spans, instant events and retries: what ``trace_span``, ``trace_event`` and
``trace_next_attempt`` write.

A group target writes into every member separately, so a member whose carrier is
broken costs only its own records. The hot path stays lean (a few microseconds
per span): a span is one small object that is its own context manager.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import Token
from typing import Any

from ..schema import (
    ATTEMPT_ATTR,
    ATTEMPT_START_EVENT,
    ERROR_MESSAGE_ATTR,
    ERROR_TYPE_ATTR,
    EVENT,
    RECORD_ATTRS,
    SPAN_END,
    SPAN_START,
    TRACE_CHILDREN_KEY,
)
from .carriers import (
    _ACTIVE,
    NO_TAG,
    TraceHandle,
    _bump_attempt,
    _end_changed,
    _resolve_handles,
    _Scope,
    _TraceKey,
    _write,
)
from .records import (
    _clean_attrs,
    _copy,
    _error_message,
    _log_failure,
    _new_id,
    _now,
    logger,
)

# _trace_children nest two levels (phase, step); the bound only stops runaway garbage input.
_MAX_CHILD_DEPTH = 8


class TraceSpanContext:
    """What ``with trace_span(...) as span`` gives: the span's targets, records and end attributes.

    The fields are slime's. ``set``/``update`` (alias ``set_attr``/``update_attrs``)
    collect end attributes while the block runs; once the span has closed they
    are added to the ``span_end`` records already written (``end_events``), which a
    live stream then sends again (docs/live.md).
    """

    __slots__ = ("_end_attrs", "_end_tags", "closed", "end_events", "handles", "name",
                 "span_records", "start_ts", "target")

    def __init__(
        self,
        target: Any,
        handles: list[TraceHandle],
        span_records: list[tuple[TraceHandle, str]] | None = None,
        start_ts: float = 0.0,
        end_attrs: dict[str, Any] | None = None,
        end_events: list[dict[str, Any]] | None = None,
        closed: bool = False,
    ) -> None:
        self.name: str | None = None
        self.target = target
        self.handles = handles
        self.span_records = [] if span_records is None else span_records
        self.start_ts = start_ts
        # Made on first use: most spans never get end attributes.
        self._end_attrs = end_attrs
        self.end_events = [] if end_events is None else end_events
        # Per end record, the tag the record listener gave it (carriers.NO_TAG: none).
        self._end_tags: list[Any] = []
        self.closed = closed

    @property
    def end_attrs(self) -> dict[str, Any]:
        """The end attributes collected so far (a live dict)."""
        if self._end_attrs is None:
            self._end_attrs = {}
        return self._end_attrs

    @end_attrs.setter
    def end_attrs(self, attrs: dict[str, Any]) -> None:
        self._end_attrs = attrs

    def set(self, key: str, value: Any) -> TraceSpanContext:
        """Set one end attribute."""
        if type(key) is str and key == TRACE_CHILDREN_KEY:
            return self.update({key: value})
        try:
            if self._end_attrs is None:
                self._end_attrs = {}
            self._end_attrs[key] = value
            if self.end_events:
                self._sync_end_events({key: value})
        except Exception:
            _log_failure("setting attribute %r on span %r", key, self.name)
        return self

    def update(self, attrs: Mapping[str, Any] | None) -> TraceSpanContext:
        """Add end attributes; the reserved ``_trace_children`` key writes child spans now.

        The children (from :func:`build_sglang_meta_trace_attrs`) are placed by
        offsets from this span's start and appended immediately, like slime does.
        """
        try:
            self._merge(attrs)
        except Exception:
            _log_failure("updating span %r", self.name)
        return self

    def set_attr(self, key: str, value: Any) -> TraceSpanContext:
        """Same as :meth:`set` (slime's other name for it)."""
        return self.set(key, value)

    def update_attrs(self, attrs: Mapping[str, Any] | None) -> TraceSpanContext:
        """Same as :meth:`update` (slime's other name for it)."""
        return self.update(attrs)

    def build_end_attrs(self) -> dict[str, Any] | None:
        """A copy of the end attributes, or None when there are none."""
        return dict(self._end_attrs) if self._end_attrs else None

    def finalize(self, end_events: list[dict[str, Any]]) -> None:
        """Mark the span closed with its ``span_end`` records, which get the end attributes."""
        self.end_events = end_events
        self.closed = True
        if self._end_attrs:
            self._sync_end_events(self._end_attrs)

    def _merge(self, attrs: Mapping[str, Any] | None) -> None:
        if not attrs:
            return
        plain = dict(attrs)
        children = plain.pop(TRACE_CHILDREN_KEY, None)
        if plain:
            if self._end_attrs is None:
                self._end_attrs = {}
            self._end_attrs.update(plain)
            if self.end_events:
                self._sync_end_events(plain)
        if children and self.span_records:
            _write_children(self.span_records, children, self.start_ts, 0)

    def _sync_end_events(self, attrs: Mapping[str, Any]) -> None:
        """Add attributes set after the close to the end records, each its own cleaned
        copy; a live stream is told of each record changed, to send it again (it may have
        been sent already)."""
        cleaned = _clean_attrs(attrs)
        if not cleaned:
            return
        tags = self._end_tags
        for index, record in enumerate(self.end_events):
            try:
                own = record.get(RECORD_ATTRS)
                if type(own) is dict:
                    own.update(cleaned)
                else:
                    record[RECORD_ATTRS] = dict(cleaned)
                _end_changed(record, tags[index] if index < len(tags) else NO_TAG)
            except Exception:
                _log_failure("adding attributes to the end of span %r", self.name)


class TraceSpan(TraceSpanContext):
    """A span over one block, written into every target carrier; also its own context manager.

    Use through :func:`trace_span`. Single use: a second ``with`` on the same
    object (nested or later) records nothing, and the span ends when the block
    that opened it exits; otherwise the inner exit would close it early and the
    outer one would leave it marked active in the context, to be adopted as
    parent by every later span.
    """

    __slots__ = ("_depth", "_entered", "_record_error", "_scope", "_start_attrs", "_token")

    def __init__(
        self, target: Any, name: str, attrs: Mapping[str, Any] | None, record_error: bool
    ) -> None:
        self.target = target
        self.handles = []
        self.span_records = []
        self.start_ts = 0.0
        self._end_attrs = None
        self.end_events = []
        self._end_tags = []
        self.closed = False
        self.name = name
        self._start_attrs = attrs
        self._record_error = record_error
        self._token: Any = None
        self._scope: _Scope | None = None
        self._entered = False
        self._depth = 0

    @property
    def span_ids(self) -> tuple[str, ...]:
        """The span id written into each target carrier (one per member for a group)."""
        return tuple(span_id for _, span_id in self.span_records)

    def __enter__(self) -> TraceSpan:
        self._depth += 1
        if self._entered:
            logger.debug("tracing: span %r entered again; a span is single use", self.name)
            return self
        self._entered = True
        try:
            self._open()
        except Exception:
            _log_failure("starting span %r", self.name)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> bool:
        self._depth -= 1
        if self._depth > 0 or self._token is None:
            return False
        try:
            if exc_type is None:
                self._close(self._end_attrs)
            elif issubclass(exc_type, Exception):
                self._close(self._error_attrs(exc))
            # Cancellation and other BaseExceptions leave the span open, as slime does.
        except Exception:
            _log_failure("ending span %r", self.name)
        finally:
            self._leave()
        return False

    async def __aenter__(self) -> TraceSpan:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> bool:
        return self.__exit__(exc_type, exc, tb)

    def _open(self) -> None:
        handles = _resolve_handles(self.target)
        if not handles:
            return
        scope = _ACTIVE.get()
        ts = _now()
        attrs = _clean_attrs(self._start_attrs)
        ids: dict[_TraceKey, str] = {}
        records = self.span_records
        for index, handle in enumerate(handles):
            span_id = _new_id()
            try:
                key = handle.key
                ids[key] = span_id  # fails first for a damaged carrier's unhashable trace id
                parent = (scope and scope.parent_of(handle)) or handle.parent_span_id
            except Exception:
                _log_failure("finding the parent of span %r", self.name)
                continue
            own = attrs if index == 0 else _copy(attrs)
            if _write(handle, SPAN_START, self.name, ts, span_id, parent, own):
                records.append((handle, span_id))
            else:
                del ids[key]
        self.handles = handles
        self.target = handles[0] if len(handles) == 1 else handles
        if records:
            self.start_ts = ts
            inner = _Scope(ids, tuple(handle for handle, _ in records), scope)
            self._token = _ACTIVE.set(inner)
            self._scope = inner

    def _close(self, attrs: dict[str, Any] | None) -> None:
        ts = _now()
        cleaned = _clean_attrs(attrs)
        ends = []
        tags = self._end_tags
        for index, (handle, span_id) in enumerate(self.span_records):
            own = cleaned if index == 0 else _copy(cleaned)
            record = _write(handle, SPAN_END, self.name, ts, span_id, None, own, tags)
            if record is not None:
                ends.append(record)
        self.end_events = ends
        self.closed = True

    def _error_attrs(self, exc: BaseException | None) -> dict[str, Any] | None:
        if not self._record_error:
            return self._end_attrs
        attrs = dict(self._end_attrs or {})
        attrs[ERROR_TYPE_ATTR] = type(exc).__name__
        attrs[ERROR_MESSAGE_ATTR] = _error_message(exc) if exc is not None else ""
        return attrs

    def _leave(self) -> None:
        token, self._token = self._token, None
        scope, self._scope = self._scope, None
        try:
            _ACTIVE.reset(token)
        except ValueError:
            # Left in another context than it was entered in: a generator stepped by
            # asyncio.wait_for or through a copied context. Where this span is still the
            # innermost one there, the scope it opened in becomes innermost again, so no
            # later span there nests under it; any other scope is that context's own.
            if _ACTIVE.get() is scope:
                _ACTIVE.set(None if token.old_value is Token.MISSING else token.old_value)
        except Exception:
            _log_failure("restoring the parent of span %r", self.name)


def trace_span(
    target: Any, name: str, attrs: Mapping[str, Any] | None = None, record_error: bool = True
) -> TraceSpan:
    """Record a span around a block: ``with trace_span(sample, "reward_model") as span:``.

    ``target`` is a sample, a dict sample, a :class:`TraceHandle`, or a list/tuple
    of them (a group: one start/end pair per member, each with its own span id and
    the same timestamps). ``attrs`` go on the start record; ``span.set``/``update``
    on the end record. If the block raises an ``Exception`` the end record gets
    ``error_type``/``error_message`` (unless ``record_error`` is False) and the
    exception propagates; cancellation and other ``BaseException``s leave the span
    open. Works with ``with`` and ``async with``. The parent is the innermost open
    span of the same trace in the current context.
    """
    return TraceSpan(target, name, attrs, record_error)


def _write_children(
    parents: list[tuple[TraceHandle, str]], children: Any, base_ts: float, depth: int
) -> None:
    """Append synthesised child spans/events under each parent span, laid out from
    ``base_ts``; one child may come alone, not in a list, as slime takes it."""
    if isinstance(children, Mapping):
        children = [children]
    if depth > _MAX_CHILD_DEPTH or not isinstance(children, (list, tuple)):
        return
    for child in children:
        try:
            _write_child(parents, child, base_ts, depth)
        except Exception:
            _log_failure("writing a child span")


def _write_child(
    parents: list[tuple[TraceHandle, str]], child: Any, base_ts: float, depth: int
) -> None:
    if not isinstance(child, Mapping) or not isinstance(child.get("name"), str):
        return
    name = child["name"]
    start = base_ts + float(child.get("start_offset", 0.0))
    attrs = child.get("attrs")
    cleaned = _clean_attrs(attrs)
    if child.get("type") == "event":
        for handle, parent_id in parents:
            _write(handle, EVENT, name, start, None, parent_id, _copy(cleaned))
        return
    if child.get("type") != "span":
        return
    end = base_ts + float(child["end_offset"])
    if not start <= end:  # ends before it starts, or a time that is no number: slime skips it
        return
    opened = []
    for handle, parent_id in parents:
        span_id = _new_id()
        if _write(handle, SPAN_START, name, start, span_id, parent_id, None):
            opened.append((handle, span_id))
    _write_children(opened, child.get("children"), start, depth + 1)
    for handle, span_id in opened:
        _write(handle, SPAN_END, name, end, span_id, None, _copy(cleaned))


def trace_event(target: Any, name: str, attrs: Mapping[str, Any] | None = None) -> None:
    """Record an instant event under the innermost open span of each target's trace."""
    try:
        handles = _resolve_handles(target)
        if not handles:
            return
        ts = _now()
        cleaned = _clean_attrs(attrs)
        scope = _ACTIVE.get()
        for index, handle in enumerate(handles):
            try:
                parent = (scope and scope.parent_of(handle)) or handle.parent_span_id
            except Exception:
                _log_failure("finding the parent of event %r", name)
                continue
            own = cleaned if index == 0 else _copy(cleaned)
            _write(handle, EVENT, name, ts, None, parent, own)
    except Exception:
        _log_failure("recording event %r", name)


def trace_next_attempt(target: Any, attrs: Mapping[str, Any] | None = None) -> Any:
    """Start a retry: bump each target's attempt and record an ``attempt_start`` event.

    The event's attrs are ``{"attempt": n, **attrs}``. Records written from now on
    carry attempt ``n``, including the end of a span opened before the bump.
    Returns the target's handle, the list of handles for a group, or ``target``
    itself when it resolves to no handle (as slime does).
    """
    handles: list[TraceHandle] = []
    try:
        extra = _clean_attrs(attrs) or {}
        handles = _resolve_handles(target)
        for handle in handles:
            _start_attempt(handle, extra)
    except Exception:
        _log_failure("starting the next attempt")
    if not handles:
        return target
    return handles[0] if len(handles) == 1 else handles


def _start_attempt(handle: TraceHandle, extra: dict[str, Any]) -> None:
    try:
        attempt = _bump_attempt(handle)
    except Exception:
        _log_failure("bumping the attempt of trace %r", handle.trace_id)
        return
    event_attrs = {ATTEMPT_ATTR: attempt}
    event_attrs.update(extra)
    event_attrs[ATTEMPT_ATTR] = attempt
    trace_event(handle, ATTEMPT_START_EVENT, event_attrs)
