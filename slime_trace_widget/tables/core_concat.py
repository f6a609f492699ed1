"""Core tables put one after another, in Arrow: several dumps' frames as one
(``combine_frames``), and new rows after a table's (the engine join).

Columns of numbers and text are joined as they are (text in ``large_string``, pandas'
own, when a part has it there), so nothing is copied until a pandas view is made.
A names column gets one dictionary, by one of two rules:

- :data:`SAME_OR_SORTED` (combining dumps): the first part's names when every part
  has the same names (of the same text type), else the names the rows use, sorted,
  as pandas' own text: what concatenating the parts' pandas views gave (categories
  that differ make objects, which become categories again).
- :data:`APPENDED` (rows added to a table): the first part's names, in their order,
  then each name only a later part has, in its order.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from .core_tables import CODES, CORE_SCHEMA, CORE_TABLES, VOCABULARY, CoreTables

__all__ = ["APPENDED", "SAME_OR_SORTED", "combined_tables", "concatenated"]

SAME_OR_SORTED = "same_or_sorted"
APPENDED = "appended"


def combined_tables(parts: list[CoreTables], dumps: list[int]) -> CoreTables:
    """One set of core tables from several, each part's sample rows, spans, events and
    ``dumps`` (how many dumps each part holds) numbered after the previous parts'."""
    pieces: dict[str, list[pa.Table]] = {name: [] for name in CORE_TABLES}
    rows = spans = dump = 0
    for part, held in zip(parts, dumps, strict=True):
        pieces["samples"].append(_shifted(part.samples, {"dump": dump}))
        for name in ("span_core", "event_core"):
            pieces[name].append(_shifted(getattr(part, name), {"sample_row": rows},
                                         {"parent_index": spans}))
        pieces["segments"].append(_shifted(part.segments, {"span_index": spans}))
        rows += part.samples.num_rows
        spans += part.span_core.num_rows
        dump += held
    return CoreTables(*(concatenated(name, pieces[name], SAME_OR_SORTED)
                        for name in CORE_TABLES))


def concatenated(name: str, tables: list[pa.Table], names_rule: str) -> pa.Table:
    """The rows of core tables ``name``, one table after another; names columns by
    ``names_rule``. The tables are checked ones (``CoreTables``) or new rows of
    ``filled_table``: names in one chunk, int32 codes."""
    columns = {}
    for spec in CORE_SCHEMA[name]:
        parts = [table.column(spec.name) for table in tables]
        if spec.kind in (CODES, VOCABULARY):
            columns[spec.name] = _names(parts, names_rule)
        else:
            columns[spec.name] = _joined(parts)
    return pa.table(columns)


def _shifted(table: pa.Table, by: dict[str, int],
             references: dict[str, int] | None = None) -> pa.Table:
    """``table`` with ``by``'s columns moved by their offsets, and ``references``' too
    where they point somewhere (-1, none, stays)."""
    for moved, keep_missing in ((by, False), (references or {}, True)):
        for column, offset in moved.items():
            if not offset:
                continue
            position = table.schema.get_field_index(column)
            values = table.column(position)
            shifted = pc.add(values, pa.scalar(offset, values.type))
            if keep_missing:
                shifted = pc.if_else(pc.greater_equal(values, 0), shifted, values)
            table = table.set_column(position, column, shifted)
    return table


def _joined(parts: list[pa.ChunkedArray]) -> pa.ChunkedArray:
    kind = parts[0].type
    if any(part.type != kind for part in parts):  # text as string and as large_string
        kind = pa.large_string()
        parts = [part.cast(kind) for part in parts]
    return pa.chunked_array([chunk for part in parts for chunk in part.chunks], type=kind)


def _names(parts: list[pa.ChunkedArray], rule: str) -> pa.ChunkedArray:
    # checked tables hold names in one chunk: taken as it is (combining would copy it)
    arrays = [part.chunk(0) if part.num_chunks == 1 else part.combine_chunks()
              for part in parts]
    first = arrays[0].dictionary
    if rule == APPENDED:
        values = first.to_pylist()
        known = set(values)
        for array in arrays[1:]:
            for value in array.dictionary.to_pylist():
                if value not in known:
                    known.add(value)
                    values.append(value)
        names = pa.array(values, first.type)
    elif all(array.dictionary.type == first.type
             and set(array.dictionary.to_pylist()) == set(first.to_pylist())
             for array in arrays[1:]):
        names = first
    else:
        used: set[str] = set()
        for array in arrays:
            used.update(pc.take(array.dictionary,
                                pc.unique(pc.drop_null(array.indices))).to_pylist())
        names = pa.array(sorted(used), pa.large_string() if used else pa.string())
    codes = pa.concat_arrays([_codes_into(array, names) for array in arrays])
    return pa.chunked_array([pa.DictionaryArray.from_arrays(codes, names)])


def _codes_into(array: pa.DictionaryArray, names: pa.Array) -> pa.Array:
    """The codes of ``array``'s values into ``names`` (which holds them all)."""
    if array.dictionary.equals(names):
        return array.indices
    mapping = pc.index_in(array.dictionary.cast(names.type), value_set=names)
    return pc.take(mapping, array.indices)
