"""Open the run dataset lazily: only the rollouts (and samples) asked for.

Which files hold a rollout is known from the manifest and the layout, so a
request for 2 rollouts of 100 opens only their files, never the rest. A
``where`` filter on samples runs in DuckDB over those files only; it sees a sample
without a rollout id as ``rollout_id`` NULL, as the frames show it (the files keep
such samples under ``rollout_id=-1``). A dump whose samples files DuckDB cannot read
is left out of the condition and skipped like any damaged dump; the condition's own
errors are reported as the condition's (ValueError).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ...frames.model import TraceFrames, combine_frames
from ...tables.core_tables import UNKNOWN_ROLLOUT
from ..dumps.errors import DumpError
from ..dumps.paths import DUMP_KINDS, dump_labels
from ..dumps.wire import WireError
from . import duck_rows
from .layout import part_path, read_dump
from .manifest import Manifest


def open_dataset(root: str | Path, rollouts: Iterable[int] | int | None = None,
                 where: str | None = None, kinds: Iterable[str] | str | None = None,
                 warn_failures: bool = True, dumps: Iterable[str] | str | None = None
                 ) -> TraceFrames:
    """Frames of the run dataset at ``root``: the rollout ids in ``rollouts`` (default
    all), dumps of ``kinds`` (``train``/``eval``, default both; ValueError for another),
    and the samples for which the SQL condition ``where`` holds (DuckDB, over the
    ``samples`` columns, e.g. ``"status = 'truncated'"``; a missing number, NaN in the
    frames, is NULL there: ``"reward is null"``). The rewards of the samples left out go with the
    frames as ``frames.group_peers``, so each sample keeps the fate it has in its whole
    dump (``answers.ledger``). A dump whose files are damaged is skipped with a warning
    (none when ``warn_failures`` is False) and listed in ``frames.failures``. ``dumps``
    keeps only the dumps of those names, as ``rollout_trends`` names them in its
    ``dump_file`` column (two runs' ``rollout_5.pt``: ``runA/rollout_5.pt``). Each of
    ``rollouts``, ``kinds`` and ``dumps`` takes one value or several."""
    root = Path(root)
    manifest = Manifest.load(root, must_exist=True)
    wanted = None if rollouts is None else {int(r) for r in _several(rollouts)}
    kinds = None if kinds is None else set(_several(kinds))
    if kinds is not None and not kinds <= set(DUMP_KINDS):
        raise ValueError(f"kinds={sorted(kinds)}: a dump's kind is one of {list(DUMP_KINDS)}")
    converted = manifest.converted()
    named = None if dumps is None else set(_several(dumps))
    labels = dump_labels([entry["path"] for entry in converted])
    entries = [entry for entry, label in zip(converted, labels, strict=True)
               if (kinds is None or entry["kind"] in kinds)
               and (wanted is None or wanted & set(entry["rollouts"]))
               and (named is None or label in named)]
    rows, failures = None, []
    if where:
        rows, damaged = _rows_where(root, entries, wanted, where)
        failures = [(entry["path"], f"damaged dataset files ({damaged[entry['stem']]})")
                    for entry in entries if entry["stem"] in damaged]
        entries = [entry for entry in entries if entry["stem"] not in damaged]
    parts = []
    for entry in entries:
        chosen = None if rows is None else rows.get(entry["stem"], np.zeros(0, np.int64))
        try:
            part = read_dump(root, entry, wanted, chosen)
        except WireError as exc:
            failures.append((entry["path"], f"damaged dataset files ({exc})"))
            continue
        if part is not None:
            parts.append(part)
    if warn_failures:
        for path, reason in failures:
            warnings.warn(f"skipped {path}: {reason}", RuntimeWarning, stacklevel=2)
    if not parts:
        asked = [f"rollouts={'all' if wanted is None else sorted(wanted)}", f"where={where!r}"]
        asked += [] if kinds is None else [f"kinds={sorted(kinds)}"]
        asked += [] if named is None else [f"dumps={sorted(named)} of {labels}"]
        raise DumpError(f"{root}: nothing in the dataset matches ({', '.join(asked)})"
                        + (f"; {len(failures)} dump(s) unreadable" if failures else ""))
    frames = combine_frames(parts)
    frames.failures = failures
    return frames


def _several(chosen: Any) -> list[Any]:
    """The items of a selection argument; one name or number is a selection of one
    (``kinds="eval"`` was the set of its letters, ``rollouts=3`` a TypeError)."""
    return [chosen] if isinstance(chosen, (str, int)) else list(chosen)


def _rows_where(root: Path, entries: list[dict[str, Any]], wanted: set[int] | None,
                where: str) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Per dump (by its tables' file stem), the sample positions where ``where`` holds,
    and the dumps left out because a samples file of theirs is damaged (stem ->
    why). ValueError when the condition itself fails."""
    import duckdb

    files = {entry["stem"]: [part_path(root, "samples", rollout, entry["stem"]).as_posix()
                             for rollout in entry["rollouts"]
                             if wanted is None or rollout in wanted]
             for entry in entries}
    files = {stem: paths for stem, paths in files.items() if paths}
    try:
        return _query_rows(files, where), {}
    except duckdb.Error as exc:
        damaged = {stem: problem for stem, paths in files.items()
                   if (problem := _unreadable_samples(paths)) is not None}
        if not damaged:
            raise _condition_error(where, exc) from exc
    rest = {stem: paths for stem, paths in files.items() if stem not in damaged}
    try:
        return _query_rows(rest, where), damaged
    except duckdb.Error as exc:
        raise _condition_error(where, exc) from exc


def _query_rows(files: dict[str, list[str]], where: str) -> dict[str, np.ndarray]:
    """The sample positions, per stem, of the samples ``files`` where ``where`` holds
    (duckdb.Error when it fails). ``rollout_id`` -1 (none) reads as NULL."""
    every = [path for paths in files.values() for path in paths]
    if not every:
        return {}
    rows = (f"select * replace (nullif(rollout_id, {UNKNOWN_ROLLOUT}) as rollout_id) "
            f"from ({duck_rows.dataset_rows('$files')})")
    parameters = {"files": every}
    with duck_rows.connection() as db:  # a missing reward or duration is NULL to `where`
        duck_rows.confine(db, every)
        query = (f"select filename, row from ({duck_rows.with_nan_as_null(db, rows, parameters)})"
                 f" where ({where})")
        found = db.execute(query, parameters).fetchnumpy()
    stems = np.array([Path(name).stem for name in found["filename"].tolist()], dtype=object)
    positions = np.asarray(found["row"], dtype=np.int64)
    return {str(stem): np.sort(positions[stems == stem]) for stem in set(stems.tolist())}


def _unreadable_samples(paths: list[str]) -> str | None:
    """Why one of a dump's samples files is damaged (read whole and checked, with its
    ``row`` column of integers), or None when all read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for path in paths:
        try:
            table = pq.read_table(path)
            table.validate(full=True)
            if not pa.types.is_integer(table.schema.field("row").type):
                return f"{path}: row is not an integer column"
        except (OSError, pa.ArrowException, KeyError, TypeError, ValueError) as exc:
            return f"{path}: {exc}"
    return None


def _condition_error(where: str, exc: Exception) -> ValueError:
    """The error of a ``where`` condition DuckDB refused, on one line."""
    return ValueError(f"where={where!r}: {' '.join(str(exc).split())[:300]}")
