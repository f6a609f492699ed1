"""Virtual ``[P]`` / ``[D]`` spans for SGLang prefill/decode (PD) timings.

Both forms of the format give the same virtual spans, so the timeline and every
analysis read PD data one way. In the child-span form each ``sglang_pd_prefill``
/ ``sglang_pd_decode`` span becomes a virtual span ``"<generation name> [P]"``
(or ``[D]``) over the same interval, its children the segments; the real spans
stay, flagged ``pd_detail``. In the attribute form the generation span's
``pd_*_duration`` end attributes are laid end to end from its start. Segments
that are missing, non-positive, non-finite or past ``carrier.TS_LIMIT`` are left
out; the summary keys go into both virtual spans' end attributes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..schema import (
    PD_DURATION_ATTR,
    PD_PHASE_ATTR,
    PD_PHASE_LABELS,
    PD_SPAN_PREFIX,
    PD_SUMMARY_EVENT,
    PD_SUMMARY_KEYS,
)
from ..vocabularies import PD_LANE_SUFFIXES
from .carrier import TS_LIMIT

if TYPE_CHECKING:
    from .names import Names

# The record format's PD names, under the names this module has always exported.
PHASE_SPANS = PD_PHASE_LABELS
PD_PREFIX = PD_SPAN_PREFIX
SUMMARY_EVENT = PD_SUMMARY_EVENT
SUMMARY_KEYS = PD_SUMMARY_KEYS
LANE_SUFFIX = PD_LANE_SUFFIXES

#: Attribute-form segments per phase, in SGLang's order: (segment name, keys read). The
#: first release's unprefixed ``pd_bootstrap_duration`` and ``pd_alloc_waiting_duration``
#: are the prefill's, as slime's first viewer drew them under ``[P]``.
ATTRIBUTE_SEGMENTS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "prefill": (
        ("prefill_bootstrap_queue", ("pd_prefill_bootstrap_queue_duration",)),
        ("prefill_bootstrap", ("pd_prefill_bootstrap_duration", "pd_bootstrap_duration")),
        ("prefill_alloc_wait", ("pd_prefill_alloc_wait_duration", "pd_alloc_waiting_duration")),
        ("prefill_forward", ("pd_prefill_forward_duration",)),
        ("prefill_transfer_queue", ("pd_prefill_transfer_queue_duration",)),
    ),
    "decode": (
        ("decode_prealloc", ("pd_decode_prealloc_duration",)),
        ("decode_bootstrap", ("pd_decode_bootstrap_duration",)),
        ("decode_alloc_wait", ("pd_decode_alloc_wait_duration",)),
        ("decode_transfer", ("pd_decode_transfer_duration",)),
        ("decode_forward", ("pd_decode_forward_duration",)),
    ),
}
_DURATION_KEYS = frozenset(
    key for phase in ATTRIBUTE_SEGMENTS.values() for _, keys in phase for key in keys
)


@dataclass
class VirtualSpans:
    """Virtual spans to append to the spans table, and their segments.

    Span lists are parallel; ``seg_*`` lists are parallel too, ``seg_owner``
    being the position of the owning virtual span in the span lists.
    """

    generation: list[int] = field(default_factory=list)  # index of the generation span
    phase: list[str] = field(default_factory=list)
    start: list[float] = field(default_factory=list)
    end: list[float] = field(default_factory=list)
    attrs: list[dict[str, Any]] = field(default_factory=list)
    form: list[str] = field(default_factory=list)  # "children" or "attrs"
    seg_owner: list[int] = field(default_factory=list)
    seg_name: list[str] = field(default_factory=list)
    seg_start: list[float] = field(default_factory=list)
    seg_end: list[float] = field(default_factory=list)
    seg_duration: list[float] = field(default_factory=list)

    def add(self, generation: int, phase: str, start: float, end: float,
            attrs: dict[str, Any], form: str) -> int:
        self.generation.append(generation)
        self.phase.append(phase)
        self.start.append(start)
        self.end.append(end)
        self.attrs.append(attrs)
        self.form.append(form)
        return len(self.generation) - 1

    def add_segment(self, owner: int, name: str, start: float, duration: float) -> None:
        """Record a segment; its duration also goes into the owner's attrs as ``<name>_s``."""
        self.seg_owner.append(owner)
        self.seg_name.append(name)
        self.seg_start.append(start)
        self.seg_end.append(start + duration)
        self.seg_duration.append(duration)
        self.attrs[owner][f"{name}_s"] = duration


def find_pd_detail(names: Names, parents: np.ndarray) -> np.ndarray:
    """Mask of real ``sglang_pd_*`` spans (phases and their segments) under a parent."""
    by_name = np.array([str(c).startswith(PD_PREFIX) for c in names.categories], dtype=bool)
    codes = np.asarray(names.codes)
    return by_name[codes] & (codes >= 0) & (parents >= 0)


def build_virtual_spans(
    names: Names,
    starts: np.ndarray,
    ends: np.ndarray,
    parents: np.ndarray,
    end_attrs: list[dict | None],
    summaries: dict[int, dict],
    pd_detail: np.ndarray,
) -> VirtualSpans:
    """Return the ``[P]``/``[D]`` spans of both PD forms.

    ``summaries`` maps a generation span index to its ``sglang_pd_summary`` attrs;
    ``pd_detail`` marks the real PD spans, whose own duration keys are not a
    generation's attribute-form timings.
    """
    out = VirtualSpans()
    with_children = _from_child_spans(names, starts, ends, parents, end_attrs, summaries, out)
    skip = pd_detail.copy()
    skip[list(with_children)] = True
    _from_attributes(starts, end_attrs, skip, out)
    return out


def _from_child_spans(
    names: Names,
    starts: np.ndarray,
    ends: np.ndarray,
    parents: np.ndarray,
    end_attrs: list[dict | None],
    summaries: dict[int, dict],
    out: VirtualSpans,
) -> set[int]:
    """Virtual spans from ``sglang_pd_prefill``/``decode`` spans; segments are their children.

    A segment's duration is its ``pd_<segment>_duration`` end attribute when
    present (exact), else ``end - start`` (epoch subtraction loses digits).
    """
    categories = [str(c) for c in names.categories]
    codes = np.asarray(names.codes)
    phase_codes = [i for i, c in enumerate(categories) if c in PHASE_SPANS]
    phase_index = np.flatnonzero(np.isin(codes, phase_codes) & (parents >= 0))
    if not len(phase_index):
        return set()
    first_owner = len(out.generation)
    generations = parents[phase_index]
    phases = [PHASE_SPANS[categories[c]] for c in codes[phase_index].tolist()]
    for phase_span, generation, phase in zip(phase_index.tolist(), generations.tolist(), phases,
                                             strict=True):
        attrs: dict[str, Any] = {PD_PHASE_ATTR: phase}
        own = end_attrs[phase_span]
        if own and PD_DURATION_ATTR in own:
            attrs[PD_DURATION_ATTR] = own[PD_DURATION_ATTR]
        summary = summaries.get(generation)
        if summary:
            attrs.update(summary)
        out.attrs.append(attrs)
    out.generation += generations.tolist()
    out.phase += phases
    out.start += starts[phase_index].tolist()
    out.end += ends[phase_index].tolist()
    out.form += ["children"] * len(phase_index)

    owner_of_span = np.full(len(parents), -1, dtype=np.int64)
    owner_of_span[phase_index] = np.arange(first_owner, first_owner + len(phase_index))
    children = np.flatnonzero(owner_of_span[np.maximum(parents, 0)] >= 0)
    children = children[parents[children] >= 0]
    with np.errstate(invalid="ignore"):
        children = children[(ends[children] - starts[children]) > 0]
    children = children[np.lexsort((starts[children], parents[children]))]
    seg_names = [c.removeprefix(PD_PREFIX) for c in categories]
    names_of = [seg_names[c] for c in codes[children].tolist()]
    child_starts = starts[children].tolist()
    spans_of = (ends[children] - starts[children]).tolist()
    owners = owner_of_span[parents[children]].tolist()
    # The attribute names per segment name, made once rather than once per segment.
    exact_key = {name: f"pd_{name}_duration" for name in set(names_of)}
    total_key = {name: f"{name}_s" for name in exact_key}
    for child, owner, name, span in zip(children.tolist(), owners, names_of, spans_of,
                                        strict=True):
        own = end_attrs[child]
        exact = own.get(exact_key[name]) if own else None
        duration = exact if type(exact) is float and 0 < exact < TS_LIMIT else span
        out.attrs[owner][total_key[name]] = duration
        out.seg_duration.append(duration)
    out.seg_owner += owners
    out.seg_name += names_of
    out.seg_start += child_starts
    out.seg_end += [start + duration for start, duration in
                    zip(child_starts, out.seg_duration[-len(child_starts):], strict=True)
                    ] if child_starts else []
    return set(generations.tolist())


def _from_attributes(
    starts: np.ndarray, end_attrs: list[dict | None], skip: np.ndarray, out: VirtualSpans
) -> None:
    """Virtual spans from ``pd_*_duration`` end attributes of spans not in ``skip``."""
    for index in np.flatnonzero(~skip).tolist():
        attrs = end_attrs[index]
        if not attrs or _DURATION_KEYS.isdisjoint(attrs):
            continue
        cursor = float(starts[index])
        summary = {key: attrs[key] for key in SUMMARY_KEYS if key in attrs}
        for phase, layout in ATTRIBUTE_SEGMENTS.items():
            segments = []
            for seg_name, keys in layout:
                duration = _first_number(attrs, keys)
                if duration > 0 and cursor + duration < TS_LIMIT:
                    segments.append((seg_name, cursor, duration))
                    cursor += duration
            if not segments:
                continue
            phase_attrs: dict[str, Any] = {PD_PHASE_ATTR: phase,
                                           PD_DURATION_ATTR: sum(seg[2] for seg in segments)}
            phase_attrs.update(summary)
            owner = out.add(index, phase, segments[0][1], cursor, phase_attrs, "attrs")
            for name, start, duration in segments:
                out.add_segment(owner, name, start, duration)


def _first_number(attrs: dict, keys: tuple[str, ...]) -> float:
    """The first finite number under ``keys``, else 0.0 (an int past float range is none)."""
    for key in keys:
        value = attrs.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            try:
                number = float(value)
            except OverflowError:
                continue
            if math.isfinite(number):
                return number
    return 0.0
