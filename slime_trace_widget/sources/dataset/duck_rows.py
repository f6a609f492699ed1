"""The dataset's Parquet as DuckDB must read it: a missing number is NULL.

The dataset keeps the frames' float columns as they are, so a missing duration,
reward or time is NaN. DuckDB orders NaN above every number: a max, a quantile or a
sum over it is NaN, and ``reward > 0`` holds for it. Worse, Parquet's min/max
statistics leave NaN out, and DuckDB's statistics propagation reads them as "no NaN
in this file" and folds ``isnan()`` to false, so which rows a condition keeps can
differ from file to file. Every DuckDB read of the dataset goes through a connection
made by :func:`connection` and queries wrapped by :func:`with_nan_as_null`, so it
sees what frames registered from pandas show DuckDB: NULL.

The rows' ``rollout_id`` is their file's ``rollout_id=N`` folder (:func:`dataset_rows`),
read from that folder alone: DuckDB's hive partitioning makes a column of every
``key=value`` folder of the path, so a dataset kept under ``status=old/`` or
``name=qwen/`` (experiment folders are often named so) read every sample's status as
``old`` and every span's name as ``qwen``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["confine", "connection", "dataset_rows", "with_nan_as_null"]

_FLOAT_TYPES = ("DOUBLE", "FLOAT")


def connection() -> Any:
    """A new DuckDB connection (close it: ``with connection() as db``) whose plans keep
    every ``isnan()`` test: statistics propagation is off for it alone."""
    import duckdb

    db = duckdb.connect()
    db.execute("set disabled_optimizers = 'statistics_propagation'")
    return db


def confine(db: Any, files: list[str]) -> None:
    """Let ``db`` read ``files`` and no other file, for good: a user's SQL condition run
    on it (``open_dataset(where=...)``) filters those rows and cannot read another file
    (``read_csv('/etc/passwd')``, whose text a failed cast echoes), install or load an
    extension, or set the configuration back."""
    db.execute("set allowed_paths = $files", {"files": files})
    db.execute("set enable_external_access = false")
    db.execute("set autoinstall_known_extensions = false")
    db.execute("set autoload_known_extensions = false")
    db.execute("set lock_configuration = true")


def dataset_rows(files: str) -> str:
    """A query of the rows of the dataset's Parquet ``files`` (SQL for a list of paths,
    written with ``/``: a parameter or a literal), by column name, with each file's
    ``filename`` and the ``rollout_id`` of its ``rollout_id=N`` folder (the one the file
    is in; a file's name may hold any character but ``/``)."""
    rollout = r"regexp_extract(filename, '/rollout_id=(-?[0-9]+)/[^/]*$', 1)"
    return (f"select *, cast({rollout} as bigint) as rollout_id from read_parquet({files}, "
            "hive_partitioning = false, union_by_name = true, filename = true)")


def with_nan_as_null(db: Any, rows: str, parameters: dict[str, Any] | None = None) -> str:
    """The query ``rows`` (a ``select``, run on ``db`` with ``parameters``) with each NaN
    of its float columns read as NULL."""
    columns = db.execute(f"describe {rows}", parameters or {}).fetchall()
    floats = [_identifier(name) for name, kind, *_ in columns if kind in _FLOAT_TYPES]
    if not floats:
        return rows
    nulled = ", ".join(f"case when isnan({column}) then null else {column} end as {column}"
                       for column in floats)
    return f"select * replace ({nulled}) from ({rows})"


def _identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
