"""Core frames (pandas) back to Arrow: how a view a user changed becomes frames again
(``TraceFrames.with_views``). Frames hold Arrow tables, so nothing else encodes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from ..tables.core_tables import CORE_SCHEMA, JSON_TEXT, dictionary_column, json_text_column
from ..tables.names import Names

__all__ = ["encode_table"]


def encode_table(frame: pd.DataFrame, name: str) -> pa.Table:
    """Core frame ``name`` (samples, span_core, event_core, segments) as an Arrow table,
    the columns of the frame as they are (a run dataset's frames may hold engine spans),
    those its schema holds as JSON text (plain data, a dict reward) as JSON again."""
    json_columns = {column.name for column in CORE_SCHEMA[name] if column.kind == JSON_TEXT}
    return pa.table({column: json_text_column(frame[column].tolist())
                     if column in json_columns else _encode_column(frame[column])
                     for column in frame.columns})


def _encode_column(series: pd.Series) -> pa.Array:
    dtype = series.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return dictionary_column(Names(series.cat.codes.to_numpy(), list(dtype.categories)))
    if isinstance(dtype, pd.Int64Dtype):
        return pa.array(series.to_numpy(dtype=np.int64, na_value=0), type=pa.int64(),
                        mask=series.isna().to_numpy())
    if isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow":
        # Arrow already, no Python strings; as large_string, the type pandas keeps them
        # in, so that neither side copies them (two copies of a 1.9M-span dump's ids)
        return pa.array(series.array).cast(pa.large_string())
    if pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype):
        return pa.array(np.asarray(series, dtype=object), type=pa.string(), from_pandas=True)
    return pa.array(series.to_numpy())
