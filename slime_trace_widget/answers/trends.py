"""Trends across a run: one row per dump, computed in DuckDB.

Over a dataset directory the queries read the Parquet files directly (only
the columns they need), so hundreds of rollouts are summarised without
loading any of them into pandas; over frames the same queries run on the
frames' columns.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..frames.engine_load import TRACK_METRICS, TRACK_NAMES, load_tracks
from ..frames.model import TraceFrames
from ..sources.dataset import duck_rows
from ..sources.dataset.layout import (
    DUMP_FILE,
    DUMP_KIND,
    ENGINE_LOAD,
    PARTITION,
    dump_kind,
    part_path,
)
from ..sources.dataset.manifest import Manifest
from ..sources.dumps.errors import DumpError
from ..sources.dumps.paths import dump_labels
from ..tables.core_tables import json_text_column
from ..vocabularies import INSTANT_EVENT
from .engine import PHASE_COLUMNS, REQUEST_SPANS, RETRACT_EVENT, TOKENS_ATTR, dump_phase_seconds
from .ledger import FATES, FILTER_EVENTS, fates_of, id_keys, ledger_of, sample_fates
from .tail import FINISHED_COLUMNS, OVERSAMPLE, tail_of

#: Span names reported with p50/p95 columns: the ones with most total time.
HEAVIEST_SPANS = 3
_TOKENS_COLUMN = f"attr.{TOKENS_ATTR}"
#: The columns that name a row of the trends: its rollout id, kind and dump file.
TREND_KEYS = (PARTITION, DUMP_KIND, DUMP_FILE)
_KEYS = ", ".join(TREND_KEYS)
#: The column of frames' samples with each one's fate (code in ``FATES``), as trends get it.
_FATE_CODE = "fate_code"
_PD_COLUMNS = {"pd_transfer_mb": ("attr.pd_transfer_total_mb", "sum"),
               "pd_transfer_gb_s": ("attr.pd_transfer_speed_gb_s", "avg")}
#: The ledger and tail columns of :func:`rollout_trends`.
LEDGER_COLUMNS = tuple(f"share_{fate}" for fate in FATES)
TAIL_TREND_COLUMNS = (*FINISHED_COLUMNS, "stop_s", "saved_s", "saved_share")


def rollout_trends(source: str | Path | TraceFrames, heaviest: int = HEAVIEST_SPANS,
                   oversample: float = OVERSAMPLE) -> pd.DataFrame:
    """One row per dump of a run dataset directory (or of frames), by rollout id:
    samples, wall time, sample duration p50/p95/max, straggler share (of the samples
    with a duration, those over twice the median), p50/p95 of the ``heaviest`` span
    names by total time (``<name>_p50``, ``<name>_p95``; spans that end before their
    start are left out, as in :func:`.stats.span_stats`), tool
    errors, retries, aborted and truncated samples; what the dump's time bought, as
    ``share_<fate>`` for each fate of :data:`.ledger.FATES` (the share of its
    sample-seconds, :func:`.ledger.signal_ledger`'s rules with whole dict rewards); the
    tail's price by :func:`.tail.tail_price` (``finished_50``, ``finished_90``,
    ``finished_99``, and with ``oversample``, ``stop_s``, ``saved_s``, ``saved_share``;
    its ``step_s`` is ``wall_s``); PD transfer figures if any (``pd_transfer_mb``, summed,
    and ``pd_transfer_gb_s``, averaged, one value per request), and
    with engine traces joined, seconds per engine phase (``engine_queue_s``,
    ``engine_prefill_s``, ``engine_decode_s``, ``engine_pd_s``, ``engine_other_s``)
    ``engine_retractions``, ``engine_retracted_s`` and ``engine_decode_tokens_per_s``;
    with the engines' load scraped, ``load_<track>_p50`` and ``load_<track>_max`` for each
    track of :func:`slime_trace_widget.frames.engine_load.load_tracks`
    (``vocabularies.LOAD_TRACKS``: ``running``, ``queued`` and the rest): over the scrapes
    between the dump's first sample start and last sample end, each engine's median and
    largest value, then the largest over the engines (the busiest engine's figures).

    A span name whose ``<name>_p50`` or ``<name>_p95`` would be another column of the
    trends (a span named ``duration``: ``duration_p50``) gets no columns: the other
    column keeps its figures, the next heaviest name takes the place, and a
    RuntimeWarning counts and names the span names passed over."""
    return _figures(source, ("samples", "spans", "events"),
                    functools.partial(_trends, heaviest=heaviest, oversample=oversample))


def ledger_trends(source: str | Path | TraceFrames, oversample: float = OVERSAMPLE
                  ) -> pd.DataFrame:
    """Only the ledger and tail columns of :func:`rollout_trends` (``share_<fate>``,
    ``finished_50/90/99``, ``stop_s``, ``saved_s``, ``saved_share``), one row per dump
    with its keys, from a run dataset directory or frames."""
    out = _figures(source, ("samples", "events"),
                   functools.partial(_ledger_figures, oversample=oversample))
    return out.sort_values(list(TREND_KEYS)).reset_index(drop=True)


def _figures(source: str | Path | TraceFrames, tables: tuple[str, ...],
             compute: Callable[[Any], pd.DataFrame]) -> pd.DataFrame:
    """``compute(db)`` over the ``tables`` of frames or of a run dataset directory as views
    of a DuckDB connection; for a dataset, again without the dumps a damaged file of
    which made DuckDB fail (:class:`_DatasetDumps`)."""
    if isinstance(source, TraceFrames):
        with duck_rows.connection() as db:
            _register_frames(db, source, tables=tables)
            return compute(db)
    dataset = _DatasetDumps(Path(source), tables)
    while True:
        with duck_rows.connection() as db:
            dataset.register(db)
            try:
                return compute(db)
            except _duck_errors() as exc:
                dataset.skip_damaged(exc)


def _duck_errors() -> type[Exception]:
    import duckdb

    return duckdb.Error


class _DatasetDumps:
    """The dumps of a run dataset that trends read: the manifest's converted dumps and
    their files, as :func:`~..sources.dataset.open_dataset` reads them (never a file the
    manifest does not list), less the dumps with a damaged file among those of the
    ``tables`` read, each skipped with a warning as ``open_dataset`` skips it. The
    warnings point at the caller of the trends function that made this (``stacklevel``)."""

    def __init__(self, root: Path, tables: tuple[str, ...]) -> None:
        from ..sources.dataset.conversion import damaged_file

        self.root = root
        self.tables = (*tables, ENGINE_LOAD)  # the engines' load, where a dump has it
        self.entries = Manifest.load(root, must_exist=True).converted()
        if not self.entries:
            raise FileNotFoundError(f"{root}: the dataset has no converted dump yet")
        self.renamed = _renamed_dumps(self.entries)
        self.skipped = 0
        self._skip(damaged_file)  # missing, empty or without a footer: cheap to see

    def files(self, entry: dict[str, Any], table: str) -> list[Path]:
        """The files of ``table`` of one dump: one per rollout id of the dump (the
        engines' load: those the manifest lists, as ``layout.read_dump`` reads it)."""
        paths = [part_path(self.root, table, rollout, entry["stem"])
                 for rollout in entry["rollouts"]]
        if table != ENGINE_LOAD:
            return paths
        listed = set(entry.get("files", ()))
        return [path for path in paths if path.relative_to(self.root).as_posix() in listed]

    def register(self, db: Any) -> None:
        """The dumps' tables as views of ``db`` (a :func:`duck_rows.connection`)."""
        for table in self.tables:
            files = [path for entry in self.entries for path in self.files(entry, table)]
            if files:
                _create_view(db, table, _dataset_rows(files, self.renamed))

    def skip_damaged(self, error: Exception) -> None:
        """After DuckDB failed with ``error``: skip each dump with a file DuckDB cannot
        read whole; ``error`` again when there is none (the failure is no damaged file's)."""
        if not self._skip(_unreadable_by_duckdb):
            raise error

    def _skip(self, problem_of: Any) -> int:
        """Skip the dumps of which a file has a problem (``problem_of(path)``, None for
        none), with a warning each; how many. DumpError when no dump is left."""
        kept = []
        for entry in self.entries:
            problem = next((problem for table in self.tables
                            for path in self.files(entry, table)
                            if (problem := problem_of(path)) is not None), None)
            if problem is None:
                kept.append(entry)
                continue
            warnings.warn(f"skipped {entry['path']}: damaged dataset files ({problem})",
                          RuntimeWarning, stacklevel=5)
        found = len(self.entries) - len(kept)
        self.entries, self.skipped = kept, self.skipped + found
        if not kept:
            raise DumpError(f"{self.root}: no dump of the dataset is readable; "
                            f"{self.skipped} dump(s) unreadable")
        return found


def _unreadable_by_duckdb(path: Path) -> str | None:
    """Why DuckDB cannot read the Parquet file ``path`` whole, or None when it can (every
    value of every column is read, into one small row)."""
    import duckdb

    with duck_rows.connection() as db:
        try:
            db.execute("select max(hash(columns(*))) from read_parquet($path)",
                       {"path": path.as_posix()}).fetchall()
        except duckdb.Error as exc:
            return f"{path}: {' '.join(str(exc).split())[:300]}"
    return None


def _create_view(db: Any, name: str, rows: str) -> None:
    db.execute(f"create view {name} as {duck_rows.with_nan_as_null(db, rows)}")


def _renamed_dumps(entries: list[dict[str, Any]]) -> dict[str, str]:
    """The dumps whose rows must carry another ``dump_file`` than the file name stored
    in them (by their tables' file stem): those that share a file name with another dump
    of the dataset (two runs' ``rollout_5.pt``), as :func:`dump_labels` names them
    (``entries``: the manifest's converted dumps, as ``open_dataset`` names them)."""
    labels = dump_labels([entry["path"] for entry in entries])
    return {entry["stem"]: label for entry, label in zip(entries, labels, strict=True)
            if label != entry["file"]}


def _dataset_rows(files: list[Path], renamed: dict[str, str]) -> str:
    """A query of every row of the dataset ``files`` (of one table), ``dump_file`` its
    dump's label."""
    listed = ", ".join(f"'{_quoted(path.as_posix())}'" for path in files)
    source = f"({duck_rows.dataset_rows(f'[{listed}]')})"
    if not renamed:
        return f"select * exclude (filename) from {source}"
    stem = r"regexp_extract(filename, '([^/\\]+)[.]parquet$', 1)"
    cases = " ".join(f"when '{_quoted(name)}' then '{_quoted(label)}'"
                     for name, label in renamed.items())
    return (f"select * exclude (filename) replace (case {stem} {cases} "
            f"else {DUMP_FILE} end as {DUMP_FILE}) from {source}")


def _quoted(text: str) -> str:
    return text.replace("'", "''")


def _register_frames(db: Any, frames: TraceFrames,
                     tables: tuple[str, ...] = ("samples", "spans", "events")) -> None:
    """The frames' ``tables`` under the dataset's names (one dump per path; its kind by
    its path, as a dataset's rows have it, not by its label)."""
    samples = frames.samples
    paths = frames.paths or ["frames"]
    files = np.array(dump_labels(paths), dtype=object)
    dump = np.clip(samples["dump"].to_numpy(dtype=np.int64), 0, len(files) - 1)
    labels = pd.DataFrame({
        PARTITION: id_keys(samples["rollout_id"]),
        DUMP_FILE: files[dump],
        DUMP_KIND: np.array([dump_kind(path) for path in paths], dtype=object)[dump]})
    detail = samples["reward_detail"]
    db.register("samples", pd.concat(
        [labels, pd.DataFrame({"row": samples.index.to_numpy()}),
         samples[["status", "attempts", "start", "end", "duration", "group_index", "reward",
                  "remove_sample"]].reset_index(drop=True),
         # the frames' own fates: they also know the group members a read left out
         pd.DataFrame({_FATE_CODE: sample_fates(frames).cat.codes.to_numpy()}),
         pd.DataFrame({"reward_detail": json_text_column(detail.tolist()).to_numpy(
             zero_copy_only=False) if detail.notna().any() else np.full(len(detail), None)})],
        axis=1))
    for name, core_name, position in (("spans", "span_core", "span_index"),
                                      ("events", "event_core", "event_index")):
        if name not in tables:
            continue
        core, attrs = getattr(frames, core_name), getattr(frames, name)  # attrs joined here
        rows = core["sample_row"].to_numpy()
        picked = core[[c for c in ("sample_row", "name", "duration", "virtual", "error",
                                   "origin", "parent_name", "parent_index", "start", "ts",
                                   "kind") if c in core]]
        kept = [c for c, _ in _PD_COLUMNS.values() if c in attrs.columns]
        kept += [c for c in (_TOKENS_COLUMN,) if c in attrs.columns and name == "spans"]
        db.register(name, pd.concat([labels.iloc[rows].reset_index(drop=True),
                                     pd.DataFrame({position: core.index.to_numpy()}),
                                     picked.reset_index(drop=True),
                                     attrs[kept].reset_index(drop=True)], axis=1))
    load = frames.engine_load
    if len(load):  # the frames' load is not the dumps': each dump takes its own time
        load = load[load["metric"].isin(TRACK_METRICS).to_numpy()]
        db.register("engine_load", load.astype({"engine": str, "metric": str, "labels": str}))


def _trends(db: Any, heaviest: int, oversample: float) -> pd.DataFrame:
    out = db.execute(f"""
        with s as (select *, median(duration) over (partition by {_KEYS}) as median_duration
                   from samples)
        select {_KEYS}, count(*) as samples,
               max("end") - min(start) as wall_s,
               quantile_cont(duration, 0.5) as duration_p50,
               quantile_cont(duration, 0.95) as duration_p95,
               max(duration) as duration_max,
               avg(case when duration is null then null
                        when duration > 2 * median_duration then 1.0 else 0.0 end)
                   as straggler_share,
               sum(greatest(coalesce(attempts, 1) - 1, 0)) as retries,
               count(*) filter (where lower(status) = 'aborted') as aborted,
               count(*) filter (where lower(status) = 'truncated') as truncated
        from s group by {_KEYS}""").df()
    keys = list(TREND_KEYS)
    tool_errors = db.execute(f"""
        select {_KEYS}, count(*) filter (where error and name ilike '%tool%') as tool_errors
        from spans group by {_KEYS}""").df()
    out = out.merge(tool_errors, on=keys, how="left")
    first = list(out.columns)  # the per-name columns come right after these
    engine = _has_engine(db)
    out = out.merge(_ledger_figures(db, oversample), on=keys, how="left")
    out = out.merge(_pd_figures(db), on=keys, how="left") if _has_pd(db) else out
    out = out.merge(_engine_figures(db), on=keys, how="left") if engine else out
    if _has_load(db):
        load = _load_figures(db)
        out = out.merge(load.astype({key: out[key].dtype for key in keys}), on=keys,
                        how="left")
    named: list[str] = []
    for name in _heaviest_names(db, heaviest, set(out.columns), engine):
        out = out.merge(_span_quantiles(db, name), on=keys, how="left")
        named += [f"{name}_p50", f"{name}_p95"]
    out = out[[*first, *named, *(c for c in out.columns if c not in first and c not in named)]]
    out["tool_errors"] = out["tool_errors"].fillna(0).astype(np.int64)
    return out.sort_values(list(TREND_KEYS)).reset_index(drop=True)


def _heaviest_names(db: Any, heaviest: int, taken: set[str], engine: bool) -> list[str]:
    """The ``heaviest`` span names by total time (the dump's spans, not the ``[P]``/``[D]``
    ones, of a duration of at least 0) whose ``<name>_p50`` and ``<name>_p95`` are not in
    ``taken`` (the trends' other columns); a RuntimeWarning counts and names the names
    passed over for that, the next heaviest taking their places."""
    dump_only = "and origin = 'dump'" if engine else ""
    # each taken column can pass over one name at most: so many more are enough
    ranked = [row[0] for row in db.execute(f"""
        select name from spans where not virtual and duration >= 0 {dump_only}
        group by name order by sum(duration) desc, name
        limit {max(int(heaviest), 0) + len(taken)}""").fetchall()]
    chosen: list[str] = []
    passed: list[str] = []
    for name in ranked:
        if len(chosen) >= heaviest:
            break
        clashes = {f"{name}_p50", f"{name}_p95"} & taken
        (passed if clashes else chosen).append(name)
    if passed:
        warnings.warn(f"rollout_trends: {len(passed)} span name(s) passed over, their p50/p95 "
                      f"columns are other columns of the trends: "
                      f"{', '.join(map(repr, passed))}", RuntimeWarning, stacklevel=5)
    return chosen


def _span_quantiles(db: Any, name: str) -> pd.DataFrame:
    """``<name>_p50`` and ``<name>_p95`` per dump of the spans named ``name`` (not the
    ``[P]``/``[D]`` ones, of a duration of at least 0)."""
    figures = db.execute(f"""
        select {_KEYS}, quantile_cont(duration, 0.5) as p50,
               quantile_cont(duration, 0.95) as p95
        from spans where name = $name and not virtual and duration >= 0
        group by {_KEYS}""", {"name": name}).df()  # the name is text from the dump: bound
    return figures.rename(columns={"p50": f"{name}_p50", "p95": f"{name}_p95"})


def _ledger_figures(db: Any, oversample: float) -> pd.DataFrame:
    """Per dump, the ledger's shares and the tail's figures: DuckDB reads the samples'
    few columns and which samples a filter event marks; the rules of
    :mod:`.ledger` and :mod:`.tail` run on that table, once for every dump."""
    keys = list(TREND_KEYS)
    present = _columns(db, "samples")
    removed = "coalesce(s.remove_sample, false)" if "remove_sample" in present else "false"
    fate = f", s.{_FATE_CODE}" if _FATE_CODE in present else ""
    names = ", ".join(_sql_text(name) for name in FILTER_EVENTS)
    joined = ", ".join(f"s.{key}" for key in keys)
    rows = db.execute(f"""
        with marked as (
            select distinct {_KEYS}, sample_row from events
            where name in ({names}) and kind = {_sql_text(INSTANT_EVENT)})
        select {joined}, s.group_index, s.status::varchar as status,
               s.reward::double as reward, s.reward_detail::varchar as reward_detail,
               {removed} as removed, s.start, s."end", s.duration,
               m.sample_row is not null as dropped{fate}
        from samples s left join marked m
          on m.{PARTITION} = s.{PARTITION} and m.{DUMP_FILE} = s.{DUMP_FILE}
             and m.sample_row = s."row"
        order by {joined}, s."row"
        """).df()
    dump, labels = pd.factorize(pd.MultiIndex.from_frame(rows[keys]), sort=True)
    reward = rows["reward"].to_numpy(dtype=np.float64, na_value=np.nan)
    # the fates are the dump's, as sample_fates gives them over frames: a group is one
    # group_index within the dump, whatever rollout ids its samples carry
    table = pd.DataFrame({
        "dump": pd.factorize(pd.MultiIndex.from_frame(rows[[DUMP_FILE, DUMP_KIND]]))[0],
        "group_index": rows["group_index"].astype("Int64").array,
        "status": rows["status"].to_numpy(dtype=object), "reward": reward,
        "reward_text": rows["reward_detail"].where(np.isnan(reward), None).to_numpy(
            dtype=object),
        "removed": rows["removed"].to_numpy(dtype=bool),
        "dropped": rows["dropped"].to_numpy(dtype=bool),
        "evaluation": (rows[DUMP_KIND] == "eval").to_numpy()})
    codes = rows[_FATE_CODE].to_numpy(dtype=np.int64) if fate else \
        fates_of(table).cat.codes.to_numpy()
    ledger = ledger_of(pd.DataFrame({"dump": dump}), codes,
                       rows["duration"].to_numpy(dtype=np.float64, na_value=np.nan))
    units = pd.DataFrame({"rollout_id": dump, "start": rows["start"].to_numpy(dtype=np.float64),
                          "end": rows["end"].to_numpy(dtype=np.float64),
                          "unit": _units(dump, table["group_index"]),
                          "dropped": table["dropped"].to_numpy()})
    tail = tail_of(units, oversample)
    figures = ledger[list(LEDGER_COLUMNS)].join(tail[list(TAIL_TREND_COLUMNS)], how="left")
    out = pd.DataFrame(list(labels), columns=keys).iloc[figures.index.to_numpy()]
    out = out.astype({key: rows[key].dtype for key in keys}).reset_index(drop=True)
    return pd.concat([out, figures.reset_index(drop=True)], axis=1)


def _units(dump: np.ndarray, group: pd.Series) -> np.ndarray:
    """:func:`.tail.unit_table`'s unit ids: one per group of a dump, negative per sample."""
    grouped = group.notna().to_numpy()
    unit = -1 - np.arange(len(dump), dtype=np.int64)
    unit[grouped] = pd.factorize(pd.MultiIndex.from_arrays(
        [dump[grouped], group[grouped].to_numpy(dtype=np.int64)]))[0]
    return unit


def _has_engine(db: Any) -> bool:
    """Whether engine traces were joined into any dump (old datasets have no origin)."""
    if "origin" not in _columns(db, "spans"):
        return False
    return bool(db.execute("select count(*) from spans where origin = 'engine'").fetchone()[0])


def _engine_figures(db: Any) -> pd.DataFrame:
    """Seconds per engine phase and retractions per dump, by :func:`engine_breakdown`'s
    rules (:func:`.engine.phase_seconds`: each sample's phases partition the wall time its
    engine slices cover, nested slices first, then the phases' priority; the unsliced wait
    after a retraction is queue): DuckDB reads the engine spans, the spans their requests
    hang under and the retract events; the rules run on that table, once for every dump."""
    requests = ", ".join(_sql_text(n) for n in REQUEST_SPANS)
    figures = _engine_phases(db, requests)
    retractions = db.execute(f"""
        select {_KEYS}, count(*) filter (where origin = 'engine' and name = '{RETRACT_EVENT}')
               as engine_retractions
        from events group by {_KEYS}""").df()
    keys = list(TREND_KEYS)
    # work a retracted slice had done: from its start to the retraction
    joined = ", ".join(f"e.{key}" for key in keys)
    retracted = db.execute(f"""
        select {joined}, sum(greatest(e.ts - s.start, 0)) as engine_retracted_s
        from events e join spans s
          on e.{DUMP_FILE} = s.{DUMP_FILE} and e.{PARTITION} = s.{PARTITION}
             and e.parent_index = s.span_index
        where e.origin = 'engine' and e.name = '{RETRACT_EVENT}'
        group by {joined}""").df()
    figures = figures.astype({key: retractions[key].dtype for key in keys})
    out = figures.merge(retractions, on=keys, how="outer").merge(retracted, on=keys,
                                                                  how="left")
    out["engine_retractions"] = out["engine_retractions"].fillna(0).astype(np.int64)
    out["engine_retracted_s"] = out["engine_retracted_s"].fillna(0.0)
    tokens = _decode_tokens(db, requests)
    if tokens is None:
        out["engine_decode_tokens_per_s"] = np.nan
        return out
    out = out.merge(tokens, on=keys, how="left")
    rate = out["engine_decode_tokens"] / out["engine_decode_s"].where(out["engine_decode_s"] > 0)
    out["engine_decode_tokens_per_s"] = rate.where(rate > 0)
    return out.drop(columns="engine_decode_tokens")


def _engine_phases(db: Any, requests: str) -> pd.DataFrame:
    """``engine_<phase>_s`` per dump with an engine slice: :func:`.engine.dump_phase_seconds`
    over its engine spans, the spans their request spans hang under (the windows their
    time is clipped to) and its engine's retract events, read one dump at a time so that
    a run's engine spans are never all in memory at once."""
    keys = list(TREND_KEYS)
    same = " and ".join(f"s.{key} = ?" for key in keys)
    dumps = db.execute(f"select distinct {_KEYS} from spans where origin = 'engine'").fetchall()
    rows = []
    for dump in dumps:
        spans = db.execute(f"""
            with owners as (
                select distinct parent_index from spans s
                where {same} and s.origin = 'engine' and s.name in ({requests}))
            select s.sample_row, s.span_index, s.parent_index, s.name::varchar as name,
                   s.start, s.duration, s.origin = 'engine' as engine
            from spans s
            where {same} and (s.origin = 'engine'
                              or s.span_index in (select parent_index from owners))""",
                           [*dump, *dump]).df()
        retracts = db.execute(f"""
            select parent_index, ts from events s
            where {same} and origin = 'engine' and name = '{RETRACT_EVENT}'""", list(dump)).df()
        seconds = dump_phase_seconds(spans, retracts)
        if seconds is not None:
            rows.append([*dump, *seconds[PHASE_COLUMNS]])
    phases = pd.DataFrame(rows, columns=[*keys, *PHASE_COLUMNS]).astype(
        dict.fromkeys(PHASE_COLUMNS, np.float64))
    return phases.rename(columns={column: f"engine_{column}" for column in PHASE_COLUMNS})


def _decode_tokens(db: Any, requests: str) -> pd.DataFrame | None:
    """Completion tokens of the generation spans the engine requests hang under, per dump
    (None when no span carries the token count)."""
    keys = list(TREND_KEYS)
    if _TOKENS_COLUMN not in _columns(db, "spans"):
        return None
    joined = ", ".join(f"s.{key}" for key in keys)
    return db.execute(f"""
        with generations as (
            select distinct {_KEYS}, parent_index from spans
            where origin = 'engine' and name in ({requests}))
        select {joined}, sum(try_cast(s."{_TOKENS_COLUMN}" as double)) as engine_decode_tokens
        from spans s join generations g
          on s.{DUMP_FILE} = g.{DUMP_FILE} and s.{PARTITION} = g.{PARTITION}
             and s.span_index = g.parent_index
        group by {joined}""").df()


def _has_load(db: Any) -> bool:
    return bool(db.execute("select count(*) from information_schema.tables "
                           "where table_name = 'engine_load'").fetchone()[0])


def _load_figures(db: Any) -> pd.DataFrame:
    """Per dump, ``load_<track>_p50`` and ``load_<track>_max`` (see :func:`rollout_trends`)
    over the scrapes in the dump's time. Rows of a dataset's ``engine_load`` belong to
    their dump; the frames' rows to every dump whose time holds them."""
    keys = list(TREND_KEYS)
    own = set(keys) <= _columns(db, "engine_load")
    on = " and ".join(f"l.{key} = w.{key}" for key in keys) + " and " if own else ""
    metrics = ", ".join(_sql_text(name) for name in TRACK_METRICS)
    joined = ", ".join(f"w.{key}" for key in keys)
    rows = db.execute(f"""
        with w as (select {_KEYS}, min(start) filter (where isfinite(start)) as t0,
                          max("end") filter (where isfinite("end")) as t1
                   from samples group by {_KEYS})
        select {joined}, l.engine, l.metric, l.labels, l.ts, l.value
        from engine_load l join w on {on} l.ts between w.t0 and w.t1
        where l.metric in ({metrics})""").df()
    names = [f"load_{track}_{figure}" for track in TRACK_NAMES for figure in ("p50", "max")]
    figures = []
    for key, part in rows.groupby(keys, sort=False):
        tracks = load_tracks(part)
        per_engine = tracks.groupby(["track", "engine"], observed=True)["value"].agg(
            ["median", "max"])
        busiest = per_engine.groupby(level="track", observed=True).max()
        values = {f"load_{track}_{figure}": busiest.loc[track, column]
                  for track in busiest.index
                  for figure, column in (("p50", "median"), ("max", "max"))}
        figures.append({**dict(zip(keys, key, strict=True)), **values})
    return pd.DataFrame(figures, columns=[*keys, *names]).astype(
        {name: np.float64 for name in names})


def _sql_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _columns(db: Any, view: str) -> set[str]:
    return {row[0] for row in db.execute(f"describe {view}").fetchall()}


def _has_pd(db: Any) -> bool:
    wanted = {column for column, _ in _PD_COLUMNS.values()}
    return bool(wanted & (_columns(db, "spans") | _columns(db, "events")))


def _pd_figures(db: Any) -> pd.DataFrame:
    """PD transfer figures per dump, one value per request: from the real spans that
    carry them as attributes (first format) and the events that do (the summary event,
    current format). The ``[P]``/``[D]`` spans are left out: they carry copies of their
    request's figures."""
    requests = []
    for view, real in (("spans", "where not virtual"), ("events", "")):
        present = _columns(db, view)
        values = [f'try_cast("{column}" as double) as {name}' if column in present
                  else f"null::double as {name}" for name, (column, _) in _PD_COLUMNS.items()]
        requests.append(f"select {_KEYS}, {', '.join(values)} from {view} {real}")
    figures = ", ".join(f"{how}({name}) as {name}" for name, (_, how) in _PD_COLUMNS.items())
    return db.execute(f"""
        with requests as ({" union all ".join(requests)})
        select {_KEYS}, {figures} from requests group by {_KEYS}""").df()
