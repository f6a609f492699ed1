"""Export to Perfetto / chrome://tracing: Chrome trace event JSON.

Times are microseconds rebased to the dump start (epoch microseconds lose
precision in doubles). One process per rollout, one thread per sample, named
and ordered with metadata events. Complete (``X``) events must nest on a
thread, but a sample's spans need not (concurrent tool calls, PD phases that
outlast their generation), so spans that would partly overlap go to extra
threads of the same sample ("#12 ⋯1"), placed right after it. The spans
exported are the measured ones (``analysis.measured_spans``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .analysis import measured_spans
from .values import json_safe

if TYPE_CHECKING:
    from .frames import TraceFrames

PERFETTO_MAX_CHARS = 10_000


def perfetto_trace(frames: TraceFrames) -> dict[str, Any]:
    """The Chrome trace event document for ``frames``."""
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
    extra_tracks: dict[int, int] = {}
    for row, track in zip(spans["sample_row"].tolist(), tracks.tolist(), strict=True):
        extra_tracks[row] = max(extra_tracks.get(row, 0), track)
    for row, sample in samples.iterrows():
        for track in range(extra_tracks.get(row, 0) + 1):
            tid = _tid(row, track)
            events.append({"ph": "M", "name": "thread_name", "pid": int(pid_of_row[row]),
                           "tid": tid, "args": {"name": _thread_name(sample, track)}})
            events.append({"ph": "M", "name": "thread_sort_index", "pid": int(pid_of_row[row]),
                           "tid": tid, "args": {"sort_index": tid}})
    start_attrs, end_attrs = frames.span_attrs(spans.index)
    events += _complete_events(spans, start_attrs, end_attrs, tracks, pid_of_row, t0)
    events += _instant_events(frames.event_core, frames.event_attrs.dicts(), pid_of_row, t0)
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"source": "slime-trace-widget", "t0_epoch_s": t0,
                          "dumps": frames.paths}}


def export_perfetto(frames: TraceFrames, path: str | Path) -> Path:
    """Write :func:`perfetto_trace` as JSON to ``path`` (open it in ui.perfetto.dev)."""
    target = Path(path)
    with target.open("w", encoding="utf-8") as stream:
        json.dump(perfetto_trace(frames), stream, allow_nan=False, ensure_ascii=False,
                  separators=(",", ":"))
    return target


def _tid(row: int, track: int) -> int:
    return int(row) * 64 + track + 1


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
    """Track per span so that complete events on one track nest properly (greedy)."""
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
    return np.minimum(tracks, 63)


def _complete_events(spans: pd.DataFrame, starts_of: list, ends_of: list,
                     tracks: np.ndarray, pid_of_row: np.ndarray,
                     t0: float) -> list[dict[str, Any]]:
    rows = spans["sample_row"].to_numpy()
    # Round both ends, then subtract: adjacent spans (one ends where the next starts)
    # stay adjacent instead of overlapping by a rounding error.
    ts = np.round((spans["start"].to_numpy() - t0) * 1e6, 3)
    dur = np.round((spans["display_end"].to_numpy() - t0) * 1e6, 3) - ts
    out = []
    for i, (name, state, attempt, span_id, start_attrs, end_attrs) in enumerate(zip(
        spans["name"].astype(str), spans["state"].astype(str), spans["attempt"].tolist(),
        spans["span_id"].tolist(), starts_of, ends_of, strict=True,
    )):
        args = json_safe({**(start_attrs or {}), **(end_attrs or {})}, PERFETTO_MAX_CHARS)
        args.update(span_id=span_id, state=state, attempt=attempt)
        out.append({"ph": "X", "name": name if state == "closed" else f"{name} (open)",
                    "cat": "span", "pid": int(pid_of_row[rows[i]]),
                    "tid": _tid(rows[i], int(tracks[i])), "ts": float(ts[i]),
                    "dur": float(max(dur[i], 0.0)), "args": args})
    return out


def _instant_events(events: pd.DataFrame, attrs_of: list, pid_of_row: np.ndarray,
                    t0: float) -> list[dict[str, Any]]:
    rows = events["sample_row"].to_numpy()
    ts = np.round((events["ts"].to_numpy() - t0) * 1e6, 3)
    out = []
    for i, (name, kind, attrs) in enumerate(zip(events["name"].astype(str),
                                                events["kind"].astype(str), attrs_of,
                                                strict=True)):
        args = json_safe(attrs or {}, PERFETTO_MAX_CHARS)
        args["kind"] = kind
        out.append({"ph": "i", "s": "t", "name": name, "cat": kind,
                    "pid": int(pid_of_row[rows[i]]), "tid": _tid(rows[i], 0),
                    "ts": float(ts[i]), "args": args})
    return out
