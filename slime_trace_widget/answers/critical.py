"""The critical path: the spans whose time bounded a sample's end-to-end latency."""

from __future__ import annotations

import heapq
import math
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from ..frames.model import TraceFrames

from ..vocabularies import SAME_INSTANT_SECONDS
from .stats import measured_spans


def critical_path(frames: TraceFrames, sample_row: int) -> pd.DataFrame:
    """The spans whose time bounded sample ``sample_row``'s end-to-end latency, in time
    order: their ``span_core`` rows with ``start_attrs``/``end_attrs`` and
    ``critical``, the seconds each holds the path itself (its time on the path minus
    its children's on it).

    Walking back from the sample's end: the span that finished last, then the last to
    finish before that one started, and so on; within each span on the path, the same
    walk over its children from its own finish. A span *finishes* when it and every
    span under it have ended: a child that outlives its parent (a reward started from a
    generation and still running after it) is what the sample waited for, so the path
    goes through the parent into that child, which holds the time past the parent's
    end. When a child started only after its parent had ended, whatever ran in
    between (a sibling of the parent) is on the path there before the walk comes
    back to the parent's own time. Concurrent spans that finished earlier are not
    on the path. Times within ``vocabularies.SAME_INSTANT_SECONDS`` (1 ms) of each other
    are one instant: a step stamped a microsecond after its generation ended, when the
    next span started at that end, does not take the generation off the path. Open
    spans count to their display end. A span's ``critical``
    seconds are the parts of its own interval no span under it on the path covers;
    the seconds of a sample never overlap and add up to its latency less the gaps
    when no span ran.
    """
    measured = measured_spans(frames)
    mine = measured[measured["sample_row"] == sample_row]
    path = _critical_walk(mine)
    labels = path["span"].tolist()
    start_attrs, end_attrs = frames.span_attrs(labels)
    spans = frames.span_core.loc[labels].assign(
        start_attrs=start_attrs, end_attrs=end_attrs, critical=path["critical"].to_numpy())
    return spans.sort_values(["start", "depth"], kind="stable")


def critical_path_share(frames: TraceFrames) -> pd.DataFrame:
    """Per span name, the seconds it holds the critical path summed over all samples,
    its ``share`` of all critical time, and in how many samples it is on the path:
    what to optimise first."""
    table = _critical_walk(measured_spans(frames))
    if table.empty:
        return pd.DataFrame(columns=["critical", "share", "samples"])
    table["name"] = frames.span_core.loc[table["span"], "name"].astype(str).to_numpy()
    out = table.groupby("name").agg(critical=("critical", "sum"),
                                    samples=("sample_row", "nunique"))
    out["share"] = out["critical"] / out["critical"].sum()
    return out[["critical", "share", "samples"]].sort_values("critical", ascending=False)


#: Seconds: a child ending with its parent (within one instant) is still inside it, and
#: a span finishing within one instant of a limit finished by it.
_EPSILON = SAME_INSTANT_SECONDS
_LEFT_AT = itemgetter(5)  # a left frame: the latest time it still has


def _critical_walk(spans: pd.DataFrame) -> pd.DataFrame:
    """Every sample's critical path through ``spans`` (measured spans): one row per span
    on a path with ``sample_row``, ``span`` (its label) and ``critical`` (exclusive
    seconds).

    One sort puts each parent's children in a contiguous run, latest finish first
    (ties: earliest start first); a sample's top-level spans hang under a node of their
    own. The walk then visits each span at most once: one sort and one linear pass.
    """
    n = len(spans)
    if not n:
        return pd.DataFrame({"sample_row": [], "span": [], "critical": []})
    labels = spans.index.to_numpy()
    starts = spans["start"].to_numpy(np.float64)
    ends = spans["display_end"].to_numpy(np.float64)
    samples = spans["sample_row"].to_numpy()
    parent_pos = spans.index.get_indexer(spans["parent_index"])
    sample_codes, sample_rows = pd.factorize(samples)
    node = np.where(parent_pos >= 0, parent_pos, n + sample_codes)  # a root's node: its sample
    finishes = _finishes(ends, parent_pos)
    order = np.lexsort((starts, -finishes, node))
    bounds = np.searchsorted(node[order], np.arange(n + len(sample_rows) + 1))
    order_list, bound_list = order.tolist(), bounds.tolist()
    spans_times = (starts.tolist(), ends.tolist(), finishes.tolist())
    found_sample: list[int] = []
    found_span: list[int] = []
    found_seconds: list[float] = []
    sample_end = pd.Series(ends).groupby(sample_codes).max().to_numpy()
    for code in range(len(sample_rows)):
        _walk_one(n + code, float(sample_end[code]), code, order_list, bound_list,
                  spans_times, (found_sample, found_span, found_seconds))
    return pd.DataFrame({"sample_row": np.asarray(sample_rows)[found_sample],
                         "span": labels[found_span], "critical": found_seconds})


def _running_at(passed: list[tuple[float, int, int]] | None, limit: float,
                starts: list[float]) -> int | None:
    """The child passed over that started latest before ``limit`` (so it was running
    then: it finished after a higher limit), taken off ``passed``; None when there is
    none. Children that started at or after the limit never run at a later, lower one:
    they are dropped."""
    while passed:
        child = heapq.heappop(passed)[2]
        if starts[child] < limit - _EPSILON:
            return child
    return None


def _finishes(ends: np.ndarray, parent_pos: np.ndarray) -> np.ndarray:
    """Per span, when it and every span under it had ended: the latest end in its
    subtree (``parent_pos``: the parent's position, -1 for a top-level span).

    Depths come from pointer jumping (a logarithmic number of whole-array steps);
    then each level, deepest first, passes its finishes up to its parents."""
    finishes = ends.copy()
    has_parent = parent_pos >= 0
    if not has_parent.any():
        return finishes
    depth = has_parent.astype(np.int64)  # edges up to ``ancestor``; the depth once that is -1
    ancestor = parent_pos.copy()
    for _ in range(64):  # each step doubles the reach: parents form a forest
        jumping = np.flatnonzero(ancestor >= 0)
        if not len(jumping):
            break
        above = ancestor[jumping]
        depth[jumping] += depth[above]
        ancestor[jumping] = ancestor[above]
    by_depth = np.argsort(depth, kind="stable")
    cuts = np.searchsorted(depth[by_depth], np.arange(int(depth.max()) + 2)).tolist()
    for level_depth in range(len(cuts) - 2, 0, -1):  # deepest first, each into its parents
        level = by_depth[cuts[level_depth]:cuts[level_depth + 1]]
        np.maximum.at(finishes, parent_pos[level], finishes[level])
    return finishes


def _walk_one(root: int, limit: float, sample: int, order: list[int], bounds: list[int],
              times: tuple[list[float], list[float], list[float]],
              found: tuple[list[int], list[int], list[float]]) -> None:
    """One sample's walk back in time from node ``root`` and ``limit`` (the sample's end).

    In a node, at each step, whatever ran latest up to the limit comes first: the
    child that finished latest by the limit (entered, and walked from its own
    finish), a child the walk left earlier (below), or the node's own interval
    (those seconds are the node's, and the limit moves down to where its own time
    stops mattering); a child wins a tie with its parent. A node that is done
    returns its limit to its parent. A child still running at the limit is passed
    over (something that finished later had the time), but when nothing else of the
    node ran just before a later limit (the sample's own node has no interval; a
    span's own one ends before a child that outlived it), the passed child that started
    latest and was running then is entered, clipped to the limit: an instant some
    span of the node ran is never dropped. When nothing of a node ran just before the
    limit (a child that started after its parent had ended), the node is *left*:
    its parent's walk goes on from the limit, so a sibling that ran in between is on
    the path, and takes the node up again at the latest time it has left. So the
    seconds of the path never overlap and cover every instant some span ran.

    An explicit stack instead of recursion, so a crafted chain thousands of spans
    deep does not exhaust Python's stack; each span is entered at most once.
    """
    starts, ends, finishes = times
    n_spans = len(starts)
    # A frame: [node, next child position, limit, own seconds, frames left in it,
    # the latest time a left frame still has, the children passed over (a heap of
    # (-start, position, child), made when the first is)].
    stack: list[list[Any]] = [[root, bounds[root], limit, 0.0, [], 0.0, None]]
    while stack:
        frame = stack[-1]
        node, position, limit, left = frame[0], frame[1], frame[2], frame[4]
        stop = bounds[node + 1]
        while position < stop and finishes[order[position]] > limit + _EPSILON:
            # Still running here: not waited for now, but what the node waited for
            # should nothing else have run just before a later limit.
            if frame[6] is None:
                frame[6] = []
            child = order[position]
            heapq.heappush(frame[6], (-starts[child], position, child))
            position += 1
        frame[1] = position
        child_top = min(finishes[order[position]], limit) if position < stop else -math.inf
        resumed = max(left, key=_LEFT_AT) if left else None
        left_top = min(resumed[5], limit) if resumed is not None else -math.inf
        own_top = min(ends[node], limit) if node < n_spans else -math.inf
        if node < n_spans and own_top <= starts[node]:
            own_top = -math.inf
        next_top = max(child_top, left_top)
        top = max(next_top, own_top)
        running = _running_at(frame[6], limit, starts) if top < limit - _EPSILON else None
        if running is not None:  # passed over, and the only thing that ran just before
            stack.append([running, bounds[running], limit, 0.0, [], 0.0, None])
        elif top == -math.inf:  # nothing left in this node
            stack.pop()
            if not stack:
                return
            found[0].append(sample)
            found[1].append(node)
            found[2].append(frame[3])
            stack[-1][2] = limit
        elif top < limit - _EPSILON and len(stack) > 1:  # nothing of it ran just before
            stack.pop()
            frame[5] = top
            stack[-1][4].append(frame)
            stack[-1][2] = limit
        elif next_top >= own_top - _EPSILON:
            frame[2] = next_top
            if resumed is not None and left_top >= child_top:
                left.remove(resumed)
                resumed[2] = left_top
                stack.append(resumed)
            else:
                child = order[position]
                frame[1] = position + 1
                stack.append([child, bounds[child], child_top, 0.0, [], 0.0, None])
        else:  # its own interval ran latest, down to the next thing or its start
            low = max(next_top, starts[node])
            frame[3] += own_top - low
            frame[2] = low
