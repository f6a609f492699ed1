"""TraceFrames across a process boundary as Arrow IPC files: written by a worker
(:mod:`.arrow_files`), read and checked here, by the caller.

Reading runs no code from the files and trusts nothing in them: every table
must have exactly the columns and Arrow types that frames of this version
have (``core_tables.CORE_SCHEMA``), Arrow's full validation must pass, and
every row reference (sample row, parent span, segment owner) must point
inside its table. Anything else is a ``WireError``. Attribute tables are
free-form (one column per key) but may only hold numbers, bools and text, and
their JSON text (the reserved columns and the columns of lists and dicts) must
decode to what the views expect of it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ...frames.model import TraceFrames, frames_from_tables
from ...tables.attr_columns import AttrTable
from ...tables.attr_format import EXTRA_COLUMNS, NONE_KEYS, OVERFLOW, is_json_field, json_rows
from ...tables.core_tables import CoreTables, FrameTables
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
           "checked_core_tables", "meta_of", "parse_meta", "read_frames", "read_table",
           "table_file", "write_frames", "write_table", "write_tables"]


def write_frames(frames: TraceFrames, directory: str) -> None:
    """Write ``frames`` into ``directory`` as a worker writes its tables."""
    write_tables(FrameTables(**{name: getattr(frames.tables, name) if name in CORE_TABLES
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
        frames = frames_from_tables(flattened)
    except ValueError as exc:  # a core table is not this version's
        raise WireError(str(exc)) from exc
    check_references(frames)
    return frames


def checked_core_tables(samples: pa.Table, span_core: pa.Table, event_core: pa.Table,
                        segments: pa.Table) -> CoreTables:
    """The core tables of frames, which must have exactly the columns and types that
    frames of this version have (WireError otherwise)."""
    try:
        return CoreTables(samples, span_core, event_core, segments)
    except ValueError as exc:
        raise WireError(str(exc)) from exc


def checked_attrs(table: pa.Table, name: str) -> pa.Table:
    """``table`` if it holds only numbers, bools and text, and its JSON columns hold
    JSON of the shape their readers take (WireError otherwise)."""
    for field in table.schema:
        kind = field.type
        if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)
                or pa.types.is_boolean(kind) or kind == pa.string()):
            raise WireError(f"{name}.{field.name[:80]}: attributes cannot be {kind}")
        if field.name in EXTRA_COLUMNS or is_json_field(field):
            _check_json(table.column(field.name), f"{name}.{field.name[:80]}",
                        _JSON_SHAPES.get(field.name))
    return table


def _is_list_of_text(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(key, str) for key in value)


#: What each reserved column's rows must decode to: ``_none_keys`` a list of keys,
#: ``_overflow`` an object of attributes (JSON keys are always text). A key's own JSON
#: column may hold any JSON value.
_JSON_SHAPES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    NONE_KEYS: ("a list of text", _is_list_of_text),
    OVERFLOW: ("an object", lambda value: isinstance(value, dict)),
}


def _check_json(column: pa.ChunkedArray, where: str,
                shape: tuple[str, Callable[[Any], bool]] | None) -> None:
    """Every non-null row of ``column`` must be JSON text (of ``shape``, if given)."""
    if column.type != pa.string():
        raise WireError(f"{where}: JSON columns must be text, not {column.type}")
    try:
        rows = json_rows(column)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested past the stack
        raise WireError(f"{where}: a row is not JSON ({type(exc).__name__})") from exc
    if shape is not None:
        expected, fits = shape
        for position, value in rows.items():
            if not fits(value):
                raise WireError(f"{where}: row {position} is not {expected}")


def check_references(frames: TraceFrames) -> None:
    """Every row reference must point inside its table (read in the Arrow tables: no
    view is made)."""
    tables = frames.tables
    n_samples, n_spans = tables.samples.num_rows, tables.span_core.num_rows
    checks = (
        ("span_core.sample_row", tables.span_core, "sample_row", 0, n_samples),
        ("span_core.parent_index", tables.span_core, "parent_index", -1, n_spans),
        ("event_core.sample_row", tables.event_core, "sample_row", 0, n_samples),
        ("event_core.parent_index", tables.event_core, "parent_index", -1, n_spans),
        ("segments.span_index", tables.segments, "span_index", 0, n_spans),
    )
    for name, table, column, low, high in checks:
        least, most = pc.min_max(table.column(column)).values()
        if least.is_valid and (least.as_py() < low or most.as_py() >= high):
            raise WireError(f"{name} points outside its table")
    for name, rows in (("span_start_attrs", n_spans), ("span_end_attrs", n_spans),
                       ("event_attrs", tables.event_core.num_rows)):
        if len(getattr(frames, name)) != rows:
            raise WireError(f"{name} has {len(getattr(frames, name))} rows, expected {rows}")
