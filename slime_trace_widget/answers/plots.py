"""Matplotlib views of the analysis tables (optional: ``pip install slime-trace-widget[plot]``).

Kept out of ``analysis`` so the DataFrame helpers never import matplotlib.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..frames.model import TraceFrames
from .stats import ALIVE, concurrency, measured_spans, resample_concurrency


def _axes(ax: Any) -> Any:
    if ax is not None:
        return ax
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise ImportError("plots need matplotlib: pip install 'slime-trace-widget[plot]'") from exc
    return plt.subplots(figsize=(9, 4))[1]


def _legend_as_written(ax: Any, **options: Any) -> Any:
    """``ax.legend(**options)`` with its entries drawn as written, never as mathtext.

    The entries are names from the data (span names, trend columns): a ``$`` in one
    is a dollar (``price $5 vs $6``), and a name mathtext cannot parse
    (``$\\undefined$``) still draws and saves.
    """
    legend = ax.legend(**options)
    for text in legend.get_texts():
        text.set_parse_math(False)
    return legend


def plot_durations(frames: TraceFrames, names: list[str] | None = None, bins: int = 40,
                   ax: Any = None) -> Any:
    """Histogram of closed-span durations per name, on log-spaced bins (seconds)."""
    ax = _axes(ax)
    spans = measured_spans(frames)
    spans = spans[(spans["state"] == "closed") & (spans["duration"] > 0)]
    if names is None:
        totals = spans.groupby("name", observed=True)["duration"].sum()
        names = totals.sort_values(ascending=False).head(6).index.astype(str).tolist()
    chosen = spans[spans["name"].isin(names)]
    if chosen.empty:
        ax.set_title("no closed spans to plot")
        return ax
    edges = np.geomspace(chosen["duration"].min(), chosen["duration"].max() * 1.0001, bins + 1)
    for name in names:
        values = chosen.loc[chosen["name"] == name, "duration"]
        ax.hist(values, bins=edges, histtype="step", linewidth=1.5, label=f"{name} ({len(values)})")
    ax.set_xscale("log")
    ax.set_xlabel("duration (s)")
    ax.set_ylabel("spans")
    _legend_as_written(ax, fontsize="small")
    ax.set_title("span durations")
    return ax


def plot_concurrency(frames: TraceFrames, names: list[str] | None = None,
                     interval: float | None = None, ax: Any = None) -> Any:
    """Samples inside each span name (and alive) over time since the dump start."""
    ax = _axes(ax)
    steps = concurrency(frames, names)
    if steps.empty:
        ax.set_title("no spans to plot")
        return ax
    span = frames.t1 - frames.t0
    grid = resample_concurrency(steps, interval or max(span / 600, 1e-3), start=frames.t0,
                                end=frames.t1)
    others = [c for c in grid.columns if c != ALIVE]
    columns = [ALIVE, *others[:8]] if names is None else list(grid.columns)
    for column in columns:
        ax.step(grid.index - frames.t0, grid[column], where="post", label=column,
                linewidth=2 if column == ALIVE else 1)
    ax.set_xlabel("seconds since dump start")
    ax.set_ylabel("samples")
    _legend_as_written(ax, fontsize="small", ncol=2)
    ax.set_title("concurrency")
    return ax


def plot_rollout_trends(trends: Any, columns: list[str] | None = None, ax: Any = None) -> Any:
    """Columns of ``analysis.rollout_trends`` over rollout id, one line per column and
    dump kind (train and eval apart); default: sample duration p50, p95 and max."""
    ax = _axes(ax)
    columns = columns or ["duration_p50", "duration_p95", "duration_max"]
    if trends.empty:
        ax.set_title("no rollouts to plot")
        return ax
    for kind, rows in trends.groupby("dump_kind", sort=True):
        rows = rows.sort_values("rollout_id")
        for column in columns:
            ax.plot(rows["rollout_id"], rows[column], marker="o", markersize=3,
                    label=column if trends["dump_kind"].nunique() == 1 else f"{column} ({kind})")
    ax.set_xlabel("rollout id")
    ax.set_ylabel(", ".join(columns) if len(columns) < 3 else "value", parse_math=False)
    _legend_as_written(ax, fontsize="small")
    ax.set_title("trends across the run")
    return ax
