"""Everything about spans and events, as JSON-safe data for the details panel.

The kernel keeps the attributes; the renderer asks for one item when it is
clicked (notebook) or reads the same fields embedded column-wise in the page
(HTML snapshot, built for many items at once). Both use the column builders
below, so the panel shows the same fields either way.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from .frames import TraceFrames
from .payload import NAME_CHARS
from .values import MAX_STRING_CHARS, json_safe, truncate


def span_columns(frames: TraceFrames, indices: np.ndarray | list[int],
                 max_chars: int = MAX_STRING_CHARS) -> dict[str, list]:
    """Detail fields of the spans ``indices`` (``spans.index`` values), column-wise."""
    spans = frames.span_core.loc[indices]
    return {
        "kind": ["span"] * len(spans),
        "index": spans.index.tolist(),
        "name": _texts(spans["name"]),
        "span_id": _texts(spans["span_id"]),
        "parent_span_id": _texts(spans["parent_span_id"]),
        "parent_name": _texts(spans["parent_name"]),
        "start": _numbers(spans["start"]),
        "end": _numbers(spans["end"]),
        "display_end": _numbers(spans["display_end"]),
        "duration": _numbers(spans["duration"]),
        "state": _texts(spans["state"]),
        "clip_reason": _texts(spans["clip_reason"]),
        "attempt": spans["attempt"].tolist(),
        "end_attempt": spans["end_attempt"].tolist(),
        "virtual": spans["virtual"].tolist(),
        "start_attrs": [json_safe(a or {}, max_chars) for a in spans["start_attrs"]],
        "end_attrs": [json_safe(a or {}, max_chars) for a in spans["end_attrs"]],
    }


def event_columns(frames: TraceFrames, indices: np.ndarray | list[int],
                  max_chars: int = MAX_STRING_CHARS) -> dict[str, list]:
    """Detail fields of the events ``indices`` (``events.index`` values), column-wise."""
    events = frames.event_core.loc[indices]
    return {
        "kind": _texts(events["kind"]),
        "index": events.index.tolist(),
        "name": _texts(events["name"]),
        "ts": _numbers(events["ts"]),
        "attempt": events["attempt"].tolist(),
        "span_id": _texts(events["span_id"]),
        "parent_span_id": _texts(events["parent_span_id"]),
        "parent_name": _texts(events["parent_name"]),
        "attrs": [json_safe(a or {}, max_chars) for a in events["attrs"]],
    }


def segment_columns(frames: TraceFrames, span_indices: np.ndarray | list[int]) -> dict[str, list]:
    """Exact PD segments of the given virtual spans, column-wise, with their owner."""
    segments = frames.segments
    chosen = segments[segments["span_index"].isin(span_indices)] if len(segments) else segments
    return {
        "owner": chosen["span_index"].tolist() if len(chosen) else [],
        "name": _texts(chosen["name"]) if len(chosen) else [],
        "start": _numbers(chosen["start"]) if len(chosen) else [],
        "end": _numbers(chosen["end"]) if len(chosen) else [],
        "duration": _numbers(chosen["duration"]) if len(chosen) else [],
    }


def sample_summaries(frames: TraceFrames, rows: np.ndarray | list[int],
                     max_chars: int = MAX_STRING_CHARS) -> list[dict[str, Any]]:
    """The sample fields the panel lists above the item, one dict per row."""
    samples = frames.samples.loc[rows]
    rewards = _numbers(samples["reward"])
    columns = {
        "row": samples.index.tolist(),
        "id": _ints(samples["sample_index"]),
        "group": _ints(samples["group_index"]),
        "rollout_id": _ints(samples["rollout_id"]),
        "source": _texts(samples["source"]),
        "status": _texts(samples["status"]),
        # a dict reward is shown whole where a scalar would be
        "reward": [detail if reward is None else reward
                   for reward, detail in zip(rewards, samples["reward_detail"], strict=True)],
        "label": _texts(samples["label"]),
        "trace_id": _texts(samples["trace_id"]),
        "attempts": samples["attempts"].tolist(),
        "start": _numbers(samples["start"]),
        "end": _numbers(samples["end"]),
        "duration": _numbers(samples["duration"]),
    }
    names = list(columns)
    return [json_safe(dict(zip(names, values, strict=True)), max_chars)
            for values in zip(*columns.values(), strict=True)]


def span_detail(frames: TraceFrames, index: int, max_chars: int = MAX_STRING_CHARS) -> dict:
    """Timing, parent, attributes, PD segments and sample summary of span ``index``."""
    detail = _first_row(span_columns(frames, [index], max_chars))
    segments = segment_columns(frames, [index])
    detail["segments"] = [dict(zip(("name", "start", "end", "duration"), values, strict=True))
                          for values in zip(segments["name"], segments["start"],
                                            segments["end"], segments["duration"], strict=True)]
    row = int(frames.span_core.at[index, "sample_row"])
    detail["sample"] = sample_summaries(frames, [row], max_chars)[0]
    return detail


def event_detail(frames: TraceFrames, index: int, max_chars: int = MAX_STRING_CHARS) -> dict:
    """Time, parent, attributes and sample summary of event ``index``."""
    detail = _first_row(event_columns(frames, [index], max_chars))
    row = int(frames.event_core.at[index, "sample_row"])
    detail["sample"] = sample_summaries(frames, [row], max_chars)[0]
    return detail


def _first_row(columns: dict[str, list]) -> dict[str, Any]:
    return {name: values[0] for name, values in columns.items()}


def _numbers(series: pd.Series) -> list[float | None]:
    values = series.to_numpy(dtype=np.float64)
    return [v if math.isfinite(v) else None for v in values.tolist()]


def _ints(series: pd.Series) -> list[int | None]:
    return [None if pd.isna(v) else int(v) for v in series]


def _texts(series: pd.Series) -> list[str | None]:
    """Text of a column, cut to ``NAME_CHARS``: names and ids, not attribute values."""
    return [None if v is None or (isinstance(v, float) and v != v)
            else truncate(str(v), NAME_CHARS) for v in series.tolist()]
