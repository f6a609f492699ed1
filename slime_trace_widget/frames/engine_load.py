"""The engines' load beside the rows: scraped Prometheus series, and named tracks from them.

``frames.engine_load`` holds what the collector scraped from each engine's ``/metrics``
over the frames' time (``slime-trace-viewer collect DIR --scrape URL``), one row per
sample of one scrape, in long form:

========  =================================================================
engine    the scrape target's name (``--scrape NAME=URL``; default ``host:port``)
metric    the sample's full name, e.g. ``sglang:num_running_reqs``
labels    its labels as canonical text (:func:`canonical_labels`)
ts        the scrape's time, epoch seconds in the dump's clock (float64)
value     the value as the engine wrote it (float64; NaN and infinities kept)
========  =================================================================

``engine``, ``metric`` and ``labels`` are categoricals of ``str``.

Alignment: scrape times are the collector's clock. Where an engine's name names a
host of ``frames.engine_skew`` (the engine-trace join's clock estimate: engine time +
skew = dump time), its rows are shifted by that skew (:func:`aligned`); other rows keep
the collector's time, which is the dump's when the collector runs where the rollout
runs.

:func:`load_tracks` turns them into the few named tracks the timeline draws
(:data:`TRACKS`). SGLang's metric names change between versions, so each track names
its candidates in order of preference, and each engine uses the first that it exposes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from ..vocabularies import LOAD_TRACK_COMBINE, LOAD_TRACK_UNITS, LOAD_TRACKS

#: Columns of ``frames.engine_load``, in order.
ENGINE_LOAD_COLUMNS = ("engine", "metric", "labels", "ts", "value")
#: Columns of :func:`load_tracks`, in order.
TRACK_COLUMNS = ("engine", "track", "ts", "value")
#: One ``name="value"`` of the label syntax, value still escaped (the exposition format's).
LABEL_PAIR = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\\n]|\\.)*)"[ \t]*')
#: Labels that tell apart the ranks of one scheduler group: their series count once.
RANK_LABELS = frozenset({"tp_rank", "pp_rank", "moe_ep_rank", "pid"})
#: SGLang writes per-priority breakdowns beside the total (``priority=""``) under this label.
PRIORITY_LABEL = "priority"
_ESCAPE = re.compile(r"\\(.)")
_UNESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


@dataclass(frozen=True)
class Candidate:
    """A metric a track may read: its full name, whether it is a counter read as a
    per-second rate, and labels a series must carry to count (``where``)."""

    metric: str
    rate: bool = False
    where: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Track:
    """A named track: how an engine's series combine at one scrape (``sum`` or ``max``),
    its candidate metrics in order of preference, and its unit."""

    name: str
    combine: str
    candidates: tuple[Candidate, ...]
    unit: str


def _track(name: str, *candidates: Candidate) -> Track:
    """Track ``name`` reading ``candidates``, its combine rule and unit the vocabulary's
    (the renderer adds the engines' series up by the same rule)."""
    return Track(name, LOAD_TRACK_COMBINE[name], candidates, LOAD_TRACK_UNITS[name])


#: How each track reads the engines' metrics. Names as SGLang 0.5.23 exposes them
#: (``srt/observability/metrics_collector.py``), older or newer names after.
_TRACK_RULES: tuple[Track, ...] = (
    _track("running", Candidate("sglang:num_running_reqs")),
    _track("queued", Candidate("sglang:num_queue_reqs")),
    _track("token_usage", Candidate("sglang:token_usage"), Candidate("sglang:full_token_usage")),
    _track("throughput", Candidate("sglang:gen_throughput"),
           Candidate("sglang:realtime_tokens_total", rate=True, where=(("mode", "decode"),)),
           Candidate("sglang:generation_tokens_total", rate=True)),
    _track("retractions", Candidate("sglang:num_retracted_requests_total", rate=True),
           Candidate("sglang:num_retracted_reqs")),
)
#: The tracks, in the order they are drawn: ``vocabularies.LOAD_TRACKS``, which the
#: payload's ``load_track`` codes index too. Every track there has its rule here.
TRACKS: tuple[Track, ...] = tuple(
    next(rule for rule in _TRACK_RULES if rule.name == name) for name in LOAD_TRACKS)
TRACK_NAMES = LOAD_TRACKS
#: Every metric some track may read.
TRACK_METRICS = tuple(dict.fromkeys(c.metric for track in TRACKS for c in track.candidates))


# --------------------------------------------------------------------------- label text


def unescape_label_value(raw: str) -> str:
    """A label value as written between quotes, unescaped: ``\\\\``, ``\\"`` and ``\\n``
    are the only escapes (ValueError on any other)."""
    if "\\" not in raw:
        return raw

    def one(match: re.Match) -> str:
        char = _UNESCAPES.get(match.group(1))
        if char is None:
            raise ValueError(f"bad escape \\{match.group(1)} in a label value")
        return char

    return _ESCAPE.sub(one, raw)


def canonical_labels(pairs: dict[str, str]) -> str:
    """Labels as their one canonical text: sorted by name, ``name="value"`` joined by
    ``,``, values escaped as the exposition format escapes them (``{}`` gives ``""``)."""
    return ",".join(f'{key}="{escape_label_value(pairs[key])}"' for key in sorted(pairs))


def escape_label_value(value: str) -> str:
    """A label value escaped for the text between its quotes."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def parse_labels(text: str) -> dict[str, str]:
    """The labels of a canonical label text (ValueError if it is not one)."""
    pairs: dict[str, str] = {}
    position = 0
    while position < len(text):
        pair = LABEL_PAIR.match(text, position)
        if pair is None:
            raise ValueError(f"not label text: {text[:80]!r}")
        pairs[pair.group(1)] = unescape_label_value(pair.group(2))
        position = pair.end()
        if text.startswith(",", position):
            position += 1
        elif position < len(text):
            raise ValueError(f"not label text: {text[:80]!r}")
    return pairs


# --------------------------------------------------------------------------- frames


def empty_engine_load() -> pd.DataFrame:
    """An ``engine_load`` table without rows, its columns typed."""
    return engine_load_frame([], [], [], np.zeros(0), np.zeros(0))


def engine_load_frame(engine: object, metric: object, labels: object, ts: object,
                      value: object) -> pd.DataFrame:
    """An ``engine_load`` table from its columns (strings become categoricals)."""
    return pd.DataFrame({
        "engine": _categorical(engine), "metric": _categorical(metric),
        "labels": _categorical(labels),
        "ts": np.asarray(ts, dtype=np.float64), "value": np.asarray(value, dtype=np.float64)})


def _categorical(values: object) -> pd.Categorical:
    if isinstance(values, pd.Series) and isinstance(values.dtype, pd.CategoricalDtype):
        return values.array  # type: ignore[return-value]
    if isinstance(values, pd.Categorical):
        return values
    return pd.Categorical(pd.array(values, dtype="str"))


def aligned(engine_load: pd.DataFrame, engine_skew: pd.DataFrame) -> pd.DataFrame:
    """``engine_load`` in the dump's clock: the rows of an engine that names a host of
    ``engine_skew`` (:func:`skews_by_name`) shifted by its ``skew``; the other rows as
    they are."""
    if not len(engine_load) or not len(engine_skew) or "host" not in engine_skew:
        return engine_load
    shift = skews_by_name(engine_skew)
    engines = engine_load["engine"].astype("category")
    by_code = np.array([shift.get(str(name), 0.0) for name in engines.cat.categories]
                       + [0.0])
    offsets = by_code[engines.cat.codes.to_numpy()]  # code -1 (missing) takes the last: 0
    if not offsets.any():
        return engine_load
    return engine_load.assign(ts=engine_load["ts"].to_numpy() + offsets)


def skews_by_name(engine_skew: pd.DataFrame) -> dict[str, float]:
    """The skew each engine name takes: a host's own name (a machine-id, or
    ``<host_id>@<machine>`` where machines share one), and, for a host whose ``machine``
    is known (its address, or a ``host.name`` sent without one), ``<host_id>@<machine>``
    too. A machine-id only one machine sent in the join's window
    keeps its plain name there, so a scrape target named after its machine finds it in
    every window. A plain machine-id that clones share names no host of a window both
    sent in, and whichever clone's of a window one alone sent in: targets of clones are
    named after their machine. An alias two hosts share takes neither's skew."""
    hosts = engine_skew["host"].astype(str).tolist()
    skews = engine_skew["skew"].astype(float).tolist()
    machines = (engine_skew["machine"].fillna("").astype(str).tolist()
                if "machine" in engine_skew else [""] * len(hosts))
    by_name = dict(zip(hosts, skews, strict=True))
    aliases: dict[str, set[int]] = {}
    for row, (host, machine) in enumerate(zip(hosts, machines, strict=True)):
        if not machine:
            continue
        host_id = host.removesuffix(f"@{machine}")
        aliases.setdefault(f"{host_id}@{machine}", set()).add(row)
    for name, rows in aliases.items():
        if name not in by_name and len(rows) == 1:
            by_name[name] = skews[rows.pop()]
    return by_name


def combine_engine_load(tables: list[pd.DataFrame]) -> pd.DataFrame:
    """The rows of several ``engine_load`` tables (one per dump) as one, sorted by time.
    Dumps whose windows overlap read the same scrapes: a scrape (an engine's rows at one
    time) already in an earlier table is left out of the later ones."""
    kept = [table for table in tables if len(table)]
    if not kept:
        return empty_engine_load()
    if len(kept) == 1:
        return kept[0]
    engines = pd.Index(pd.unique(np.concatenate(
        [np.asarray(t["engine"].astype("category").cat.categories, dtype=object)
         for t in kept])))
    parts, seen = [], None
    for table in kept:
        engine = table["engine"].astype("category")
        codes = engines.get_indexer(np.asarray(engine.cat.categories, dtype=object))[
            engine.cat.codes.to_numpy()]
        key = pd.MultiIndex.from_arrays([codes, table["ts"].to_numpy()])
        if seen is not None:
            fresh = ~key.isin(seen)
            table, key = table[fresh], key[fresh]
        parts.append(table)
        seen = key.unique() if seen is None else seen.append(key.unique())
    columns = {name: union_categoricals([pd.Categorical(t[name]) for t in parts])
               for name in ("engine", "metric", "labels")}
    ts = np.concatenate([t["ts"].to_numpy(dtype=np.float64) for t in parts])
    value = np.concatenate([t["value"].to_numpy(dtype=np.float64) for t in parts])
    out = engine_load_frame(columns["engine"], columns["metric"], columns["labels"], ts, value)
    if len(ts) > 1 and not bool(np.all(ts[1:] >= ts[:-1])):
        out = out.iloc[np.argsort(ts, kind="stable")].reset_index(drop=True)
    return out


# --------------------------------------------------------------------------- tracks


def load_tracks(engine_load: pd.DataFrame) -> pd.DataFrame:
    """The named :data:`TRACKS` of ``engine_load``, one row per engine, track and scrape.

    Columns ``engine`` (categorical of str), ``track`` (categorical, categories
    :data:`TRACK_NAMES` in that order), ``ts`` (float64, epoch seconds, as in
    ``engine_load``) and ``value`` (float64, finite), sorted by engine, track and time.
    The rules, per engine and track:

    * the first candidate metric the engine exposes is read (none: no rows);
    * a counter candidate becomes a per-second rate between consecutive scrapes of a
      series, at the later one's time (a value lower than the one before is a restart:
      it counts from zero);
    * series with a non-empty ``priority`` label are left out when the metric has a total
      series too (SGLang writes per-priority breakdowns beside the total);
    * series that differ only in rank labels (:data:`RANK_LABELS`: the ranks of one
      scheduler group, which report the same batch) count once, by their largest value;
      the remaining series (data-parallel groups, other label values) are summed, or
      for ``token_usage`` the largest is taken;
    * values that are NaN or infinite are left out.
    """
    parts = []
    if len(engine_load):
        rows = engine_load[engine_load["metric"].isin(TRACK_METRICS).to_numpy()]
        rows = rows[["engine", "metric", "labels", "ts", "value"]].astype(
            {"engine": str, "metric": str, "labels": str})
        labels = {text: parse_labels(text) for text in rows["labels"].unique()}
        for track in TRACKS:
            part = _track(rows, track, labels)
            if len(part):
                parts.append(part)
    if not parts:
        out = pd.DataFrame({"engine": pd.Categorical(pd.array([], dtype="str")),
                            "track": pd.Categorical([], categories=list(TRACK_NAMES)),
                            "ts": np.zeros(0), "value": np.zeros(0)})
        return out
    out = pd.concat(parts, ignore_index=True)
    out["track"] = pd.Categorical(out["track"], categories=list(TRACK_NAMES))
    out = out.sort_values(["engine", "track", "ts"], kind="stable").reset_index(drop=True)
    out["engine"] = pd.Categorical(pd.array(out["engine"], dtype="str"))
    return out[list(TRACK_COLUMNS)]


def _track(rows: pd.DataFrame, track: Track, labels: dict[str, dict[str, str]]
           ) -> pd.DataFrame:
    """One track's rows, for every engine that exposes one of its candidates."""
    chosen = []
    done: set[str] = set()
    for candidate in track.candidates:
        picked = rows[(rows["metric"] == candidate.metric).to_numpy()]
        if candidate.where:
            wanted = {text for text, pairs in labels.items()
                      if all(pairs.get(k) == v for k, v in candidate.where)}
            picked = picked[picked["labels"].isin(wanted).to_numpy()]
        picked = picked[~picked["engine"].isin(done).to_numpy()]
        if not len(picked):
            continue
        done.update(picked["engine"].unique())
        picked = _without_breakdowns(picked, labels)
        if candidate.rate:
            picked = _rates(picked)
        chosen.append(picked)
    if not chosen:
        return pd.DataFrame(columns=list(TRACK_COLUMNS))
    picked = pd.concat(chosen, ignore_index=True)
    picked = picked[np.isfinite(picked["value"].to_numpy())]
    group = {text: canonical_labels({k: v for k, v in pairs.items() if k not in RANK_LABELS})
             for text, pairs in labels.items()}
    picked = picked.assign(group=picked["labels"].map(group))
    per_group = picked.groupby(["engine", "ts", "group"], sort=False)["value"].max()
    per_scrape = per_group.groupby(level=["engine", "ts"], sort=False)
    combined = per_scrape.sum() if track.combine == "sum" else per_scrape.max()
    out = combined.reset_index()
    out.insert(1, "track", track.name)
    return out


def _without_breakdowns(rows: pd.DataFrame, labels: dict[str, dict[str, str]]
                        ) -> pd.DataFrame:
    """``rows`` less per-priority breakdown series where their engine has a total one."""
    breakdown = rows["labels"].map(
        {text: bool(pairs.get(PRIORITY_LABEL)) for text, pairs in labels.items()})
    breakdown = breakdown.to_numpy(dtype=bool)
    if not breakdown.any():
        return rows
    with_total = set(rows.loc[~breakdown, "engine"])
    return rows[~(breakdown & rows["engine"].isin(with_total).to_numpy())]


def _rates(rows: pd.DataFrame) -> pd.DataFrame:
    """Counter readings as per-second rates between consecutive scrapes of a series."""
    rows = rows.sort_values(["engine", "labels", "ts"], kind="stable")
    same = (rows["engine"].to_numpy()[1:] == rows["engine"].to_numpy()[:-1]) & \
        (rows["labels"].to_numpy()[1:] == rows["labels"].to_numpy()[:-1])
    value = rows["value"].to_numpy()
    ts = rows["ts"].to_numpy()
    gain = np.diff(value)
    gain = np.where(gain < 0, value[1:], gain)  # a restart counts from zero
    elapsed = np.diff(ts)
    keep = same & (elapsed > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = gain / elapsed
    later = rows.iloc[1:][keep]
    return later.assign(value=rate[keep])
