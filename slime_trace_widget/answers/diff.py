"""Two rollouts side by side: per-name statistics, and the widget's rollout diff table."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from ..frames.model import TraceFrames

from .stats import span_stats


def compare(frames_a: TraceFrames, frames_b: TraceFrames,
            labels: tuple[str, str] = ("a", "b")) -> pd.DataFrame:
    """Per-name statistics of two rollouts side by side, with differences and ratios."""
    a, b = labels
    left = span_stats(frames_a)[["count", "total", "mean", "p50", "p90", "max", "share"]]
    right = span_stats(frames_b)[["count", "total", "mean", "p50", "p90", "max", "share"]]
    joined = left.add_suffix(f"_{a}").join(right.add_suffix(f"_{b}"), how="outer")
    for column in ("count", "total", "mean", "p90"):
        joined[f"{column}_diff"] = joined[f"{column}_{b}"] - joined[f"{column}_{a}"]
    joined["mean_ratio"] = joined[f"mean_{b}"] / joined[f"mean_{a}"]
    return joined.sort_values(f"total_{b}", ascending=False, na_position="last")


#: The widget's diff table, column by column (``js/src/data/diff.js`` builds the same rows).
DIFF_COLUMNS = ("count_a", "p50_a", "p95_a", "total_a", "open_a",
                "count_b", "p50_b", "p95_b", "total_b", "open_b",
                "count_diff", "p50_diff", "p95_diff", "total_diff", "p50_ratio")


def rollout_diff(frames: TraceFrames, a: int | None = None, b: int | None = None
                 ) -> pd.DataFrame:
    """The widget's rollout diff: per span name, rollout ``b`` against rollout ``a``.

    ``a`` and ``b`` are dump positions (the widget's ``meta.rollouts`` order;
    the first two by default). The spans are the payload's: every span but the
    real ``sglang_pd_*`` ones, so a PD phase counts once, as its ``[P]``/``[D]``
    span. Count, p50, p95 (linear interpolation) and total use closed spans;
    ``open_*`` counts the open ones. A name missing from a rollout has NaN on
    that side; the count and total differences treat that side as zero, the p50
    and p95 ones stay NaN, and ``p50_ratio`` needs a positive ``p50_a``. Rows
    are sorted by ``total_diff``, largest increase first, then by name.
    """
    a = 0 if a is None else a
    b = 1 if b is None else b
    core = frames.span_core
    spans = core.loc[~core["pd_detail"].to_numpy(), ["sample_row", "name", "duration", "state"]]
    dump = frames.samples["dump"].reindex(spans["sample_row"]).to_numpy()
    sides = [_diff_side(spans[dump == which], suffix) for which, suffix in ((a, "a"), (b, "b"))]
    table = sides[0].join(sides[1], how="outer")
    for column in ("count", "total"):
        table[f"{column}_diff"] = table[f"{column}_b"].fillna(0) - table[f"{column}_a"].fillna(0)
    for column in ("p50", "p95"):
        table[f"{column}_diff"] = table[f"{column}_b"] - table[f"{column}_a"]
    table["p50_ratio"] = table["p50_b"] / table["p50_a"].where(table["p50_a"] > 0)
    table.index.name = "name"
    table = table.reset_index().sort_values(["total_diff", "name"], ascending=[False, True],
                                            kind="stable")
    return table.set_index("name")[list(DIFF_COLUMNS)]


def _diff_side(spans: pd.DataFrame, suffix: str) -> pd.DataFrame:
    """One rollout's columns of :func:`rollout_diff`, one row per name it has."""
    names = spans["name"].astype(str)
    closed = spans["state"].to_numpy() == "closed"
    durations = spans["duration"][closed].groupby(names[closed])
    side = pd.DataFrame(index=pd.Index(sorted(set(names)), dtype=object))
    side["count"] = durations.count().reindex(side.index).fillna(0).astype("Int64")
    side["p50"] = durations.quantile(0.5).reindex(side.index)
    side["p95"] = durations.quantile(0.95).reindex(side.index)
    side["total"] = durations.sum().reindex(side.index).fillna(0.0)
    side["open"] = names[~closed].value_counts().reindex(side.index).fillna(0).astype("Int64")
    return side.add_suffix(f"_{suffix}")
