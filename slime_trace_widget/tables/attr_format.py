"""The attribute tables' reserved columns and field mark, which building them
(``attr_columns``) and reading them back as Python (``attr_python``) share.

A table has a column per attribute key, and two reserved text columns that are null
in most rows: ``_none_keys``, a row's keys whose value was None (JSON list), and
``_overflow``, a row's attributes past the column cap (JSON object). A key's column
whose text is JSON (its values were lists or dicts) carries the field mark.

The JSON is Python's: a key's values read back exactly as ``values.plain_value`` made
them, NaN and infinities inside lists and dicts included (as the tokens ``NaN``,
``Infinity`` and ``-Infinity``, which Python's ``json`` writes and reads but strict
JSON lacks; what leaves Python for a browser is made strict where it leaves).
"""

from __future__ import annotations

import json
import operator
from itertools import compress, repeat
from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["EXTRA_COLUMNS", "JSON_FIELD", "MAX_REPEATED_CHARS", "NONE_KEYS", "OVERFLOW",
           "exact_json", "extra_rows", "is_json_field", "json_rows", "valid_rows"]

NONE_KEYS = "_none_keys"
OVERFLOW = "_overflow"
#: The reserved columns, which hold no key's values.
EXTRA_COLUMNS = (NONE_KEYS, OVERFLOW)
#: The field metadata key (value ``b"1"``) of a column of JSON text.
JSON_FIELD = b"json"
#: Most characters the JSON text of one value may hold beyond the value's own strings:
#: a string held in many places of one value (a pickle's memo lets a few bytes say so)
#: is written out at each of them. 16 Mi characters, far past what a trainer records.
MAX_REPEATED_CHARS = 1 << 24


def is_json_field(field: pa.Field) -> bool:
    """Whether the column of ``field`` holds JSON text (decoded again for the dicts)."""
    return bool(field.metadata and field.metadata.get(JSON_FIELD))


def valid_rows(column: pa.ChunkedArray) -> list[tuple[int, Any]]:
    """(position, Python value) of the non-null rows of ``column``."""
    positions = np.flatnonzero(~np.asarray(column.is_null().to_numpy(zero_copy_only=False)))
    return list(zip(positions.tolist(), column.take(pa.array(positions)).to_pylist(),
                    strict=True))


def json_rows(column: pa.ChunkedArray) -> dict[int, Any]:
    """The decoded JSON of each non-null row of a column of JSON text, by position."""
    return {position: json.loads(text) for position, text in valid_rows(column)}


def extra_rows(table: pa.Table, name: str) -> dict[int, Any]:
    """:func:`json_rows` of the reserved column ``name`` of ``table`` (none when the
    table lacks the column)."""
    return json_rows(table.column(name)) if name in table.column_names else {}


def exact_json(value: Any) -> str | None:
    """``value``, plain data as ``values.plain_value`` makes it (text keys, a bounded
    depth and number of items, no int past ``values.MAX_INT_BITS``), as JSON text that
    :func:`json_rows` reads back equal to it: floats as ``repr`` writes them, NaN and
    infinities as ``NaN``/``Infinity``/``-Infinity``, ints and strings whole.

    None, and no text made, when the text would hold more than
    :data:`MAX_REPEATED_CHARS` characters beyond the value's own strings or a list or
    dict twice (see :func:`repeated_chars`), or when ``json`` refuses the value
    (nested past the recursion limit, an int past ``sys.get_int_max_str_digits``): the
    caller then writes a bounded text instead, so the work stays that of the value's
    own size.
    """
    repeated = repeated_chars(value)
    if repeated is None or repeated > MAX_REPEATED_CHARS:
        return None
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=True)
    except (ValueError, TypeError, RecursionError):
        return None


def repeated_chars(value: Any) -> int | None:
    """How many characters JSON text of ``value`` holds beyond each of its string
    objects once (a dict's keys counted as its values are): what writing it out adds
    to what is in memory. None when a list or dict is met twice, which plain data never
    holds (its text would repeat all of that container, however deep or cyclic).

    Walked without recursion, each list and dict once, its items sorted by type in C.
    """
    written = 0
    strings: dict[int, str] = {}  # by id: each string object once, kept alive meanwhile
    containers: dict[int, Any] = {}  # by id, kept alive likewise
    pending = [value]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is str:
            written += len(item)
            strings[id(item)] = item
            continue
        if kind is dict:
            members = [*item, *item.values()]
        elif kind is list:
            members = item
        else:
            continue
        if id(item) in containers:
            return None
        containers[id(item)] = item
        kinds = list(map(type, members))
        present = set(kinds)
        if str in present:
            texts = members if present == {str} else list(
                compress(members, map(operator.is_, kinds, repeat(str))))
            written += sum(map(len, texts))
            strings.update(zip(map(id, texts), texts, strict=True))
        if list in present or dict in present:
            pending.extend(compress(members, (kind is list or kind is dict for kind in kinds)))
    return written - sum(map(len, strings.values()))
