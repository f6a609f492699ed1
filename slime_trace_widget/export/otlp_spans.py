"""Frames as OTLP trace messages: the mapping only, nothing is sent here.

Each sample is a root span named ``sample`` in its trace, from the sample's start
to its end (samples that share slime's trace id, a group's members, share the trace,
each with its root), carrying the sample's fields (``slime.rollout_id``, ``slime.sample_index``,
``slime.group_index``, ``slime.source``, ``slime.status``, ``slime.reward``...);
every measured span (``analysis.measured_spans``: the real spans, the attribute
form's ``[P]``/``[D]`` phases, joined engine slices) becomes one OTLP span under
its parent, or under the root when it has none. Attributes keep their types
(the end record's value where a key has one, as in ``spans["attr.<key>"]``);
lists of one plain type stay arrays, other lists and dicts travel as JSON text.
Instant events become span events on the span they happened in (or the root),
unmatched ends too, marked ``slime.event_kind``. An open span ends at its clipped
end with ``slime.state = "open"``; an error span gets an error status.

Ids are the W3C ids ``trace_headers`` and the live stream send (``schema.w3c_trace_id``
of slime's trace id, ``schema.w3c_span_id`` of slime's span id), derived only for a
repeat (see :mod:`.otlp_ids`), and stable, so a second export of the same dump sends
the same spans. Samples that share slime's trace id (a group's members) share the OTLP
trace, each under a root of its own. The original ids stay as ``slime.trace_id`` /
``slime.span_id``. An attribute named like one of these ``slime.`` fields is kept as
``attr.<name>``.

Requests are sized in bytes: a request is closed before a span would take its
serialized size over ``batch_bytes`` (:data:`DEFAULT_BATCH_BYTES`, 3 MiB, well under
the 4 MiB most receivers take), or its span count over ``batch_spans``. A span goes
whole with its events; a sample larger than a request goes on in the next ones, its
root in the first, every span keeping its id and parent. Only a span larger than the
budget on its own makes a larger request, alone. :func:`split_batch` halves a request
a receiver found too large.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span, Status

from .._version import __version__
from ..frames.model import TraceFrames
from ..values import MAX_STRING_CHARS, clean_text, json_safe, truncate
from ..vocabularies import INSTANT_EVENT
from .otlp_ids import otlp_ids
from .own_fields import beside_attributes

SAMPLE_SPAN = "sample"
SCOPE_NAME = "slime_trace_widget"
DEFAULT_SERVICE = "slime-rollout"
#: Most spans per request (the byte budget usually closes a request first).
DEFAULT_BATCH_SPANS = 1000
#: Most serialized bytes per request: well under the 4 MiB gRPC servers and most OTLP
#: receivers take by default, with room for headers and compression framing.
DEFAULT_BATCH_BYTES = 3 << 20
#: What a resource's spans may add to a request beyond their own framed sizes: the
#: growth of the resource's and its scope's length prefixes (at most 4 bytes each).
_RESOURCE_FRAMING = 2 * 4
#: Longest list sent as an OTLP array; longer ones go as JSON text (cut like any text).
MAX_ARRAY_VALUES = 1000
_INT64 = (-(2**63), 2**63 - 1)
_ARRAY_FIELDS = {bool: "bool_value", int: "int_value", float: "double_value", str: "string_value"}


@dataclass
class Batch:
    """One request: what the sender sends, and what it holds (``traces``: the sample
    roots among its spans)."""

    request: ExportTraceServiceRequest
    spans: int
    events: int
    traces: int


def otlp_batches(frames: TraceFrames, *, service_name: str = DEFAULT_SERVICE,
                 batch_spans: int = DEFAULT_BATCH_SPANS,
                 batch_bytes: int = DEFAULT_BATCH_BYTES, include_text: bool = False,
                 max_chars: int = MAX_STRING_CHARS) -> Iterator[Batch]:
    """The frames as OTLP requests of at most ``batch_spans`` spans and ``batch_bytes``
    serialized bytes (a span larger than that on its own goes alone), samples in row
    order; a sample larger than a request goes on in the next ones, its spans keeping
    their ids and parents, each span whole with its events.

    ``include_text`` adds each sample's prompt and response to its root span as
    ``input.value`` / ``output.value`` (the OpenInference names Phoenix shows)."""
    plan = _Plan(frames, include_text, max_chars)
    resources = [_resource(frames, dump, service_name) for dump in range(len(frames.paths) or 1)]
    filling = _Filling(resources, max(batch_spans, 1), max(batch_bytes, 1))
    step = max(batch_spans, 1)
    pending: list[tuple[int, np.ndarray]] = []
    size = 0
    for row in plan.exported_rows():
        positions = plan.span_positions(row)
        for start in range(0, max(len(positions), 1), step):
            piece = positions[start:start + step]
            pending.append((row if start == 0 else -1 - row, piece))
            size += len(piece) + (start == 0)
            if size >= step:
                yield from plan.fill(pending, filling)
                pending, size = [], 0
    if pending:
        yield from plan.fill(pending, filling)
    if filling.spans:
        yield filling.finish()


def batch_layout(service_name: str | None = None, batch_spans: int | None = None,
                 batch_bytes: int | None = None, include_text: bool = False
                 ) -> dict[str, Any]:
    """The options of :func:`otlp_batches` that decide which span goes in which request,
    each left out (None, or 0) taken as its default: what ``to_otlp`` sends with, and
    what a ledger of an earlier copy stored (so both lay requests out alike)."""
    return {"service_name": service_name or DEFAULT_SERVICE,
            "batch_spans": batch_spans or DEFAULT_BATCH_SPANS,
            "batch_bytes": batch_bytes or DEFAULT_BATCH_BYTES,
            "include_text": bool(include_text)}


def split_batch(batch: Batch) -> tuple[Batch, Batch]:
    """``batch``'s spans in two requests, the first half and the rest in their order,
    each span with its resource; for a request a receiver found too large. Needs two
    spans or more."""
    placed = _placed(batch)
    if len(placed) < 2:
        raise ValueError("a request of one span cannot be split")
    half = len(placed) // 2
    return _batch_of(placed[:half]), _batch_of(placed[half:])


def span_ids(batch: Batch) -> list[bytes]:
    """The span ids of ``batch``, in its order."""
    return [span.span_id for _, span in _placed(batch)]


def keep_spans(batch: Batch, keep: list[bool]) -> Batch | None:
    """``batch`` with only the spans ``keep`` marks (in :func:`span_ids`' order), each
    with its resource; None when none is kept."""
    kept = [pair for pair, wanted in zip(_placed(batch), keep, strict=True) if wanted]
    return _batch_of(kept) if kept else None


def _placed(batch: Batch) -> list[tuple[ResourceSpans, Span]]:
    """Every span of ``batch`` with the resource it goes under, in the request's order
    (the one walk over resources, scopes and spans)."""
    return [(resource, span) for resource in batch.request.resource_spans
            for scope in resource.scope_spans for span in scope.spans]


def describe_span(batch: Batch) -> str:
    """The first span of ``batch`` in words: its name, trace and span ids (hex), slime's
    span id when it has one, and the request's size."""
    resource = batch.request.resource_spans[0]
    span = resource.scope_spans[0].spans[0]
    slime = next((kv.value.string_value for kv in span.attributes
                  if kv.key == "slime.span_id"), "")
    own = f", slime span id {slime}" if slime else ""
    return (f"span {span.name!r} (trace {span.trace_id.hex()}, span {span.span_id.hex()}"
            f"{own}), {batch.request.ByteSize()} bytes")


def _batch_of(placed: list[tuple[ResourceSpans, Span]]) -> Batch:
    """A request of ``placed`` (resource, span) pairs, spans grouped under copies of
    their resources in order, with its counts (a root span has no parent)."""
    request = ExportTraceServiceRequest()
    scopes: dict[int, Any] = {}
    for resource, span in placed:
        if id(resource) not in scopes:
            copy = request.resource_spans.add()
            copy.resource.CopyFrom(resource.resource)
            scope = copy.scope_spans.add()
            scope.scope.CopyFrom(resource.scope_spans[0].scope)
            scopes[id(resource)] = scope
        scopes[id(resource)].spans.add().CopyFrom(span)
    spans = [span for _, span in placed]
    return Batch(request, len(spans), sum(len(span.events) for span in spans),
                 sum(not span.parent_span_id for span in spans))


class _Filling:
    """The request being filled: spans are built in place, then placed; one that would
    take the request over its byte or span budget moves to a new request, and the full
    one is handed back."""

    def __init__(self, resources: list[ResourceSpans], max_spans: int, max_bytes: int) -> None:
        self.resources, self.max_spans, self.max_bytes = resources, max_spans, max_bytes
        self.resource_bytes = [_framed(resource.ByteSize()) + _RESOURCE_FRAMING
                               for resource in resources]
        self._start()

    def _start(self) -> None:
        self.request = ExportTraceServiceRequest()
        self.scopes: dict[int, Any] = {}
        self.size = self.spans = self.events = self.traces = 0

    def new_span(self, dump: int) -> Span:
        """An empty span under ``dump``'s resource, for the caller to fill, then
        :meth:`place`."""
        dump = min(dump, len(self.resources) - 1)
        if dump not in self.scopes:
            resource = self.request.resource_spans.add()
            resource.CopyFrom(self.resources[dump])
            self.scopes[dump] = resource.scope_spans[0]
            self.size += self.resource_bytes[dump]
        self.dump = dump
        return self.scopes[dump].spans.add()

    def place(self, events: int, root: bool) -> Batch | None:
        """Count the span just filled; the full request when the span had to move on to
        a new one, else None."""
        scope = self.scopes[self.dump]
        span_bytes = _framed(scope.spans[-1].ByteSize())
        finished = None
        if self.spans and (self.spans >= self.max_spans
                           or self.size + span_bytes > self.max_bytes):
            moved = Span()
            moved.CopyFrom(scope.spans[-1])
            del scope.spans[-1]
            if not len(scope.spans):  # its resource came with it: the last one added
                del self.request.resource_spans[-1]
                del self.scopes[self.dump]
                self.size -= self.resource_bytes[self.dump]
            finished = self.finish()
            self.new_span(self.dump).CopyFrom(moved)
        self.size += span_bytes
        self.spans += 1
        self.events += events
        self.traces += root
        return finished

    def finish(self) -> Batch:
        """The request filled so far; a new one starts."""
        batch = Batch(self.request, self.spans, self.events, self.traces)
        self._start()
        return batch


def _framed(size: int) -> int:
    """What a message of ``size`` bytes adds to the message holding it: its tag (one byte
    for every field here), its length prefix and itself."""
    return 1 + _varint_bytes(size) + size


def _varint_bytes(value: int) -> int:
    return max(1, (value.bit_length() + 6) // 7)


def exported_span_count(frames: TraceFrames) -> int:
    """How many OTLP spans :func:`otlp_batches` makes: measured spans plus one root per
    sample that has a span or an event (for progress bars and checks)."""
    spans = frames.measured_spans()
    with_items = np.union1d(spans["sample_row"].to_numpy(),
                            frames.event_core["sample_row"].to_numpy())
    return len(spans) + len(with_items)


class _Plan:
    """Per-span and per-sample columns worked out once (as lists, read per item in the
    loops); messages built as requests fill."""

    def __init__(self, frames: TraceFrames, include_text: bool, max_chars: int) -> None:
        self.frames, self.include_text, self.max_chars = frames, include_text, max_chars
        spans = frames.measured_spans()
        self.span_index = spans.index
        sample_rows = spans["sample_row"].to_numpy()
        self.span_order = np.argsort(sample_rows, kind="stable")
        self.span_bounds = _bounds(sample_rows[self.span_order], len(frames.samples))
        events = frames.event_core
        self.event_order = np.argsort(events["sample_row"].to_numpy(), kind="stable")
        self.event_bounds = _bounds(events["sample_row"].to_numpy()[self.event_order],
                                    len(frames.samples))
        self.sample_rows = sample_rows.tolist()
        self.slime_ids = [_plain(span_id) for span_id in spans["span_id"].tolist()]
        ids = otlp_ids(frames, self.sample_rows, self.slime_ids)
        self.trace_ids, self.root_ids, self.span_ids = ids.traces, ids.roots, ids.spans
        parents = pd.Series(np.arange(len(spans)), index=spans.index).reindex(
            spans["parent_index"].to_numpy()).to_numpy()
        self.parents = [None if parent != parent else int(parent) for parent in parents]
        self.names = [clean_text(str(name)) for name in spans["name"].tolist()]
        starts = spans["start"].to_numpy()
        ends = np.where(np.isnan(spans["end"].to_numpy()), spans["display_end"].to_numpy(),
                        spans["end"].to_numpy())
        self.start_ns = _nanoseconds(starts)
        self.end_ns = _nanoseconds(np.fmax(ends, starts))
        self.errors = spans["error"].to_numpy(dtype=bool).tolist()
        self.attempts = spans["attempt"].tolist()
        self.open = (spans["state"] == "open").to_numpy().tolist()
        self.clip_reasons = [_plain(reason) for reason in spans["clip_reason"].tolist()]
        self.virtual = spans["virtual"].to_numpy(dtype=bool).tolist()
        self.engine = (spans["origin"] == "engine").to_numpy().tolist()
        position_of = pd.Series(np.arange(len(spans)), index=spans.index)
        targets = position_of.reindex(events["parent_index"].to_numpy()).to_numpy()
        self.event_targets = [None if target != target else int(target) for target in targets]
        self.event_ns = _nanoseconds(events["ts"].to_numpy())
        self.event_names = [clean_text(str(name)) for name in events["name"].tolist()]
        self.event_kinds = [str(kind) for kind in events["kind"].tolist()]
        self.event_span_ids = [_plain(span_id) for span_id in events["span_id"].tolist()]
        self.dumps = frames.samples["dump"].tolist()

    def exported_rows(self) -> Iterator[int]:
        """Sample rows with at least one span or event (a root span needs a time)."""
        spans, events = self.span_bounds, self.event_bounds
        for row in range(len(self.frames.samples)):
            if spans[row + 1] > spans[row] or events[row + 1] > events[row]:
                yield row

    def span_positions(self, row: int) -> np.ndarray:
        return self.span_order[self.span_bounds[row]:self.span_bounds[row + 1]]

    def event_positions(self, row: int) -> np.ndarray:
        return self.event_order[self.event_bounds[row]:self.event_bounds[row + 1]]

    def fill(self, pending: list[tuple[int, np.ndarray]], filling: _Filling
             ) -> Iterator[Batch]:
        """Build ``pending`` (sample row, its span positions) into ``filling``, in order;
        the requests it fills meanwhile. A negative row (``-1 - row``) is the rest of a
        split sample, whose root went earlier. Attributes are read for all of
        ``pending`` at once."""
        spans = np.concatenate([positions for _, positions in pending])
        start_attrs, end_attrs = self.frames.span_attrs(self.span_index[spans])
        attrs = iter(zip(start_attrs, end_attrs, strict=True))
        events = self._events_by_span(sorted({row if row >= 0 else -1 - row
                                              for row, _ in pending}))
        positions = [event for held in events.values() for event in held]
        attrs_of = dict(zip(positions, self.frames.event_attrs.rows(positions)
                            if positions else [], strict=True))
        for row, positions in pending:
            sample_row = row if row >= 0 else -1 - row
            dump = int(self.dumps[sample_row])
            if row >= 0:
                held = _with_attrs(events.pop(-1 - row, []), attrs_of)
                self._root(filling.new_span(dump), row, held)
                full = filling.place(len(held), root=True)
                if full is not None:
                    yield full
            for position in positions.tolist():
                start, end = next(attrs)
                held = _with_attrs(events.pop(position, []), attrs_of)
                self._span(filling.new_span(dump), position, start, end, held)
                full = filling.place(len(held), root=False)
                if full is not None:
                    yield full

    def _events_by_span(self, rows: list[int]) -> dict[int, list[int]]:
        """Event positions of ``rows`` by the exported span (position) they go on, or by
        ``-1 - row`` for those that go on the sample's root."""
        grouped: dict[int, list[int]] = {}
        for row in rows:
            for event in self.event_positions(row).tolist():
                target = self.event_targets[event]
                grouped.setdefault(-1 - row if target is None else target, []).append(event)
        return grouped

    def _root(self, span: Span, row: int, events: list[tuple[int, dict | None]]) -> int:
        sample = self.frames.samples.iloc[row]
        positions = self.span_positions(row)
        given = _nanoseconds(np.array([sample["start"], sample["end"]], dtype=float))
        known = np.concatenate([self.start_ns[positions], self.end_ns[positions],
                                self.event_ns[self.event_positions(row)], given])
        known = known[known > 0]
        span.trace_id = self.trace_ids[row]
        span.span_id = self.root_ids[row]
        span.name = SAMPLE_SPAN
        span.kind = Span.SPAN_KIND_INTERNAL
        span.start_time_unix_nano = int(known.min()) if len(known) else 0
        span.end_time_unix_nano = int(known.max()) if len(known) else 0
        _add_attributes(span.attributes, self._sample_fields(sample), self.max_chars)
        if sample["status"] == "failed":
            span.status.code = Status.STATUS_CODE_ERROR
            span.status.message = "failed"
        return self._add_events(span, events)

    def _sample_fields(self, sample: pd.Series) -> dict[str, Any]:
        fields = {"slime.rollout_id": sample["rollout_id"],
                  "slime.sample_index": sample["sample_index"],
                  "slime.group_index": sample["group_index"],
                  "slime.source": sample["source"], "slime.status": sample["status"],
                  "slime.reward": sample["reward"], "slime.label": sample["label"],
                  "slime.response_length": sample["response_length"],
                  "slime.attempts": sample["attempts"], "slime.trace_id": sample["trace_id"]}
        if sample["reward_detail"] is not None:
            fields["slime.reward_detail"] = sample["reward_detail"]
        if self.include_text:
            fields["input.value"] = sample["prompt"]
            fields["output.value"] = sample["response"]
        return {key: _plain(value) for key, value in fields.items()}

    def _span(self, span: Span, position: int, start: dict | None, end: dict | None,
              events: list[tuple[int, dict | None]]) -> int:
        row = self.sample_rows[position]
        parent = self.parents[position]
        span.trace_id = self.trace_ids[row]
        span.span_id = self.span_ids[position]
        span.parent_span_id = self.root_ids[row] if parent is None else self.span_ids[parent]
        span.name = self.names[position]
        span.kind = Span.SPAN_KIND_INTERNAL
        span.start_time_unix_nano = int(self.start_ns[position])
        span.end_time_unix_nano = int(self.end_ns[position])
        own: dict[str, Any] = {"slime.span_id": self.slime_ids[position],
                               "slime.attempt": self.attempts[position]}
        if self.open[position]:
            own["slime.state"] = "open"
            own["slime.clip_reason"] = self.clip_reasons[position]
        if self.virtual[position]:
            own["slime.pd_phase"] = True
        if self.engine[position]:
            own["slime.origin"] = "engine"
        attributes = {**(start or {}), **{k: v for k, v in (end or {}).items() if v is not None}}
        _add_attributes(span.attributes, beside_attributes(attributes, own), self.max_chars)
        if self.errors[position]:
            span.status.code = Status.STATUS_CODE_ERROR
        return self._add_events(span, events)

    def _add_events(self, span: Span, events: list[tuple[int, dict | None]]) -> int:
        """The events (position, attributes) as span events of ``span``; their count."""
        for position, values in events:
            event = span.events.add()
            event.time_unix_nano = int(self.event_ns[position])
            event.name = self.event_names[position]
            own = {} if self.event_kinds[position] == INSTANT_EVENT else {
                "slime.event_kind": self.event_kinds[position],
                "slime.span_id": self.event_span_ids[position]}
            _add_attributes(event.attributes, beside_attributes(values or {}, own),
                            self.max_chars)
        return len(events)


def _with_attrs(events: list[int], attrs_of: dict[int, dict | None]
                ) -> list[tuple[int, dict | None]]:
    return [(position, attrs_of[position]) for position in events]


def _bounds(sorted_rows: np.ndarray, n_rows: int) -> np.ndarray:
    """Where each sample row's items start in ``sorted_rows`` (n_rows + 1 offsets)."""
    return np.searchsorted(sorted_rows, np.arange(n_rows + 1), side="left")


def _nanoseconds(seconds: np.ndarray) -> np.ndarray:
    """Epoch seconds as integer nanoseconds (0 where unknown)."""
    clean = np.where(np.isfinite(seconds) & (seconds > 0), seconds, 0.0)
    return np.round(clean * 1e9).astype(np.int64)


def _resource(frames: TraceFrames, dump: int, service_name: str) -> ResourceSpans:
    """The resource of one dump's spans: the service, the dump and its rollout."""
    resource = ResourceSpans()
    fields: dict[str, Any] = {"service.name": service_name}
    if frames.paths:
        name = Path(frames.paths[dump]).name
        fields["slime.dump"] = name
    if dump < len(frames.rollout_ids) and frames.rollout_ids[dump] is not None:
        fields["slime.rollout_id"] = int(frames.rollout_ids[dump])
    _add_attributes(resource.resource.attributes, fields, MAX_STRING_CHARS)
    scope = resource.scope_spans.add()
    scope.scope.name = SCOPE_NAME
    scope.scope.version = __version__
    return resource


def _plain(value: Any) -> Any:
    """A frames cell as plain Python (pandas' NA and NaN as None, numpy scalars unboxed)."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if isinstance(value, np.generic) else value


def _add_attributes(target: Any, values: dict[str, Any], max_chars: int) -> None:
    """Append ``values`` as typed OTLP key-values; None values are left out. Plain
    scalars are set in place (the common case, millions of times in a big export);
    anything else goes through :func:`any_value`."""
    for key, value in values.items():
        kind = type(value)
        if kind is str:
            target.add(key=clean_text(key)).value.string_value = truncate(value, max_chars)
        elif kind is float:
            target.add(key=clean_text(key)).value.double_value = value
        elif kind is int and _INT64[0] <= value <= _INT64[1]:
            target.add(key=clean_text(key)).value.int_value = value
        elif kind is bool:
            target.add(key=clean_text(key)).value.bool_value = value
        elif value is not None:
            converted = any_value(value, max_chars)
            if converted is not None:
                target.add(key=clean_text(str(key))).value.CopyFrom(converted)


def any_value(value: Any, max_chars: int = MAX_STRING_CHARS) -> AnyValue | None:
    """``value`` as an OTLP ``AnyValue``: booleans, 64-bit integers, floats and text
    as themselves, a list of one of those kinds as an array, anything else as JSON
    text (a larger integer as its digits); None as None."""
    value = _plain(value)
    kind = type(value)
    if value is None:
        return None
    if kind is bool:
        return AnyValue(bool_value=value)
    if kind is int:
        return (AnyValue(int_value=value) if _INT64[0] <= value <= _INT64[1]
                else AnyValue(string_value=str(value)))
    if kind is float:
        return AnyValue(double_value=value)
    if kind is str:
        return AnyValue(string_value=truncate(value, max_chars))
    if kind in (list, tuple) and 0 < len(value) <= MAX_ARRAY_VALUES:
        kinds = {type(item) for item in value}
        field = _ARRAY_FIELDS.get(next(iter(kinds))) if len(kinds) == 1 else None
        if field == "int_value" and not all(_INT64[0] <= v <= _INT64[1] for v in value):
            field = None
        if field is not None:
            array = AnyValue()
            items = array.array_value.values
            for item in value:
                items.append(AnyValue(**{field: truncate(item, max_chars)
                                         if field == "string_value" else item}))
            return array
    text = json.dumps(json_safe(value, max_chars), ensure_ascii=False)
    return AnyValue(string_value=truncate(text, max_chars))
