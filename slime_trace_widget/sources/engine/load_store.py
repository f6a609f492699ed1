"""The engine-load store: scraped Prometheus samples kept durably, read back by time window.

One row per sample of one scrape, in long form: ``engine`` (the target's name),
``metric`` (the sample's full name), ``labels`` (canonical text), ``type`` (its
family's type), ``ts_ns`` (the scrape's time, the collector's clock) and ``value``.
Strings are dictionary-encoded, in the write-ahead file and in the finished files,
so a row costs a few bytes whatever its names.

Files under ``DIR/engine_load/``, written, rolled and recovered as the span store's
(:mod:`.durable`): ``wal-<seq>.arrows`` being appended (one record batch per group of
scrapes, fsynced), ``load-<first ns>-<last ns>-<seq>.parquet`` finished files sorted by
time (zstd), rolled after :data:`ROLL_SECONDS` or :data:`ROLL_ROWS` rows and on
shutdown. A window reads only the files whose names overlap it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from ...frames.engine_load import empty_engine_load
from . import durable
from .prometheus import Exposition

SUBDIR = "engine_load"
ROLL_ROWS = 2_000_000
ROLL_SECONDS = 60.0
_TEXT = pa.dictionary(pa.int32(), pa.string())
SCHEMA = pa.schema([("engine", _TEXT), ("metric", _TEXT), ("labels", _TEXT), ("type", _TEXT),
                    ("ts_ns", pa.int64()), ("value", pa.float64())])
LAYOUT = durable.Layout(subdir=SUBDIR, prefix="load", schema=SCHEMA, start="ts_ns",
                        end="ts_ns", sort_by="ts_ns", what="engine load", compression="zstd")


def scrape_table(engine: str, scrape: Exposition, ts_ns: int) -> pa.Table:
    """One scrape of target ``engine`` at ``ts_ns`` as rows of the store's schema."""
    n = len(scrape)
    engines = pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)),
                                             pa.array([engine], type=pa.string()))
    return pa.table({
        "engine": engines,
        "metric": _encoded(scrape.metrics), "labels": _encoded(scrape.labels),
        "type": _encoded(scrape.types),
        "ts_ns": pa.array(np.full(n, ts_ns, dtype=np.int64)),
        "value": pa.array(np.asarray(scrape.values, dtype=np.float64)),
    }, schema=SCHEMA)


def _encoded(values: list[str]) -> pa.DictionaryArray:
    return pa.array(values, type=pa.string()).dictionary_encode()


class LoadStore(durable.DurableStore):
    """The writing side: one per collector folder, used from one thread."""

    def __init__(self, directory: str | Path, roll_rows: int = ROLL_ROWS,
                 roll_seconds: float = ROLL_SECONDS) -> None:
        super().__init__(directory, LAYOUT, roll_rows, roll_seconds)


def read_load(source: str | Path | Iterable[str | Path], start_ns: int | None = None,
              end_ns: int | None = None, unreadable: dict[str, str] | None = None
              ) -> pa.Table:
    """Stored samples scraped in ``[start_ns, end_ns]`` (all when not given), as a table.
    ``source`` is a collector folder or a list of its files; files another store wrote
    are left out, a file that cannot be read is skipped: put in ``unreadable`` (path,
    reason) when given, else warned of by name."""
    return durable.read_rows(LAYOUT, source, start_ns, end_ns, unreadable=unreadable)


def window_files(source: str | Path, start_ns: int, end_ns: int) -> list[list]:
    """The finished load files of a collector folder that overlap ``[start_ns, end_ns]``,
    as ``[name, size]``."""
    return durable.window_files(LAYOUT, source, start_ns, end_ns)


def load_engine_load(source: str | Path | Iterable[str | Path], start: float | None = None,
                     end: float | None = None, *, buckets: bool = True,
                     unreadable: dict[str, str] | None = None) -> pd.DataFrame:
    """The engines' load scraped into a collector folder (``slime-trace-viewer collect DIR
    --scrape URL``), or its files, in ``[start, end]`` (epoch seconds; all when not
    given), sorted by time: the columns of ``frames.engine_load`` (see
    :mod:`slime_trace_widget.frames.engine_load`), times in the collector's clock.
    ``buckets=False`` leaves out histograms' ``*_bucket`` series (most of a scrape's
    rows; their ``*_sum`` and ``*_count`` stay). A file that cannot be read is skipped
    (:func:`read_load`: put in ``unreadable`` when given)."""
    table = read_load(source, None if start is None else int(np.floor(start * 1e9)),
                      None if end is None else int(np.ceil(end * 1e9)), unreadable)
    if not table.num_rows:
        return empty_engine_load()
    ts_ns = table.column("ts_ns").to_numpy()
    order = None if bool(np.all(ts_ns[1:] >= ts_ns[:-1])) else np.argsort(ts_ns, kind="stable")
    if order is not None:
        table = table.take(pa.array(order))
        ts_ns = ts_ns[order]
    columns = {name: _compact(table.column(name).to_pandas().array)
               for name in ("engine", "metric", "labels")}
    load = pd.DataFrame({**columns, "ts": ts_ns / 1e9, "value": table.column("value").to_numpy()})
    if buckets:
        return load
    metric = load["metric"].array
    bucket = np.asarray(metric.categories.str.endswith("_bucket"), dtype=bool)
    keep = ~bucket[np.maximum(np.asarray(metric.codes), 0)]
    if keep.all():
        return load
    kept = load[keep].reset_index(drop=True)
    for name in ("engine", "metric", "labels"):
        kept[name] = _compact(kept[name].array)
    return kept


def _compact(values: pd.Categorical) -> pd.Categorical:
    """``values`` without the categories no row uses (files outside the window add some)."""
    codes = np.asarray(values.codes)
    used = np.bincount(codes[codes >= 0], minlength=len(values.categories)) > 0
    if used.all():
        return values
    renumber = np.cumsum(used) - 1
    kept = np.where(codes >= 0, renumber[np.maximum(codes, 0)], -1)
    return pd.Categorical.from_codes(kept.astype(codes.dtype), values.categories[used])
