"""The tail's price: when a rollout's samples finished, and what stopping early would save.

Figures come from the recorded times alone: a sample *finishes* at its ``end`` (its
last record) and a rollout starts at its samples' earliest ``start``. slime fills its
batch with whole groups (``generate_rollout_async`` takes a group once all its samples
are done, and stops at ``rollout_batch_size`` groups), so the over-sampling figures
count *units*: groups (a ``group_index`` within a dump; a unit finishes with its last
member), or single samples for samples without a group (evaluation dumps). A group
whose every member was dropped by a filter (:data:`.ledger.FILTER_EVENTS`) is not
counted toward the batch, as slime's dynamic filter does not count it; a member without
times (untraced) counts in that "every member" too, though a unit's finish is the last
end of its members with times (a unit without any is left out).

What the over-sampling figures promise, and on what they rest:

* Reading 1: the recorded rollout was over-sampled ``oversample`` times; had it stopped
  at the batch size, ``ceil(units / oversample)`` units, it would have ended when that
  many had finished: ``stop_s``. Reading 2: the recorded units are a sample of how long
  a unit takes; with ``oversample`` times the prompts and a stop at this many units,
  the stop comes at the same order statistic. Both give ``stop_s``.
* Samples are independent: one's time does not depend on which others run with it.
* The engines' load is the same: more prompts in flight make every request slower
  (more queueing, smaller batches per request), which these figures do not model, so
  ``stop_s`` is a lower bound for a run with more prompts; stopping early also costs
  the abort of the requests still running, which is not counted either.
* The units kept by stopping early are the fast ones: the batch leans toward short
  responses, a bias in what the step learns that the saved seconds do not show.
* A sample resumed by partial rollout brings its earlier start with it, which moves
  the rollout's start back to the step it began in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .ledger import filter_dropped, id_keys

if TYPE_CHECKING:
    from ..frames.model import TraceFrames

__all__ = ["FINISHED", "FINISHED_COLUMNS", "OVERSAMPLE", "TAIL_COLUMNS", "finish_order", "tail_of",
           "tail_price", "unit_table"]

#: Fractions of a rollout's samples for ``finished_<percent>``.
FINISHED = (0.5, 0.9, 0.99)
#: The default over-sampling factor of :func:`tail_price`.
OVERSAMPLE = 1.25
#: The columns of :data:`FINISHED`, in its order.
FINISHED_COLUMNS = tuple(f"finished_{round(share * 100)}" for share in FINISHED)
TAIL_COLUMNS = ("samples", *FINISHED_COLUMNS, "step_s", "unit", "units", "oversample",
                "batch_units", "stop_s", "saved_s", "saved_share")


def unit_table(frames: TraceFrames) -> pd.DataFrame:
    """Per sample (indexed like ``frames.samples``): ``rollout_id`` (-1 when unknown),
    ``start``, ``end``, ``unit`` (an id shared by the members of a group, the sample's
    own otherwise; negative ids are samples) and ``dropped`` (a filter event)."""
    samples = frames.samples
    rows = np.arange(len(samples), dtype=np.int64)
    group = samples["group_index"]
    grouped = group.notna().to_numpy()
    keys = pd.MultiIndex.from_arrays([samples["dump"].to_numpy()[grouped],
                                      group[grouped].to_numpy(dtype=np.int64)])
    unit = -1 - rows
    unit[grouped] = pd.factorize(keys)[0]
    return pd.DataFrame({
        "rollout_id": id_keys(samples["rollout_id"]),
        "start": samples["start"].to_numpy(dtype=np.float64),
        "end": samples["end"].to_numpy(dtype=np.float64),
        "unit": unit,
        "dropped": filter_dropped(frames),
    }, index=samples.index)


def tail_price(frames: TraceFrames, oversample: float = OVERSAMPLE) -> pd.DataFrame:
    """Per rollout id (the index) and dump: when its samples finished and what an early
    stop saves.

    ``dump``: the dump the row is of, its position in ``frames.paths`` (as
    ``signal_ledger(frames, by="dump")`` and ``rollout_diff`` count dumps): two dumps of
    one rollout id (two runs' ``rollout_0.pt``, or a step's train and eval dumps) are
    two rollouts, each its own row, in rollout id then dump order; frames whose dumps
    have rollout ids of their own have one row per id, as before there was a ``dump``.
    ``samples``: samples with a start and an end (the others are left out);
    ``finished_50``, ``finished_90``, ``finished_99``: seconds from the rollout's first
    start until 50/90/99% of them had finished (the end of the ``ceil(q * samples)``-th
    to finish); ``step_s``: until the last finished. ``unit``: ``group`` when the
    rollout's batch is made of groups, else ``sample``; ``units``: how many count
    toward the batch; ``oversample``: the factor asked for; ``batch_units``:
    ``ceil(units / oversample)``; ``stop_s``: seconds from the first start until that
    many units had finished; ``saved_s`` = ``step_s - stop_s``; ``saved_share`` =
    ``saved_s / step_s``. The module docstring says on what assumptions these rest."""
    table, keys = _per_dump(frames)
    out = tail_of(table, oversample)
    rollout_dump = keys[out.index.to_numpy()]
    out.index = pd.Index(rollout_dump.get_level_values(0), name="rollout_id")
    out.insert(0, "dump", rollout_dump.get_level_values(1))
    return out


def tail_of(table: pd.DataFrame, oversample: float = OVERSAMPLE) -> pd.DataFrame:
    """:func:`tail_price` of a :func:`unit_table`-shaped table."""
    if not oversample >= 1:
        raise ValueError(f"oversample must be at least 1, not {oversample!r}")
    timed = table[np.isfinite(table["start"].to_numpy()) & np.isfinite(table["end"].to_numpy())]
    rollout = timed["rollout_id"].to_numpy(dtype=np.int64)
    rollouts = np.unique(rollout)
    index = pd.Index(rollouts, name="rollout_id")
    t0 = pd.Series(timed["start"].to_numpy()).groupby(rollout).min().reindex(rollouts).to_numpy()
    n = np.bincount(np.searchsorted(rollouts, rollout), minlength=len(rollouts))
    out = pd.DataFrame({"samples": n}, index=index)
    ends = _ordered(rollout, timed["end"].to_numpy())
    for share, column in zip(FINISHED, FINISHED_COLUMNS, strict=True):
        out[column] = _nth(ends, rollouts, np.ceil(share * n)) - t0
    out["step_s"] = _nth(ends, rollouts, n) - t0
    units = _unit_finishes(table)
    grouped = units.groupby("rollout_id")["grouped"].any().reindex(rollouts, fill_value=False)
    out["unit"] = np.where(grouped.to_numpy(), "group", "sample")
    counted = units[units["counted"].to_numpy()]
    finishes = _ordered(counted["rollout_id"].to_numpy(), counted["end"].to_numpy())
    total = counted.groupby("rollout_id").size().reindex(rollouts, fill_value=0).to_numpy()
    batch = np.ceil(total / oversample - 1e-9).astype(np.int64)
    out["units"] = total
    out["oversample"] = float(oversample)
    out["batch_units"] = batch
    out["stop_s"] = _nth(finishes, rollouts, batch) - t0
    out["saved_s"] = out["step_s"] - out["stop_s"]
    out["saved_share"] = out["saved_s"] / out["step_s"].where(out["step_s"] > 0)
    return out[list(TAIL_COLUMNS)]


def finish_order(frames: TraceFrames) -> pd.DataFrame:
    """Every unit of :func:`tail_price` in the order it finished: indexed by rollout id
    and ``position`` (1 for the first to finish in its rollout id and dump), with
    ``dump`` (as in :func:`tail_price`), ``seconds`` from the rollout's first start and
    ``counted`` (whether it counts toward the batch); stopping after the first ``N``
    counted units of a dump ends its step at the ``N``-th counted row's ``seconds``."""
    table, keys = _per_dump(frames)
    timed = table[np.isfinite(table["start"].to_numpy()) & np.isfinite(table["end"].to_numpy())]
    t0 = timed.groupby("rollout_id")["start"].min()
    units = _unit_finishes(table).sort_values(["rollout_id", "end"], kind="stable")
    position = units.groupby("rollout_id").cumcount().to_numpy() + 1
    seconds = units["end"].to_numpy() - t0.reindex(units["rollout_id"]).to_numpy()
    rollout_dump = keys[units["rollout_id"].to_numpy()]
    return pd.DataFrame({"dump": rollout_dump.get_level_values(1), "seconds": seconds,
                         "counted": units["counted"].to_numpy(),
                         "unit": np.where(units["grouped"].to_numpy(), "group", "sample")},
                        index=pd.MultiIndex.from_arrays([rollout_dump.get_level_values(0),
                                                         position],
                                                        names=["rollout_id", "position"]))


def _per_dump(frames: TraceFrames) -> tuple[pd.DataFrame, pd.MultiIndex]:
    """:func:`unit_table` with each sample's ``rollout_id`` replaced by a code of its
    (rollout id, dump) pair, for :func:`tail_of` to take each pair as a rollout; and
    the pairs, one per code, in code order (rollout id, then dump)."""
    table = unit_table(frames)
    pairs = pd.MultiIndex.from_arrays([table["rollout_id"].to_numpy(),
                                       frames.samples["dump"].to_numpy(dtype=np.int64)])
    codes, keys = pd.factorize(pairs, sort=True)
    table["rollout_id"] = codes.astype(np.int64)
    return table, keys


def _unit_finishes(table: pd.DataFrame) -> pd.DataFrame:
    """One row per unit of a :func:`unit_table`-shaped table with a member that has a
    start and an end: its rollout id, its finish (the last end of those members), whether
    it is a group and whether it counts toward the batch (not every member dropped, the
    members without times too)."""
    start, end = table["start"].to_numpy(), table["end"].to_numpy()
    timed = np.isfinite(start) & np.isfinite(end)
    members = pd.DataFrame({"rollout_id": table["rollout_id"].to_numpy(),
                            "unit": table["unit"].to_numpy(),
                            "end": np.where(timed, end, np.nan),
                            "dropped": table["dropped"].to_numpy(dtype=bool)})
    grouped = members.groupby(["rollout_id", "unit"], sort=False)
    units = grouped.agg(end=("end", "max"), dropped=("dropped", "all")).reset_index()
    units = units[units["end"].notna().to_numpy()].reset_index(drop=True)
    units["grouped"] = units["unit"].to_numpy() >= 0
    units["counted"] = ~units["dropped"].to_numpy(dtype=bool)
    return units


def _ordered(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``values`` sorted by key then value, with the keys in that order."""
    order = np.lexsort((values, keys))
    return keys[order], values[order]


def _nth(ordered: tuple[np.ndarray, np.ndarray], rollouts: np.ndarray, nth: np.ndarray
         ) -> np.ndarray:
    """Per rollout, the ``nth`` smallest value (1-based; NaN when out of range)."""
    keys, values = ordered
    first = np.searchsorted(keys, rollouts, side="left")
    size = np.searchsorted(keys, rollouts, side="right") - first
    nth = np.asarray(nth, dtype=np.int64)
    ok = (nth >= 1) & (nth <= size)
    out = np.full(len(rollouts), np.nan)
    out[ok] = values[first[ok] + nth[ok] - 1]
    return out
