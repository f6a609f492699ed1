"""The engine-trace store: spans appended durably, read back by time window.

Files under ``DIR/engine_spans/`` (see :mod:`.durable` for how they are written,
rolled and recovered):

* ``wal-<seq>.arrows``: the write-ahead file being appended, one record batch per
  accepted request (or group of requests), fsynced before the clients are answered.
* ``spans-<first start ns>-<last end ns>-<seq>.parquet``: finished files, sorted by
  start. A write-ahead file is rolled into one once it holds :data:`ROLL_SPANS`
  spans or :data:`~.durable.ROLL_BYTES` bytes or is :data:`ROLL_SECONDS` old, and on
  shutdown.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

import pandas as pd
import pyarrow as pa

from . import durable
from .span_schema import END, JSON_COLUMNS, SCHEMA, START
from .stretches import FOLD_COLUMNS, fold_decode_loops, mostly_decode_loops

SUBDIR = "engine_spans"
ROLL_SPANS = 250_000
ROLL_SECONDS = 60.0
#: Beside each finished file that is mostly decode loops (trace level 3), its spans with
#: the loops folded (``stretches``): what a join reads, a few dozen rows a request instead
#: of one per scheduler iteration. Other files are folded as they are read.
LAYOUT = durable.Layout(subdir=SUBDIR, prefix="spans", schema=SCHEMA, start=START,
                        end=END, sort_by=START, what="engine traces",
                        companion="folded", derive=lambda table: fold_decode_loops(table).table,
                        worth_deriving=mostly_decode_loops,
                        derived_schema=pa.schema([*SCHEMA, *FOLD_COLUMNS]))


class SpanStore(durable.DurableStore):
    """The writing side: one per collector folder, used from one thread."""

    def __init__(self, directory: str | Path, roll_spans: int = ROLL_SPANS,
                 roll_seconds: float = ROLL_SECONDS,
                 roll_bytes: int = durable.ROLL_BYTES) -> None:
        super().__init__(directory, LAYOUT, roll_spans, roll_seconds, roll_bytes)

    @property
    def roll_spans(self) -> int:
        return self.roll_rows


#: The span columns whose text repeats over most rows (one engine, one resource).
REPEATED_COLUMNS = ("name", "service", "resource", "links")


def read_spans(source: str | Path | Iterable[str | Path], start_ns: int | None = None,
               end_ns: int | None = None, *, dictionaries: tuple[str, ...] = (),
               folded: bool = False, unreadable: dict[str, str] | None = None) -> pa.Table:
    """Stored spans that overlap ``[start_ns, end_ns]`` (all when not given), as a table.

    ``source`` is a collector folder (its finished files, chosen by their names, and
    its write-ahead files) or a list of finished files. A file that cannot be read is
    skipped: put in ``unreadable`` (path, reason) when given, else warned of by name
    (:func:`~.durable.read_rows`). ``dictionaries`` (e.g. :data:`REPEATED_COLUMNS`)
    are read dictionary-encoded: a window of a busy engine then takes about half the
    memory and time. ``folded``: decode loops folded into stretches
    (:mod:`.stretches`), read from the files' folded companions where they are, and
    merged across files; should the same loops lie in two files, from the spans.
    """
    if not folded:
        return durable.read_rows(LAYOUT, source, start_ns, end_ns, dictionaries,
                                 unreadable=unreadable)
    source = source if isinstance(source, (str, os.PathLike)) else list(source)
    merged = fold_decode_loops(durable.read_rows(LAYOUT, source, start_ns, end_ns,
                                                 dictionaries, derived=True,
                                                 unreadable=unreadable))
    if not merged.overlapping:
        return merged.table
    return fold_decode_loops(durable.read_rows(LAYOUT, source, start_ns, end_ns,
                                               dictionaries, unreadable=unreadable)).table


def holds_spans(source: str | Path | Iterable[str | Path]) -> bool:
    """Whether ``source`` (a collector folder, or its files) holds a span: a store that was
    opened (``collect`` always opens one) but never received a span holds none."""
    return durable.holds_rows(LAYOUT, source)


def window_files(source: str | Path, start_ns: int, end_ns: int) -> list[list]:
    """The finished files of a collector folder that overlap ``[start_ns, end_ns]``, as
    ``[name, size]``: what a join over that window read, to notice when it changes."""
    return durable.window_files(LAYOUT, source, start_ns, end_ns)


def load_engine_traces(source: str | Path | Iterable[str | Path], start: float | None = None,
                       end: float | None = None) -> pd.DataFrame:
    """The engines' spans of a collector folder (``slime-trace-viewer collect DIR``), or of
    its files, that overlap ``[start, end]`` (epoch seconds; all when not given).

    One row per span: ``trace_id``, ``span_id``, ``parent_id`` (hex), ``name``,
    ``start``/``end`` (epoch seconds) and ``start_ns``/``end_ns`` (exact),
    ``service``, ``status`` (OTLP status code), ``attributes`` and ``resource``
    (dicts), ``events`` (list of name, time_ns, attributes) and ``links``.
    """
    table = read_spans(source, None if start is None else int(start * 1e9),
                       None if end is None else int(end * 1e9))
    frame = table.to_pandas()
    for column in JSON_COLUMNS:
        frame[column] = [json.loads(text) for text in frame[column]]
    frame.insert(4, "start", frame["start_ns"].to_numpy() / 1e9)
    frame.insert(5, "end", frame["end_ns"].to_numpy() / 1e9)
    return frame
