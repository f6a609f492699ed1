"""Where each span sits and how far it is drawn: depths, display ends, lanes.

Numpy over whole columns of span indices (``parents`` holds each span's parent
index, -1 for a root); ``frames`` calls these while building the spans table.
An open span is drawn to the earliest of its row's last timestamp, its next
sibling's start and its nearest closed ancestor's end (only when that end is later
than the span's start, as in slime's viewer), never before its start;
:data:`..vocabularies.CLIP_REASONS` names which one won, in that order. A closed span ending
before its start is drawn with zero width. An expanded row gives each depth a
lane; the virtual ``[P]``/``[D]`` spans (``pd_lanes``) get lanes of their own
just below their generation span's children, and the real ``sglang_pd_*``
spans (``pd_detail``) share their virtual lane.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..vocabularies import CLIP_REASONS
from .pd_lanes import PHASE_SPANS

if TYPE_CHECKING:
    from .names import Names

#: Lane kinds beside a span's depth: 0 real, 1 and 2 the virtual [P] and [D] spans, and
#: the engine's spans by role, so a request's prefill and decode halves (which overlap)
#: each get lanes of their own.
ENGINE_LANE_KINDS = {"prefill": 3, "decode": 4}
_KINDS = 5


def span_depths(parents: np.ndarray) -> np.ndarray:
    """Depth from the parent chain by pointer jumping: O(n log depth), so a crafted
    100,000-deep chain costs ~17 vectorised rounds (links are acyclic after
    ``carrier`` cut cycles)."""
    depth = (parents >= 0).astype(np.int64)
    ancestor = parents.copy()
    while True:
        jumping = ancestor >= 0
        if not jumping.any():
            return depth
        target = ancestor[jumping]
        depth[jumping] += depth[target]
        ancestor[jumping] = ancestor[target]


def display_ends(
    rows: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    parents: np.ndarray,
    open_mask: np.ndarray,
    row_last: np.ndarray,
    until: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Display end for every span and the clip reason code (-1 for closed spans).

    ``until`` is for a rollout still running: its open spans are running, so each is
    drawn to ``until`` (now), cut only by a closed ancestor's end (reason ``row_end``
    for "now"); a sibling starting later runs beside it, it does not end it.

    Linear in the number of spans plus log-time per open span, however many
    spans are open: siblings are found by binary search in (row, parent, start)
    order, and the nearest closed ancestor by pointer jumping over open ones.
    """
    display = np.where(open_mask, starts, np.maximum(ends, starts))
    clip = np.full(len(starts), -1, dtype=np.int8)
    open_index = np.flatnonzero(open_mask)
    if not len(open_index):
        return display, clip
    own_start = starts[open_index]
    if until is None:
        last = row_last[rows[open_index]]
        row_end = np.where(np.isnan(last), own_start, last)
        next_sibling = _next_sibling_starts(rows, parents, starts, open_index)
    else:
        row_end = np.full(len(open_index), float(until))
        next_sibling = np.full(len(open_index), np.inf)
    closed = _nearest_closed_ancestor(parents, open_mask)[open_index]
    ancestor_end = np.where(closed >= 0, ends[np.maximum(closed, 0)], np.inf)
    # As slime's viewer: an ancestor that ended by the span's start does not cut it.
    ancestor_end = np.where(ancestor_end > own_start, ancestor_end, np.inf)
    # Stacked in the vocabulary's order, so the row that wins is the reason's code.
    limits = {"row_end": row_end, "next_sibling": next_sibling, "ancestor_end": ancestor_end}
    candidates = np.stack([limits[name] for name in CLIP_REASONS])
    reason = np.argmin(candidates, axis=0)
    display[open_index] = np.maximum(own_start, candidates[reason, np.arange(len(open_index))])
    clip[open_index] = reason
    return display, clip


def _next_sibling_starts(rows: np.ndarray, parents: np.ndarray, starts: np.ndarray,
                         chosen: np.ndarray) -> np.ndarray:
    """For each span in ``chosen``: the earliest later start among its siblings (or inf)."""
    group = rows * (len(parents) + 1) + (parents + 1)
    order = np.lexsort((starts, group))
    sorted_group, sorted_start = group[order], starts[order]
    out = np.full(len(chosen), np.inf)
    for k, (g, start) in enumerate(zip(group[chosen].tolist(), starts[chosen].tolist(),
                                       strict=True)):
        lo = np.searchsorted(sorted_group, g, "left")
        hi = np.searchsorted(sorted_group, g, "right")
        after = lo + np.searchsorted(sorted_start[lo:hi], start, "right")
        if after < hi:
            out[k] = sorted_start[after]
    return out


def _nearest_closed_ancestor(parents: np.ndarray, open_mask: np.ndarray) -> np.ndarray:
    """Index of each span's nearest closed ancestor (-1 for none), by pointer jumping:
    a pointer only ever moves past open spans, so no closed ancestor is skipped."""
    pointer = parents.copy()
    while True:
        pending = pointer >= 0
        pending[pending] = open_mask[pointer[pending]]
        if not pending.any():
            return pointer
        pointer[pending] = pointer[pointer[pending]]


def span_lanes(
    rows: np.ndarray,
    depth: np.ndarray,
    parents: np.ndarray,
    names: Names,
    pd_detail: np.ndarray,
    phase_kind: np.ndarray,
) -> np.ndarray:
    """Lane per span: dense rank of (depth, lane kind) within each sample row.

    Virtual spans already sit at their generation's child depth; real PD spans
    take the key of the virtual lane that draws them.
    """
    key = depth * _KINDS + phase_kind
    detail = np.flatnonzero(pd_detail)
    if len(detail):
        codes = np.asarray(names.codes)
        phase_of_code = np.array([PHASE_SPANS.get(str(c), "") for c in names.categories],
                                 dtype=object)
        phase_span = np.where(phase_of_code[codes[detail]] != "", detail, parents[detail])
        phase = phase_of_code[codes[phase_span]]
        generation = parents[phase_span]
        valid = (phase != "") & (generation >= 0)
        key[detail[valid]] = (depth[generation[valid]] + 1) * _KINDS + np.where(
            phase[valid] == "prefill", 1, 2)
    stride = int(key.max()) + 1 if len(key) else 1
    unique, inverse = np.unique(rows * stride + key, return_inverse=True)
    unique_rows = unique // stride
    first_of_row = np.searchsorted(unique_rows, unique_rows)
    return (np.arange(len(unique)) - first_of_row)[inverse]
