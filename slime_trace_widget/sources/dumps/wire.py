"""TraceFrames across a process boundary as Arrow IPC files: written by a worker,
read and checked by the caller.

Reading runs no code from the files and trusts nothing in them: every table
must have exactly the columns and Arrow types that frames of this version
have, Arrow's full validation must pass, and every row reference (sample row,
parent span, segment owner) must point inside its table. Anything else is a
``WireError``. Attribute tables are free-form (one column per key) but may
only hold numbers, bools and text.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from functools import cache
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ...frames.attr_columns import AttrTable
from ...frames.build import build_frames, inferred_text
from ...frames.model import TraceFrames

__all__ = ["ATTR_TABLES", "CORE_TABLES", "WireError", "check_references", "checked_attrs",
           "decode_table", "encode_table", "meta_of", "parse_meta", "read_frames", "read_table",
           "table_file", "write_frames", "write_table"]

CORE_TABLES = ("samples", "span_core", "event_core", "segments")
ATTR_TABLES = ("span_start_attrs", "span_end_attrs", "event_attrs")
_META = "meta.json"
#: Text columns the build keeps as objects (the rest pandas infers as str).
_OBJECT_TEXT = frozenset({"label", "trace_id", "reward_detail", "prompt", "response", "metadata"})
_MAX_META_BYTES = 64 << 20


class WireError(ValueError):
    """A worker's output is not what a worker of this version writes."""


# --------------------------------------------------------------------------- writing


def write_frames(frames: TraceFrames, directory: str) -> None:
    """Write ``frames`` into ``directory`` (one ``.arrow`` file per table, and meta.json)."""
    for name in CORE_TABLES:
        write_table(encode_table(getattr(frames, name)), table_file(directory, name))
    for name in ATTR_TABLES:
        attrs, path = getattr(frames, name), table_file(directory, name)
        if attrs.file != path:  # else mapped from that very file: written already
            write_table(attrs.table, path)
    with open(os.path.join(directory, _META), "w", encoding="utf-8") as stream:
        json.dump(meta_of(frames), stream)


def meta_of(frames: TraceFrames) -> dict[str, Any]:
    """What frames hold besides their tables, as JSON-ready data (see :func:`parse_meta`)."""
    return {"paths": frames.paths, "rollout_ids": frames.rollout_ids,
            "warnings": dict(frames.warnings), "t0": _number(frames.t0),
            "t1": _number(frames.t1)}


def table_file(directory: str, name: str) -> str:
    """Where the table ``name`` of the frames in ``directory`` is."""
    return os.path.join(directory, f"{name}.arrow")


def write_table(table: pa.Table, path: str) -> None:
    """One Arrow IPC file of ``table`` at ``path`` (:func:`read_table` reads it)."""
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def _number(value: float) -> float | None:
    return value if math.isfinite(value) else None


def encode_table(frame: pd.DataFrame) -> pa.Table:
    """A core frame (samples, span_core, event_core, segments) as an Arrow table."""
    return pa.table({name: _encode_column(frame[name]) for name in frame.columns})


def _encode_column(series: pd.Series) -> pa.Array:
    dtype = series.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        codes = np.asarray(series.cat.codes, dtype=np.int32)
        categories = pa.array([str(c) for c in dtype.categories], type=pa.string())
        return pa.DictionaryArray.from_arrays(pa.array(codes, mask=codes < 0), categories)
    if isinstance(dtype, pd.Int64Dtype):
        return pa.array(series.to_numpy(dtype=np.int64, na_value=0), type=pa.int64(),
                        mask=series.isna().to_numpy())
    if isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow":
        # Arrow already, no Python strings; as large_string, the type pandas keeps them
        # in, so that neither side copies them (two copies of a 1.9M-span dump's ids)
        return pa.array(series.array).cast(pa.large_string())
    if series.name == "reward_detail":  # plain data (a dict reward) as JSON text
        return pa.array([None if v is None else json.dumps(v, allow_nan=True)
                         for v in series.tolist()], type=pa.string())
    if pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype):
        return pa.array(np.asarray(series, dtype=object), type=pa.string(), from_pandas=True)
    return pa.array(series.to_numpy())


# --------------------------------------------------------------------------- reading


def read_frames(directory: str, mapped: bool = False) -> TraceFrames:
    """The frames a worker wrote into ``directory``; WireError when anything is off.
    ``mapped``: the columns point into memory maps of the files (for files in memory
    already, a tmpfs), else into one read copy of each."""
    tables = {name: read_table(table_file(directory, name), mapped) for name in
              (*CORE_TABLES, *ATTR_TABLES)}
    frames_parts: dict[str, Any] = {}
    for name in CORE_TABLES:
        frames_parts[name] = decode_table(tables[name], name)
    for name in ATTR_TABLES:
        frames_parts[name] = AttrTable(checked_attrs(tables[name], name))
    meta = _read_meta(os.path.join(directory, _META))
    frames = TraceFrames(**frames_parts, **meta)
    check_references(frames)
    return frames


def read_table(path: str, mapped: bool = False) -> pa.Table:
    """The table of the Arrow IPC file at ``path``, fully validated; WireError if not."""
    try:
        if mapped:  # the pages stay with the columns once the file is deleted
            with pa.memory_map(path) as source:
                table = pa.ipc.open_file(source).read_all()
        else:
            # Read into memory, not mapped: the file is deleted next, and a mapping
            # would keep its disk cache pages in this process for as long as the
            # columns live. One read of the whole file, the columns pointing into it:
            # Arrow's own file reads take five times as long.
            with open(path, "rb") as source:
                buffer = pa.py_buffer(source.read())
            table = pa.ipc.open_file(pa.BufferReader(buffer)).read_all()
        table.validate(full=True)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise WireError(f"{os.path.basename(path)}: {exc}") from exc
    return table


@cache
def _reference() -> TraceFrames:
    """Empty frames: the columns and dtypes every worker's tables must have."""
    return build_frames([])


def decode_table(table: pa.Table, name: str) -> pd.DataFrame:
    """Core frame ``name`` from ``table``, which must have exactly the columns and
    types that frames of this version have (WireError otherwise)."""
    reference: pd.DataFrame = getattr(_reference(), name)
    expected = list(reference.columns)
    if table.column_names != expected:
        raise WireError(f"{name}: columns {table.column_names[:8]}... are not {expected[:8]}...")
    columns = {}
    for column in expected:
        try:
            columns[column] = _decode_column(table.column(column), reference[column])
        except (TypeError, ValueError, pa.ArrowException) as exc:
            raise WireError(f"{name}.{column}: {exc}") from exc
    frame = pd.DataFrame(columns, copy=False)
    frame.index.name = reference.index.name
    return frame


def _decode_column(column: pa.ChunkedArray, reference: pd.Series) -> Any:
    dtype = reference.dtype
    # One chunk (a worker's file holds one batch) is taken as it is: combining copies
    # even a single chunk, 0.13-0.19 s per id column of a 1.9M-span dump.
    array = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    if isinstance(dtype, pd.CategoricalDtype):
        if not pa.types.is_dictionary(array.type) or array.type.value_type != pa.string():
            raise TypeError(f"expected dictionary-encoded text, got {array.type}")
        codes = array.indices.to_numpy(zero_copy_only=False)
        codes = np.where(array.is_null().to_numpy(zero_copy_only=False), -1, codes)
        names = array.dictionary.to_pylist()
        # Fixed vocabularies keep their dtype; names found in a dump are objects, as built.
        categories = pd.Index(names, dtype=dtype.categories.dtype if len(dtype.categories)
                              else object)
        if categories.has_duplicates:
            raise ValueError("repeated categories")
        return pd.Categorical.from_codes(codes.astype(np.int32), categories=categories)
    if isinstance(dtype, pd.Int64Dtype):
        _expect(array, pa.int64())
        # Not through floats: ids past 2**53 must come back exact.
        return pd.arrays.IntegerArray(array.fill_null(0).to_numpy(),
                                      array.is_null().to_numpy(zero_copy_only=False))
    if pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype):
        if array.type != pa.large_string():  # written from Arrow-backed text, else string
            _expect(array, pa.string())
        if reference.name not in _OBJECT_TEXT:  # as the build made it, in Arrow if it can
            text = inferred_text(array)
            if text is not array:
                return text
        values = np.empty(len(array), dtype=object)
        values[:] = array.to_pylist()
        if reference.name == "reward_detail":
            values[:] = [None if v is None else json.loads(v) for v in values.tolist()]
        if reference.name not in _OBJECT_TEXT:  # text pandas infers as str, as the build does
            return values
        return pd.Series(values, dtype=object, copy=False)
    _expect(array, pa.from_numpy_dtype(dtype))
    if array.null_count:
        raise ValueError("nulls in a column that has none")
    return array.to_numpy(zero_copy_only=False)


def _expect(array: pa.Array, kind: pa.DataType) -> None:
    if array.type != kind:
        raise TypeError(f"expected {kind}, got {array.type}")


def checked_attrs(table: pa.Table, name: str) -> pa.Table:
    """``table`` if it holds only numbers, bools and text (WireError otherwise)."""
    for field in table.schema:
        kind = field.type
        if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)
                or pa.types.is_boolean(kind) or kind == pa.string()):
            raise WireError(f"{name}.{field.name[:80]}: attributes cannot be {kind}")
    return table


def _read_meta(path: str) -> dict[str, Any]:
    try:
        if os.path.getsize(path) > _MAX_META_BYTES:
            raise WireError("meta.json is too large")
        with open(path, encoding="utf-8") as stream:
            return parse_meta(json.load(stream))
    except (OSError, ValueError) as exc:
        raise WireError(f"meta.json: {exc}") from exc


def parse_meta(meta: Any) -> dict[str, Any]:
    """TraceFrames keyword arguments from :func:`meta_of`'s data, checked (WireError)."""
    try:
        paths = [str(p) for p in meta["paths"]]
        rollout_ids = [None if r is None else int(r) for r in meta["rollout_ids"]]
        warnings = Counter({str(k): int(v) for k, v in dict(meta["warnings"]).items()})
        t0, t1 = (float("nan") if meta[k] is None else float(meta[k]) for k in ("t0", "t1"))
    except (ValueError, KeyError, TypeError) as exc:
        raise WireError(f"frames meta: {exc}") from exc
    return {"paths": paths, "rollout_ids": rollout_ids, "warnings": warnings,
            "t0": t0, "t1": t1}


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
