"""The critical path: the spans whose time bounded a sample's end-to-end latency."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from ..frames.model import TraceFrames

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
    end. Concurrent spans that finished earlier are not on the path. Open spans count
    to their display end. A span's ``critical`` seconds are its own interval minus
    the parts of it its children on the path cover; the seconds of a sample add up to
    its latency less the gaps when no span ran.
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


_EPSILON = 1e-9  # seconds: a child ending exactly with its parent is still inside it


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
    """One sample's walk from node ``root``: within a node's children (latest finish
    first), take the one that finished by the limit, walk into it from its own
    finish, then move the limit to its start. An explicit stack instead of
    recursion, so a crafted chain thousands of spans deep does not exhaust Python's
    stack. Each span on the path is recorded with its exclusive seconds: its length
    minus the parts of it its children's path covers (a child's part on the path
    runs from its start to its finish)."""
    starts, ends, finishes = times
    # A frame: [node, next child position, limit, covered by its children's path].
    stack = [[root, bounds[root], limit, 0.0]]
    while stack:
        frame = stack[-1]
        node, position, limit = frame[0], frame[1], frame[2]
        chosen = -1
        while position < bounds[node + 1]:
            k = order[position]
            position += 1
            if finishes[k] <= limit + _EPSILON:  # else still running here: not waited for
                chosen = k
                break
        frame[1] = position
        if chosen >= 0:
            stack.append([chosen, bounds[chosen], finishes[chosen], 0.0])
            continue
        stack.pop()
        if not stack:
            return
        length = max(ends[node] - starts[node], 0.0)
        found[0].append(sample)
        found[1].append(node)
        found[2].append(max(length - frame[3], 0.0))
        parent = stack[-1]
        above = parent[0]
        if above < len(starts):  # a span, not the sample's node: the part inside it
            parent[3] += max(min(finishes[node], ends[above]) - max(starts[node], starts[above]),
                             0.0)
        parent[2] = starts[node]
