"""The dataset's Parquet as DuckDB must read it: a missing number is NULL.

The dataset keeps the frames' float columns as they are, so a missing duration,
reward or time is NaN. DuckDB orders NaN above every number: a max, a quantile or a
sum over it is NaN, and ``reward > 0`` holds for it. Worse, Parquet's min/max
statistics leave NaN out, and DuckDB's statistics propagation reads them as "no NaN
in this file" and folds ``isnan()`` to false, so which rows a condition keeps can
differ from file to file. Every DuckDB read of the dataset goes through a connection
made by :func:`connection` and queries wrapped by :func:`with_nan_as_null`, so it
sees what frames registered from pandas show DuckDB: NULL.
"""

from __future__ import annotations

from typing import Any

__all__ = ["connection", "with_nan_as_null"]

_FLOAT_TYPES = ("DOUBLE", "FLOAT")


def connection() -> Any:
    """A new DuckDB connection (close it: ``with connection() as db``) whose plans keep
    every ``isnan()`` test: statistics propagation is off for it alone."""
    import duckdb

    db = duckdb.connect()
    db.execute("set disabled_optimizers = 'statistics_propagation'")
    return db


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
