"""Attribute tables (``attr_columns``) in pandas: the ``attr.<key>`` columns and the
attribute dicts that ``TraceFrames.spans`` and ``.events`` join to their core.

Kept apart from ``attr_columns`` so that building the tables, in a worker,
never imports pandas.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ..tables.attr_columns import ATTR_PREFIX, AttrTable, merged_attr_arrays

__all__ = ["attr_frame", "event_attr_frames", "merged_attr_frame", "span_attr_frames"]


def merged_attr_frame(start: AttrTable, end: AttrTable, index: pd.Index) -> pd.DataFrame:
    """``attr.<key>`` columns: the end value where a key has one, else the start value."""
    return pd.DataFrame({name: _pandas_column(column, index)
                         for name, column in merged_attr_arrays(start, end).items()},
                        index=index)


def attr_frame(attrs: AttrTable, index: pd.Index) -> pd.DataFrame:
    """``attr.<key>`` columns of one table."""
    return pd.DataFrame({ATTR_PREFIX + key: _pandas_column(attrs.column(key), index)
                         for key in attrs.keys}, index=index)


def span_attr_frames(start: AttrTable, end: AttrTable, index: pd.Index) -> list[pd.DataFrame]:
    """What ``TraceFrames.spans`` joins to the span core: the ``start_attrs`` and
    ``end_attrs`` dicts, then the merged ``attr.<key>`` columns."""
    dicts = pd.DataFrame({"start_attrs": _dict_column(start, index),
                          "end_attrs": _dict_column(end, index)})
    return [dicts, merged_attr_frame(start, end, index)]


def event_attr_frames(attrs: AttrTable, index: pd.Index) -> list[pd.DataFrame]:
    """What ``TraceFrames.events`` joins to the event core: the ``attrs`` dicts, then
    the ``attr.<key>`` columns."""
    return [pd.DataFrame({"attrs": _dict_column(attrs, index)}), attr_frame(attrs, index)]


def _dict_column(attrs: AttrTable, index: pd.Index) -> pd.Series:
    """Every row's attribute dict (or None) as a column pandas keeps as objects
    (``fromiter`` takes each dict as it is, where ``np.asarray`` would not)."""
    dicts = attrs.dicts()
    return pd.Series(np.fromiter(dicts, dtype=object, count=len(dicts)), index=index,
                     dtype=object, copy=False)


def _pandas_column(column: pa.ChunkedArray | pa.Array, index: pd.Index) -> Any:
    """A pandas-friendly column: numbers as float64 with NaN gaps (int64 when none),
    bools as bool (float with gaps, as pandas does), text as objects with None."""
    kind = column.type
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        if column.null_count == 0:
            return column.to_numpy()
        return column.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False)
    if pa.types.is_floating(kind):
        return column.to_numpy(zero_copy_only=False)
    values = np.empty(len(column), dtype=object)
    values[:] = column.to_pylist()
    return pd.Series(values, index=index, dtype=object, copy=False)
