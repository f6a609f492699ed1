"""Read the per-sample fields of a dump record (dict or placeholder object).

Samples arrive as ``Sample.to_dict()`` dicts, as objects whose class was not
installed (inert placeholders from the safe loader, already turned into dicts
by ``dump``), or as anything else a damaged dump holds. Each field is read
defensively: a missing or odd field gives ``None``/NaN, never an exception.
Integers outside the int64 columns they go to read as missing, and text is
made with :func:`values.short_text`, which stays fast on crafted values
(``str`` of a pickled list-of-lists that shares its halves never returns).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..values import bounded_int, plain_value, short_text, truncate
from .carrier import MAX_ATTEMPT

_SOURCE_KEYS = ("source", "source_name")
#: The fields of a sample record that flattening reads; the rest (token lists,
#: log-probs, loss masks, multimodal inputs) can be dropped before it.
READ_FIELDS = frozenset({"trace", "reward", "index", "group_index", "rollout_id", "metadata",
                         "status", "label", "response_length", "prompt", "response",
                         "remove_sample"})
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_TEXT_LIMIT = 10_000
#: Longest prompt, response or metadata text kept (the panel shows the start of it).
SAMPLE_TEXT_LIMIT = 2_000_000


@dataclass
class SampleFields:
    """What the samples table and the carrier reader need from one sample."""

    rollout_id: int | None
    dump: int
    index: int | None
    group_index: int | None
    source: str | None
    status: str | None
    label: str | None
    reward: float
    reward_detail: Any
    response_length: int | None
    trace_id: str | None
    prompt: str | None  # a chat prompt (list of messages) as JSON text
    response: str | None
    metadata: str | None  # JSON text
    carrier_attempt: int
    events: list | None  # None = untraced (or unreadable carrier)
    carrier_problem: str | None  # warning kind when the carrier could not be read
    remove_sample: bool = False  # slime's Sample.remove_sample: zero loss mask, no training


def sample_fields(sample: Any, rollout_id: int | None, dump: int) -> SampleFields:
    """Extract :class:`SampleFields` from one sample record."""
    record = sample if isinstance(sample, dict) else _fields_of(sample)
    carrier = record.get("trace")
    events, problem = _carrier_events(carrier)
    carrier_dict = carrier if isinstance(carrier, dict) else {}
    reward, detail = _reward(record.get("reward"))
    index = _int_or_none(record.get("index"))
    group = _int_or_none(record.get("group_index"))
    return SampleFields(
        rollout_id=rollout_id if rollout_id is not None else _int_or_none(record.get("rollout_id")),
        dump=dump,
        index=index if index is not None else _int_or_none(carrier_dict.get("sample_id")),
        group_index=group if group is not None else _int_or_none(carrier_dict.get("group_id")),
        source=_source(record.get("metadata")),
        status=_status_text(record.get("status")),
        label=_text_or_none(record.get("label")),
        reward=reward,
        reward_detail=detail,
        response_length=_int_or_none(record.get("response_length")),
        trace_id=_text_or_none(carrier_dict.get("trace_id")),
        prompt=_long_text(record.get("prompt")),
        response=_long_text(record.get("response")),
        metadata=_long_text(record.get("metadata")),
        carrier_attempt=bounded_int(carrier_dict.get("attempt"), 0, MAX_ATTEMPT) or 0,
        events=events,
        carrier_problem=problem,
        remove_sample=_flag(record.get("remove_sample")),
    )


def _fields_of(sample: Any) -> dict:
    fields = getattr(sample, "__dict__", None)
    return fields if isinstance(fields, dict) else {}


def _carrier_events(carrier: Any) -> tuple[list | None, str | None]:
    if carrier is None:
        return None, None
    if not isinstance(carrier, dict):
        return None, "carrier_not_a_dict"
    events = carrier.get("events")
    if events is None:
        return [], None
    if not isinstance(events, list):
        return None, "events_not_a_list"
    return events, None


def _source(metadata: Any) -> str | None:
    if not isinstance(metadata, dict):
        return None
    for key in _SOURCE_KEYS:
        if metadata.get(key) is not None:
            return short_text(metadata[key], _TEXT_LIMIT)
    for key, value in metadata.items():
        if isinstance(key, str) and "source" in key and value is not None:
            return short_text(value, _TEXT_LIMIT)
    return None


def _status_text(status: Any) -> str | None:
    """Status string from a str or an Enum (the loader has made an enum's placeholder its
    value already: ``placeholders.sample_records``), else the value as short text."""
    if status is None or isinstance(status, str):
        return status
    value = getattr(status, "value", None)
    if isinstance(value, str):
        return value
    return short_text(status, _TEXT_LIMIT)


def _reward(reward: Any) -> tuple[float, Any]:
    if isinstance(reward, dict):
        return math.nan, plain_value(reward)
    try:
        if reward is None or isinstance(reward, (str, bytes)):
            return math.nan, None
        return float(reward), None
    except Exception:  # an int past float range, a tensor of many elements, an odd object
        return math.nan, plain_value(reward)


def _flag(value: Any) -> bool:
    """Whether slime's ``if sample.remove_sample:`` would hold: Python's truth of a bool or
    a number, Python's or numpy's, alone or as an array of one (a tensor arrives as a
    numpy array); text, containers and anything else read as unset. Only plain types
    are asked, so no method of an unpickled object runs."""
    if isinstance(value, np.ndarray):
        if value.size != 1 or value.dtype.kind not in "biuf":
            return False
        value = value.reshape(-1)[0]
    if type(value) in (bool, int, float) or isinstance(value, np.bool_ | np.integer |
                                                         np.floating):
        return bool(value)
    return False


def _int_or_none(value: Any) -> int | None:
    return bounded_int(value, _INT64_MIN, _INT64_MAX)


def _long_text(value: Any) -> str | None:
    """Text a user reads to understand a sample; containers become JSON text. Text past
    :data:`SAMPLE_TEXT_LIMIT` is cut with the marker that says how much is missing, so
    a view of the whole text never passes a cut one off as whole."""
    if value is None:
        return None
    if type(value) is str:
        return value if len(value) <= SAMPLE_TEXT_LIMIT else truncate(value, SAMPLE_TEXT_LIMIT)
    return short_text(value, SAMPLE_TEXT_LIMIT)


def _text_or_none(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else short_text(value, _TEXT_LIMIT)
