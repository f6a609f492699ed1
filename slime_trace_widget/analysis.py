"""Answers in one call: where the time went, the long tail, concurrency, comparisons.

Every function takes :class:`TraceFrames` and returns a DataFrame the user can
keep filtering. Conventions shared by all of them:

* Only measured spans count (:func:`measured_spans`).
* Statistics use closed spans (open spans have no duration); ``open`` counts
  the others.
* A span's *self time* is its duration minus the time covered by its
  children (union of their intervals, clipped to the span).
* Interval unions (idle time, concurrency) use each span's display end, so an
  open span counts up to where the timeline draws it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from .frames import TraceFrames

QUANTILES = (0.5, 0.9, 0.99)
TURN_SPAN = "sglang_generate"
ALIVE = "(alive)"


def measured_spans(frames: TraceFrames) -> pd.DataFrame:
    """Spans that carry their own time: the one rule analyses, plots and exports share.

    These are the real spans plus the derived ``[P]``/``[D]`` spans of the
    attribute PD form (the only record of those phases); derived spans of the
    child-span form are skipped because the real ``sglang_pd_*`` spans they
    mirror are already counted.
    """
    core = frames.span_core
    keep = ~core["virtual"].to_numpy() | (core["pd_form"] == "attrs").to_numpy()
    return core[keep]


# --------------------------------------------------------------------------- statistics


def span_stats(frames: TraceFrames, by: str | list[str] | None = None) -> pd.DataFrame:
    """Per span name (and optionally per samples column): count, total, mean, p50, p90,
    p99, max of durations, open spans, and ``share``: total time over the summed
    lifetimes of the samples in the group (time of a sample spent in that name)."""
    spans = measured_spans(frames)
    keys = [by] if isinstance(by, str) else list(by or [])
    table = spans[["sample_row", "name", "duration", "state"]].copy()
    table["name"] = table["name"].astype(str)
    for key in keys:
        table[key] = frames.samples[key].reindex(table["sample_row"]).to_numpy()
    group_keys = [*keys, "name"]
    closed = table[table["state"] == "closed"]
    grouped = closed.groupby(group_keys, observed=True, dropna=False)["duration"]
    stats = grouped.agg(count="count", total="sum", mean="mean", max="max")
    quantiles = grouped.quantile(list(QUANTILES)).unstack()
    quantiles.columns = [f"p{round(q * 100)}" for q in quantiles.columns]
    stats = stats.join(quantiles)
    opened = table[table["state"] == "open"].groupby(group_keys, observed=True,
                                                      dropna=False).size()
    stats["open"] = opened.reindex(stats.index).fillna(0).astype(int)
    lifetimes = _group_lifetimes(frames, keys)
    if keys:
        lifetime = lifetimes.reindex(stats.index.droplevel("name")).to_numpy()
    else:
        lifetime = np.full(len(stats), lifetimes)
    stats["share"] = stats["total"].to_numpy() / lifetime
    ordered = ["count", "total", "mean", "p50", "p90", "p99", "max", "open", "share"]
    return stats[ordered].sort_values("total", ascending=False)


def _group_lifetimes(frames: TraceFrames, keys: list[str]) -> Any:
    durations = frames.samples["duration"].fillna(0)
    if not keys:
        return float(durations.sum())
    return durations.groupby([frames.samples[k] for k in keys], observed=True,
                             dropna=False).sum()


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


#: The widget's diff table, column by column (``js/src/diff.js`` builds the same rows).
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


# --------------------------------------------------------------------------- per sample


def self_times(frames: TraceFrames) -> pd.Series:
    """Self time of every measured span (duration minus its children's covered time)."""
    spans = measured_spans(frames)
    return _self_seconds(spans, spans["start"], spans["display_end"])


def _self_seconds(spans: pd.DataFrame, start: pd.Series, end: pd.Series) -> pd.Series:
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
    """Sample a :func:`concurrency` step function on a fixed grid (one column per name)."""
    lo = steps["time"].min() if start is None else start
    hi = steps["time"].max() if end is None else end
    grid = np.arange(lo, hi + interval / 2, interval)
    columns = {}
    for name, group in steps.groupby("name", sort=True):
        times = group["time"].to_numpy()
        values = group["active"].to_numpy()
        position = np.searchsorted(times, grid, side="right") - 1
        columns[name] = np.where(position >= 0, values[np.maximum(position, 0)], 0)
    return pd.DataFrame(columns, index=pd.Index(grid, name="time"))


# --------------------------------------------------------------------------- critical path


def critical_path(frames: TraceFrames, sample_row: int) -> pd.DataFrame:
    """The spans whose time bounded sample ``sample_row``'s end-to-end latency, in time
    order: their ``span_core`` rows with ``start_attrs``/``end_attrs`` and
    ``critical``, the seconds each holds the path itself (its time on the path minus
    its children's on it).

    Walking back from the sample's end: the span that finished last, then the last to
    finish before that one started, and so on; within each span on the path, the same
    walk over its children from its own end. Concurrent spans that ended earlier are
    not on the path. Open spans count to their display end.
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

    One sort puts each parent's children in a contiguous run, latest end first (ties:
    earliest start first); a sample's top-level spans hang under a node of their own.
    The walk then visits each span at most once, so a million spans take seconds.
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
    order = np.lexsort((starts, -ends, node))
    bounds = np.searchsorted(node[order], np.arange(n + len(sample_rows) + 1))
    order_list, bound_list = order.tolist(), bounds.tolist()
    start_list, end_list = starts.tolist(), ends.tolist()
    found_sample: list[int] = []
    found_span: list[int] = []
    found_seconds: list[float] = []
    sample_end = pd.Series(ends).groupby(sample_codes).max().to_numpy()
    for code in range(len(sample_rows)):
        _walk_one(n + code, float(sample_end[code]), code, order_list, bound_list,
                  start_list, end_list, (found_sample, found_span, found_seconds))
    return pd.DataFrame({"sample_row": np.asarray(sample_rows)[found_sample],
                         "span": labels[found_span], "critical": found_seconds})


def _walk_one(root: int, limit: float, sample: int, order: list[int], bounds: list[int],
              starts: list[float], ends: list[float],
              found: tuple[list[int], list[int], list[float]]) -> None:
    """One sample's walk from node ``root``: within a node's children (latest end
    first), take the one that ended by the limit, walk into it from its own end, then
    move the limit to its start. An explicit stack instead of recursion, so a
    crafted chain thousands of spans deep does not exhaust Python's stack. Each span
    on the path is recorded with its exclusive seconds: its length minus the time
    its own path covers."""
    # A frame: [node, next child position, limit, covered by its children's path].
    stack = [[root, bounds[root], limit, 0.0]]
    while stack:
        frame = stack[-1]
        node, position, limit = frame[0], frame[1], frame[2]
        chosen = -1
        while position < bounds[node + 1]:
            k = order[position]
            position += 1
            if ends[k] <= limit + _EPSILON:  # else still running here: not waited for
                chosen = k
                break
        frame[1] = position
        if chosen >= 0:
            stack.append([chosen, bounds[chosen], ends[chosen], 0.0])
            continue
        stack.pop()
        if not stack:
            return
        length = max(ends[node] - starts[node], 0.0)
        found[0].append(sample)
        found[1].append(node)
        found[2].append(max(length - frame[3], 0.0))
        parent = stack[-1]
        parent[3] += length
        parent[2] = starts[node]


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
                          "own": _self_seconds(spans, start, end).to_numpy()})
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


def rollout_trends(source: Any, heaviest: int = 3) -> pd.DataFrame:
    """Trends across a run, one row per dump of a run dataset folder (or of frames),
    computed in DuckDB: see :func:`slime_trace_widget.dataset.trends.rollout_trends`."""
    from .dataset.trends import rollout_trends as trends_of

    return trends_of(source, heaviest)
