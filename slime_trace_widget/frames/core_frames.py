"""The core tables in pandas: Arrow tables (``core_tables``) to DataFrames and back.

Decoding trusts nothing in a table: it must have exactly the columns and Arrow
types of :data:`core_tables.CORE_SCHEMA`, or a ``ValueError`` (or ``TypeError``)
names the table and column. Flattening in this process and a worker's files
both come through here, so frames are the same whichever made them.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ..tables.core_tables import (
    CODES,
    CORE_SCHEMA,
    INDEX_NAMES,
    JSON_TEXT,
    LATER_COLUMNS,
    NULLABLE_INT,
    OBJECT_TEXT,
    TEXT,
    VOCABULARY,
    Column,
    FrameTables,
    dictionary_column,
    filled_table,
    json_text_column,
)
from ..tables.names import Names
from .model import TraceFrames

__all__ = ["INFERRED_TEXT", "append_rows", "decode_table", "encode_table", "frames_from_tables",
           "inferred_text", "new_rows"]

#: What pandas makes of a column of Python strings and None (Arrow-backed text in pandas 3).
INFERRED_TEXT = pd.Series(["text"]).dtype
_ARROW_TEXT = isinstance(INFERRED_TEXT, pd.StringDtype) and INFERRED_TEXT.storage == "pyarrow"


def frames_from_tables(tables: FrameTables) -> TraceFrames:
    """The frames of flattened ``tables``: core tables decoded, the rest as it is."""
    return TraceFrames(
        samples=decode_table(tables.samples, "samples"),
        span_core=decode_table(tables.span_core, "span_core"),
        event_core=decode_table(tables.event_core, "event_core"),
        segments=decode_table(tables.segments, "segments"),
        span_start_attrs=tables.span_start_attrs,
        span_end_attrs=tables.span_end_attrs,
        event_attrs=tables.event_attrs,
        paths=tables.paths,
        rollout_ids=tables.rollout_ids,
        warnings=tables.warnings,
        t0=tables.t0,
        t1=tables.t1,
    )


def new_rows(name: str, start: int, rows: int, values: dict[str, Any]) -> pd.DataFrame:
    """Rows ``start`` to ``start + rows`` of core frame ``name``: the columns in ``values``,
    blanks elsewhere (``core_tables.filled_table``), decoded as every core frame is."""
    frame = decode_table(filled_table(name, rows, values), name)
    return frame.set_axis(pd.RangeIndex(start, start + rows, name=frame.index.name))


def append_rows(frame: pd.DataFrame, more: pd.DataFrame) -> pd.DataFrame:
    """``frame`` then ``more`` (the same columns): a categorical column keeps ``frame``'s
    categories in their order, then those only ``more`` has, in theirs."""
    columns = {}
    for name in frame.columns:
        first, second = frame[name], more[name]
        if isinstance(first.dtype, pd.CategoricalDtype):
            union = pd.api.types.union_categoricals([first.array, second.array])
            # union_categoricals infers the categories' dtype anew; keep frame's
            categories = pd.Index(union.categories, dtype=first.dtype.categories.dtype)
            columns[name] = pd.Series(pd.Categorical.from_codes(union.codes, categories),
                                      copy=False)
        else:
            columns[name] = pd.concat([first, second], ignore_index=True)
    return pd.DataFrame(columns, copy=False).set_axis(frame.index.append(more.index))


# --------------------------------------------------------------------------- encoding


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


# --------------------------------------------------------------------------- decoding


def decode_table(table: pa.Table, name: str) -> pd.DataFrame:
    """Core frame ``name`` from ``table``, which must have exactly the columns and
    types of :data:`CORE_SCHEMA` (ValueError or TypeError otherwise)."""
    schema = CORE_SCHEMA[name]
    expected = [column.name for column in schema]
    table = _with_later_columns(table, name, expected)
    if table.column_names != expected:
        raise ValueError(f"{name}: columns {table.column_names[:8]}... are not "
                         f"{expected[:8]}...")
    columns = {}
    for column in schema:
        try:
            columns[column.name] = _decode_column(table.column(column.name), column)
        except (TypeError, ValueError, pa.ArrowException) as exc:
            raise ValueError(f"{name}.{column.name}: {exc}") from exc
    frame = pd.DataFrame(columns, copy=False)
    frame.index.name = INDEX_NAMES[name]
    return frame


def _with_later_columns(table: pa.Table, name: str, expected: list[str]) -> pa.Table:
    """``table`` with the :data:`LATER_COLUMNS` it was written without, at their default
    (only when it has every column before them, in order)."""
    later = LATER_COLUMNS.get(name, {})
    missing = [column for column in later if column not in table.column_names]
    if not missing or table.column_names != expected[:len(expected) - len(missing)]:
        return table
    for column in missing:
        table = table.append_column(column, pa.array(np.full(table.num_rows, later[column])))
    return table


def _decode_column(column: pa.ChunkedArray, spec: Column) -> Any:
    # One chunk (a worker's file holds one batch) is taken as it is: combining copies
    # even a single chunk, 0.13-0.19 s per id column of a 1.9M-span dump.
    array = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    kind = spec.kind
    if kind in (CODES, VOCABULARY):
        return _categorical(array, spec)
    if kind == NULLABLE_INT:
        _expect(array, pa.int64())
        # Not through floats: ids past 2**53 must come back exact.
        return pd.arrays.IntegerArray(array.fill_null(0).to_numpy(),
                                      array.is_null().to_numpy(zero_copy_only=False))
    if kind in (TEXT, OBJECT_TEXT, JSON_TEXT):
        return _text(array, kind)
    _expect(array, pa.from_numpy_dtype(np.dtype(kind)))
    if array.null_count:
        raise ValueError("nulls in a column that has none")
    return array.to_numpy(zero_copy_only=False)


def _categorical(array: pa.Array, spec: Column) -> pd.Categorical:
    if not pa.types.is_dictionary(array.type) or array.type.value_type != pa.string():
        raise TypeError(f"expected dictionary-encoded text, got {array.type}")
    codes = array.indices.to_numpy(zero_copy_only=False)
    codes = np.where(array.is_null().to_numpy(zero_copy_only=False), -1, codes).astype(np.int32)
    names = array.dictionary.to_pylist()
    if spec.kind == VOCABULARY:
        # The whole vocabulary, in its order, whatever the file held (a table of no
        # rows may come back without its dictionary).
        vocabulary = list(spec.vocabulary)
        if names != vocabulary:
            if not set(names) <= set(vocabulary) or len(set(names)) < len(names):
                raise ValueError(f"categories {names[:8]} are not of {vocabulary}")
            remap = np.array([vocabulary.index(name) for name in names] + [-1], np.int32)
            codes = remap[codes]
        return pd.Categorical.from_codes(codes, dtype=_vocabulary_dtype(spec.vocabulary))
    # Names found in a dump are objects, as built.
    categories = pd.Index(names, dtype=object)
    if categories.has_duplicates:
        raise ValueError("repeated categories")
    return pd.Categorical.from_codes(codes, categories=categories)


@cache
def _vocabulary_dtype(vocabulary: tuple[str, ...]) -> pd.CategoricalDtype:
    """The categorical dtype of a fixed vocabulary, as pandas infers its categories."""
    return pd.CategoricalDtype(list(vocabulary))


def _text(array: pa.Array, kind: str) -> Any:
    if array.type != pa.large_string():  # ids are large_string, else string
        _expect(array, pa.string())
    if kind == TEXT:  # as pandas infers it, in Arrow if it can
        text = inferred_text(array)
        if text is not array:
            return text
    values = np.empty(len(array), dtype=object)
    values[:] = array.to_pylist()
    if kind == JSON_TEXT:
        values[:] = [None if v is None else json.loads(v) for v in values.tolist()]
    if kind == TEXT:  # no Arrow text here: objects, as pandas infers them
        return values
    return pd.Series(values, dtype=object, copy=False)


def inferred_text(values: np.ndarray | pa.Array) -> Any:
    """``values`` (an object array of str and None, or Arrow text) as the column pandas
    would infer from them, built by Arrow in C: pandas' inference visits each string
    (0.8 s for the ids of 1.9M spans). The values as they are where pandas keeps
    objects: no Arrow text, no string at all, or something other than text."""
    if not _ARROW_TEXT:
        return values
    try:
        text = values if isinstance(values, pa.Array) else pa.array(values, pa.large_string())
    except (pa.ArrowException, TypeError, ValueError):
        return values
    if text.null_count == len(text):
        return values
    return pd.array(text.cast(pa.large_string()), dtype=INFERRED_TEXT)


def _expect(array: pa.Array, kind: pa.DataType) -> None:
    if array.type != kind:
        raise TypeError(f"expected {kind}, got {array.type}")
