"""Export to Parquet: ``samples``, ``spans``, ``events`` and ``segments`` tables.

Each table is a hive layout partitioned by rollout id, one file per dump
(``spans/rollout_id=3/rollout_7-1a2b3c4d.parquet``; ``-1`` when the dump has no
rollout id), as the run dataset lays its tables out, so DuckDB, Spark, Dask or Ray
Data read a folder of many rollouts as one table, and a train and an eval dump of
one rollout id, exported into one folder, sit side by side. A file's stem is the
dump's file stem and a short hash of its absolute path (two runs' ``rollout_7.pt``
do not collide); frames made in memory take a hash of their samples instead.
Exporting a dump again replaces its own files under the rollout ids it holds now;
files an earlier export wrote under a rollout id it no longer holds stay (frames read
with a filter hold only some of a dump's rollouts, so the export cannot tell them from a
dump whose rollout id changed): export into a new folder to start over. Each file is
written whole or not at all. Every row carries ``dump_file`` (the dump's file name)
and ``dump_kind`` (``train`` or ``eval``, the run dataset's columns). Attribute dicts are stored as
JSON text; ``attr.*`` columns keep their type when it is uniform and become JSON
text otherwise. A key holding lists or dicts keeps the attribute table's own JSON
text in its ``attr.*`` column: exact, so a NaN or infinity inside reads as Python's
``NaN``/``Infinity`` (as DuckDB's JSON functions and Python's ``json`` read it),
where the dicts hold it as ``json_safe`` text. Every dump gets a file of each table,
with no rows where it has none.
Rows join on ``rollout_id`` and ``dump_file``, and a sample's ``row`` with the
``sample_row`` of its spans and events (segments name their span by ``span_index``).

Dumps differ in their attributes, so the files of a folder differ in ``attr.*``
columns, and a column's type may differ (an int in one dump, a float in another):
read the folder by column name, ``read_parquet('out/spans/*/*.parquet',
hive_partitioning = true, union_by_name = true)`` in DuckDB (which also widens an int
column to a float one), as the run dataset is read.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from ..frames.model import TraceFrames
from ..sources.dumps.paths import dump_kind
from ..tables.core_tables import UNKNOWN_ROLLOUT
from ..values import clean_text, json_safe
from ..whole_files import replaced

#: What frames made in memory name as their dump's path.
IN_MEMORY = "<memory>"
#: Bytes of the hash in a file's stem (twice as many hex digits).
_TAG_BYTES = 4


def to_parquet(frames: TraceFrames, directory: str | Path) -> Path:
    """Write the frames as hive-partitioned Parquet tables under ``directory``, one
    file per table, rollout id and dump (see the module docstring); ``directory``.
    ImportError when pyarrow has no Parquet support."""
    # Imported here: the run dataset's layout needs pyarrow.parquet, which a pyarrow
    # build may lack; importing this module must not need it.
    from ..sources.dataset.layout import DUMP_FILE, DUMP_KIND

    root = Path(directory)
    samples = frames.samples
    rollout_of_row = samples["rollout_id"].fillna(UNKNOWN_ROLLOUT).astype(np.int64)
    dump_of_row = samples["dump"].astype(np.int64)
    dumps = _dump_labels(frames)
    tables = {
        "samples": samples.reset_index(),
        "spans": frames.spans.reset_index(names="span_index"),
        "events": frames.events.reset_index(names="event_index"),
        "segments": frames.segments.copy(),
    }
    row_of = {
        "samples": tables["samples"]["row"],
        "spans": tables["spans"]["sample_row"],
        "events": tables["events"]["sample_row"],
        "segments": frames.span_core["sample_row"].reindex(
            tables["segments"]["span_index"]).reset_index(drop=True),
    }
    for name, table in tables.items():
        rows = row_of[name].to_numpy()
        rollout = rollout_of_row.reindex(rows).to_numpy()
        dump = np.minimum(dump_of_row.reindex(rows).to_numpy(), len(dumps) - 1)
        table = _parquet_ready(table)
        parts = set(zip(rollout.tolist(), dump.tolist(), strict=True))
        # a dump with no row in this table still gets its file, with none: a reader of
        # the folder finds every table, and its columns, for every dump
        present = set(dump.tolist())
        parts |= {(_rollout_of_dump(frames, dump_index), dump_index)
                  for dump_index in range(len(dumps)) if dump_index not in present}
        for rollout_id, dump_index in sorted(parts):
            stem, dump_file, kind = dumps[dump_index]
            chosen = table[(rollout == rollout_id) & (dump == dump_index)].drop(
                columns=["rollout_id"], errors="ignore")
            chosen = chosen.assign(**{DUMP_FILE: dump_file, DUMP_KIND: kind})
            _write_whole(chosen, root / name / f"rollout_id={int(rollout_id)}" /
                         f"{stem}.parquet")
    return root


def _rollout_of_dump(frames: TraceFrames, dump: int) -> int:
    """The rollout id a dump's files of no rows go under: the dump's, else -1."""
    rollout = frames.rollout_ids[dump] if dump < len(frames.rollout_ids) else None
    return UNKNOWN_ROLLOUT if rollout is None else int(rollout)


def _dump_labels(frames: TraceFrames) -> list[tuple[str, str, str]]:
    """(file stem, ``dump_file``, ``dump_kind``) of each dump of the frames; stems are
    unique within the frames (a path given twice gets ``-2``, ``-3``... on its copies)."""
    paths = frames.paths or [IN_MEMORY]
    out: list[tuple[str, str, str]] = []
    used: set[str] = set()
    for dump, path in enumerate(paths):
        text = str(path)
        name = clean_text(os.path.basename(text))
        stem = _in_memory_stem(frames, dump) if text == IN_MEMORY else _path_stem(text)
        unique, copy = stem, 1
        while unique in used:
            copy += 1
            unique = f"{stem}-{copy}"
        used.add(unique)
        out.append((unique, name, dump_kind(text)))
    return out


def _path_stem(path: str) -> str:
    """The dump's file stem and a hash of its absolute path (the bytes the file system
    holds, so a name that is not valid UTF-8 hashes as itself), as text a reader of the
    folder can decode."""
    tag = hashlib.blake2b(os.fsencode(os.path.abspath(path)),
                          digest_size=_TAG_BYTES).hexdigest()
    return f"{clean_text(Path(path).stem)}-{tag}"


def _in_memory_stem(frames: TraceFrames, dump: int) -> str:
    """A stem for a dump made in memory: a hash of its samples' trace ids, indexes and
    starts, so exporting the same frames again replaces their files."""
    samples = frames.samples[frames.samples["dump"] == dump]
    identity = json.dumps(json_safe(list(zip(
        samples["trace_id"].tolist(), samples["sample_index"].tolist(),
        samples["start"].tolist(), strict=True))), sort_keys=True)
    tag = hashlib.blake2b(identity.encode("utf-8"), digest_size=_TAG_BYTES).hexdigest()
    return f"memory-{tag}"


def _write_whole(table: pd.DataFrame, target: Path) -> None:
    """``table`` as the Parquet file ``target``, whole or not at all."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with replaced(target) as temporary:
        table.to_parquet(temporary, index=False)


def _parquet_ready(table: pd.DataFrame) -> pd.DataFrame:
    """Columns Arrow can store: dicts and mixed objects become JSON text, and text is
    made valid UTF-8 (a dump's strings may hold lone surrogates, which Arrow refuses)."""
    out = table.rename(columns=lambda name: clean_text(name) if isinstance(name, str) else name)
    for column in out.columns:
        series = out[column]
        if series.dtype != object:
            continue
        kinds = set(map(type, series.dropna().tolist()))
        if kinds <= {bool} or not kinds:
            out[column] = series.astype(object).where(series.notna(), None)
            continue
        if kinds <= {str}:
            out[column] = [None if v is None or v != v else clean_text(v) for v in series]
            continue
        out[column] = [None if v is None or (isinstance(v, float) and v != v)
                       else clean_text(json.dumps(json_safe(v), ensure_ascii=False))
                       for v in series]
    return out
