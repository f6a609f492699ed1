"""What a pandas view of the frames will take in memory, told before it is made.

The tables of frames are Arrow: compact, checked against the memory available when a
worker's output is read. Their pandas views are not: text becomes one Python string
per value, and each span's attributes a dict of Python objects, two to four times the
bytes of the tables on the demo dumps. Frames of many dumps whose tables fit can so
have views that do not, and making one would end the kernel (the system's
out-of-memory killer) rather than raise. A view is therefore made only while an
upper estimate of it fits in :data:`VIEW_MEMORY_SHARE` of the memory available;
otherwise :class:`MemoryError` says which view, how much, and what to read instead.

An estimate reads the tables' types, lengths, null counts and buffer sizes, and
counts each text at four bytes a character (what CPython stores for text with a
character past U+FFFF). Only when that does not fit is the text looked at: a value
all ASCII takes a byte a character. The costs below are upper figures for CPython
3.10-3.13 and pandas 2-3 on 64-bit machines.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from ..machine_memory import available_memory, memory_amount
from ..tables.attr_columns import AttrTable
from ..tables.core_tables import CORE_SCHEMA, JSON_TEXT

__all__ = ["VIEW_INSTEAD", "VIEW_MEMORY_SHARE", "Estimate", "attr_view_bytes", "check_room",
           "table_view_bytes"]

#: A view is made only while its estimate is at most this share of the memory available.
VIEW_MEMORY_SHARE = 0.8
#: A frame's own objects (index, block manager), and each column's (array, Series).
_FRAME = 64 << 10
_COLUMN = 1 << 10
#: One column slot: a pointer or a number.
_SLOT = 8
#: A ``str`` object without its characters, with its allocator's rounding.
_STRING = 80
#: Bytes a character of text may take: four, with one past U+FFFF in the same value.
_WIDEST_CHARACTER = 4
#: A number held in a dict (float 24, int up to 36 bytes), with its allocator's rounding.
_NUMBER = 40
#: A dict per row: the table CPython allocates for up to five keys, and each further key.
_DICT = 232
_DICT_KEY = 56
#: Lists and dicts decoded from JSON text, per byte of that text ("[]," is 3 bytes
#: and a 56-byte list with a slot for its item; '{"":0},' 7 bytes and a 232-byte dict).
_JSON_PER_BYTE = 48

#: An estimate of a view: its bytes, with the text looked at (True) or not.
Estimate = Callable[[bool], int]


def table_view_bytes(table: pa.Table, name: str, look_at_text: bool = False) -> int:
    """Upper estimate of the pandas frame decoded from the core table ``name``."""
    return _FRAME + sum(_column_bytes(table.column(column.name), column.kind == JSON_TEXT,
                                      look_at_text)
                        for column in CORE_SCHEMA[name])


def attr_view_bytes(attrs: AttrTable, look_at_text: bool = False) -> int:
    """Upper estimate of the dicts column and the ``attr.<key>`` columns of ``attrs``."""
    table = attrs.table
    keys = set(attrs.keys)  # the other columns (keys set to None, keys past the cap) are JSON
    total = _FRAME + table.num_rows * (_SLOT + _DICT)
    for name in table.column_names:
        column = table.column(name)
        valid = len(column) - column.null_count
        total += _column_bytes(column, name not in keys or attrs.is_json(name), look_at_text)
        total += valid * _DICT_KEY
        if _is_number(column.type):
            total += valid * _NUMBER  # the dicts' own objects; the column keeps numpy
    return total


#: What to read instead of a view that does not fit.
VIEW_INSTEAD = ("read the Arrow tables instead (frames.tables, frames.span_end_attrs.table), "
                "load fewer dumps at once, or convert them to a run dataset "
                "(slime-trace-viewer convert) and open only the rollouts or samples you need")


def check_room(what: str, estimate: Estimate, instead: str = VIEW_INSTEAD) -> None:
    """Raise :class:`MemoryError` naming ``what`` when its ``estimate`` does not fit in
    the available share of memory (nothing when the machine does not say what it has);
    ``instead`` says what to do."""
    room = available_memory()
    if room is None:
        return
    limit = VIEW_MEMORY_SHARE * room
    if estimate(False) <= limit:
        return
    needed = estimate(True)
    if needed <= limit:
        return
    raise MemoryError(
        f"{what} would take up to {memory_amount(needed)}, more than "
        f"{VIEW_MEMORY_SHARE:.0%} of the {memory_amount(room)} of memory available: {instead}")


def _column_bytes(column: pa.ChunkedArray, json_text: bool, look_at_text: bool) -> int:
    rows = len(column)
    kind = column.type
    if _is_number(kind) or pa.types.is_boolean(kind):
        return _COLUMN + rows * (_SLOT + 1)  # a nullable int keeps a mask beside its values
    if pa.types.is_dictionary(kind):  # codes, and a str per entry of each chunk's dictionary
        return _COLUMN + rows * (_SLOT + 1) + sum(
            _text_bytes(pa.chunked_array([chunk.dictionary]), look_at_text)
            for chunk in column.chunks)
    size = _COLUMN + _SLOT * rows + _text_bytes(column, look_at_text)
    if json_text or not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        size += _JSON_PER_BYTE * column.nbytes  # decoded to Python objects
    return size


def _text_bytes(column: pa.ChunkedArray, look_at_text: bool) -> int:
    """The ``str`` objects of a column's valid values (its bytes, for what is not text)."""
    valid = len(column) - column.null_count
    kind = column.type
    if look_at_text and (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        return _STRING * valid + _characters_bytes(column)
    return _STRING * valid + _WIDEST_CHARACTER * column.nbytes


def _characters_bytes(column: pa.ChunkedArray) -> int:
    """What CPython stores for the characters of a text column, at most: a byte each
    for a value all ASCII, four for any other."""
    characters = pc.utf8_length(column)
    widths = pc.if_else(pc.string_is_ascii(column), 1, _WIDEST_CHARACTER)
    return int(pc.sum(pc.multiply(characters, widths)).as_py() or 0)


def _is_number(kind: pa.DataType) -> bool:
    return pa.types.is_integer(kind) or pa.types.is_floating(kind)
