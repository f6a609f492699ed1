"""What a rollout's time bought: each sample's fate, and its sample-seconds by fate.

Every sample gets exactly one fate of :data:`FATES`, decided in this order (the
first rule that holds wins); ``docs/ledger.md`` explains each rule against slime's
code:

1. ``failed``: status ``failed``.
2. ``aborted``: status ``aborted``.
3. ``filtered``: ``remove_sample`` is true (slime then zeroes its loss mask), or the
   sample carries an instant event named in :data:`FILTER_EVENTS` (``filter_dropped``,
   written by rollout code that keeps the groups a dynamic-sampling filter dropped;
   slime's own rollout leaves those groups out of the dump).
4. ``truncated``: status ``truncated`` (hit the length limit; it may still train, so it
   is counted apart from the two below).
5. ``no_signal``: every other sample (``completed``, ``pending``, no status, any other
   text) whose group gives it no gradient: the group's usable rewards are all equal, a
   member that is neither aborted nor failed has no usable reward, the group has one
   member (a sample without a ``group_index`` is such a group), or the sample is in an
   evaluation dump (evaluation trains nothing).
6. ``signal``: the rest: kept, in a group whose rewards vary.

A *group* is one ``group_index`` within one dump. Its rewards are those of all its
members in the dump, whatever their fate, as slime's GRPO normalisation sees them; it
normalises over each group only while every group of the batch has one size (the batch
is then ``n_samples_per_prompt`` times ``rollout_batch_size`` samples), and over the
whole batch otherwise, so a dump whose groups differ in size (a sample without a
``group_index`` a group of one) is one group. A
usable reward is a finite number, or a dict reward (compared whole; with
``reward_key``, the number under that key, like slime's ``--reward-key``); None,
NaN and infinities are not usable. A group with a member that trains on such a reward
(one neither aborted nor failed: those end without a reward, and slime's rollout keeps
aborted groups out of the batch) gives no signal: slime's ``check_reward_nonzero_std``
finds a NaN deviation and drops it, and its GRPO normalisation gives every member a NaN
advantage (or fails, on None). Numbers are all equal when their sample standard
deviation is at most :data:`EQUAL_STD` (slime's ``check_reward_nonzero_std`` filter's
threshold); dict rewards when they are equal values, as Python compares them: keys in
any order, numbers by value (``1``, ``1.0`` and ``true`` alike); a group mixing
numbers and dicts varies.

*Sample-seconds* are each sample's ``duration`` (its first record to its last, the
``samples`` column; 0 for a sample with no timestamps), so a rollout's fates' seconds
add up to its samples' summed durations and its fates' counts to its samples.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..sources.dumps.paths import dump_kind
from ..tables.core_tables import UNKNOWN_ROLLOUT, json_text_column
from ..vocabularies import FATES, INSTANT_EVENT
from .engine import PHASES, engine_breakdown

if TYPE_CHECKING:
    from ..frames.model import TraceFrames

__all__ = ["BY", "EQUAL_STD", "FATES", "FILTER_EVENTS", "KINDS", "UNKNOWN_ROLLOUT", "fate_table",
           "fates_of", "filter_dropped", "id_keys", "ledger_kinds", "ledger_of",
           "normalised_groups", "sample_fates", "signal_ledger"]

#: Instant event names that mark a sample as dropped by a filter.
FILTER_EVENTS = ("filter_dropped",)
#: Rewards of a group whose sample standard deviation is at most this are all equal.
EQUAL_STD = 1e-6
#: Groupings of :func:`signal_ledger` and the index levels each gives.
BY: dict[str, tuple[str, ...]] = {"rollout": ("rollout_id",), "dump": ("dump",),
                                  "source": ("rollout_id", "source"),
                                  "group": ("rollout_id", "dump", "group_index")}
#: Span kinds of :func:`ledger_kinds`, in priority order, as name patterns (fnmatch,
#: case-sensitive): an instant covered by spans of several kinds counts in the first.
KINDS: dict[str, tuple[str, ...]] = {
    "reward": ("*reward*", "*judge*"),
    "tools": ("*tool*",),
    "generation": ("sglang_*", "generate", "*_generate", "*_generate [[]*"),
}
_CODE = {fate: code for code, fate in enumerate(FATES)}


# --------------------------------------------------------------------------- fates


def fate_table(frames: TraceFrames) -> pd.DataFrame:
    """The per-sample inputs of the fate rules, indexed like ``frames.samples``:
    ``dump``, ``group_index``, ``status``, ``reward``, ``reward_text`` (a dict reward's
    JSON text), ``removed``, ``dropped`` (a filter event), ``evaluation``."""
    samples = frames.samples
    removed = (samples["remove_sample"].to_numpy(dtype=bool) if "remove_sample" in samples
               else np.zeros(len(samples), dtype=bool))
    detail = samples["reward_detail"]
    has_detail = detail.notna().to_numpy() & np.isnan(samples["reward"].to_numpy())
    text = np.full(len(samples), None, dtype=object)
    if has_detail.any():
        text[has_detail] = json_text_column(detail[has_detail].tolist()).to_numpy(
            zero_copy_only=False)
    return pd.DataFrame({
        "dump": samples["dump"].to_numpy(),
        "group_index": samples["group_index"].array,
        "status": samples["status"].array,
        "reward": samples["reward"].to_numpy(),
        "reward_text": text,
        "removed": removed,
        "dropped": filter_dropped(frames),
        "evaluation": _evaluation(frames),
    }, index=samples.index)


def filter_dropped(frames: TraceFrames) -> np.ndarray:
    """Per sample (in ``frames.samples``' order), whether an instant event of
    :data:`FILTER_EVENTS` marks it dropped by a filter."""
    events = frames.event_core
    marked = events["sample_row"][events["name"].isin(FILTER_EVENTS).to_numpy()
                                  & (events["kind"] == INSTANT_EVENT).to_numpy()]
    return frames.samples.index.isin(marked.to_numpy())


def _evaluation(frames: TraceFrames) -> np.ndarray:
    """Whether each sample's dump is an evaluation dump (by its path: :func:`dump_kind`,
    which also finds slime's ``eval_<id>`` in a folder's name)."""
    dumps = frames.samples["dump"].to_numpy(dtype=np.int64)
    kinds = np.array([dump_kind(path) == "eval" for path in frames.paths]
                     or [False], dtype=bool)
    return kinds[np.clip(dumps, 0, len(kinds) - 1)]


def fates_of(table: pd.DataFrame, reward_key: str | None = None,
             peers: pd.DataFrame | None = None) -> pd.Series:
    """The fate of each row of a :func:`fate_table`-shaped table, as a Categorical
    of :data:`FATES` (the rules of this module's docstring). ``peers``: the rewards of
    group members the table leaves out (``TraceFrames.group_peers``), which count
    toward their groups' rewards."""
    status = _lower_text(table["status"])
    every = table if peers is None or not len(peers) else pd.concat(
        [table[["dump", "group_index", "status", "reward", "reward_text"]], peers],
        ignore_index=True)
    reward, text = _usable_rewards(every, reward_key)
    trains = ~np.isin(_lower_text(every["status"]), ["aborted", "failed"])
    dump = every["dump"].to_numpy(dtype=np.int64)
    varies = _group_varies(dump, normalised_groups(dump, every["group_index"]), reward, text,
                           trains)[:len(table)]
    kept = varies & ~table["evaluation"].to_numpy(dtype=bool)
    codes = np.where(kept, _CODE["signal"], _CODE["no_signal"])
    # later assignments win: apply the rules from the last to the first
    codes[status == "truncated"] = _CODE["truncated"]
    codes[table["removed"].to_numpy(dtype=bool) | table["dropped"].to_numpy(dtype=bool)] = \
        _CODE["filtered"]
    codes[status == "aborted"] = _CODE["aborted"]
    codes[status == "failed"] = _CODE["failed"]
    return pd.Series(pd.Categorical.from_codes(codes, categories=FATES), index=table.index,
                     name="fate")


def sample_fates(frames: TraceFrames, reward_key: str | None = None) -> pd.Series:
    """Each sample's fate (a Categorical of :data:`FATES`, in that order), indexed like
    ``frames.samples``; ``reward_key`` picks the number of dict rewards."""
    return fates_of(fate_table(frames), reward_key, frames.group_peers)


def _lower_text(values: Any) -> np.ndarray:
    """Lower-cased text of a (categorical or object) column, '' where missing."""
    series = pd.Series(values)
    if isinstance(series.dtype, pd.CategoricalDtype):
        words = np.array([str(c).lower() for c in series.cat.categories] + [""], dtype=object)
        return words[series.cat.codes.to_numpy()]  # code -1 (missing) picks the last ''
    return series.fillna("").astype(str).str.lower().to_numpy(dtype=object)


def _usable_rewards(table: pd.DataFrame, reward_key: str | None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The usable reward of each row as a number (NaN if none) and as dict text (None),
    the text spelled one way per value (:func:`_value_text`), so that equal dicts have
    equal texts."""
    reward = table["reward"].to_numpy(dtype=np.float64).copy()
    reward[~np.isfinite(reward)] = np.nan
    text = table["reward_text"].to_numpy(dtype=object).copy()
    if reward_key is not None:
        keyed = np.array([_keyed(value, reward_key) for value in text[pd.notna(text)]],
                         dtype=np.float64)
        reward[pd.notna(text)] = keyed
        reward[~np.isfinite(reward)] = np.nan
        return reward, np.full(len(text), None, dtype=object)
    present = pd.notna(text)
    if present.any():
        codes, distinct = pd.factorize(text[present])  # each distinct text read once
        text[present] = np.array([_value_text(value) for value in distinct],
                                 dtype=object)[codes]
    return reward, text


def _value_text(text: str) -> str:
    """A dict reward's JSON text spelled one way for every value Python finds equal to
    it: keys sorted, integral numbers as integers (``1.0`` and ``true`` as ``1``); text
    that is not JSON is kept as it is."""
    try:
        return json.dumps(_by_value(json.loads(text)), sort_keys=True, allow_nan=True)
    except (ValueError, TypeError, RecursionError):
        return text


def _by_value(value: Any) -> Any:
    """``value`` (parsed JSON) with every number that equals an integer made that
    integer, as Python's ``1 == 1.0 == True`` has it."""
    if isinstance(value, dict):
        return {key: _by_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_by_value(item) for item in value]
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _keyed(text: str, key: str) -> float:
    """The number under ``key`` of a dict reward's JSON text (NaN if none)."""
    try:
        value = json.loads(text)
        return float(value[key]) if isinstance(value, dict) and key in value else np.nan
    except (ValueError, TypeError, OverflowError):
        return np.nan


def normalised_groups(dump: np.ndarray, group: Any) -> pd.arrays.IntegerArray:
    """The groups slime's reward normalisation sees, per row of ``dump`` positions and
    ``group`` indexes: the group index where every group of the row's dump has one size,
    0 for every row of a dump whose groups differ in size (a row without a group counts
    as a group of one), which slime normalises as one batch
    (``_post_process_rewards``: ``rewards.view(-1, len(rewards))``)."""
    group = pd.array(group, dtype="Int64")
    missing = np.asarray(group.isna(), dtype=bool)
    codes = np.empty(len(dump), dtype=np.int64)
    codes[~missing] = pd.factorize(pd.MultiIndex.from_arrays(
        [dump[~missing], group[~missing].to_numpy(dtype=np.int64)]))[0]
    known = int(codes[~missing].max()) + 1 if (~missing).any() else 0
    codes[missing] = known + np.arange(int(missing.sum()))  # each its own group of one
    sizes = np.bincount(codes)[codes]
    kinds = pd.Series(sizes).groupby(dump).nunique()
    mixed = np.isin(dump, kinds.index[kinds.to_numpy() > 1].to_numpy())
    if not mixed.any():
        return group
    out = group.copy()
    out[mixed] = 0
    return out


def _group_varies(dump: np.ndarray, group: Any, reward: np.ndarray, text: np.ndarray,
                  trains: np.ndarray) -> np.ndarray:
    """Per row: whether its group's usable rewards vary and every member that
    ``trains`` has one (rows without a group: never)."""
    group = pd.array(group, dtype="Int64")
    grouped = ~group.isna()
    out = np.zeros(len(dump), dtype=bool)
    if not grouped.any():
        return out
    keys = pd.MultiIndex.from_arrays([dump[grouped], group[grouped].to_numpy(dtype=np.int64)])
    codes, _ = pd.factorize(keys)
    numbers = pd.Series(reward[grouped]).groupby(codes)
    spread = numbers.std(ddof=1).to_numpy()
    count = numbers.count().to_numpy()
    words = pd.Series(text[grouped]).groupby(codes)
    distinct = words.nunique(dropna=True).to_numpy()
    worded = words.count().to_numpy()
    varies = (spread > EQUAL_STD) | (distinct > 1) | ((count > 0) & (worded > 0))
    unusable = (np.isnan(reward) & pd.isna(text) & trains)[grouped]
    spoiled = np.bincount(codes, weights=unusable, minlength=len(varies)) > 0
    out[grouped] = (varies & ~spoiled)[codes]
    return out


# --------------------------------------------------------------------------- ledger


def signal_ledger(frames: TraceFrames, by: str = "rollout", reward_key: str | None = None
                  ) -> pd.DataFrame:
    """Sample-seconds and samples by fate, one row per rollout id (``by="rollout"``;
    -1 for samples without one), per dump position (``"dump"``), per rollout and
    source (``"source"``) or per rollout, dump and group (``"group"``).

    Columns: ``samples`` and ``seconds`` (summed ``duration``), then for each fate of
    :data:`FATES` ``samples_<fate>``, ``seconds_<fate>`` and ``share_<fate>`` (its
    seconds over ``seconds``; NaN when ``seconds`` is 0). Every sample is in exactly
    one fate, so the fates' samples add up to ``samples`` and their seconds to
    ``seconds``."""
    fates = sample_fates(frames, reward_key)
    return ledger_of(_keys(frames.samples, by), fates.cat.codes.to_numpy(),
                     frames.samples["duration"].to_numpy(dtype=np.float64))


def _keys(samples: pd.DataFrame, by: str) -> pd.DataFrame:
    if by not in BY:
        raise ValueError(f"by must be one of {', '.join(map(repr, BY))}, not {by!r}")
    keys = {}
    for level in BY[by]:
        column = samples[level]
        if level in ("rollout_id", "group_index"):
            keys[level] = id_keys(column)
            continue
        if level == "source":
            column = column.astype(object).where(column.notna(), None)
        keys[level] = column.to_numpy()
    return pd.DataFrame(keys)


def id_keys(column: Any) -> np.ndarray:
    """An id column of integers (``rollout_id``, ``group_index``) as int64 keys, each id
    exactly (never through a float, which rounds ids past 2**53: 2**53 + 1 would key as
    2**53), :data:`UNKNOWN_ROLLOUT` where missing."""
    return pd.array(column, dtype="Int64").fillna(UNKNOWN_ROLLOUT).to_numpy(dtype=np.int64)


def ledger_of(keys: pd.DataFrame, codes: np.ndarray, seconds: np.ndarray) -> pd.DataFrame:
    """:func:`signal_ledger`'s table from key columns, fate codes and sample-seconds."""
    seconds = np.where(np.isfinite(seconds), seconds, 0.0)
    index = pd.MultiIndex.from_frame(keys) if keys.shape[1] > 1 else pd.Index(
        keys.iloc[:, 0], name=keys.columns[0])
    slots, unique = pd.factorize(index, sort=True)
    if keys.shape[1] > 1:
        unique = pd.MultiIndex.from_tuples(list(unique), names=list(keys.columns)) if len(
            unique) else pd.MultiIndex.from_arrays([[]] * keys.shape[1], names=list(keys.columns))
    else:
        unique = pd.Index(unique, name=keys.columns[0])
    n, width = len(unique), len(FATES)
    position = slots * width + codes
    counts = np.bincount(position, minlength=n * width).reshape(n, width)
    sums = np.bincount(position, weights=seconds, minlength=n * width).reshape(n, width)
    total = sums.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        shares = sums / np.where(total > 0, total, np.nan)[:, None]
    columns: dict[str, np.ndarray] = {"samples": counts.sum(axis=1), "seconds": total}
    columns |= {f"samples_{fate}": counts[:, i] for i, fate in enumerate(FATES)}
    columns |= {f"seconds_{fate}": sums[:, i] for i, fate in enumerate(FATES)}
    columns |= {f"share_{fate}": shares[:, i] for i, fate in enumerate(FATES)}
    return pd.DataFrame(columns, index=unique)


# --------------------------------------------------------------------------- kinds


def ledger_kinds(frames: TraceFrames, by: str = "rollout", reward_key: str | None = None,
                 kinds: Mapping[str, Sequence[str]] | None = None) -> pd.DataFrame:
    """What each fate's sample-seconds went to: one row per key of :func:`signal_ledger`
    and fate (the last index level, ``fate``), with ``seconds`` and ``<kind>_s`` for
    each kind of ``kinds`` (default :data:`KINDS`: reward, tools, generation), then
    ``other_s`` (inside spans of no kind) and ``idle_s`` (inside no span), which add
    up to ``seconds``. An instant of a sample's life inside spans of several kinds
    counts once, in the first kind (reward, then tools, then generation). With engine
    traces joined, ``engine_<phase>_s`` (:func:`engine_breakdown`'s phases) tell what
    the engine did meanwhile: each sample's phases partition the wall time its engine
    slices cover within its generation spans, each instant once, so they lie inside
    generation and are not added in."""
    kinds = dict(KINDS if kinds is None else kinds)
    samples = frames.samples
    fates = sample_fates(frames, reward_key)
    per_sample = _kind_seconds(frames, kinds)
    keys = _keys(samples, by)
    keys["fate"] = fates.array  # a Categorical: rows follow the order of FATES
    table = per_sample.reset_index(drop=True)
    if _has_engine(frames):
        engine = engine_breakdown(frames, by="sample").reindex(samples.index).fillna(0.0)
        for phase in (*PHASES, "other"):
            table[f"engine_{phase}_s"] = engine[f"{phase}_s"].to_numpy()
    # dropna=False: a sample without a source is a row of signal_ledger(by="source") too
    out = table.groupby([keys[c] for c in keys.columns], observed=True, sort=True,
                        dropna=False).sum()
    out.index.names = list(keys.columns)
    return out


def _has_engine(frames: TraceFrames) -> bool:
    core = frames.span_core
    return bool((core["origin"] == "engine").any())


def _kind_seconds(frames: TraceFrames, kinds: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """Per sample: ``seconds`` (duration) split into ``<kind>_s``, ``other_s``, ``idle_s``."""
    samples = frames.samples
    duration = samples["duration"].to_numpy(dtype=np.float64)
    duration = np.where(np.isfinite(duration), duration, 0.0)
    spans = frames.measured_spans()
    spans = spans[(spans["origin"] == "dump").to_numpy()]
    rows = samples.index.get_indexer(spans["sample_row"].to_numpy())
    lo = samples["start"].to_numpy(dtype=np.float64)[rows]
    hi = samples["end"].to_numpy(dtype=np.float64)[rows]
    start = np.maximum(spans["start"].to_numpy(), lo)
    end = np.minimum(spans["display_end"].to_numpy(), hi)
    names = spans["name"].astype("category")
    ranks = np.array([_rank(str(name), kinds) for name in names.cat.categories] + [len(kinds)],
                     dtype=np.int64)
    rank = ranks[names.cat.codes.to_numpy()]  # code -1 (no name) picks the last: other
    valid = (rows >= 0) & np.isfinite(start) & np.isfinite(end) & (end > start)
    rows, rank = rows[valid], rank[valid]
    # one time line for all samples, each sample's own (from its start, clipped to its
    # end) laid after the one before it, so one sort and running maximum merge them all
    start, end = start[valid] - lo[valid], end[valid] - lo[valid]
    width = (end.max() if len(end) else 0.0) + 1.0
    shift = rows * width
    order = np.argsort(start + shift, kind="stable")
    out = pd.DataFrame({"seconds": duration}, index=samples.index)
    covered = np.zeros(len(samples))
    for level, kind in enumerate([*kinds, "other"]):
        chosen = order[rank[order] <= level]
        reached = _union_per_row(rows[chosen], start[chosen] + shift[chosen],
                                 end[chosen] + shift[chosen], len(samples))
        out[f"{kind}_s"] = reached - covered
        covered = reached
    out["idle_s"] = duration - covered
    return out


def _union_per_row(rows: np.ndarray, start: np.ndarray, end: np.ndarray, n: int) -> np.ndarray:
    """Length of the union of each row's intervals (``start`` sorted, rows apart in time)."""
    if not len(start):
        return np.zeros(n)
    reach = np.maximum.accumulate(end)
    fresh = np.ones(len(start), dtype=bool)
    fresh[1:] = start[1:] > reach[:-1]
    first = np.flatnonzero(fresh)
    last = np.append(first[1:], len(start)) - 1
    return np.bincount(rows[first], weights=reach[last] - start[first], minlength=n)[:n]


def _rank(name: str, kinds: Mapping[str, Sequence[str]]) -> int:
    """The position of the first kind whose patterns match ``name`` (else: other)."""
    for position, patterns in enumerate(kinds.values()):
        if any(fnmatchcase(name, pattern) for pattern in patterns):
            return position
    return len(kinds)
