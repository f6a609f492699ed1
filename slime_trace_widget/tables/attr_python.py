"""Attribute tables (``attr_columns``) back as Python: each column's values and each
row's dict, as the pandas views, the details panel and the exports read them.

Only the values a dict holds become Python objects; text is made once and shared by
the dicts and the ``attr.<key>`` columns. The dicts are made in C where
``_native_dicts.c`` compiled, in Python otherwise, the same dicts either way.
"""

from __future__ import annotations

import json
from itertools import repeat

import numpy as np
import pyarrow as pa

from .attr_format import EXTRA_COLUMNS, NONE_KEYS, OVERFLOW, extra_rows, is_json_field

try:  # compiled where the package was built with a C compiler (see hatch_build.py)
    from . import _native_dicts
except ImportError:
    _native_dicts = None

__all__ = ["python_values", "raw_numbers", "table_dicts"]

#: Columns the native dict pass reads as they are: numbers, bools and Python objects
#: (others go as lists of Python values).
_NATIVE_DTYPES = (np.dtype(np.float64), np.dtype(np.int64), np.dtype(np.bool_),
                  np.dtype(object))


def python_values(table: pa.Table) -> dict[str, np.ndarray]:
    """Each attribute column of ``table`` as an array whose ``tolist()`` gives its Python
    values where the column is valid: text (JSON as its text) as objects with None,
    shared by the dicts and the ``attr.<key>`` columns so each string is made once;
    numbers and bools as numpy, so that only the values a dict holds become objects."""
    return {name: _python_column(table.column(name)) for name in table.column_names
            if name not in EXTRA_COLUMNS}


def _python_column(column: pa.ChunkedArray) -> np.ndarray:
    """See :func:`python_values`: converted in C, text by Arrow, numbers by numpy (exact,
    no float in between; what a missing number or bool reads as is not defined)."""
    kind = column.type
    if kind in (pa.string(), pa.large_string()):
        return column.to_numpy(zero_copy_only=False)
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind):
        if column.null_count == 0:
            return column.to_numpy()
        chunks = [raw_numbers(chunk) for chunk in column.chunks]
        return chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
    values = np.empty(len(column), dtype=object)
    values[:] = column.to_pylist()
    return values


def raw_numbers(chunk: pa.Array) -> np.ndarray:
    """The values buffer of a number or bool array as numpy, nulls and all (their
    slots hold whatever the buffer holds): no copy but for bools."""
    data = chunk.buffers()[1]
    if pa.types.is_boolean(chunk.type):
        bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8), bitorder="little")
        return bits[chunk.offset:chunk.offset + len(chunk)].astype(bool)
    dtype = np.dtype(chunk.type.to_pandas_dtype())
    return np.frombuffer(data, dtype=dtype, count=chunk.offset + len(chunk))[chunk.offset:]


def table_dicts(table: pa.Table, values: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """Row dicts (None for a row without attributes) in an object array, made per group
    of rows that have the same keys; ``values`` are :func:`python_values` of ``table``
    when the caller has them already."""
    n = table.num_rows
    out = np.full(n, None, dtype=object)
    names = [name for name in table.column_names if name not in EXTRA_COLUMNS]
    if names:
        values = values if values is not None else python_values(table)
        json_keys = {field.name for field in table.schema
                     if is_json_field(field)}
        columns = [[None if v is None else json.loads(v) for v in values[name].tolist()]
                   if name in json_keys else values[name] for name in names]
        valid = np.empty((n, len(names)), dtype=bool)
        for position, name in enumerate(names):
            valid[:, position] = table.column(name).is_valid().to_numpy(zero_copy_only=False)
        _fill_dicts(out, names, columns, valid)
    for position, keys in extra_rows(table, NONE_KEYS).items():
        out[position] = {**(out[position] or {}), **dict.fromkeys(keys)}
    for position, attributes in extra_rows(table, OVERFLOW).items():
        out[position] = {**(out[position] or {}), **attributes}
    return out


def _fill_dicts(out: np.ndarray, names: list[str], columns: list[np.ndarray | list],
                valid: np.ndarray) -> None:
    """Write into ``out`` each row's dict of the ``columns`` it has (``valid``), keys in
    column order; rows with none stay None. A number's or bool's Python value is made
    only where a dict holds it; text is the column's own object."""
    if not len(out):
        return
    _, first_rows, pattern_of_row = np.unique(_row_patterns(valid), return_index=True,
                                              return_inverse=True)
    pattern_of_row = pattern_of_row.ravel().astype(np.int64)
    present = [tuple(np.flatnonzero(valid[row]).tolist()) for row in first_rows.tolist()]
    if _native_dicts is not None:
        laid = [np.ascontiguousarray(column) if isinstance(column, np.ndarray)
                and column.dtype in _NATIVE_DTYPES else column if isinstance(column, list)
                else column.tolist() for column in columns]
        out[:] = _native_dicts.row_dicts(tuple(names), laid, pattern_of_row, present)
        return
    order = np.argsort(pattern_of_row, kind="stable")
    for group in np.split(order, np.flatnonzero(np.diff(pattern_of_row[order])) + 1):
        columns_here = present[pattern_of_row[group[0]]]
        if not columns_here:
            continue
        keys = tuple(names[c] for c in columns_here)
        rows = zip(*(_taken(columns[c], group) for c in columns_here), strict=True)
        out[group] = np.fromiter(map(dict, map(zip, repeat(keys), rows)), dtype=object,
                                 count=len(group))


def _taken(column: np.ndarray | list, rows: np.ndarray) -> list:
    """The Python values of ``column`` at ``rows``."""
    if isinstance(column, list):
        return [column[row] for row in rows.tolist()]
    return column[rows].tolist()


def _row_patterns(valid: np.ndarray) -> np.ndarray:
    """A number per row of the boolean matrix ``valid``, equal for equal rows: the row's
    bits as 64-bit words, the words of wider rows paired down to one number."""
    n = len(valid)
    packed = np.packbits(valid, axis=1)
    padded = np.zeros((n, -(-packed.shape[1] // 8) * 8), dtype=np.uint8)
    padded[:, :packed.shape[1]] = packed
    words = padded.view(np.uint64)
    patterns = words[:, 0]
    for more in range(1, words.shape[1]):
        _, first = np.unique(patterns, return_inverse=True)
        _, second = np.unique(words[:, more], return_inverse=True)
        patterns = (first.ravel().astype(np.uint64) * np.uint64(int(second.max()) + 1)
                    + second.ravel().astype(np.uint64))
    return patterns
