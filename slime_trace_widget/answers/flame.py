"""The flame table: time per span-name path from the root, with self time and quantiles."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from ..frames.model import TraceFrames

from .stats import measured_spans, self_seconds


def flame(frames: TraceFrames, samples: Any = None, window: tuple[float, float] | None = None
          ) -> pd.DataFrame:
    """One row per span-name path from the root (``path``, names joined by ``;``) over
    the measured spans of ``samples`` (sample rows, default all) overlapping
    ``window`` (absolute seconds, default all time, spans clipped to it): ``count``,
    ``total`` and ``self`` seconds (self: minus the union of the children's
    intervals, never below zero with concurrent children), p50 and p95 of the
    (clipped) durations. ``[P]``/``[D]`` spans count once, as in ``measured_spans``."""
    spans = measured_spans(frames)
    if samples is not None:
        rows = samples.index if isinstance(samples, pd.DataFrame) else pd.Index(samples)
        spans = spans[spans["sample_row"].isin(rows)]
    start, end = spans["start"], spans["display_end"]
    if window is not None:
        start, end = start.clip(lower=window[0]), end.clip(upper=window[1])
        inside = end > start
        spans, start, end = spans[inside], start[inside], end[inside]
    columns = ["path", "name", "depth", "count", "total", "self", "p50", "p95"]
    if spans.empty:
        return pd.DataFrame(columns=columns)
    path_id, paths = _name_paths(spans)
    table = pd.DataFrame({"path": paths["path"].to_numpy()[path_id],
                          "seconds": (end - start).to_numpy(),
                          "own": self_seconds(spans, start, end).to_numpy()})
    grouped = table.groupby("path", sort=True)
    out = grouped.agg(count=("seconds", "size"), total=("seconds", "sum"),
                      own=("own", "sum")).rename(columns={"own": "self"})
    out["p50"] = grouped["seconds"].quantile(0.5)
    out["p95"] = grouped["seconds"].quantile(0.95)
    out = out.reset_index().merge(paths, on="path", how="left")
    return out[columns]


def _name_paths(spans: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    """Each span's path id, and per path id its ``path`` (names from the root among
    ``spans`` down to the span, joined by ``;``, a backslash or ``;`` in a name
    escaped by a backslash as the widget writes them), ``name`` and ``depth``.

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
        path_id[members] = base + inverse.reshape(-1)
    return path_id, pd.DataFrame({"path": np.asarray(texts, dtype=object),
                                  "name": np.asarray(names, dtype=object), "depth": levels})
