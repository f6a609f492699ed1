"""Open the run dataset lazily: only the rollouts (and samples) asked for.

Which files hold a rollout is known from the manifest and the layout, so a
request for 2 rollouts of 100 opens only their files, never the rest. A
``where`` filter on samples runs in DuckDB over those files only.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ...frames.model import TraceFrames, combine_frames
from ..dumps.errors import DumpError
from ..dumps.wire import WireError
from .layout import part_path, read_dump
from .manifest import Manifest


def open_dataset(root: str | Path, rollouts: Iterable[int] | None = None,
                 where: str | None = None, kinds: Iterable[str] | None = None) -> TraceFrames:
    """Frames of the run dataset at ``root``: the rollout ids in ``rollouts`` (default
    all), dumps of ``kinds`` (``train``/``eval``, default both), and the samples for
    which the SQL condition ``where`` holds (DuckDB, over the ``samples`` columns,
    e.g. ``"status = 'truncated'"``). The rewards of the samples left out go with the
    frames as ``frames.group_peers``, so each sample keeps the fate it has in its whole
    dump (``answers.ledger``). A dump whose files are damaged is skipped with a warning
    and listed in ``frames.failures``."""
    root = Path(root)
    manifest = Manifest.load(root, must_exist=True)
    wanted = None if rollouts is None else {int(r) for r in rollouts}
    kinds = None if kinds is None else set(kinds)
    entries = [entry for entry in manifest.converted()
               if (kinds is None or entry["kind"] in kinds)
               and (wanted is None or wanted & set(entry["rollouts"]))]
    rows = _rows_where(root, entries, wanted, where) if where else None
    parts, failures = [], []
    for entry in entries:
        chosen = None if rows is None else rows.get(entry["stem"], np.zeros(0, np.int64))
        try:
            part = read_dump(root, entry, wanted, chosen)
        except WireError as exc:
            failures.append((entry["path"], f"damaged dataset files ({exc})"))
            continue
        if part is not None:
            parts.append(part)
    for path, reason in failures:
        warnings.warn(f"skipped {path}: {reason}", RuntimeWarning, stacklevel=2)
    if not parts:
        raise DumpError(f"{root}: nothing in the dataset matches "
                        f"(rollouts={sorted(wanted) if wanted else 'all'}, where={where!r})"
                        + (f"; {len(failures)} dump(s) unreadable" if failures else ""))
    frames = combine_frames(parts)
    frames.failures = failures
    return frames


def _rows_where(root: Path, entries: list[dict[str, Any]], wanted: set[int] | None,
                where: str) -> dict[str, np.ndarray]:
    """Per dump (by its tables' file stem), the sample positions where ``where`` holds."""
    import duckdb

    files = [part_path(root, "samples", rollout, entry["stem"]).as_posix()
             for entry in entries for rollout in entry["rollouts"]
             if wanted is None or rollout in wanted]
    if not files:
        return {}
    query = ("select filename, row from read_parquet($files, hive_partitioning = true, "
             f"union_by_name = true, filename = true) where ({where})")
    try:
        found = duckdb.execute(query, {"files": files}).fetchnumpy()
    except duckdb.Error as exc:
        raise ValueError(f"where={where!r}: {' '.join(str(exc).split())[:300]}") from exc
    stems = np.array([Path(name).stem for name in found["filename"].tolist()], dtype=object)
    positions = np.asarray(found["row"], dtype=np.int64)
    return {str(stem): np.sort(positions[stems == stem]) for stem in set(stems.tolist())}
