"""Core frames (pandas) back to Arrow: how a view a user changed becomes frames again
(``TraceFrames.with_views``). Frames hold Arrow tables, so nothing else encodes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from ..tables.core_tables import dictionary_column, json_text_column
from ..tables.names import Names

__all__ = ["encode_table"]


def encode_table(frame: pd.DataFrame) -> pa.Table:
    """A core frame (samples, span_core, event_core, segments) as an Arrow table, the
    columns of the frame as they are (a run dataset's frames may hold engine spans)."""
    return pa.table({name: _encode_column(frame[name]) for name in frame.columns})


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
    if series.name == "reward_detail":  # plain data (a dict reward) as JSON text
        return json_text_column(series.tolist())
    if pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype):
        return pa.array(np.asarray(series, dtype=object), type=pa.string(), from_pandas=True)
    return pa.array(series.to_numpy())
