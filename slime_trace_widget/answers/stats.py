"""Where the time went: measured spans, statistics per name, per sample, concurrency.

Only measured spans count (:func:`measured_spans`); statistics use closed spans
and count the open ones apart, and the closed ones whose end precedes their start
(the loader's ``end_before_start`` warning: their length is unknown); a span's
*self time* is its duration minus the union of its children's intervals; interval
unions use display ends, so an open span counts up to where the timeline draws it
(a span ending before its start, with no length).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from ..frames.model import TraceFrames

QUANTILES = (0.5, 0.9, 0.99)
TURN_SPAN = "sglang_generate"
ALIVE = "(alive)"


def measured_spans(frames: TraceFrames) -> pd.DataFrame:
    """Spans that carry their own time (:meth:`TraceFrames.measured_spans`: the real
    spans and the attribute form's PD phases)."""
    return frames.measured_spans()


# --------------------------------------------------------------------------- statistics


def span_stats(frames: TraceFrames, by: str | list[str] | None = None) -> pd.DataFrame:
    """Per span name (and optionally per samples column): count, total, mean, p50, p90,
    p99, max of the closed spans' durations, open spans, ``share``: total time over the
    summed lifetimes of the samples in the group (time of a sample spent in that name),
    and ``end_before_start``: closed spans whose end precedes their start, left out of
    the duration figures (the loader counts them in its warnings under that name).
    One row per name with a closed span."""
    spans = measured_spans(frames)
    keys = [by] if isinstance(by, str) else list(by or [])
    table = spans[["sample_row", "name", "duration", "state"]].copy()
    table["name"] = table["name"].astype(str)
    for key in keys:
        table[key] = frames.samples[key].reindex(table["sample_row"]).to_numpy()
    group_keys = [*keys, "name"]
    # One aggregation over every span, so that each figure lands on the same group,
    # a missing key (NaN) included, and the columns exist when no span is closed.
    closed = (table["state"] == "closed").to_numpy()
    backwards = closed & (table["duration"] < 0).to_numpy()
    table["closed"] = table["duration"].where(closed & ~backwards)
    table["is_open"] = (table["state"] == "open").to_numpy()
    table["backwards"] = backwards
    grouped = table.groupby(group_keys, observed=True, dropna=False)
    percentiles = {f"p{round(q * 100)}": ("closed", lambda d, q=q: d.quantile(q))
                   for q in QUANTILES}
    stats = grouped.agg(count=("closed", "count"), total=("closed", "sum"),
                        mean=("closed", "mean"), max=("closed", "max"),
                        open=("is_open", "sum"), end_before_start=("backwards", "sum"),
                        **percentiles)
    stats = stats[(stats["count"] + stats["end_before_start"]) > 0]  # a closed span
    stats = stats.astype({"open": int, "end_before_start": int})
    lifetimes = _group_lifetimes(frames, keys)
    if keys:
        lifetime = lifetimes.reindex(stats.index.droplevel("name")).to_numpy()
    else:
        lifetime = np.full(len(stats), lifetimes)
    stats["share"] = stats["total"].to_numpy() / lifetime
    ordered = ["count", "total", "mean", "p50", "p90", "p99", "max", "open", "share",
               "end_before_start"]
    return stats[ordered].sort_values("total", ascending=False)


def _group_lifetimes(frames: TraceFrames, keys: list[str]) -> Any:
    durations = frames.samples["duration"].fillna(0)
    if not keys:
        return float(durations.sum())
    return durations.groupby([frames.samples[k] for k in keys], observed=True,
                             dropna=False).sum()


# --------------------------------------------------------------------------- per sample


def self_times(frames: TraceFrames) -> pd.Series:
    """Self time of every measured span (duration minus its children's covered time)."""
    spans = measured_spans(frames)
    return self_seconds(spans, spans["start"], spans["display_end"])


def self_seconds(spans: pd.DataFrame, start: pd.Series, end: pd.Series) -> pd.Series:
    """``end - start`` of each span minus the union of its children's intervals clipped
    to it (children among ``spans``), so concurrent children never make it negative."""
    children = spans[spans["parent_index"].isin(spans.index)]
    parent_labels = children["parent_index"].to_numpy()
    clipped = pd.DataFrame({
        "parent": parent_labels,
        "start": np.maximum(start.loc[children.index].to_numpy(),
                            start.loc[parent_labels].to_numpy()),
        "end": np.minimum(end.loc[children.index].to_numpy(), end.loc[parent_labels].to_numpy()),
    })
    covered = _union_lengths(clipped[clipped["end"] > clipped["start"]], "parent")
    return ((end - start) - covered.reindex(spans.index).fillna(0)).clip(lower=0)


def sample_breakdown(frames: TraceFrames, turn_span: str = TURN_SPAN) -> pd.DataFrame:
    """Per sample: time in each span name at depth 0 and 1, idle time, turns, attempts.

    ``time.<name>`` columns hold seconds (sum of durations, open spans to their
    display end); ``idle`` is lifetime not covered by any span.
    """
    spans = measured_spans(frames)
    samples = frames.samples
    shallow = spans[spans["depth"] <= 1]
    seconds = (shallow["display_end"] - shallow["start"]).rename("seconds")
    by_name = (pd.concat([shallow[["sample_row"]], shallow["name"].astype(str), seconds],
                         axis=1)
               .pivot_table(index="sample_row", columns="name", values="seconds",
                            aggfunc="sum", fill_value=0.0))
    by_name.columns = [f"time.{c}" for c in by_name.columns]
    intervals = pd.DataFrame({"row": spans["sample_row"].to_numpy(),
                              "start": spans["start"].to_numpy(),
                              "end": spans["display_end"].to_numpy()})
    covered = _union_lengths(intervals, "row")
    out = samples[["sample_index", "source", "status", "duration", "attempts"]].copy()
    out["busy"] = covered.reindex(out.index).fillna(0.0)
    out["idle"] = (out["duration"].fillna(0.0) - out["busy"]).clip(lower=0)
    out["turns"] = (spans[spans["name"] == turn_span].groupby("sample_row").size()
                    .reindex(out.index).fillna(0).astype(int))
    return out.join(by_name).fillna({c: 0.0 for c in by_name.columns})


def long_tail(frames: TraceFrames, k: int = 10) -> pd.DataFrame:
    """The ``k`` slowest samples, how far above the median, and what dominated each.

    ``top_name`` is the span name with the most self time in the sample (so a
    wrapper like ``generate_and_rm`` does not hide what it waited on).
    """
    samples = frames.samples[frames.samples["traced"]]
    median = samples["duration"].median()
    slow = samples.nlargest(k, "duration")
    spans = measured_spans(frames)
    own = self_times(frames)
    per_name = (pd.DataFrame({"row": spans["sample_row"].to_numpy(),
                              "name": spans["name"].astype(str).to_numpy(),
                              "self": own.to_numpy()})
                .query("row in @slow.index")
                .groupby(["row", "name"])["self"].sum())
    top = per_name.groupby(level="row").idxmax().map(lambda pair: pair[1])
    top_time = per_name.groupby(level="row").max()
    breakdown = sample_breakdown(frames).loc[slow.index]
    out = slow[["sample_index", "source", "status", "duration", "attempts"]].copy()
    out["x_median"] = out["duration"] / median
    out["top_name"] = top.reindex(out.index)
    out["top_seconds"] = top_time.reindex(out.index)
    out["top_share"] = out["top_seconds"] / out["duration"]
    out["turns"] = breakdown["turns"]
    out["idle"] = breakdown["idle"]
    return out


# --------------------------------------------------------------------------- concurrency


def concurrency(frames: TraceFrames, names: list[str] | None = None) -> pd.DataFrame:
    """Step function of how many samples are inside each span name, and alive at all.

    Columns ``time`` (epoch seconds), ``name`` and ``active``: from ``time`` on
    (until the next row of the same name), ``active`` samples were inside it.
    A sample inside two spans of a name at once counts once.
    """
    spans = measured_spans(frames)
    if names is not None:
        spans = spans[spans["name"].isin(names)]
    intervals = pd.DataFrame({
        "key": spans["sample_row"].astype(str).to_numpy() + "\0" + spans["name"].astype(str),
        "name": spans["name"].astype(str).to_numpy(),
        "start": spans["start"].to_numpy(),
        "end": spans["display_end"].to_numpy(),
    })
    merged = _merge_intervals(intervals, "key", keep=["name"])
    alive = frames.samples.dropna(subset=["start"])
    merged = pd.concat([merged, pd.DataFrame({"name": ALIVE, "start": alive["start"],
                                              "end": alive["end"]})], ignore_index=True)
    steps = pd.concat([
        pd.DataFrame({"time": merged["start"], "name": merged["name"], "delta": 1}),
        pd.DataFrame({"time": merged["end"], "name": merged["name"], "delta": -1}),
    ], ignore_index=True).sort_values(["name", "time", "delta"], kind="stable")
    steps = steps.groupby(["name", "time"], sort=False)["delta"].sum().reset_index()
    steps["active"] = steps.groupby("name")["delta"].cumsum().astype(int)
    return steps.drop(columns="delta").reset_index(drop=True)


def resample_concurrency(steps: pd.DataFrame, interval: float,
                         start: float | None = None, end: float | None = None) -> pd.DataFrame:
    """Sample a :func:`concurrency` step function on a fixed grid of ``interval`` seconds
    (one column per name), from ``start`` to ``end`` (default: the steps' first and last
    time; no rows when there are no steps and no bounds are given)."""
    if not interval > 0:
        raise ValueError(f"interval must be a positive number of seconds, not {interval!r}")
    lo = steps["time"].min() if start is None else start
    hi = steps["time"].max() if end is None else end
    if not (np.isfinite(lo) and np.isfinite(hi)):  # no steps: a dump with no spans
        return pd.DataFrame(index=pd.Index(np.zeros(0), name="time"))
    grid = np.arange(lo, hi + interval / 2, interval)
    columns = {}
    for name, group in steps.groupby("name", sort=True):
        times = group["time"].to_numpy()
        values = group["active"].to_numpy()
        position = np.searchsorted(times, grid, side="right") - 1
        columns[name] = np.where(position >= 0, values[np.maximum(position, 0)], 0)
    return pd.DataFrame(columns, index=pd.Index(grid, name="time"))


# --------------------------------------------------------------------------- intervals


def _merge_intervals(intervals: pd.DataFrame, key: str, keep: list[str]) -> pd.DataFrame:
    """Union of [start, end) intervals within each ``key`` group, vectorised."""
    if intervals.empty:
        return pd.DataFrame(columns=[key, *keep, "start", "end"])
    ordered = intervals.sort_values([key, "start"], kind="stable").reset_index(drop=True)
    reach = ordered.groupby(key, sort=False)["end"].cummax()
    previous = reach.groupby(ordered[key], sort=False).shift()
    starts_new = previous.isna() | (ordered["start"] > previous)
    block = starts_new.cumsum()
    merged = ordered.groupby(block).agg({key: "first", **{c: "first" for c in keep},
                                         "start": "first"})
    merged["end"] = reach.groupby(block).max()
    return merged.reset_index(drop=True)


def _union_lengths(intervals: pd.DataFrame, key: str) -> pd.Series:
    """Total length of the union of intervals per ``key``."""
    merged = _merge_intervals(intervals, key, keep=[])
    if merged.empty:
        return pd.Series(dtype=float)
    return (merged["end"] - merged["start"]).clip(lower=0).groupby(merged[key]).sum()
