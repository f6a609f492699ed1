"""Attribute dicts grouped by key tuple, each key's values laid out as typed chunks.

The first half of building an attribute table (:mod:`.attr_columns` assembles the
columns from these groups): each group is the rows that have one key tuple, and
each key's values over them become Arrow chunks of one plain type where they can.
The native pass (``_native_columns.c``) does this in one read of each value; the
Python pass does the same, for machines that could not compile it and for the rows
and keys the native pass leaves to it.

Keys other than str (and str keys Arrow cannot name) are made text; when two keys
of one dict make the same text (``1`` and ``"1"``), the last one in the dict's
order wins and each value lost is counted as the warning ``attr_key_collision``.
Only the Python pass renames keys (the native pass leaves any dict with such a key
to it), so both passes follow this rule.
"""

from __future__ import annotations

from collections import Counter
from operator import itemgetter
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from ..values import PLAIN_TYPES, clean_text, short_text

try:  # compiled where the package was built with a C compiler (see hatch_build.py)
    from . import _native_columns
except ImportError:
    _native_columns = None

__all__ = ["ARROW_TYPES", "CONVERSION_ERRORS", "NONE_TYPE", "Chunk", "Group", "group_by_keys"]

#: A block of one key's values: Arrow, or the values where they made no plain type.
Chunk = pa.Array | list


class Group(NamedTuple):
    """The rows of one part that have one key tuple: their positions in the part,
    each key's values over them in blocks of rows (see :func:`group_by_keys`), and
    the set of those values' types."""

    members: list[int]
    columns: list[list[Chunk]]
    kinds: list[frozenset[type]]


def group_by_keys(dicts: list[dict | None], warnings: Counter[str] | None = None
                  ) -> tuple[list[dict | None], dict[tuple, Group]]:
    """The rows with attributes grouped by key tuple, each group's values by key with
    their types; keys other than str made text.

    The native pass (``_native_columns.c``, where the package was built with a C
    compiler) reads each value once and copies it into its key's typed column, with
    none of the Python pass's work per value; its result equals the Python pass's,
    column for column (the tests compare them). It leaves to Python a list with a
    row that is not exactly a dict or a key that is not ASCII text, and each key
    whose values over a group are not all floats, all ints within int64, all bools
    or all ASCII text; those come out as the Python pass makes them, in its blocks
    of rows. Values lost to keys that make the same text are counted in
    ``warnings`` (``attr_key_collision``, see the module's docstring).
    """
    if _native_columns is not None:
        laid = _native_columns.lay_columns(dicts)
        if laid is not None:
            return dicts, {keys: _native_group(dicts, keys, members, columns)
                           for keys, members, columns in laid}
    return group_by_keys_in_python(dicts, warnings)


def group_by_keys_in_python(dicts: list[dict | None], warnings: Counter[str] | None = None
                             ) -> tuple[list[dict | None], dict[tuple, Group]]:
    """:func:`group_by_keys` in Python.

    Each dict is read once, its values laid end to end in its group's list while
    it is in the cache; every block of a group (:data:`BLOCK_VALUES` values and
    :data:`BLOCK_ROWS` rows at least), each key's values (a strided slice) have
    their types taken and are converted to Arrow while they still are: each row and
    each value is read while it is in the cache, never in a second pass over all
    of them. Taking the types per block rather than per row spares a list of them.

    Only str keys may become dict keys here: their hashes are salted per process,
    while ints, floats and tuples hash the same everywhere, so a dump can hold
    thousands of attribute keys that all collide (multiples of 2**61 - 1), which
    made this grouping quadratic. A row with another key, or a key Arrow cannot
    name (lone surrogates), gets a copy keyed by its keys' clean text. Only the
    first row of each key tuple pays for the check.
    """
    laid: dict[tuple, _Laying] = {}
    renamed: dict[int, dict] = {}
    for position, value in enumerate(dicts):
        if not value:
            continue
        keys = tuple(value)
        lists = laid.get(keys)
        if lists is None:
            if not all(type(key) is str and (key.isascii() or clean_text(key) is key)
                       for key in keys):
                value = renamed[position] = {short_text(k): v for k, v in value.items()}
                if len(value) < len(keys) and warnings is not None:
                    warnings["attr_key_collision"] += len(keys) - len(value)
                keys = tuple(value)
                lists = laid.get(keys)
            if lists is None:
                lists = laid[keys] = _Laying(len(keys))
        values = value.values()
        lists.members.append(position)
        lists.values.extend(values)
        if len(lists.values) >= lists.limit:
            lists.convert()
    if renamed:
        dicts = [renamed.get(position, value) for position, value in enumerate(dicts)]
    groups = {}
    for keys, lists in laid.items():
        lists.convert()
        groups[keys] = Group(lists.members, lists.chunks, list(map(frozenset, lists.kinds)))
    return dicts, groups


#: Values of one key tuple laid before they are converted (see group_by_keys): few
#: enough that a block's values are still in the cache when it is converted.
BLOCK_VALUES = 8192
#: Rows of one key tuple a block holds at least: each key's chunk then has this many
#: values or more, whatever the tuple's width: each chunk has a fixed cost beyond its
#: values, which wide tuples (50 keys and more) would otherwise pay every few rows.
BLOCK_ROWS = 256


class _Laying:
    """One key tuple's rows as grouping lays them: their positions, the values of the
    rows not converted yet (row after row), and per key the chunks converted so far
    and the types met. Slots: grouping reads them on every row."""

    __slots__ = ("chunks", "kinds", "limit", "members", "values")

    def __init__(self, width: int) -> None:
        #: Values laid before they are converted as one more block.
        self.limit = width * _block_rows(width)
        self.members: list[int] = []
        self.values: list = []
        self.chunks: list[list[Chunk]] = [[] for _ in range(width)]
        self.kinds: list[set[type]] = [set() for _ in range(width)]

    def convert(self) -> None:
        """Each key's laid values as one more chunk; the laid lists emptied."""
        if not self.values:
            return
        width = len(self.chunks)
        for offset, (chunks, kinds) in enumerate(zip(self.chunks, self.kinds, strict=True)):
            chunk, block_kinds = _typed_block(self.values[offset::width])
            kinds.update(block_kinds)
            chunks.append(chunk)
        self.values.clear()


def _block_rows(width: int) -> int:
    """Rows of a key tuple of ``width`` keys converted as one block: enough for
    :data:`BLOCK_VALUES` values and :data:`BLOCK_ROWS` rows."""
    return max(-(-BLOCK_VALUES // width), BLOCK_ROWS)


def _typed_block(values: list) -> tuple[Chunk, frozenset[type]]:
    """One block of one key's values as a chunk, with the set of their types."""
    kinds = frozenset(map(type, values))
    return block_chunk(values, kinds), kinds


def _native_group(dicts: list[dict | None], keys: tuple, members: bytes,
                  columns: list[tuple[str, bytes, bytes | None] | None]) -> Group:
    """A group as :func:`group_by_keys_in_python` makes it, from the native pass: each
    typed column one chunk, each column it left to Python converted in the blocks of
    rows that pass would have used (their chunks then are the same)."""
    positions = np.frombuffer(members, dtype=np.int64).tolist()
    rows: list[dict] | None = None
    block = _block_rows(len(keys))
    chunks: list[list[Chunk]] = []
    kinds: list[frozenset[type]] = []
    for key, column in zip(keys, columns, strict=True):
        if column is not None:
            chunks.append([_native_chunk(column, len(positions))])
            kinds.append(_NATIVE_KINDS[column[0]])
            continue
        if rows is None:
            rows = [dicts[position] for position in positions]  # type: ignore[misc]
        values = list(map(itemgetter(key), rows))
        typed = [_typed_block(values[start:start + block])
                 for start in range(0, len(values), block)]
        chunks.append([chunk for chunk, _ in typed])
        kinds.append(frozenset().union(*(block_kinds for _, block_kinds in typed)))
    return Group(positions, chunks, kinds)


def _native_chunk(column: tuple[str, bytes, bytes | None], rows: int) -> pa.Array:
    """A column the native pass typed, as Arrow over its bytes."""
    kind, data, offsets = column
    if kind == "s":
        assert offsets is not None
        return pa.StringArray.from_buffers(rows, pa.py_buffer(offsets), pa.py_buffer(data))
    if kind == "b":
        return pa.array(np.frombuffer(data, dtype=np.bool_))
    return pa.Array.from_buffers(_NATIVE_TYPES[kind], rows, [None, pa.py_buffer(data)])


#: The Python type and the Arrow type of each kind of column the native pass types.
_NATIVE_KINDS = {"f": frozenset({float}), "i": frozenset({int}), "b": frozenset({bool}),
                 "s": frozenset({str})}
_NATIVE_TYPES = {"f": pa.float64(), "i": pa.int64()}


def block_chunk(values: list, kinds: frozenset[type]) -> Chunk:
    """``values`` as Arrow when they are of one plain type (``kinds``: theirs), else as
    they are: the column's type is decided once every block is known, and ints
    among floats made floats here would read ``0.0``, not ``0``, in a text column."""
    plain = kinds - NONE_TYPE
    if len(plain) > 1 or not kinds <= PLAIN_TYPES:
        return values
    try:
        if plain == kinds:  # no None among them
            dense = _dense_chunk(values, next(iter(plain)))
            if dense is not None:
                return dense
        return pa.array(values, type=ARROW_TYPES[plain])
    except CONVERSION_ERRORS:
        return values  # ints past int64, text with lone surrogates: the column decides


def _dense_chunk(values: list, kind: type) -> pa.Array | None:
    """Values of one plain type without None as Arrow, by numpy for numbers and by one
    join for ASCII text; None for other text. Arrow's own conversion of a Python
    list checks each value's type again, which grouping already knows; this one
    relies on ``kind`` being every value's exact type."""
    if kind is str:
        joined = "".join(values)
        if not joined.isascii() or len(joined) > _MAX_TEXT_OFFSET:
            return None  # UTF-8 lengths differ from str lengths: Arrow measures them
        offsets = np.zeros(len(values) + 1, dtype=np.int32)
        np.cumsum(np.fromiter(map(len, values), dtype=np.int32, count=len(values)),
                  out=offsets[1:])
        return pa.StringArray.from_buffers(len(values), pa.py_buffer(offsets),
                                           pa.py_buffer(joined.encode("ascii")))
    return pa.array(np.array(values, dtype=_NUMPY_KINDS[kind]))


#: The Arrow type of a column by the Python types of its values (None aside); mixed
#: kinds other than ints among floats are not here (they become text, in Python).
ARROW_TYPES = {
    frozenset(): pa.null(), frozenset({str}): pa.string(), frozenset({bool}): pa.bool_(),
    frozenset({int}): pa.int64(), frozenset({float}): pa.float64(),
    frozenset({int, float}): pa.float64(),
}
NONE_TYPE = frozenset({type(None)})
#: The numpy type of a block of numbers or bools of one Python type.
_NUMPY_KINDS = {int: np.int64, float: np.float64, bool: np.bool_}
#: The largest offset of Arrow's (32-bit) text; a longer block goes through Arrow.
_MAX_TEXT_OFFSET = 2**31 - 1
#: What converting plain values to Arrow raises on ints past int64 or text with lone
#: surrogates: those values go the Python way.
CONVERSION_ERRORS = (pa.ArrowException, OverflowError, TypeError, ValueError, UnicodeError)
