"""Everything about spans and events, as JSON-safe data for the details panel.

The kernel keeps the attributes; the renderer asks for one item when it is
clicked (notebook) or reads the same fields embedded column-wise in the page
(HTML snapshot, built for many items at once). Both use the column builders
below, so the panel shows the same fields either way.

A sample's texts (``SAMPLE_TEXT_FIELDS``) can run to megabytes, so
the summary carries only the start of each (:data:`TEXT_PREVIEW_CHARS`) and its
full length; the panel's "show all" asks for one text whole with
:func:`sample_text` (notebook), or reads a longer cut embedded in the page
(snapshot).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ..frames.model import TraceFrames
from ..values import MAX_STRING_CHARS, clean_text, exact_in_browser, json_safe, truncate
from .contract import SAMPLE_TEXT_FIELDS
from .payload import NAME_CHARS

#: Characters of each sample text in a summary: a few screens of the panel, and
#: small enough that a click on a span stays quick however long the texts are.
TEXT_PREVIEW_CHARS = 2_000
#: Most characters of one sample text sent for "show all" (the loader keeps no more).
FULL_TEXT_CHARS = 2_000_000


def span_fields(frames: TraceFrames, indices: np.ndarray | list[int]) -> dict[str, np.ndarray]:
    """Detail fields of the spans ``indices`` (``spans.index`` values), column-wise,
    attributes aside (one span's: :func:`span_detail`; a page's: ``page_attrs``).

    Arrays, so a page can embed them as bytes: numbers are float64 (not finite:
    none), ints int64, flags bool, texts objects (None: none), cut as the panel shows
    them. :func:`span_columns` has them as JSON lists.
    """
    spans = frames.span_core.loc[indices]
    return {
        "kind": np.full(len(spans), "span", dtype=object),
        "index": spans.index.to_numpy(dtype=np.int64),
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
        "attempt": spans["attempt"].to_numpy(dtype=np.int64),
        "end_attempt": spans["end_attempt"].to_numpy(dtype=np.int64),
        "virtual": spans["virtual"].to_numpy(dtype=bool),
    }


def event_fields(frames: TraceFrames, indices: np.ndarray | list[int]) -> dict[str, np.ndarray]:
    """Detail fields of the events ``indices`` (``events.index`` values), column-wise,
    attributes aside; arrays as in :func:`span_fields`."""
    events = frames.event_core.loc[indices]
    return {
        "kind": _texts(events["kind"]),
        "index": events.index.to_numpy(dtype=np.int64),
        "name": _texts(events["name"]),
        "ts": _numbers(events["ts"]),
        "attempt": events["attempt"].to_numpy(dtype=np.int64),
        "span_id": _texts(events["span_id"]),
        "parent_span_id": _texts(events["parent_span_id"]),
        "parent_name": _texts(events["parent_name"]),
    }


def segment_fields(frames: TraceFrames, span_indices: np.ndarray | list[int]
                   ) -> dict[str, np.ndarray]:
    """Exact PD segments of the given virtual spans, column-wise, with their owner
    (a ``spans.index`` value); arrays as in :func:`span_fields`."""
    segments = frames.segments
    if not len(segments):
        return {"owner": np.zeros(0, dtype=np.int64), "name": np.zeros(0, dtype=object),
                **{name: np.zeros(0) for name in ("start", "end", "duration")}}
    chosen = segments[segments["span_index"].isin(span_indices)]
    return {
        "owner": chosen["span_index"].to_numpy(dtype=np.int64),
        "name": _texts(chosen["name"]),
        "start": _numbers(chosen["start"]),
        "end": _numbers(chosen["end"]),
        "duration": _numbers(chosen["duration"]),
    }


def span_columns(frames: TraceFrames, indices: np.ndarray | list[int]) -> dict[str, list]:
    """:func:`span_fields` as JSON lists (numbers that are not finite: None)."""
    return json_columns(span_fields(frames, indices))


def event_columns(frames: TraceFrames, indices: np.ndarray | list[int]) -> dict[str, list]:
    """:func:`event_fields` as JSON lists."""
    return json_columns(event_fields(frames, indices))


def segment_columns(frames: TraceFrames, span_indices: np.ndarray | list[int]
                    ) -> dict[str, list]:
    """:func:`segment_fields` as JSON lists."""
    return json_columns(segment_fields(frames, span_indices))


def json_columns(fields: dict[str, np.ndarray]) -> dict[str, list]:
    """Field arrays as JSON-ready lists: floats that are not finite become None."""
    return {name: _json_numbers(values) if values.dtype.kind == "f" else values.tolist()
            for name, values in fields.items()}


def _json_numbers(values: np.ndarray) -> list[float | None]:
    return [v if math.isfinite(v) else None for v in values.tolist()]


def sample_summaries(frames: TraceFrames, rows: np.ndarray | list[int],
                     max_chars: int = MAX_STRING_CHARS,
                     preview_chars: int = TEXT_PREVIEW_CHARS) -> list[dict[str, Any]]:
    """The sample fields the panel lists above the item, one dict per row.

    Each of :data:`SAMPLE_TEXT_FIELDS` comes as its first ``preview_chars``
    characters and its full length (``<field>_chars``), added after ``json_safe``,
    whose budget for all strings together would otherwise cut them further.
    """
    samples = frames.samples.loc[rows]
    rewards = _json_numbers(_numbers(samples["reward"]))
    columns = {
        "row": samples.index.tolist(),
        "id": _ints(samples["sample_index"]),
        "group": _ints(samples["group_index"]),
        "rollout_id": _ints(samples["rollout_id"]),
        "source": _texts(samples["source"]).tolist(),
        "status": _texts(samples["status"]).tolist(),
        # a dict reward is shown whole where a scalar would be
        "reward": [detail if reward is None else reward
                   for reward, detail in zip(rewards, samples["reward_detail"], strict=True)],
        "trace_id": _texts(samples["trace_id"]).tolist(),
        "attempts": samples["attempts"].tolist(),
        "start": _json_numbers(_numbers(samples["start"])),
        "end": _json_numbers(_numbers(samples["end"])),
        "duration": _json_numbers(_numbers(samples["duration"])),
    }
    names = list(columns)
    summaries = [exact_in_browser(json_safe(dict(zip(names, values, strict=True)), max_chars))
                 for values in zip(*columns.values(), strict=True)]
    for field in SAMPLE_TEXT_FIELDS:
        for summary, value in zip(summaries, samples[field].tolist(), strict=True):
            summary[field], summary[f"{field}_chars"] = cut_text(value, preview_chars)
    return summaries


def sample_text(frames: TraceFrames, row: int, field: str,
                max_chars: int = FULL_TEXT_CHARS) -> dict[str, Any]:
    """Sample text ``field`` of sample ``row`` whole, up to ``max_chars``, for "show all".

    ``chars`` is the full length, so the panel can say what is still left out.
    """
    if field not in SAMPLE_TEXT_FIELDS:
        raise ValueError(f"field must be one of {', '.join(SAMPLE_TEXT_FIELDS)}")
    text, chars = cut_text(frames.samples.at[row, field], max_chars)
    return {"text": text, "chars": chars}


def cut_text(text: Any, max_chars: int) -> tuple[str | None, int | None]:
    """The first ``max_chars`` characters of ``text``, sendable, and its full length;
    ``(None, None)`` for a sample without that text (None, or NaN in a table)."""
    if not isinstance(text, str):
        return None, None
    return clean_text(text[:max_chars]), len(text)


def span_detail(frames: TraceFrames, index: int, max_chars: int = MAX_STRING_CHARS) -> dict:
    """Timing, parent, attributes, PD segments and sample summary of span ``index``."""
    detail = _first_row(span_columns(frames, [index]))
    (detail["start_attrs"],), (detail["end_attrs"],) = frames.span_attrs_json([index], max_chars)
    segments = segment_columns(frames, [index])
    detail["segments"] = [dict(zip(("name", "start", "end", "duration"), values, strict=True))
                          for values in zip(segments["name"], segments["start"],
                                            segments["end"], segments["duration"], strict=True)]
    row = int(frames.span_core.at[index, "sample_row"])
    detail["sample"] = sample_summaries(frames, [row], max_chars)[0]
    return detail


def event_detail(frames: TraceFrames, index: int, max_chars: int = MAX_STRING_CHARS) -> dict:
    """Time, parent, attributes and sample summary of event ``index``."""
    detail = _first_row(event_columns(frames, [index]))
    (detail["attrs"],) = frames.event_attrs_json([index], max_chars)
    row = int(frames.event_core.at[index, "sample_row"])
    detail["sample"] = sample_summaries(frames, [row], max_chars)[0]
    return detail


def _first_row(columns: dict[str, list]) -> dict[str, Any]:
    return {name: values[0] for name, values in columns.items()}


def _numbers(series: pd.Series) -> np.ndarray:
    return series.to_numpy(dtype=np.float64)


def _ints(series: pd.Series) -> list[int | None]:
    return [None if pd.isna(v) else int(v) for v in series]


def _texts(series: pd.Series) -> np.ndarray:
    """Text of a column (an object array, None where it has none), cut to
    ``NAME_CHARS``: names and ids, not attribute values. Each distinct value is cut
    once (names repeat across thousands of spans)."""
    codes, distinct = pd.factorize(series, use_na_sentinel=True)
    cut = np.array([None, *(truncate(str(v), NAME_CHARS)
                            for v in np.asarray(distinct, dtype=object).tolist())], dtype=object)
    return cut[codes + 1]
