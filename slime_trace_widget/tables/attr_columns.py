"""Span and event attributes as typed Arrow columns, one per key (``attr_python`` reads
them back as Python values and dicts).

Attributes are built into columns once, where the dump is read (the worker):
numbers numeric, text as text, mixed kinds as text, nested lists and dicts as
JSON text that reads back exactly (decoded again for the dicts; see ``attr_format``).
A null marks an absent key; keys whose value was None are listed per row in
``_none_keys`` so the dicts keep them, and keys past :data:`MAX_ATTR_COLUMNS` travel
per row as JSON in ``_overflow``.
Columns carry no Python objects, so they cross processes as Arrow data.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from operator import itemgetter
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..values import (
    MAX_SAFE_INT,
    MAX_STEPS,
    PLAIN_TYPES,
    TOTAL_CHARS_FACTOR,
    clean_text,
    exact_in_browser,
    json_safe,
    plain_value,
    short_text,
)
from .attr_format import (
    EXTRA_COLUMNS,
    JSON_FIELD,
    NONE_KEYS,
    OVERFLOW,
    exact_json,
    extra_rows,
    is_json_field,
    json_rows,
    valid_rows,
)
from .attr_grouping import ARROW_TYPES, CONVERSION_ERRORS, NONE_TYPE, Chunk, Group, group_by_keys
from .attr_python import table_dicts

__all__ = ["ATTR_PREFIX", "MAX_ATTR_COLUMNS", "AttrTable", "AttrTableBuilder", "common_type",
           "merged_attr_arrays", "text_array"]

MAX_ATTR_COLUMNS = 500
ATTR_PREFIX = "attr."
_INT64 = (-(2**63), 2**63 - 1)


class AttrTable:
    """The attributes of a list of rows (spans' start or end records, or events)."""

    def __init__(self, table: pa.Table, file: str | None = None) -> None:
        self.table = table
        #: The Arrow file whose memory map holds this table, when that file stays
        #: where it is: writing the table to that path again would be needless.
        self.file = file

    # ------------------------------------------------------------------ building

    @classmethod
    def from_dicts(cls, dicts: list[dict | None], warnings: Counter[str] | None = None
                   ) -> AttrTable:
        """Columns for ``dicts`` (None or {} for a row without attributes)."""
        builder = AttrTableBuilder()
        builder.add(dicts)
        return builder.table(warnings)

    @classmethod
    def concat(cls, parts: list[AttrTable], warnings: Counter[str] | None = None) -> AttrTable:
        """One table of the rows of ``parts`` in order; a key typed differently becomes text.

        The cap holds for the whole as for one part: past :data:`MAX_ATTR_COLUMNS`
        keys in all (dumps whose keys differ, say), the most frequent keep their
        columns and the others travel per row in ``_overflow``, each counted in
        ``warnings`` as ``attr_columns_capped``. A key's chunks keep the parts'
        buffers; each run of parts without the key adds one null chunk.
        """
        fields: dict[str, pa.Field] = {}
        for part in parts:
            for field in part.table.schema:
                known = fields.get(field.name)
                if known is None:
                    fields[field.name] = field
                elif known.type != field.type:
                    fields[field.name] = pa.field(field.name, common_type(known.type, field.type),
                                                  metadata=known.metadata)
        # Each part's columns by name, looked up once: ``Table.column_names`` builds its
        # list anew on every call, and a combine looks up every key of every part.
        held = [(dict(zip(part.table.column_names, part.table.columns, strict=True)), len(part))
                for part in parts]
        moved: set[str] = set()
        if len(fields.keys() - set(EXTRA_COLUMNS)) > MAX_ATTR_COLUMNS:
            moved = _past_the_cap(_frequency(held))
        if moved:
            if warnings is not None:
                warnings["attr_columns_capped"] += len(moved)
            held = [(_moved_to_overflow(columns, rows, moved, part.table.schema), rows)
                    for (columns, rows), part in zip(held, parts, strict=True)]
            fields = {name: field for name, field in fields.items() if name not in moved}
            fields.setdefault(OVERFLOW, pa.field(OVERFLOW, pa.string()))
        columns = {name: pa.chunked_array(_chunks(held, name, field.type), type=field.type)
                   for name, field in fields.items()}
        total = sum(len(part) for part in parts)
        if not columns:
            return cls(_empty(total))
        return cls(pa.table(columns, schema=pa.schema(list(fields.values()))))

    # ------------------------------------------------------------------ reading

    def __len__(self) -> int:
        return self.table.num_rows

    @property
    def keys(self) -> list[str]:
        """Attribute keys that have a column, most frequent first."""
        return [name for name in self.table.column_names if name not in EXTRA_COLUMNS]

    def rows(self, positions: np.ndarray | list[int]) -> list[dict[str, Any] | None]:
        """The attribute dicts of the rows at ``positions`` (None for no attributes)."""
        return table_dicts(self.take(positions).table).tolist()

    def json_rows(self, positions: np.ndarray | list[int], max_chars: int) -> list[dict]:
        """:func:`values.json_safe` of the dicts at ``positions``, for a browser
        (:func:`values.exact_in_browser`: an int past 2**53 as its digits), checked
        column by column: when no text is longer than ``max_chars``, no float is NaN or
        infinite and no int is past 2**53, the dicts are ready as they are (the
        common case, in C)."""
        table = self.take(positions).table
        rows = table_dicts(table).tolist()
        if _json_ready(table, max_chars):
            rows = [row or {} for row in rows]
            return [exact_in_browser(row) for row in rows] if _past_safe_ints(table) else rows
        return [exact_in_browser(json_safe(row or {}, max_chars)) for row in rows]

    def take(self, positions: np.ndarray | list[int]) -> AttrTable:
        """The rows at ``positions``, in that order."""
        return AttrTable(self.table.take(pa.array(np.asarray(positions, dtype=np.int64))))

    def is_json(self, key: str) -> bool:
        """Whether the text of column ``key`` is JSON (the key held lists or dicts)."""
        return is_json_field(self.table.schema.field(key))

    def explicit_nones(self) -> dict[int, list[str]]:
        """Per row (by position), the keys whose value was None (their columns are null)."""
        return extra_rows(self.table, NONE_KEYS)

    def overflow(self) -> dict[int, dict]:
        """Per row (by position), the attributes past :data:`MAX_ATTR_COLUMNS`."""
        return extra_rows(self.table, OVERFLOW)

    def dicts(self) -> list[dict[str, Any] | None]:
        """Every row's attribute dict (None for no attributes)."""
        return table_dicts(self.table).tolist()

    def dict_array(self, values: dict[str, np.ndarray] | None = None) -> np.ndarray:
        """:meth:`dicts` as an object array; ``values``: :func:`python_values` of the
        table, when the caller has them."""
        return table_dicts(self.table, values)

    def column(self, key: str) -> pa.ChunkedArray:
        return self.table.column(key)


class AttrTableBuilder:
    """One :class:`AttrTable` from rows given in parts, the same table ``from_dicts``
    makes of all the parts end to end.

    Each part is grouped by key tuple and its values transposed as it comes, so the
    work on a first part can run while later parts are still being made (the worker
    forks on the real spans' end attributes before the PD spans' exist). Column
    order, types, the cap and the per-row ``_none_keys``/``_overflow`` are decided
    in :meth:`table`, over every part, in the order one pass would see them: parts
    in order, groups in first-seen order within each.
    """

    def __init__(self) -> None:
        self._parts: list[_Part] = []
        self._rows = 0
        self._grouping_warnings: Counter[str] = Counter()  # attr_key_collision

    def add(self, dicts: list[dict | None]) -> None:
        """The next rows: ``dicts`` (None or {} for a row without attributes)."""
        dicts, groups = group_by_keys(dicts, self._grouping_warnings)
        self._parts.append(_Part(self._rows, dicts, groups))
        self._rows += len(dicts)

    def table(self, warnings: Counter[str] | None = None) -> AttrTable:
        """The table of every row added so far; ``warnings`` also gets what grouping
        counted (``attr_key_collision``) and the values written cut (``attr_value_cut``,
        see :func:`_json_text`)."""
        if warnings is not None:
            warnings.update(self._grouping_warnings)
        else:
            warnings = Counter()
        frequency: Counter[str] = Counter()
        for part in self._parts:
            for keys, group in part.groups.items():
                for key in keys:
                    frequency[key] += len(group.members)
        moved = _past_the_cap(frequency)
        if moved:
            warnings["attr_columns_capped"] += len(moved)
        pieces: dict[str, list[_Piece]] = {}
        overflow: dict[int, dict] = {}
        for part in self._parts:
            for keys, group in part.groups.items():
                index = np.asarray(group.members, dtype=np.int64) + part.offset
                wanted = [key for key in keys if key not in moved] if moved else list(keys)
                if len(wanted) < len(keys):
                    rows = list(map(part.dicts.__getitem__, group.members))
                    for position, row in zip(index.tolist(), rows, strict=True):
                        overflow[position] = {k: v for k, v in row.items() if k in moved}
                    columns = [_Piece(index, [values], None)
                               for values in _transposed(rows, wanted)] if wanted else []
                else:
                    columns = [_Piece(index, chunks, kinds)
                               for chunks, kinds in zip(group.columns, group.kinds, strict=True)]
                for key, piece in zip(wanted, columns, strict=True):
                    pieces.setdefault(key, []).append(piece)
        n = self._rows
        fields, arrays, none_keys = [], [], {}
        for key in sorted(pieces, key=lambda k: -frequency[k]):
            array, is_json = _column(pieces[key], n, key, none_keys, warnings)
            fields.append(pa.field(key, array.type, metadata={JSON_FIELD: b"1"} if is_json
                                   else None))
            arrays.append(array)
        for name, rows_json in ((NONE_KEYS, none_keys),
                                (OVERFLOW, _json_rows(overflow, warnings))):
            if rows_json:
                fields.append(pa.field(name, pa.string()))
                arrays.append(_sparse_text(rows_json, n))
        return AttrTable(pa.Table.from_arrays(arrays, schema=pa.schema(fields)) if arrays
                         else _empty(n))


class _Part(NamedTuple):
    """The rows of one ``AttrTableBuilder.add``: where they start among all rows, the
    dicts (text-keyed where needed) and their groups by key tuple."""

    offset: int
    dicts: list[dict | None]
    groups: dict[tuple, Group]


class _Piece(NamedTuple):
    """One key's values over one group's rows: the rows' positions, the values in
    chunks, and the set of their types (None: not known yet)."""

    index: np.ndarray
    chunks: list[Chunk]
    kinds: frozenset[type] | None


def merged_attr_arrays(start: AttrTable, end: AttrTable) -> dict[str, pa.ChunkedArray]:
    """``attr.<key>`` columns as Arrow data: the end value where a key has one, else the
    start value (``attr_frames.merged_attr_frame`` in pandas)."""
    columns: dict[str, pa.ChunkedArray] = {}
    for key in dict.fromkeys([*end.keys, *start.keys]):
        in_end, in_start = key in end.keys, key in start.keys
        if in_end and in_start:
            late, early = end.column(key), start.column(key)
            kind = common_type(late.type, early.type)
            late, early = late.cast(kind, safe=False), early.cast(kind, safe=False)
            combined = pc.coalesce(late, early)
        else:
            combined = (end if in_end else start).column(key)
        columns[ATTR_PREFIX + key] = combined
    return columns


# --------------------------------------------------------------------------- internals


def _transposed(rows: list[dict], wanted: list[str]) -> list[Sequence]:
    """The values of each of ``wanted`` over ``rows`` (the few keys a capped table keeps)."""
    if len(wanted) > 1:
        return list(zip(*map(itemgetter(*wanted), rows), strict=True))
    return [list(map(itemgetter(wanted[0]), rows))]


def _column(pieces: list[_Piece], n: int, key: str, none_keys: dict[int, list[str]],
            warnings: Counter[str]) -> tuple[pa.Array, bool]:
    """One key's Arrow column and whether its text is JSON; records explicit Nones."""
    fast = _inferred_column(pieces, n, key, none_keys)
    if fast is not None:
        return fast, False
    return _converted_column([(piece.index, _python_values(piece.chunks)) for piece in pieces],
                             n, key, none_keys, warnings)


def _inferred_column(pieces: list[_Piece], n: int, key: str,
                     none_keys: dict[int, list[str]]) -> pa.Array | None:
    """The column when every value is a plain int, float, bool, str or None and the
    values make one type: ints, floats (ints among floats become floats), bools or
    text. None otherwise. Only plain values reach Arrow: its inference on arbitrary
    objects (a dump's, or a user's) can crash the process; and since the values'
    types are known (collected as the rows were grouped, or scanned here for a
    capped table's columns), Arrow converts without inferring the type again."""
    kinds: set[type] = set()
    for piece in pieces:
        if piece.kinds is None:
            for chunk in piece.chunks:
                kinds.update(map(type, chunk))
        else:
            kinds.update(piece.kinds)
    if not kinds <= PLAIN_TYPES:
        return None
    kind = ARROW_TYPES.get(frozenset(kinds - NONE_TYPE))
    if kind is None:
        return None
    try:
        parts = [_as_kind(chunk, kind) for piece in pieces for chunk in piece.chunks]
    except CONVERSION_ERRORS:
        return None  # ints past int64, text with lone surrogates: converted
    joined = parts[0] if len(parts) == 1 else pa.concat_arrays(parts)  # one copy, not two
    rows = np.concatenate([piece.index for piece in pieces])
    if joined.null_count:  # once every piece converted
        nulls = np.asarray(joined.is_null().to_numpy(zero_copy_only=False))
        for position in rows[nulls].tolist():
            none_keys.setdefault(position, []).append(key)
    if kind == pa.null():
        return pa.nulls(n, pa.string())
    if len(rows) == n and np.array_equal(rows, np.arange(n)):
        return joined  # every row has the key, in order: nothing to scatter
    return _scattered(joined, rows, n)


def _as_kind(chunk: Chunk, kind: pa.DataType) -> pa.Array:
    """A chunk of one column as its type ``kind``: a block of ints among floats is
    cast (as Python's float() of each would round them), values are converted."""
    if isinstance(chunk, pa.Array):
        return chunk if chunk.type == kind else chunk.cast(kind, safe=False)
    return pa.array(chunk, type=kind)


def _python_values(chunks: list[Chunk]) -> list:
    """A piece's values as Python objects, for a column that needs Python."""
    values: list = []
    for chunk in chunks:
        values.extend(chunk.to_pylist() if isinstance(chunk, pa.Array) else chunk)
    return values


def _scattered(values: pa.Array, rows: np.ndarray, n: int) -> pa.Array:
    """A column of ``n`` rows holding ``values`` at ``rows``, null elsewhere.

    Numbers and bools without nulls are placed by numpy, then masked: Arrow's take
    with null positions checks each position, numpy's scatter does not need to.
    Text without nulls is placed from its own buffers (:func:`_scattered_text`);
    columns with nulls of their own go through the take. The result is the take's,
    value for value and null for null.
    """
    kind = values.type
    if values.null_count == 0 and kind == pa.string():
        return _scattered_text(values, rows, n)
    if values.null_count == 0 and (pa.types.is_integer(kind) or pa.types.is_floating(kind)
                                   or pa.types.is_boolean(kind)):
        present = values.to_numpy(zero_copy_only=False)
        placed = np.zeros(n, dtype=present.dtype)
        placed[rows] = present
        absent = np.ones(n, dtype=bool)
        absent[rows] = False
        return pa.array(placed, type=kind, mask=absent)
    positions = np.full(n, -1, dtype=np.int64)
    positions[rows] = np.arange(len(values))
    return values.take(pa.array(positions, mask=positions < 0))


def _scattered_text(values: pa.StringArray, rows: np.ndarray, n: int) -> pa.Array:
    """Text without nulls at ``rows`` of a column of ``n`` rows, null elsewhere, made of
    its own buffers: the values in row order (a take without nulls puts them so,
    when several key tuples interleave), each row's length at its row and the
    offsets their running sum: the same array as a take with null positions, with
    no per-row check of the positions."""
    if len(rows) > 1 and not bool((rows[1:] > rows[:-1]).all()):
        order = np.argsort(rows, kind="stable")
        values, rows = values.take(pa.array(order)), rows[order]
    _, offset_buffer, data_buffer = values.buffers()
    ends = np.frombuffer(offset_buffer, dtype=np.int32, count=len(values) + 1,
                         offset=4 * values.offset)
    lengths = np.zeros(n, dtype=np.int32)
    lengths[rows] = np.diff(ends)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    present = np.zeros(n, dtype=bool)
    present[rows] = True
    data = (pa.py_buffer(b"") if data_buffer is None
            else data_buffer.slice(int(ends[0]), int(ends[-1] - ends[0])))
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), data,
                                       pa.py_buffer(np.packbits(present, bitorder="little")),
                                       n - len(rows))


def _converted_column(pieces: list[tuple[np.ndarray, Sequence]], n: int, key: str,
                      none_keys: dict[int, list[str]], warnings: Counter[str]
                      ) -> tuple[pa.Array, bool]:
    """The column of a key whose values need Python: numpy and torch scalars, objects,
    mixed kinds, huge ints. Values are made plain first (``values.plain_value``); a
    column with lists or dicts holds each value as :func:`_json_text`."""
    pieces = [(index, tuple(v if type(v) in PLAIN_TYPES else plain_value(v) for v in values))
              for index, values in pieces]
    kinds: set[type] = set()
    for _, values in pieces:
        kinds.update(map(type, values))
    if type(None) in kinds:
        kinds.discard(type(None))
        pieces = _drop_nones(pieces, key, none_keys)
    present = np.zeros(n, dtype=bool)
    for index, _ in pieces:
        present[index] = True
    if kinds and (kinds <= {int, float} or kinds == {bool}):
        dtype = np.float64 if float in kinds else bool if kinds == {bool} else np.int64
        try:
            values = np.zeros(n, dtype=dtype)
            for index, chunk in pieces:
                values[index] = chunk
            return pa.array(values, mask=~present), False
        except OverflowError:  # ints past int64: text
            pass
    text = np.full(n, None, dtype=object)
    for index, chunk in pieces:
        text[index] = np.fromiter(chunk, dtype=object, count=len(chunk))
    if kinds & {list, dict}:  # every value as JSON, so the dicts get lists and dicts back
        return text_array(np.array([None if v is None else _json_text(v, warnings)
                                    for v in text.tolist()], dtype=object)), True
    if kinds <= {str}:
        return text_array(text), False
    # short_text: str() of an int over 4,300 digits raises; it reads as it does nested.
    return text_array(np.array([v if v is None or type(v) is str else short_text(v)
                                 for v in text.tolist()], dtype=object)), False


def text_array(values: np.ndarray) -> pa.Array:
    """Arrow text from an object array of str/None (the common case converts in C)."""
    try:
        return pa.array(values, type=pa.string())
    except (pa.ArrowException, UnicodeError):  # lone surrogates, which pickles keep
        return pa.array(_clean(values), type=pa.string())


def _clean(values: np.ndarray) -> list:
    """Text Arrow accepts: lone surrogates (which pickles keep) become U+FFFD."""
    return [v if v is None or v.isascii() else clean_text(v) for v in values.tolist()]


def _drop_nones(pieces: list[tuple[np.ndarray, Sequence]], key: str,
                none_keys: dict[int, list[str]]) -> list[tuple[np.ndarray, Sequence]]:
    kept = []
    for index, values in pieces:
        mask = np.fromiter((v is not None for v in values), dtype=bool, count=len(values))
        for position in index[~mask].tolist():
            none_keys.setdefault(position, []).append(key)
        if mask.any():
            kept.append((index[mask], tuple(v for v in values if v is not None)))
    return kept


def _json_text(value: Any, warnings: Counter[str] | None) -> str:
    """The plain ``value`` as JSON text that reads back as it is (``attr_format.exact_json``).

    A value it refuses is written as ``values.json_safe`` makes it instead (strings
    cut, NaN as text, no more than a few times ``values.MAX_STRING_CHARS`` in all) and
    counted in ``warnings`` as ``attr_value_cut``: one whose text would repeat more
    than ``attr_format.MAX_REPEATED_CHARS`` characters of its own strings (only a
    hostile dump's, sharing one string in many places), or one ``json`` refuses.
    """
    text = exact_json(value)
    if text is not None:
        return text
    if warnings is not None:
        warnings["attr_value_cut"] += 1
    return json.dumps(json_safe(value), ensure_ascii=False)


def _json_rows(rows: dict[int, dict], warnings: Counter[str] | None = None) -> dict[int, str]:
    """Each row's attributes (past the column cap) as one JSON object, each value made
    plain on its own, as a column's would be, so it reads back as a column's does."""
    return {position: _json_text({key: plain_value(value) for key, value in row.items()},
                                 warnings)
            for position, row in rows.items()}


def _sparse_text(rows: dict[int, Any], n: int) -> pa.Array:
    values = np.full(n, None, dtype=object)
    for position, text in rows.items():
        values[position] = text if isinstance(text, str) else json.dumps(text)
    return text_array(values)


def _empty(n: int) -> pa.Table:
    """A table of ``n`` rows without attributes (a table needs a column to have rows)."""
    return pa.table({NONE_KEYS: pa.nulls(n, pa.string())})


def common_type(one: pa.DataType, other: pa.DataType) -> pa.DataType:
    """The type two columns of one key share: numbers meet as float64, anything else as text."""
    if one == other:
        return one
    numeric = (pa.types.is_integer, pa.types.is_floating, pa.types.is_boolean)
    if all(any(test(kind) for test in numeric) for kind in (one, other)):
        return pa.float64()
    return pa.string()


def _past_the_cap(frequency: Counter[str]) -> set[str]:
    """The keys that lose their column: all but the :data:`MAX_ATTR_COLUMNS` most
    frequent (the first seen of equally frequent ones stay)."""
    if len(frequency) <= MAX_ATTR_COLUMNS:
        return set()
    kept = {key for key, _ in frequency.most_common(MAX_ATTR_COLUMNS)}
    return {key for key in frequency if key not in kept}


def _frequency(held: list[tuple[dict[str, pa.ChunkedArray], int]]) -> Counter[str]:
    """How many values each key has over the parts (``held``: each part's columns and
    its number of rows)."""
    frequency: Counter[str] = Counter()
    for columns, rows in held:
        for name, column in columns.items():
            if name not in EXTRA_COLUMNS:
                frequency[name] += rows - column.null_count
    return frequency


def _moved_to_overflow(columns: dict[str, pa.ChunkedArray], rows: int, moved: set[str],
                       schema: pa.Schema) -> dict[str, pa.ChunkedArray]:
    """One part's ``columns`` with those of the ``moved`` keys taken out and their
    values added to each row's ``_overflow`` (JSON columns decoded first)."""
    present = [name for name in columns if name in moved]
    if not present:
        return columns
    kept = {name: column for name, column in columns.items() if name not in moved}
    overflow: dict[int, dict] = json_rows(kept[OVERFLOW]) if OVERFLOW in kept else {}
    for name in present:
        column = columns[name]
        values = (json_rows(column).items() if is_json_field(schema.field(name))
                  else valid_rows(column))
        for position, value in values:
            overflow.setdefault(position, {})[name] = value
    kept[OVERFLOW] = pa.chunked_array([_sparse_text(_json_rows(overflow), rows)])
    return kept


def _chunks(held: list[tuple[dict[str, pa.ChunkedArray], int]], name: str,
            kind: pa.DataType) -> list[pa.Array]:
    """The chunks of column ``name`` over the parts in order, cast to ``kind``; the rows
    of each run of parts without it as one null chunk."""
    chunks: list[pa.Array] = []
    missing = 0
    for columns, rows in held:
        column = columns.get(name)
        if column is None:
            missing += rows
            continue
        if missing:
            chunks.append(pa.nulls(missing, kind))
            missing = 0
        chunks.extend((column if column.type == kind else column.cast(kind, safe=False)).chunks)
    if missing:
        chunks.append(pa.nulls(missing, kind))
    return chunks


def _past_safe_ints(table: pa.Table) -> bool:
    """Whether an int column of ``table`` holds an int past ±``values.MAX_SAFE_INT``."""
    for field in table.schema:
        if pa.types.is_integer(field.type):
            low, high = pc.min_max(table.column(field.name)).values()
            if low.is_valid and (low.as_py() < -MAX_SAFE_INT or high.as_py() > MAX_SAFE_INT):
                return True
    return False


def _json_ready(table: pa.Table, max_chars: int) -> bool:
    """Whether every value of ``table`` is JSON-ready text, number or bool that
    ``json_safe(..., max_chars)`` would leave alone (a row's texts included)."""
    longest_texts = 0
    for field in table.schema:
        column = table.column(field.name)
        if field.name == OVERFLOW or is_json_field(field):
            if column.null_count < len(column):
                return False  # nested or overflow values: json_safe walks them
        elif field.type == pa.string():
            longest = pc.max(pc.utf8_length(column)).as_py() or 0
            if longest > max_chars or len(field.name) > 1000:
                return False
            longest_texts += longest + len(field.name)
        elif pa.types.is_floating(field.type) and \
                pc.all(pc.is_finite(column)).as_py() not in (True, None):
            return False
    return longest_texts <= TOTAL_CHARS_FACTOR * max_chars and table.num_columns <= MAX_STEPS
