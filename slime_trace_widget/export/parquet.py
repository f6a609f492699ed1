"""Export to Parquet: ``samples``, ``spans``, ``events`` and ``segments`` tables.

Each table is a hive layout partitioned by rollout id
(``spans/rollout_id=3/part-0.parquet``; ``-1`` when the dump has none), so
DuckDB, Spark, Dask or Ray Data read a folder of many rollouts as one table.
Attribute dicts are stored as JSON text; ``attr.*`` columns keep their type
when it is uniform and become JSON text otherwise. Rows join on
``(rollout_id, sample_row)``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..frames.model import TraceFrames
from ..tables.core_tables import UNKNOWN_ROLLOUT
from ..values import clean_text, json_safe


def to_parquet(frames: TraceFrames, directory: str | Path) -> Path:
    """Write the frames as hive-partitioned Parquet tables under ``directory``."""
    root = Path(directory)
    rollout_of_row = frames.samples["rollout_id"].fillna(UNKNOWN_ROLLOUT).astype(np.int64)
    tables = {
        "samples": frames.samples.reset_index(),
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
        table = _parquet_ready(table)
        rollout = rollout_of_row.reindex(row_of[name].to_numpy()).to_numpy()
        for value in np.unique(rollout) if len(rollout) else []:
            part = root / name / f"rollout_id={int(value)}"
            part.mkdir(parents=True, exist_ok=True)
            chosen = table[rollout == value].drop(columns=["rollout_id"], errors="ignore")
            chosen.to_parquet(part / "part-0.parquet", index=False)
    return root


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
