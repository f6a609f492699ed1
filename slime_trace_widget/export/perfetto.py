"""Export to Perfetto / chrome://tracing: Chrome trace event JSON.

Times are whole microseconds rebased to the dump start (epoch microseconds lose
precision in doubles), so that a reader that truncates ``ts * 1000`` to nanoseconds
and one that rounds it see the same instants: a child that ends with its parent
then ends with it in both (a fraction such as 7543587.446 truncates to
...445 ns, its parent's end to one nanosecond less, and Perfetto drops a slice
that outlasts its parent). Epoch seconds in a double carry 0.24 us anyway.

One process per rollout, one thread per sample, named and ordered with metadata
events. Complete (``X``) events must nest on a
thread, but a sample's spans need not (concurrent tool calls, PD phases that
outlast their generation), so spans that would partly overlap go to extra
threads of the same sample ("#12 ⋯1"), placed right after it: as many as the
sample's concurrency needs, so no two complete events on one thread overlap
partly (Perfetto drops those). Thread ids are numbered sample by sample, lane by
lane, from 1. The spans
exported are the measured ones (``analysis.measured_spans``); an instant event
goes to its parent span's thread. Links between rows (``links``) are flows, drawn
by Perfetto as arrows, each bound to its own two slices by a ``bind_id`` on their
complete events (``perfetto_flows``: a flow event placed inside a span would bind to
a child that starts with it); so an event that ends a link is written as a complete
event of no duration (Perfetto reads both as the same zero-length slice, but an
instant cannot carry a flow). An event's ``args`` are its attributes (a span's start
and end ones) and, named apart from them as OTLP names them, the exporter's own:
``slime.span_id``, ``slime.state``, ``slime.attempt``, an instant's ``slime.kind``,
and the kinds of the links a slice ends, ``slime.links`` (an attribute of one of
those names is kept as ``attr.<name>``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..answers.links import links
from ..answers.stats import measured_spans
from ..frames.view_memory import attr_view_bytes, check_room
from ..values import json_safe, truncate
from ..whole_files import replaced
from .own_fields import beside_attributes
from .perfetto_flows import bind_flows

if TYPE_CHECKING:
    from ..frames.model import TraceFrames

PERFETTO_MAX_CHARS = 10_000
#: What the document may hold per span, event and sample beyond their attribute
#: dicts: its event dict and track entries (about 600 bytes on the demo dumps).
_BYTES_PER_ROW = 1024


def perfetto_trace(frames: TraceFrames) -> dict[str, Any]:
    """The Chrome trace event document for ``frames``. It holds every span's and
    event's attributes as Python objects: MemoryError, before it is made, when an
    upper estimate of it does not fit in the memory available."""
    check_room("the Perfetto trace", lambda look_at_text: _document_bytes(frames, look_at_text),
               instead="export fewer dumps at once, or use the Parquet export, which writes "
                       "the Arrow tables as they are")
    t0 = frames.t0 if frames.t0 == frames.t0 else 0.0
    samples = frames.samples
    pid_of_row = samples["dump"].to_numpy() + 1
    events: list[dict[str, Any]] = []
    for dump, rollout_id in enumerate(frames.rollout_ids):
        label = f"rollout {rollout_id}" if rollout_id is not None else f"dump {dump}"
        events.append({"ph": "M", "name": "process_name", "pid": dump + 1, "tid": 0,
                       "args": {"name": label}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": dump + 1, "tid": 0,
                       "args": {"sort_index": dump}})
    spans = measured_spans(frames)
    tracks = _nesting_tracks(spans)
    threads = _Threads(len(samples), spans["sample_row"].to_numpy(), tracks)
    for row, sample in samples.iterrows():
        for track in range(threads.count(row)):
            tid = threads.tid(row, track)
            events.append({"ph": "M", "name": "thread_name", "pid": int(pid_of_row[row]),
                           "tid": tid, "args": {"name": _thread_name(sample, track)}})
            events.append({"ph": "M", "name": "thread_sort_index", "pid": int(pid_of_row[row]),
                           "tid": tid, "args": {"sort_index": tid}})
    start_attrs, end_attrs = frames.span_attrs(spans.index)
    complete = _complete_events(spans, start_attrs, end_attrs, threads, tracks, pid_of_row, t0)
    instants = _instant_events(frames.event_core, frames.event_attrs.dicts(), threads,
                               _event_tracks(frames, spans, tracks), pid_of_row, t0)
    table = links(frames)
    linked = _linked_events(table, frames.event_core.index)
    slices, labels = _reading_order(
        complete + [_zero_length(instants[i]) for i in np.flatnonzero(linked)],
        [("span", label) for label in spans.index.tolist()]
        + [("event", label) for label in frames.event_core.index[linked].tolist()])
    ends, kinds = _link_slices(table, labels)
    slices, flows = bind_flows(slices, ends, kinds)
    events += slices + flows + [instants[i] for i in np.flatnonzero(~linked)]
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"source": "slime-trace-widget", "t0_epoch_s": t0,
                          "dumps": [truncate(str(path), PERFETTO_MAX_CHARS)
                                    for path in frames.paths]}}


def export_perfetto(frames: TraceFrames, path: str | Path) -> Path:
    """Write :func:`perfetto_trace` as JSON to ``path`` (open it in ui.perfetto.dev)."""
    target = Path(path)
    with replaced(target) as temporary, temporary.open("w", encoding="utf-8") as stream:
        json.dump(perfetto_trace(frames), stream, allow_nan=False, ensure_ascii=False,
                  separators=(",", ":"))
    return target


def _document_bytes(frames: TraceFrames, look_at_text: bool) -> int:
    tables = frames.tables
    rows = tables.samples.num_rows + tables.span_core.num_rows + tables.event_core.num_rows
    return rows * _BYTES_PER_ROW + sum(
        attr_view_bytes(attrs, look_at_text)
        for attrs in (frames.span_start_attrs, frames.span_end_attrs, frames.event_attrs))


class _Threads:
    """The thread ids of the samples' tracks: each sample row gets as many consecutive
    ids as it has tracks (at least one), rows in order, from 1, so no two tracks of any
    samples share a thread and the ids stay small whatever a sample's concurrency."""

    def __init__(self, n_rows: int, span_rows: np.ndarray, tracks: np.ndarray) -> None:
        counts = np.ones(n_rows, dtype=np.int64)
        if len(span_rows):
            np.maximum.at(counts, span_rows.astype(np.int64), tracks.astype(np.int64) + 1)
        self.counts = counts
        self.first = np.concatenate([[1], 1 + np.cumsum(counts)[:-1]]).astype(np.int64)

    def count(self, row: int) -> int:
        """How many tracks (threads) sample row ``row`` has."""
        return int(self.counts[row])

    def tid(self, row: int, track: int) -> int:
        return int(self.first[row] + track)

    def tids(self, rows: np.ndarray, tracks: np.ndarray) -> np.ndarray:
        """Thread ids of (row, track) pairs, element by element."""
        return self.first[rows.astype(np.int64)] + tracks


def _thread_name(sample: pd.Series, track: int) -> str:
    index = sample["sample_index"]
    parts = [f"#{'?' if pd.isna(index) else int(index)}"]
    if isinstance(sample["source"], str):
        parts.append(sample["source"])
    if sample["reward"] == sample["reward"]:
        parts.append(f"reward={sample['reward']:g}")
    name = " ".join(parts)
    return name if track == 0 else f"{name} ⋯{track}"


def _nesting_tracks(spans: pd.DataFrame) -> np.ndarray:
    """Track per span so that complete events on one track nest properly (greedy): a
    span goes to the first track of its sample where it nests, else to a new one, with
    no limit on the number of tracks."""
    tracks = np.zeros(len(spans), dtype=np.int64)
    rows = spans["sample_row"].to_numpy()
    starts = spans["start"].to_numpy()
    ends = spans["display_end"].to_numpy()
    order = np.lexsort((-ends, starts, rows))
    stacks: list[list[float]] = []
    current_row = None
    for position in order.tolist():
        if rows[position] != current_row:
            current_row, stacks = rows[position], []
        start, end = starts[position], ends[position]
        for track, stack in enumerate(stacks):
            while stack and stack[-1] <= start:
                stack.pop()
            if not stack or end <= stack[-1]:
                stack.append(end)
                tracks[position] = track
                break
        else:
            stacks.append([end])
            tracks[position] = len(stacks) - 1
    return tracks


def _event_tracks(frames: TraceFrames, spans: pd.DataFrame, tracks: np.ndarray) -> np.ndarray:
    """Track per event: its parent span's, when that span is exported, else 0. A thread's
    instant nests under the slice enclosing it, so an event whose parent went to an
    extra track must go there too (a remote link's ``trace_import`` inside the span it
    links to among them)."""
    parent = frames.event_core["parent_index"].to_numpy()
    labels = frames.span_core.index.to_numpy()[np.maximum(parent, 0)]
    at = np.where(parent >= 0, spans.index.get_indexer(labels), -1)
    return np.where(at >= 0, tracks[np.maximum(at, 0)], 0)


def _complete_events(spans: pd.DataFrame, starts_of: list, ends_of: list,
                     threads: _Threads, tracks: np.ndarray, pid_of_row: np.ndarray,
                     t0: float) -> list[dict[str, Any]]:
    rows = spans["sample_row"].to_numpy()
    tids = threads.tids(rows, tracks)
    # Round both ends, then subtract: adjacent spans (one ends where the next starts)
    # stay adjacent instead of overlapping by a rounding error.
    ts = _microseconds(spans["start"].to_numpy(), t0)
    dur = _microseconds(spans["display_end"].to_numpy(), t0) - ts
    out = []
    for i, (name, state, attempt, span_id, start_attrs, end_attrs) in enumerate(zip(
        spans["name"].astype(str), spans["state"].astype(str), spans["attempt"].tolist(),
        spans["span_id"].tolist(), starts_of, ends_of, strict=True,
    )):
        args = beside_attributes(
            json_safe({**(start_attrs or {}), **(end_attrs or {})}, PERFETTO_MAX_CHARS),
            {"slime.span_id": span_id, "slime.state": state, "slime.attempt": attempt})
        out.append({"ph": "X", "name": name if state == "closed" else f"{name} (open)",
                    "cat": "span", "pid": int(pid_of_row[rows[i]]),
                    "tid": int(tids[i]), "ts": int(ts[i]),
                    "dur": int(max(dur[i], 0)), "args": args})
    return out


def _instant_events(events: pd.DataFrame, attrs_of: list, threads: _Threads,
                    tracks: np.ndarray, pid_of_row: np.ndarray,
                    t0: float) -> list[dict[str, Any]]:
    rows = events["sample_row"].to_numpy()
    tids = threads.tids(rows, tracks)
    ts = _microseconds(events["ts"].to_numpy(), t0)
    out = []
    for i, (name, kind, attrs) in enumerate(zip(events["name"].astype(str),
                                                events["kind"].astype(str), attrs_of,
                                                strict=True)):
        args = beside_attributes(json_safe(attrs or {}, PERFETTO_MAX_CHARS), {"slime.kind": kind})
        out.append({"ph": "i", "s": "t", "name": name, "cat": kind,
                    "pid": int(pid_of_row[rows[i]]), "tid": int(tids[i]),
                    "ts": int(ts[i]), "args": args})
    return out


def _linked_events(table: pd.DataFrame, event_labels: pd.Index) -> np.ndarray:
    """Per event (``event_core`` order), whether it ends a link."""
    ends = [table.loc[table[f"{side}_kind"] == "event", f"{side}_index"].to_numpy()
            for side in ("from", "to")]
    return np.isin(event_labels.to_numpy(), np.concatenate(ends))


def _zero_length(instant: dict[str, Any]) -> dict[str, Any]:
    """An instant event as a complete event of no duration, which can carry a flow."""
    return {key: value for key, value in instant.items() if key != "s"} | {"ph": "X", "dur": 0}


def _reading_order(slices: list[dict[str, Any]], labels: list[tuple[str, int]]
                   ) -> tuple[list[dict[str, Any]], list[tuple[str, int]]]:
    """The complete events and their (table, label) in the order Perfetto reads them:
    by ``ts``, the longest first (a parent after a child that starts with it would not
    enclose the slice already open, in a reader that keeps the order given at one
    time), then spans before events and each by label, so that a group's hub (its
    lowest label) is read before its copies."""
    order = np.lexsort((  # the last key sorts first
        np.array([label for _, label in labels], dtype=np.int64),
        np.array([table != "span" for table, _ in labels], dtype=bool),
        -np.array([event["dur"] for event in slices], dtype=np.int64),
        np.array([event["ts"] for event in slices], dtype=np.int64))).tolist()
    return [slices[i] for i in order], [labels[i] for i in order]


def _link_slices(table: pd.DataFrame, labels: list[tuple[str, int]]
                 ) -> tuple[list[tuple[int, int]], list[str]]:
    """Per link whose two ends were exported, the positions of its slices among
    ``labels``, and its kind."""
    position = {label: slot for slot, label in enumerate(labels)}
    ends, kinds = [], []
    for kind, from_kind, from_index, to_kind, to_index in zip(
            table["kind"].astype(str), table["from_kind"].astype(str), table["from_index"],
            table["to_kind"].astype(str), table["to_index"], strict=True):
        first = position.get((from_kind, int(from_index)))
        second = position.get((to_kind, int(to_index)))
        if first is not None and second is not None:
            ends.append((first, second))
            kinds.append(kind)
    return ends, kinds


def _microseconds(times: np.ndarray, t0: float) -> np.ndarray:
    """Epoch seconds ``times`` as whole microseconds after ``t0`` (float64)."""
    return np.round((times - t0) * 1e6)
