"""The flame table: time per span-name path from the root, with self time and quantiles."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from ..frames.model import TraceFrames

from .query import selection_labels
from .stats import measured_spans, self_seconds


def flame(frames: TraceFrames, samples: Any = None, window: tuple[float, float] | None = None
          ) -> pd.DataFrame:
    """One row per span-name path from the root (``path``, names joined by ``;``) over
    the measured spans of ``samples`` (default all; as :func:`.query.selection_labels`
    reads them: a frame of samples, their row labels, or a boolean Series such as
    ``frames.samples.reward > 0``; a bare boolean array is refused) overlapping
    ``window`` (absolute seconds, default all time, spans clipped to it): ``count``,
    ``total`` and ``self`` seconds (self: minus the union of the children's
    intervals, never below zero with concurrent children), p50 and p95 of the
    (clipped) durations. ``[P]``/``[D]`` spans count once, as in ``measured_spans``.

    A span's path is the same with a window as without: a child that outlived its
    parent stays under it when the window holds none of the parent, so each path's
    ``total`` over windows that split the time adds up to its ``total`` without one.
    A path above a span in the window has its row even when the window holds none of
    its own spans (``count`` 0, no seconds, p50 and p95 NaN)."""
    spans = measured_spans(frames)
    if samples is not None:
        spans = spans[spans["sample_row"].isin(selection_labels(samples))]
    path_id, paths = _name_paths(spans)
    start, end = spans["start"], spans["display_end"]
    if window is not None:
        start, end = start.clip(lower=window[0]), end.clip(upper=window[1])
        inside = (end > start).to_numpy()
        spans, start, end, path_id = spans[inside], start[inside], end[inside], path_id[inside]
    columns = ["path", "name", "depth", "count", "total", "self", "p50", "p95"]
    if spans.empty:
        return pd.DataFrame(columns=columns)
    table = pd.DataFrame({"path_id": path_id, "seconds": (end - start).to_numpy(),
                          "own": self_seconds(spans, start, end).to_numpy()})
    grouped = table.groupby("path_id")
    figures = grouped.agg(count=("seconds", "size"), total=("seconds", "sum"),
                          own=("own", "sum")).rename(columns={"own": "self"})
    figures["p50"] = grouped["seconds"].quantile(0.5)
    figures["p95"] = grouped["seconds"].quantile(0.95)
    shown = paths[_with_ancestors(paths, figures.index.to_numpy())]
    out = shown.join(figures).fillna({"count": 0, "total": 0.0, "self": 0.0})
    out = out.astype({"count": np.int64}).sort_values("path")
    return out[columns].reset_index(drop=True)


def _with_ancestors(paths: pd.DataFrame, chosen: np.ndarray) -> np.ndarray:
    """Mask over :func:`_name_paths`' paths: the path ids ``chosen`` and every path above
    them (a path's ``parent`` is one ``depth`` up)."""
    keep = np.zeros(len(paths), dtype=bool)
    keep[chosen] = True
    parent, depth = paths["parent"].to_numpy(), paths["depth"].to_numpy()
    for level in range(int(depth.max(initial=0)), 0, -1):
        keep[parent[keep & (depth == level)]] = True
    return keep


def _name_paths(spans: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    """Each span's path id, and per path id its ``path`` (names from the root among
    ``spans`` down to the span, joined by ``;``, a backslash or ``;`` in a name
    escaped by a backslash as the widget writes them), ``name``, ``depth`` and
    ``parent`` (the path id one level up, -1 for a root).

    Paths are built as integer ids, one depth level at a time (parents first: a
    span's depth is more than its parent's; a path is its parent's path id plus a
    name code), and spelled once per distinct path.
    """
    name_codes, name_table = pd.factorize(spans["name"].astype(str), use_na_sentinel=False)
    pieces = [str(name).replace("\\", "\\\\").replace(";", "\\;") for name in name_table]
    parent_pos = spans.index.get_indexer(spans["parent_index"])
    depths = spans["depth"].to_numpy()
    path_id = np.full(len(spans), -1, dtype=np.int64)
    texts: list[str] = []
    names: list[str] = []
    levels: list[int] = []
    parents: list[int] = []
    for depth in np.unique(depths).tolist():
        members = np.flatnonzero(depths == depth)
        above = parent_pos[members]
        parent_path = np.where(above >= 0, path_id[np.maximum(above, 0)], -1)
        keys = (parent_path + 1) * len(name_table) + name_codes[members]
        distinct, inverse = np.unique(keys, return_inverse=True)
        base = len(texts)
        for key in distinct.tolist():
            parent, name = divmod(key, len(name_table))
            texts.append(pieces[name] if parent == 0 else f"{texts[parent - 1]};{pieces[name]}")
            names.append(str(name_table[name]))
            levels.append(0 if parent == 0 else levels[parent - 1] + 1)
            parents.append(parent - 1)
        path_id[members] = base + inverse.reshape(-1)
    return path_id, pd.DataFrame({"path": np.asarray(texts, dtype=object),
                                  "name": np.asarray(names, dtype=object), "depth": levels,
                                  "parent": np.asarray(parents, dtype=np.int64)})
