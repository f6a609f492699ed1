"""Attribute tables (``attr_columns``) in pandas: the ``attr.<key>`` columns and the
attribute dicts that ``TraceFrames.spans`` and ``.events`` join to their core.

Each column is made once, as the array pandas keeps (numbers from Arrow's buffers,
text and dicts as object arrays whose values are shared: a key's text is one Python
string in its dict and in its ``attr.<key>`` column), and the columns are handed to
pandas in one construction that neither copies nor consolidates them. Kept apart
from ``attr_columns`` so that building the tables, in a worker, never imports pandas.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..tables.attr_columns import ATTR_PREFIX, AttrTable, common_type
from ..tables.attr_python import python_values, raw_numbers

__all__ = ["attr_frame", "event_attr_frame", "merged_attr_frame", "span_attr_frame"]


def span_attr_frame(start: AttrTable, end: AttrTable, index: pd.Index) -> pd.DataFrame:
    """What ``TraceFrames.spans`` joins to the span core: the ``start_attrs`` and
    ``end_attrs`` dicts, then the merged ``attr.<key>`` columns."""
    start_values, end_values = python_values(start.table), python_values(end.table)
    columns = {"start_attrs": _object_series(start.dict_array(start_values), index),
               "end_attrs": _object_series(end.dict_array(end_values), index),
               **_merged_columns(start, end, start_values, end_values, index)}
    return pd.DataFrame(columns, index=index, copy=False)


def event_attr_frame(attrs: AttrTable, index: pd.Index) -> pd.DataFrame:
    """What ``TraceFrames.events`` joins to the event core: the ``attrs`` dicts, then
    the ``attr.<key>`` columns."""
    values = python_values(attrs.table)
    columns = {"attrs": _object_series(attrs.dict_array(values), index),
               **{ATTR_PREFIX + key: _pandas_column(attrs.column(key), values[key], index)
                  for key in attrs.keys}}
    return pd.DataFrame(columns, index=index, copy=False)


def merged_attr_frame(start: AttrTable, end: AttrTable, index: pd.Index) -> pd.DataFrame:
    """``attr.<key>`` columns: the end value where a key has one, else the start value."""
    return pd.DataFrame(_merged_columns(start, end, python_values(start.table),
                                        python_values(end.table), index),
                        index=index, copy=False)


def attr_frame(attrs: AttrTable, index: pd.Index) -> pd.DataFrame:
    """``attr.<key>`` columns of one table."""
    values = python_values(attrs.table)
    return pd.DataFrame({ATTR_PREFIX + key: _pandas_column(attrs.column(key), values[key], index)
                         for key in attrs.keys}, index=index, copy=False)


def _merged_columns(start: AttrTable, end: AttrTable, start_values: dict[str, np.ndarray],
                    end_values: dict[str, np.ndarray], index: pd.Index) -> dict[str, Any]:
    """The ``attr.<key>`` columns of spans, end keys first (``attr_columns.merged_attr_arrays``
    is the same rule in Arrow)."""
    start_keys, end_keys = set(start.keys), set(end.keys)
    columns: dict[str, Any] = {}
    for key in dict.fromkeys([*end.keys, *start.keys]):
        if key in end_keys and key in start_keys:
            late, early = end.column(key), start.column(key)
            if late.type == early.type == pa.string():  # the shared strings, end first
                objects = np.where(late.is_valid().to_numpy(zero_copy_only=False),
                                   end_values[key], start_values[key])
                columns[ATTR_PREFIX + key] = _object_series(objects, index)
                continue
            kind = common_type(late.type, early.type)
            combined = pc.coalesce(late.cast(kind, safe=False), early.cast(kind, safe=False))
            columns[ATTR_PREFIX + key] = _pandas_column(combined, None, index)
        else:
            table, values = (end, end_values) if key in end_keys else (start, start_values)
            columns[ATTR_PREFIX + key] = _pandas_column(table.column(key), values[key], index)
    return columns


def _pandas_column(column: pa.ChunkedArray, objects: np.ndarray | None, index: pd.Index) -> Any:
    """A pandas-friendly column: numbers as float64 with NaN gaps (int64 when none),
    bools as bool (float with gaps, as pandas does), text as objects with None
    (``objects``, the column's :func:`python_values`, when the caller has them)."""
    kind = column.type
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        if column.null_count == 0:
            return column.to_numpy()
        return _floats_with_gaps(column)
    if pa.types.is_floating(kind):
        return column.to_numpy(zero_copy_only=False)
    if objects is None:
        objects = np.empty(len(column), dtype=object)
        objects[:] = column.to_pylist()
    return _object_series(objects, index)


def _floats_with_gaps(column: pa.ChunkedArray) -> np.ndarray:
    """Ints or bools with nulls as float64 with NaN at the nulls, written into the one
    array pandas keeps (a cast in Arrow, then a copy to numpy, would make two)."""
    out = np.empty(len(column), dtype=np.float64)
    position = 0
    for chunk in column.chunks:
        part = out[position:position + len(chunk)]
        part[:] = raw_numbers(chunk)
        if chunk.null_count:
            part[~chunk.is_valid().to_numpy(zero_copy_only=False)] = np.nan
        position += len(chunk)
    return out


def _object_series(values: np.ndarray, index: pd.Index) -> pd.Series:
    """``values`` as a column pandas keeps as objects, without a copy."""
    return pd.Series(values, index=index, dtype=object, copy=False)
