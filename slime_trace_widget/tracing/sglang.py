"""SGLang ``meta_info`` as span attributes, PD disaggregation timings as child spans."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..schema import (
    PD_DURATION_ATTR,
    PD_PHASE_ATTR,
    PD_PHASES,
    PD_SUMMARY_EVENT,
    PD_SUMMARY_KEYS,
    SGLANG_META_KEYS,
    TRACE_CHILDREN_KEY,
)
from .records import _log_failure


def build_sglang_meta_trace_attrs(meta: Any) -> dict[str, Any]:
    """Span attributes from SGLang's ``meta_info``; pass them to ``span.update``.

    Keeps the standard keys that are present and not None, ``finish_reason`` (its
    ``type`` when a dict) and ``sglang_request_id`` (from ``meta["id"]``). PD
    disaggregation timings become the reserved ``_trace_children`` entry, which
    ``span.update`` turns into ``sglang_pd_*`` child spans instead of attributes.
    Never raises: unusable metadata gives ``{}``.
    """
    try:
        return _sglang_attrs(meta)
    except Exception:
        _log_failure("reading SGLang meta_info")
        return {}


def _sglang_attrs(meta: Any) -> dict[str, Any]:
    if not isinstance(meta, Mapping):
        return {}
    attrs = {key: meta[key] for key in SGLANG_META_KEYS if meta.get(key) is not None}
    finish_reason = meta.get("finish_reason")
    if isinstance(finish_reason, Mapping) and finish_reason.get("type") is not None:
        finish_reason = finish_reason["type"]  # else the whole dict, as slime keeps it
    if finish_reason is not None:
        attrs["finish_reason"] = finish_reason
    if meta.get("id") is not None:
        attrs["sglang_request_id"] = meta["id"]
    children = _pd_children(meta)
    if children:
        attrs[TRACE_CHILDREN_KEY] = children
    return attrs


def _pd_children(meta: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The PD phases laid end to end, then the summary event.

    Each child is ``{"type": "span"|"event", "name", "start_offset", "end_offset"
    (spans), "attrs", "children" (phases)}`` with offsets in seconds from the
    parent's start. The offsets are running sums, as slime computes them, so the
    timestamps match slime's to the last bit.
    """
    children: list[dict[str, Any]] = []
    cursor = 0.0
    for phase_name, label, segments in PD_PHASES:
        phase = _pd_phase(meta, phase_name, label, segments, cursor)
        if phase is not None:
            children.append(phase)
            cursor = phase["end_offset"]
    summary = {key: meta[key] for key in PD_SUMMARY_KEYS if meta.get(key) is not None}
    if summary:
        children.append(
            {"type": "event", "name": PD_SUMMARY_EVENT, "start_offset": cursor, "attrs": summary}
        )
    return children


def _pd_phase(
    meta: Mapping[str, Any],
    phase_name: str,
    label: str,
    segments: tuple[tuple[str, str], ...],
    start: float,
) -> dict[str, Any] | None:
    steps = []
    offset = 0.0
    for key, name in segments:
        duration = _positive_duration(meta.get(key))
        if duration is None:
            continue
        end = offset + duration
        steps.append(
            {
                "type": "span",
                "name": name,
                "start_offset": offset,
                "end_offset": end,
                "attrs": {key: meta[key]},
            }
        )
        offset = end
    if not steps:
        return None
    return {
        "type": "span",
        "name": phase_name,
        "start_offset": start,
        "end_offset": start + offset,
        "attrs": {PD_PHASE_ATTR: label, PD_DURATION_ATTR: offset},
        "children": steps,
    }


def _positive_duration(value: Any) -> float | None:
    """A usable segment duration, or None for missing, non-numeric, non-finite or <= 0."""
    if value is None or isinstance(value, bool):
        return None
    try:
        duration = float(value)
    except (TypeError, ValueError):
        return None
    return duration if math.isfinite(duration) and duration > 0.0 else None


