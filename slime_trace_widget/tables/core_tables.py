"""The four core tables (samples, span_core, event_core, segments) as Arrow data.

Flattening builds them without pandas, and a worker writes them as they are:
the worker only encodes to Arrow, so it never needs pandas, and only the caller
pays for the pandas form, which :mod:`.core_frames` gives. :data:`CORE_SCHEMA`
states each column's kind, the one definition the builder, the writer and the
decoder follow.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..values import json_safe
from ..vocabularies import CLIP_REASONS, EVENT_KINDS
from .attr_columns import AttrTable
from .names import Names

__all__ = ["CODES", "CORE_SCHEMA", "CORE_TABLES", "EVENT_KINDS", "INDEX_NAMES", "JSON_TEXT",
           "LATER_COLUMNS", "NULLABLE_INT", "OBJECT_TEXT", "ORIGINS", "PD_FORMS", "STATES",
           "TEXT", "VOCABULARY", "Column", "CoreTables", "FrameTables", "checked_table",
           "column_of", "core_table", "dictionary_column", "filled_table",
           "json_text_column", "nullable_int_column", "object_text_column", "text_column",
           "vocabulary_column"]

#: Where a span or event was recorded: slime's dump, or the engine's own trace.
ORIGINS = ["dump", "engine"]
STATES = ["closed", "open"]
#: The rollout id written for samples that have none (Parquet partitions, ledger rows);
#: read back as missing.
UNKNOWN_ROLLOUT = -1
PD_FORMS = ["children", "attrs"]

# Column kinds besides numpy dtypes ("int64", "int32", "float64", "bool").
#: Text names found in the dump, dictionary-encoded (pandas: categories of objects).
CODES = "codes"
#: A fixed vocabulary, dictionary-encoded (pandas: categories of its own dtype).
VOCABULARY = "vocabulary"
#: Integers that may be missing (pandas: Int64).
NULLABLE_INT = "Int64"
#: Ids: pandas' own text column (Arrow-backed where pandas has it).
TEXT = "text"
#: Free text that stays Python objects in pandas (labels, prompts).
OBJECT_TEXT = "object_text"
#: Plain data (a dict reward) as JSON text on the wire, objects in pandas.
JSON_TEXT = "json_text"
#: The kinds held as Arrow text: ``string``, or ``large_string`` (pandas' own text, for ids).
TEXT_KINDS = (TEXT, OBJECT_TEXT, JSON_TEXT)


class Column(NamedTuple):
    """One core column: its name, its kind, and the vocabulary of a ``VOCABULARY`` one."""

    name: str
    kind: str
    vocabulary: tuple[str, ...] = ()


def _vocabulary(name: str, words: list[str]) -> Column:
    return Column(name, VOCABULARY, tuple(words))


_COUNTS = tuple(Column(name, "int64") for name in
                ("n_spans", "n_open_spans", "n_events", "n_unmatched_ends", "n_lanes"))

CORE_SCHEMA: dict[str, tuple[Column, ...]] = {
    "samples": (
        Column("rollout_id", NULLABLE_INT), Column("dump", "int32"),
        Column("sample_index", NULLABLE_INT), Column("group_index", NULLABLE_INT),
        Column("source", CODES), Column("status", CODES), Column("label", OBJECT_TEXT),
        Column("reward", "float64"), Column("reward_detail", JSON_TEXT),
        Column("response_length", NULLABLE_INT), Column("trace_id", OBJECT_TEXT),
        Column("prompt", OBJECT_TEXT), Column("response", OBJECT_TEXT),
        Column("metadata", OBJECT_TEXT), Column("traced", "bool"), Column("attempts", "int32"),
        Column("start", "float64"), Column("end", "float64"), Column("duration", "float64"),
        *_COUNTS, Column("remove_sample", "bool"),
    ),
    "span_core": (
        Column("sample_row", "int64"), Column("span_id", TEXT), Column("parent_span_id", TEXT),
        Column("parent_index", "int64"), Column("parent_name", CODES), Column("name", CODES),
        Column("start", "float64"), Column("end", "float64"), Column("display_end", "float64"),
        Column("duration", "float64"), _vocabulary("state", STATES),
        _vocabulary("clip_reason", CLIP_REASONS), Column("depth", "int32"),
        Column("lane", "int32"), Column("attempt", "int32"), Column("end_attempt", "int32"),
        Column("virtual", "bool"), Column("pd_detail", "bool"), _vocabulary("pd_form", PD_FORMS),
        Column("error", "bool"), _vocabulary("origin", ORIGINS),
    ),
    "event_core": (
        Column("sample_row", "int64"), Column("name", CODES), Column("ts", "float64"),
        Column("attempt", "int32"), Column("parent_span_id", TEXT),
        Column("parent_index", "int64"), Column("parent_name", CODES),
        _vocabulary("kind", EVENT_KINDS), Column("span_id", TEXT), Column("depth", "int32"),
        Column("lane", "int32"), _vocabulary("origin", ORIGINS),
    ),
    "segments": (
        Column("span_index", "int64"), Column("name", CODES), Column("start", "float64"),
        Column("end", "float64"), Column("duration", "float64"),
    ),
}
CORE_TABLES = tuple(CORE_SCHEMA)
#: Columns added after tables were first written (run datasets keep older files), last in
#: their table, with the value a table written before them reads as.
LATER_COLUMNS: dict[str, dict[str, Any]] = {"samples": {"remove_sample": False}}
#: The name of each core frame's index (a RangeIndex: row position, or stable id).
INDEX_NAMES: dict[str, str | None] = {"samples": "row", "span_core": None, "event_core": None,
                                      "segments": None}


class FrameTables(NamedTuple):
    """What flattening makes of dumps: the core tables, the attribute tables, and
    the dumps' paths, rollout ids, warnings and time range."""

    samples: pa.Table
    span_core: pa.Table
    event_core: pa.Table
    segments: pa.Table
    span_start_attrs: AttrTable
    span_end_attrs: AttrTable
    event_attrs: AttrTable
    paths: list[str]
    rollout_ids: list[int | None]
    warnings: Counter[str]
    t0: float
    t1: float


@dataclass(frozen=True, eq=False)
class CoreTables:
    """The four core tables of frames, each checked as it is given (:func:`checked_table`),
    so that frames never hold a table their pandas views cannot be made of."""

    samples: pa.Table
    span_core: pa.Table
    event_core: pa.Table
    segments: pa.Table

    def __post_init__(self) -> None:
        for name in CORE_TABLES:
            object.__setattr__(self, name, checked_table(name, getattr(self, name)))

    @classmethod
    def of(cls, tables: FrameTables) -> CoreTables:
        """The core tables of flattened ``tables``."""
        return cls(tables.samples, tables.span_core, tables.event_core, tables.segments)


def checked_table(name: str, table: pa.Table) -> pa.Table:
    """``table`` as core table ``name``: exactly the columns of its schema, in order, each
    of its kind's Arrow type, or a ValueError naming the table and column. It trusts
    nothing in ``table`` (a worker's file, a run dataset's): names are dictionaries of
    distinct text that every code points into, columns of numbers hold no nulls, JSON
    text parses. What comes back is what frames hold: the :data:`LATER_COLUMNS` a table
    was written without at their default, a vocabulary column holding its whole
    vocabulary in order, a names column in one piece with int32 codes."""
    schema = CORE_SCHEMA[name]
    expected = [column.name for column in schema]
    table = _with_later_columns(table, name, expected)
    if table.column_names != expected:
        raise ValueError(f"{name}: columns {table.column_names[:8]}... are not "
                         f"{expected[:8]}...")
    for position, column in enumerate(schema):
        given = table.column(position)
        try:
            checked = _checked_column(given, column)
        except (TypeError, ValueError, RecursionError, pa.ArrowException) as exc:
            raise ValueError(f"{name}.{column.name}: {exc}") from exc
        if checked is not given:
            table = table.set_column(position, column.name, checked)
    return table


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


def _checked_column(column: pa.ChunkedArray, spec: Column) -> pa.ChunkedArray:
    kind = spec.kind
    if kind in (CODES, VOCABULARY):
        return _checked_names(column, spec)
    if kind in TEXT_KINDS:
        if column.type not in (pa.string(), pa.large_string()):
            raise TypeError(f"expected string, got {column.type}")
        if kind == JSON_TEXT:
            for value in pc.drop_null(column).to_pylist():
                json.loads(value)
        return column
    expected = pa.int64() if kind == NULLABLE_INT else pa.from_numpy_dtype(np.dtype(kind))
    if column.type != expected:
        raise TypeError(f"expected {expected}, got {column.type}")
    if kind != NULLABLE_INT and column.null_count:
        raise ValueError("nulls in a column that has none")
    return column


def _checked_names(column: pa.ChunkedArray, spec: Column) -> pa.ChunkedArray:
    """A names column as one dictionary array of int32 codes; a vocabulary's dictionary is
    the whole vocabulary, in order, whatever the table held (a table of no rows may come
    without its dictionary)."""
    single = column.chunk(0) if column.num_chunks == 1 else None
    array = column.combine_chunks() if single is None else single
    kind = array.type
    if not pa.types.is_dictionary(kind) or kind.value_type not in (pa.string(),
                                                                   pa.large_string()):
        raise TypeError(f"expected dictionary-encoded text, got {kind}")
    values = array.dictionary.to_pylist()
    if None in values:
        raise ValueError("a category is missing")
    codes = array.indices
    low, high = pc.min_max(codes).values()
    if low.is_valid and (low.as_py() < 0 or high.as_py() >= len(values)):
        raise ValueError("codes point outside the categories")
    if spec.kind == VOCABULARY:
        vocabulary = list(spec.vocabulary)
        if values != vocabulary or kind != _NAMES_TYPE:
            if not set(values) <= set(vocabulary) or len(set(values)) < len(values):
                raise ValueError(f"categories {values[:8]} are not of {vocabulary}")
            remap = pa.array([vocabulary.index(value) for value in values], pa.int32())
            array = pa.DictionaryArray.from_arrays(pc.take(remap, codes),
                                                   pa.array(vocabulary, pa.string()))
    elif len(set(values)) < len(values):
        raise ValueError("repeated categories")
    elif kind.index_type != pa.int32():
        array = pa.DictionaryArray.from_arrays(codes.cast(pa.int32()), array.dictionary)
    return column if array is single else pa.chunked_array([array])


_NAMES_TYPE = pa.dictionary(pa.int32(), pa.string())


def core_table(name: str, values: dict[str, Any]) -> pa.Table:
    """Core table ``name`` of ``values``: exactly its schema's columns, in order, each
    made the kind its schema says (:func:`column_of`), so that a builder gives values
    and the schema alone decides their Arrow types."""
    schema = CORE_SCHEMA[name]
    expected = [column.name for column in schema]
    if list(values) != expected:
        raise ValueError(f"{name}: built columns {list(values)} are not {expected}")
    return pa.table({column.name: column_of(column, values[column.name]) for column in schema})


def filled_table(name: str, rows: int, values: dict[str, Any]) -> pa.Table:
    """Core table ``name`` of ``rows`` rows: the columns in ``values`` (as
    :func:`column_of` takes them), every other column at its kind's blank (0, NaN,
    False, null)."""
    unknown = set(values) - {column.name for column in CORE_SCHEMA[name]}
    if unknown:
        raise ValueError(f"{name} has no columns {sorted(unknown)}")
    return core_table(name, {column.name: values[column.name] if column.name in values
                             else blanks(column, rows) for column in CORE_SCHEMA[name]})


def column_of(column: Column, values: Any) -> pa.Array:
    """``values`` as the Arrow data of ``column``'s kind. Names: :class:`Names`, or their
    text (None missing); a vocabulary: integer codes into it (numpy), or its words;
    numbers: anything numpy makes the kind's dtype of; text: str or None."""
    kind = column.kind
    if kind == CODES:
        if isinstance(values, Names):
            return dictionary_column(values)
        return pa.array(list(values), type=pa.string()).dictionary_encode()
    if kind == VOCABULARY:
        vocabulary = list(column.vocabulary)
        if isinstance(values, np.ndarray) and values.dtype.kind in "biu":
            return vocabulary_column(values, vocabulary)
        codes = np.array([-1 if value is None else vocabulary.index(value) for value in values],
                         dtype=np.int32)
        return vocabulary_column(codes, vocabulary)
    items = values if isinstance(values, list | np.ndarray) else list(values)
    if kind == NULLABLE_INT:
        return nullable_int_column(items)
    if kind == TEXT:
        return text_column(items)
    if kind == OBJECT_TEXT:
        return object_text_column(items)
    if kind == JSON_TEXT:
        return json_text_column(items)
    return pa.array(np.asarray(values, dtype=kind))


def blanks(column: Column, rows: int) -> list[None] | np.ndarray:
    """``rows`` blanks of ``column``'s kind, as :func:`column_of` takes them: 0, NaN or
    False for numbers, else None."""
    if column.kind in (CODES, VOCABULARY, NULLABLE_INT, TEXT, OBJECT_TEXT, JSON_TEXT):
        return [None] * rows
    return np.full(rows, np.nan if column.kind == "float64" else 0, dtype=column.kind)


def dictionary_column(names: Names) -> pa.DictionaryArray:
    """``names`` as dictionary-encoded text (int32 codes, null where missing)."""
    codes = np.asarray(names.codes, dtype=np.int32)
    categories = pa.array([str(category) for category in names.categories], type=pa.string())
    return pa.DictionaryArray.from_arrays(pa.array(codes, mask=codes < 0), categories)


def vocabulary_column(codes: np.ndarray, vocabulary: Sequence[str]) -> pa.DictionaryArray:
    """Codes into a fixed ``vocabulary`` as dictionary-encoded text."""
    return dictionary_column(Names(codes, list(vocabulary)))


def nullable_int_column(values: Sequence[int | None]) -> pa.Array:
    """Integers with None for missing, as int64 with nulls."""
    missing = np.fromiter((value is None for value in values), dtype=bool, count=len(values))
    numbers = np.array([0 if value is None else value for value in values], dtype=np.int64)
    return pa.array(numbers, type=pa.int64(), mask=missing)


def text_column(values: Sequence[str | None]) -> pa.Array:
    """Ids (str or None): large_string, the type pandas keeps Arrow-backed text in,
    so that neither side copies them; string when none is there (pandas keeps
    such a column as objects)."""
    text = pa.array(values, type=pa.large_string())
    return text if text.null_count < len(text) else text.cast(pa.string())


def object_text_column(values: Sequence[str | None]) -> pa.Array:
    """Free text (str or None) as Arrow text."""
    return pa.array(values, type=pa.string())


def json_text_column(values: Sequence[Any]) -> pa.Array:
    """Plain data (None, numbers, text, lists, dicts) as JSON text, None kept."""
    return pa.array([None if value is None else _json_text(value) for value in values],
                    type=pa.string())


def _json_text(value: Any) -> str:
    """``value`` as JSON; what ``json`` refuses (an int of more than 4,300 digits, say)
    as ``values.json_safe`` makes it."""
    try:
        return json.dumps(value, allow_nan=True)
    except (ValueError, TypeError, RecursionError):
        return json.dumps(json_safe(value))
