"""One dump's frames as files of the run dataset, and back into frames.

Every table of a dump goes to ``<root>/<table>/rollout_id=<id>/<stem>.parquet``
(one file per table and rollout id it holds; ``stem`` is unique per dump, so a
train and an eval dump of one rollout id sit side by side). Rows carry
``dump_file`` and ``dump_kind``. ``samples``, ``spans``, ``events`` and
``segments`` have the columns of ``to_parquet`` (attributes as ``attr.<key>``);
``span_start_attrs``, ``span_end_attrs`` and ``event_attrs`` keep each
record's attributes exactly, so frames read back are the frames written.
``engine_load`` (when the dump was converted with engine traces and the collector
scraped the engines) holds the load of the dump's time window as ``frames.engine_load``
has it, once under each rollout id of the dump (a dump read back takes one).
Reading trusts nothing in the files: tables are checked as worker output is.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ...frames.engine_load import ENGINE_LOAD_COLUMNS, engine_load_frame
from ...frames.model import ORIGINS, TraceFrames
from ...tables.attr_columns import ATTR_PREFIX, AttrTable, merged_attr_arrays
from ...tables.core_tables import (
    UNKNOWN_ROLLOUT,  # samples without a rollout id (read back as missing)
)
from ...whole_files import replaced
from ..dumps.paths import dump_kind
from ..dumps.wire import (
    ATTR_TABLES,
    WireError,
    check_references,
    checked_attrs,
    checked_core_tables,
    meta_of,
    parse_meta,
)
from .peers import left_out_peers

#: The column saying whether a span or event is the dump's or the engine's.
ORIGIN = "origin"
#: What the engine-trace join reported for a dump (frames fields), one file per dump.
ENGINE_REPORTS = ("engine_skew", "engine_unmatched")
#: The engines' load over a dump's time (``frames.engine_load``).
ENGINE_LOAD = "engine_load"
TABLES = ("samples", "spans", "events", "segments", *ATTR_TABLES)
PARTITION = "rollout_id"
DUMP_FILE, DUMP_KIND = "dump_file", "dump_kind"
_POSITION = {"samples": "row", "spans": "span_index", "events": "event_index",
             "span_start_attrs": "span_index", "span_end_attrs": "span_index",
             "event_attrs": "event_index"}

def part_path(root: Path, table: str, rollout: int, stem: str) -> Path:
    return root / table / f"{PARTITION}={rollout}" / f"{stem}.parquet"


# --------------------------------------------------------------------------- writing


def write_dump(frames: TraceFrames, root: Path, dump_path: str, stem: str) -> dict[str, Any]:
    """Write one dump's ``frames`` under ``root``; what was written, for the manifest.
    Rows carry the file name of ``dump_path`` as ``dump_file`` and the kind its whole
    path tells (:func:`dump_kind`: slime's ``eval_3/data.pt`` is eval) as ``dump_kind``.

    Each file appears whole or not at all (written aside, then renamed).
    """
    dump_file, kind = os.path.basename(dump_path), dump_kind(dump_path)
    core = frames.tables  # written as frames hold them: no view is made
    rollout_of_row = pc.fill_null(core.samples.column(PARTITION), UNKNOWN_ROLLOUT).to_numpy()
    span_rows = core.span_core.column("sample_row").to_numpy()
    event_rows = core.event_core.column("sample_row").to_numpy()
    segment_rows = span_rows[core.segments.column("span_index").to_numpy()] \
        if core.segments.num_rows else np.zeros(0, dtype=np.int64)
    tables = _tables(frames)
    rollouts_of = {"samples": rollout_of_row, "spans": rollout_of_row[span_rows],
                   "events": rollout_of_row[event_rows], "segments": rollout_of_row[segment_rows],
                   "span_start_attrs": rollout_of_row[span_rows],
                   "span_end_attrs": rollout_of_row[span_rows],
                   "event_attrs": rollout_of_row[event_rows]}
    files: list[str] = []
    # a dump without samples is filed under the rollout it names, as to_parquet files it
    named = [UNKNOWN_ROLLOUT if rollout is None else rollout for rollout in frames.rollout_ids]
    rollouts = sorted(set(rollout_of_row.tolist())) or named[:1] or [UNKNOWN_ROLLOUT]
    for name in TABLES:
        table = _labelled(tables[name], dump_file, kind)
        for rollout in rollouts:
            chosen = table.filter(pa.array(rollouts_of[name] == rollout))
            target = part_path(root, name, rollout, stem)
            _write_whole(chosen, target)
            files.append(target.relative_to(root).as_posix())
    for name in ENGINE_REPORTS:  # per dump, not per rollout: small, and kept whole
        report = getattr(frames, name)
        if len(report):
            target = root / name / f"{stem}.parquet"
            _write_whole(pa.Table.from_pandas(report, preserve_index=False), target)
            files.append(target.relative_to(root).as_posix())
    if len(frames.engine_load):
        load = pa.Table.from_pandas(frames.engine_load[list(ENGINE_LOAD_COLUMNS)],
                                    preserve_index=False)
        zeros = pa.array(np.zeros(load.num_rows, dtype=np.int32))
        for column, value in ((DUMP_FILE, dump_file), (DUMP_KIND, kind)):  # millions of rows
            load = load.append_column(column, pa.DictionaryArray.from_arrays(
                zeros, pa.array([value], type=pa.string())))
        for rollout in rollouts:
            target = part_path(root, ENGINE_LOAD, rollout, stem)
            _write_whole(load, target)
            files.append(target.relative_to(root).as_posix())
    return {"files": files, "rollouts": rollouts, "kind": kind, "meta": meta_of(frames),
            "samples": core.samples.num_rows, "spans": core.span_core.num_rows,
            "events": core.event_core.num_rows}


def _tables(frames: TraceFrames) -> dict[str, pa.Table]:
    core = frames.tables
    samples = core.samples.drop_columns([PARTITION])
    spans = core.span_core
    for name, column in merged_attr_arrays(frames.span_start_attrs,
                                           frames.span_end_attrs).items():
        spans = spans.append_column(name, column)
    events = core.event_core
    for key in frames.event_attrs.keys:
        events = events.append_column(ATTR_PREFIX + key, frames.event_attrs.column(key))
    tables = {"samples": samples, "spans": spans, "events": events,
              "segments": core.segments}
    for name in ATTR_TABLES:
        attrs: pa.Table = getattr(frames, name).table
        tables[name] = attrs.rename_columns([ATTR_PREFIX + c for c in attrs.column_names])
    for name, table in tables.items():
        if name in _POSITION:
            tables[name] = table.add_column(0, _POSITION[name],
                                            pa.array(np.arange(table.num_rows, dtype=np.int64)))
    return tables


def _labelled(table: pa.Table, dump_file: str, kind: str) -> pa.Table:
    n = table.num_rows
    return (table.append_column(DUMP_FILE, pa.array([dump_file] * n, type=pa.string()))
            .append_column(DUMP_KIND, pa.array([kind] * n, type=pa.string())))


def _write_whole(table: pa.Table, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with replaced(target) as temporary:
        pq.write_table(table, temporary, compression="zstd")


# --------------------------------------------------------------------------- reading


def read_dump(root: Path, entry: dict[str, Any], rollouts: set[int] | None = None,
              rows: np.ndarray | None = None) -> TraceFrames | None:
    """The frames of one converted dump (its manifest ``entry``): only the rollout ids
    in ``rollouts`` (default all) and, if given, only the sample ``rows`` (positions in
    the dump). None when nothing is left. WireError, naming the file or the dump's
    stem, when a file is not what :func:`write_dump` writes (unreadable, other
    columns, other types, rows that do not fit together): never another error."""
    try:
        return _read_dump_files(root, entry, rollouts, rows)
    except WireError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, OSError, pa.ArrowException) as exc:
        raise WireError(f"{root}: files of {entry.get('stem')!r}: "
                        f"{type(exc).__name__}: {exc}") from exc


def _read_dump_files(root: Path, entry: dict[str, Any], rollouts: set[int] | None,
                     rows: np.ndarray | None) -> TraceFrames | None:
    """:func:`read_dump`, letting any error of a damaged file through."""
    chosen = [r for r in entry["rollouts"] if rollouts is None or r in rollouts]
    if not chosen:
        return None
    stem = entry["stem"]
    tables = {name: _read_parts(root, name, chosen, stem) for name in TABLES}
    tables["segments"] = _in_span_order(tables["segments"])
    samples = tables["samples"]
    keep_rows = np.sort(samples.column("row").to_numpy())
    if rows is not None:
        keep_rows = np.intersect1d(keep_rows, rows)
    if not len(keep_rows) and rows is not None:
        return None  # a filter chose none (a dump without samples reads back as such)
    frames = _frames(tables, keep_rows, entry)
    reports: dict[str, Any] = {
        name: pq.read_table(root / name / f"{stem}.parquet").to_pandas()
        for name in ENGINE_REPORTS if f"{name}/{stem}.parquet" in entry.get("files", ())}
    if rows is not None or len(chosen) < len(entry["rollouts"]):  # samples left out
        others = [rollout for rollout in entry["rollouts"] if rollout not in chosen]
        every = pa.concat_tables([samples, _read_parts(root, "samples", others, stem)]) \
            if others else samples  # the chosen rollouts' samples are read already
        reports["group_peers"] = left_out_peers(every, keep_rows)
    load = _read_engine_load(root, entry, chosen)
    if load is not None:
        reports[ENGINE_LOAD] = load
    return replace(frames, **reports) if reports else frames


def _read_engine_load(root: Path, entry: dict[str, Any], chosen: list[int]) -> Any:
    """The dump's engine load (its copy under the first of ``chosen`` that has one), as
    ``frames.engine_load``; None when it was not kept. WireError when it is damaged."""
    files = set(entry.get("files", ()))
    for rollout in chosen:
        path = part_path(root, ENGINE_LOAD, rollout, entry["stem"])
        if path.relative_to(root).as_posix() not in files:
            continue
        try:
            table = pq.read_table(path, columns=list(ENGINE_LOAD_COLUMNS))
            table.validate(full=True)
            columns = {name: table.column(name).to_pandas() for name in ENGINE_LOAD_COLUMNS}
            return engine_load_frame(*(columns[name] for name in ENGINE_LOAD_COLUMNS))
        except (OSError, pa.ArrowException, ValueError, TypeError, KeyError) as exc:
            raise WireError(f"{path}: {_reason(exc, path)}") from exc
    return None


def _read_parts(root: Path, name: str, rollouts: list[int], stem: str) -> pa.Table:
    parts = []
    for rollout in rollouts:
        path = part_path(root, name, rollout, stem)
        try:
            columns = None
            if name in ("spans", "events"):  # their attr.<key> columns are for queries:
                columns = [c for c in pq.read_schema(path).names  # frames take the exact
                           if not c.startswith(ATTR_PREFIX)]  # attribute tables instead
            table = pq.read_table(path, columns=columns)
            table.validate(full=True)
        except (OSError, pa.ArrowException, KeyError, TypeError, ValueError) as exc:
            raise WireError(f"{path}: {_reason(exc, path)}") from exc
        if name in _POSITION and _POSITION[name] not in table.column_names:
            raise WireError(f"{path}: no {_POSITION[name]} column: not a {name} file")
        if name == "samples":
            value = None if rollout == UNKNOWN_ROLLOUT else rollout
            table = table.append_column(PARTITION, pa.array([value] * table.num_rows,
                                                            type=pa.int64()))
        parts.append(table.drop_columns([c for c in (DUMP_FILE, DUMP_KIND)
                                         if c in table.column_names]))
    try:
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    except pa.ArrowException as exc:
        raise WireError(f"{name} of {stem}: parts do not match ({exc})") from exc


def _reason(exc: BaseException, path: Path) -> str:
    """Why reading ``path`` failed: the system's reason for an OSError, else the error's
    message; where that says nothing but the path, "no such file" for a file gone
    (pyarrow's ``FileNotFoundError(path)``), else the error's type."""
    if isinstance(exc, OSError) and exc.strerror:
        return str(exc.strerror)
    text = str(exc)
    if text.strip("'\"") in ("", str(path)):
        return "no such file" if isinstance(exc, FileNotFoundError) else type(exc).__name__
    return text


def _in_span_order(segments: pa.Table) -> pa.Table:
    """Segments in the order they were written: by span, each span's in its own order.
    A dump of several rollout ids is read back one rollout's file after another, which
    groups its segments by rollout; a stable sort by ``span_index`` undoes that."""
    if segments.num_rows < 2:
        return segments
    spans = segments.column("span_index").to_numpy()
    if bool(np.all(np.diff(spans) >= 0)):
        return segments
    return segments.take(pa.array(np.argsort(spans, kind="stable")))


def _frames(tables: dict[str, pa.Table], keep_rows: np.ndarray, entry: dict) -> TraceFrames:
    """Frames of the sample positions ``keep_rows``, renumbered from 0."""
    samples = _select(tables["samples"], "row", keep_rows)
    spans = tables["spans"]
    span_keep = _positions_where(spans, "span_index", spans.column("sample_row"), keep_rows)
    events = tables["events"]
    event_keep = _positions_where(events, "event_index", events.column("sample_row"), keep_rows)
    spans = _select(spans, "span_index", span_keep)
    events = _select(events, "event_index", event_keep)
    segments = tables["segments"]
    segments = segments.filter(pa.array(np.isin(segments.column("span_index").to_numpy(),
                                                span_keep)))
    core = checked_core_tables(
        _core_columns(samples, "samples"),
        _core_columns(_renumbered(spans, keep_rows, span_keep), "spans"),
        _core_columns(_renumbered(events, keep_rows, span_keep), "events"),
        _core_columns(_renumber_column(segments, "span_index", span_keep), "segments"))
    attrs = {name: AttrTable(checked_attrs(_attr_columns(_select(
        tables[name], _POSITION[name], span_keep if name.startswith("span") else event_keep)),
        name)) for name in ATTR_TABLES}
    frames = TraceFrames(core, **attrs, **parse_meta(entry["meta"]))
    check_references(frames)
    return frames


def _positions_where(table: pa.Table, position: str, rows: pa.ChunkedArray,
                     keep_rows: np.ndarray) -> np.ndarray:
    mask = np.isin(rows.to_numpy(), keep_rows)
    return np.sort(table.column(position).to_numpy()[mask])


def _select(table: pa.Table, position: str, keep: np.ndarray) -> pa.Table:
    """The rows of ``table`` whose ``position`` is in ``keep``, in that order."""
    positions = table.column(position).to_numpy()
    if len(positions) == len(keep) and np.array_equal(positions, keep) and \
            bool(np.all(np.diff(positions) > 0)):
        return table  # the whole dump, in order and without repeats: the common case
    order = np.argsort(positions, kind="stable")
    found = np.searchsorted(positions[order], keep)
    if len(keep) and (found.max() >= len(positions) or
                      not np.array_equal(positions[order][found], keep)):
        raise WireError(f"{position}: rows are missing or repeated")
    if len(np.unique(positions)) != len(positions):
        raise WireError(f"{position}: rows are repeated")
    return table.take(pa.array(order[found]))


def _renumbered(table: pa.Table, keep_rows: np.ndarray, span_keep: np.ndarray) -> pa.Table:
    """Spans or events with sample rows and parent spans counted among those kept."""
    table = _renumber_column(table, "sample_row", keep_rows)
    parents = table.column("parent_index").to_numpy()
    inside = parents >= 0
    mapped = np.full(len(parents), -1, dtype=np.int64)
    mapped[inside] = _new_positions(parents[inside], span_keep, "parent_index")
    return table.set_column(table.column_names.index("parent_index"), "parent_index",
                            pa.array(mapped))


def _renumber_column(table: pa.Table, column: str, keep: np.ndarray) -> pa.Table:
    values = _new_positions(table.column(column).to_numpy(), keep, column)
    return table.set_column(table.column_names.index(column), column, pa.array(values))


def _new_positions(values: np.ndarray, keep: np.ndarray, column: str) -> np.ndarray:
    """Where each of ``values`` sits in the sorted ``keep`` (WireError if absent)."""
    if not len(values):
        return np.zeros(0, dtype=np.int64)
    found = np.searchsorted(keep, values)
    if found.max() >= len(keep) or not np.array_equal(keep[found], values):
        raise WireError(f"{column}: points outside the rows read")
    return found.astype(np.int64)


def _core_columns(table: pa.Table, name: str) -> pa.Table:
    """The core columns of the dataset's table ``name``: all but its position and
    attribute columns (``CoreTables`` checks them and their order)."""
    wanted = [c for c in table.column_names
              if c != _POSITION.get(name) and not c.startswith(ATTR_PREFIX)]
    if name == "samples":  # the partition column was appended last; put it back first
        wanted = [PARTITION, *[c for c in wanted if c != PARTITION]]
    chosen = table.select(wanted)
    if name in ("spans", "events") and ORIGIN not in chosen.column_names:
        # written before engine traces were joined: every span and event is the dump's
        codes = pa.array(np.zeros(chosen.num_rows, dtype=np.int32))
        chosen = chosen.append_column(ORIGIN, pa.DictionaryArray.from_arrays(
            codes, pa.array(ORIGINS, type=pa.string())))
    return chosen


def _attr_columns(table: pa.Table) -> pa.Table:
    names = [c for c in table.column_names if c.startswith(ATTR_PREFIX)]
    if len(names) + 1 != table.num_columns:
        raise WireError("attribute tables hold attr.<key> columns only")
    chosen = table.select(names)
    return chosen.rename_columns([c[len(ATTR_PREFIX):] for c in names])
