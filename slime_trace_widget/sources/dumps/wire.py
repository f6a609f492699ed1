"""TraceFrames across a process boundary as Arrow IPC files: written by a worker
(:mod:`.arrow_files`), read and checked here, by the caller.

Reading runs no code from the files and trusts nothing in them: every table
must have exactly the columns and Arrow types that frames of this version
have (``core_tables.CORE_SCHEMA``), Arrow's full validation must pass, and
every row reference (sample row, parent span, segment owner) must point
inside its table. Anything else is a ``WireError``. Attribute tables are
free-form (one column per key) but may only hold numbers, bools and text.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pyarrow as pa

from ...frames import core_frames
from ...frames.core_frames import encode_table
from ...frames.model import TraceFrames
from ...tables.attr_columns import AttrTable
from ...tables.core_tables import FrameTables
from .arrow_files import (
    ATTR_TABLES,
    CORE_TABLES,
    WireError,
    meta_of,
    parse_meta,
    read_meta,
    read_table,
    table_file,
    write_table,
    write_tables,
)

__all__ = ["ATTR_TABLES", "CORE_TABLES", "WireError", "check_references", "checked_attrs",
           "decode_table", "encode_table", "meta_of", "parse_meta", "read_frames", "read_table",
           "table_file", "write_frames", "write_table", "write_tables"]


def write_frames(frames: TraceFrames, directory: str) -> None:
    """Write ``frames`` into ``directory`` as a worker writes its tables."""
    write_tables(FrameTables(**{name: encode_table(getattr(frames, name)) if name in CORE_TABLES
                                else getattr(frames, name) for name in FrameTables._fields}),
                 directory)


def read_frames(directory: str) -> TraceFrames:
    """The frames a worker wrote into ``directory``; WireError when anything is off.
    The columns point into one read copy of each file, which may be deleted then."""
    tables: dict[str, Any] = {name: read_table(table_file(directory, name))
                              for name in (*CORE_TABLES, *ATTR_TABLES)}
    for name in ATTR_TABLES:
        tables[name] = AttrTable(checked_attrs(tables[name], name))
    flattened = FrameTables(**tables, **read_meta(directory))
    try:
        frames = core_frames.frames_from_tables(flattened)
    except (TypeError, ValueError) as exc:  # a core table is not this version's
        raise WireError(str(exc)) from exc
    check_references(frames)
    return frames


def decode_table(table: pa.Table, name: str) -> pd.DataFrame:
    """Core frame ``name`` from ``table``, which must have exactly the columns and
    types that frames of this version have (WireError otherwise)."""
    try:
        return core_frames.decode_table(table, name)
    except (TypeError, ValueError) as exc:
        raise WireError(str(exc)) from exc


def checked_attrs(table: pa.Table, name: str) -> pa.Table:
    """``table`` if it holds only numbers, bools and text (WireError otherwise)."""
    for field in table.schema:
        kind = field.type
        if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)
                or pa.types.is_boolean(kind) or kind == pa.string()):
            raise WireError(f"{name}.{field.name[:80]}: attributes cannot be {kind}")
    return table


def check_references(frames: TraceFrames) -> None:
    """Every row reference must point inside its table."""
    n_samples, n_spans = len(frames.samples), len(frames.span_core)
    checks = (
        ("span_core.sample_row", frames.span_core["sample_row"], 0, n_samples),
        ("span_core.parent_index", frames.span_core["parent_index"], -1, n_spans),
        ("event_core.sample_row", frames.event_core["sample_row"], 0, n_samples),
        ("event_core.parent_index", frames.event_core["parent_index"], -1, n_spans),
        ("segments.span_index", frames.segments["span_index"], 0, n_spans),
    )
    for name, values, low, high in checks:
        array = values.to_numpy()
        if len(array) and (array.min() < low or array.max() >= high):
            raise WireError(f"{name} points outside its table")
    for name, rows in (("span_start_attrs", n_spans), ("span_end_attrs", n_spans),
                       ("event_attrs", len(frames.event_core))):
        if len(getattr(frames, name)) != rows:
            raise WireError(f"{name} has {len(getattr(frames, name))} rows, expected {rows}")
