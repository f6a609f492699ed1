"""Two rollouts side by side: per-name statistics, the widget's rollout diff table, and
what each rollout's time bought (their signal ledgers)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from ..frames.model import TraceFrames

from .ledger import FATES, signal_ledger
from .stats import span_stats


def compare(frames_a: TraceFrames, frames_b: TraceFrames,
            labels: tuple[str, str] = ("a", "b")) -> pd.DataFrame:
    """Per-name statistics of two rollouts side by side (:func:`.stats.span_stats`), with
    differences and ratios. A name in only one rollout has NaN figures on the other
    side; its count and total differences count that side as zero (as
    :func:`rollout_diff` does), the mean and p90 differences and ``mean_ratio`` stay NaN;
    ``mean_ratio`` is NaN too where the first rollout's mean is not positive (as
    ``rollout_diff``'s ``p50_ratio``)."""
    a, b = labels
    left = span_stats(frames_a)[["count", "total", "mean", "p50", "p90", "max", "share"]]
    right = span_stats(frames_b)[["count", "total", "mean", "p50", "p90", "max", "share"]]
    joined = left.add_suffix(f"_{a}").join(right.add_suffix(f"_{b}"), how="outer")
    for column in ("count", "total"):
        joined[f"{column}_diff"] = joined[f"{column}_{b}"].fillna(0) \
            - joined[f"{column}_{a}"].fillna(0)
    for column in ("mean", "p90"):
        joined[f"{column}_diff"] = joined[f"{column}_{b}"] - joined[f"{column}_{a}"]
    joined["mean_ratio"] = joined[f"mean_{b}"] / joined[f"mean_{a}"].where(joined[f"mean_{a}"] > 0)
    return joined.sort_values(f"total_{b}", ascending=False, na_position="last")


#: The widget's diff table, column by column (``js/src/data/diff.js`` builds the same rows).
DIFF_COLUMNS = ("count_a", "p50_a", "p95_a", "total_a", "open_a",
                "count_b", "p50_b", "p95_b", "total_b", "open_b",
                "count_diff", "p50_diff", "p95_diff", "total_diff", "p50_ratio")


def rollout_diff(frames: TraceFrames, a: int | None = None, b: int | None = None,
                 of: str = "spans") -> pd.DataFrame:
    """The widget's rollout diff: per span name, rollout ``b`` against rollout ``a``
    (``of="ledger"``: their signal ledgers instead, :func:`ledger_diff`).

    ``a`` and ``b`` are dump positions (the widget's ``meta.rollouts`` order;
    the first two by default). The spans are the payload's: every span but the
    real ``sglang_pd_*`` ones, so a PD phase counts once, as its ``[P]``/``[D]``
    span. Count, p50, p95 (linear interpolation) and total use closed spans, each
    as long as the widget draws it, from its start to its drawn end (``display_end``):
    a span that ends before its start counts with length 0, as drawn.
    ``open_*`` counts the open ones. A name missing from a rollout has NaN on
    that side; the count and total differences treat that side as zero, the p50
    and p95 ones stay NaN, and ``p50_ratio`` needs a positive ``p50_a``. Rows
    are sorted by ``total_diff``, largest increase first, then by name.
    """
    if of == "ledger":
        return ledger_diff(frames, a, b)
    if of != "spans":
        raise ValueError(f"of must be 'spans' or 'ledger', not {of!r}")
    a, b = _dump_positions(frames, a, b)
    core = frames.span_core
    spans = core.loc[~core["pd_detail"].to_numpy(),
                     ["sample_row", "name", "start", "display_end", "state"]]
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


def _dump_positions(frames: TraceFrames, a: int | None, b: int | None) -> tuple[int, int]:
    """``a`` and ``b`` (the first two dumps by default) once each is known to be a dump
    position of ``frames``: a rollout id given for one would compare a dump that is not
    there, every figure of its side empty, as if its spans were gone. ValueError naming
    the positions there are and their rollout ids otherwise."""
    count = len(frames.paths)
    chosen = (0 if a is None else a, 1 if b is None else b)
    for which in chosen:
        if isinstance(which, bool) or not isinstance(which, (int, np.integer)) \
                or not 0 <= which < count:
            held = ", ".join(f"{position} (rollout {rollout})" for position, rollout
                             in enumerate(frames.rollout_ids[:count]))
            raise ValueError(f"{which!r} is not a dump position of these frames: a and b "
                             f"are positions, not rollout ids; they hold {count} dump(s): "
                             f"{held or 'none'}")
    return int(chosen[0]), int(chosen[1])


def _diff_side(spans: pd.DataFrame, suffix: str) -> pd.DataFrame:
    """One rollout's columns of :func:`rollout_diff`, one row per name it has; a closed
    span's length is its drawn one, ``display_end - start``."""
    names = spans["name"].astype(str)
    closed = spans["state"].to_numpy() == "closed"
    drawn = spans["display_end"] - spans["start"]
    durations = drawn[closed].groupby(names[closed])
    side = pd.DataFrame(index=pd.Index(sorted(set(names)), dtype=object))
    side["count"] = durations.count().reindex(side.index).fillna(0).astype("Int64")
    side["p50"] = durations.quantile(0.5).reindex(side.index)
    side["p95"] = durations.quantile(0.95).reindex(side.index)
    side["total"] = durations.sum().reindex(side.index).fillna(0.0)
    side["open"] = names[~closed].value_counts().reindex(side.index).fillna(0).astype("Int64")
    return side.add_suffix(f"_{suffix}")


#: The columns of :func:`ledger_diff`.
LEDGER_DIFF_COLUMNS = ("samples_a", "seconds_a", "share_a", "samples_b", "seconds_b", "share_b",
                       "samples_diff", "seconds_diff", "share_diff")


def ledger_diff(frames: TraceFrames, a: int | None = None, b: int | None = None,
                reward_key: str | None = None) -> pd.DataFrame:
    """What two rollouts' time bought, side by side: one row per fate of
    :data:`.ledger.FATES` (in that order) and ``all``, with each dump's samples,
    sample-seconds and seconds share of that fate (:func:`.ledger.signal_ledger`,
    ``by="dump"``) and ``b``'s minus ``a``'s. ``a`` and ``b`` are dump positions, as in
    :func:`rollout_diff` (the first two by default); a dump with no samples has zeros
    and NaN shares."""
    a, b = _dump_positions(frames, a, b)
    ledger = signal_ledger(frames, by="dump", reward_key=reward_key)
    names = [*FATES, "all"]
    table = pd.DataFrame(index=pd.Index(names, name="fate"))
    for which, suffix in ((a, "a"), (b, "b")):
        row = ledger.loc[which] if which in ledger.index else None
        samples = [row[f"samples_{fate}"] if row is not None else 0 for fate in FATES]
        seconds = [row[f"seconds_{fate}"] if row is not None else 0.0 for fate in FATES]
        total = float(np.sum(seconds))
        table[f"samples_{suffix}"] = np.array([*samples, np.sum(samples)], dtype=np.int64)
        table[f"seconds_{suffix}"] = np.array([*seconds, total], dtype=np.float64)
        table[f"share_{suffix}"] = table[f"seconds_{suffix}"] / total if total > 0 else np.nan
    for column in ("samples", "seconds", "share"):
        table[f"{column}_diff"] = table[f"{column}_b"] - table[f"{column}_a"]
    return table[list(LEDGER_DIFF_COLUMNS)]
