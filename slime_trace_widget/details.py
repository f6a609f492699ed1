"""Everything about one span or event, as JSON-safe data for the details panel.

The kernel keeps the attributes; the renderer asks for one item when it is
clicked (notebook) or reads the same dicts embedded in the page (HTML
snapshot). Both go through these functions so the panel shows the same thing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .frames import TraceFrames
from .values import MAX_STRING_CHARS, json_safe


def sample_summary(frames: TraceFrames, row: int) -> dict[str, Any]:
    """The sample fields the panel lists above the item."""
    sample = frames.samples.loc[row]
    reward = _maybe_float(sample["reward"])
    return json_safe({
        "row": int(row),
        "id": _maybe_int(sample["sample_index"]),
        "group": _maybe_int(sample["group_index"]),
        "sample_index": _maybe_int(sample["sample_index"]),
        "group_index": _maybe_int(sample["group_index"]),
        "rollout_id": _maybe_int(sample["rollout_id"]),
        "source": _maybe_text(sample["source"]),
        "status": _maybe_text(sample["status"]),
        # a dict reward is shown whole where a scalar would be
        "reward": reward if reward is not None else sample["reward_detail"],
        "reward_detail": sample["reward_detail"],
        "label": _maybe_text(sample["label"]),
        "trace_id": _maybe_text(sample["trace_id"]),
        "attempts": int(sample["attempts"]),
        "start": _maybe_float(sample["start"]),
        "end": _maybe_float(sample["end"]),
        "duration": _maybe_float(sample["duration"]),
    })


def span_detail(frames: TraceFrames, index: int, max_chars: int = MAX_STRING_CHARS) -> dict:
    """Timing, parent, attributes, PD segments and sample summary of span ``index``."""
    span = frames.span_core.loc[index]
    segments = frames.segments
    own = segments[segments["span_index"].to_numpy() == index] if len(segments) else segments
    detail = {
        "kind": "span",
        "index": int(index),
        "name": str(span["name"]),
        "span_id": _maybe_text(span["span_id"]),
        "parent_span_id": _maybe_text(span["parent_span_id"]),
        "parent_name": _maybe_text(span["parent_name"]),
        "start": float(span["start"]),
        "end": _maybe_float(span["end"]),
        "display_end": float(span["display_end"]),
        "duration": _maybe_float(span["duration"]),
        "state": str(span["state"]),
        "clip_reason": _maybe_text(span["clip_reason"]),
        "attempt": int(span["attempt"]),
        "end_attempt": int(span["end_attempt"]),
        "virtual": bool(span["virtual"]),
        "start_attrs": span["start_attrs"] or {},
        "end_attrs": span["end_attrs"] or {},
        "segments": [
            {"name": str(s.name), "start": float(s.start), "end": float(s.end),
             "duration": float(s.duration)}
            for s in own.itertuples(index=False)
        ],
        "sample": sample_summary(frames, int(span["sample_row"])),
    }
    return json_safe(detail, max_chars)


def event_detail(frames: TraceFrames, index: int, max_chars: int = MAX_STRING_CHARS) -> dict:
    """Time, parent, attributes and sample summary of event ``index``."""
    event = frames.event_core.loc[index]
    detail = {
        "kind": str(event["kind"]),
        "index": int(index),
        "name": str(event["name"]),
        "ts": float(event["ts"]),
        "attempt": int(event["attempt"]),
        "span_id": _maybe_text(event["span_id"]),
        "parent_span_id": _maybe_text(event["parent_span_id"]),
        "parent_name": _maybe_text(event["parent_name"]),
        "attrs": event["attrs"] or {},
        "sample": sample_summary(frames, int(event["sample_row"])),
    }
    return json_safe(detail, max_chars)


def _maybe_int(value: Any) -> int | None:
    return None if pd.isna(value) else int(value)


def _maybe_float(value: Any) -> float | None:
    if value is None or pd.isna(value):
        return None
    return float(value)


def _maybe_text(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    return str(value)
