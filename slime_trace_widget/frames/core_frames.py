"""The core tables in pandas: Arrow tables (``core_tables``) to DataFrames and back.

Decoding trusts nothing in a table: :func:`decode_table` checks it first
(:func:`core_tables.checked_table`: exactly the columns and Arrow types of
:data:`core_tables.CORE_SCHEMA`, or a ``ValueError`` naming the table and column);
frames check their tables when they are made and decode each one, once, with
:func:`decode_checked` when a view of it is first asked for. Flattening in this
process, a worker's files and a run dataset all come through here, so frames are
the same whichever made them.
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
    NULLABLE_INT,
    OBJECT_TEXT,
    TEXT,
    VOCABULARY,
    Column,
    checked_table,
)

__all__ = ["INFERRED_TEXT", "decode_checked", "decode_table", "inferred_text"]

#: What pandas makes of a column of Python strings and None (Arrow-backed text in pandas 3).
INFERRED_TEXT = pd.Series(["text"]).dtype
_ARROW_TEXT = isinstance(INFERRED_TEXT, pd.StringDtype) and INFERRED_TEXT.storage == "pyarrow"


# --------------------------------------------------------------------------- decoding


def decode_table(table: pa.Table, name: str) -> pd.DataFrame:
    """Core frame ``name`` from ``table``, which must have exactly the columns and
    types of :data:`CORE_SCHEMA` (ValueError naming the table and column otherwise)."""
    return decode_checked(checked_table(name, table), name)


def decode_checked(table: pa.Table, name: str) -> pd.DataFrame:
    """Core frame ``name`` from ``table`` as ``checked_table`` gives it: each column made
    once, numbers in place where Arrow holds them so."""
    columns = {column.name: _decode_column(table.column(column.name), column)
               for column in CORE_SCHEMA[name]}
    frame = pd.DataFrame(columns, copy=False)
    frame.index.name = INDEX_NAMES[name]
    return frame


def _decode_column(column: pa.ChunkedArray, spec: Column) -> Any:
    # One chunk (a worker's file holds one batch) is taken as it is: combining would
    # copy even a single chunk.
    array = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    kind = spec.kind
    if kind in (CODES, VOCABULARY):
        return _categorical(array, spec)
    if kind == NULLABLE_INT:
        # Not through floats: ids past 2**53 must come back exact.
        return pd.arrays.IntegerArray(array.fill_null(0).to_numpy(),
                                      array.is_null().to_numpy(zero_copy_only=False))
    if kind in (TEXT, OBJECT_TEXT, JSON_TEXT):
        return _text(array, kind)
    return array.to_numpy(zero_copy_only=False)


def _categorical(array: pa.DictionaryArray, spec: Column) -> pd.Categorical:
    codes = array.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    if spec.kind == VOCABULARY:  # checked: the whole vocabulary, in order
        return pd.Categorical.from_codes(codes, dtype=_vocabulary_dtype(spec.vocabulary))
    # Names found in a dump are objects, as built; names in large_string (frames of
    # dumps whose names differ, combined) are pandas' own text.
    text = INFERRED_TEXT if array.type.value_type == pa.large_string() else object
    categories = pd.Index(array.dictionary.to_pylist(), dtype=text)
    return pd.Categorical.from_codes(codes, categories=categories, validate=False)


@cache
def _vocabulary_dtype(vocabulary: tuple[str, ...]) -> pd.CategoricalDtype:
    """The categorical dtype of a fixed vocabulary, as pandas infers its categories."""
    return pd.CategoricalDtype(list(vocabulary))


def _text(array: pa.Array, kind: str) -> Any:
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
    would infer from them, built by Arrow in C, where pandas' inference would visit
    each string in Python. The values as they are where pandas keeps
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
