"""The attribute tables' reserved columns and field mark, which building them
(``attr_columns``) and reading them back as Python (``attr_python``) share.

A table has a column per attribute key, and two reserved text columns that are null
in most rows: ``_none_keys``, a row's keys whose value was None (JSON list), and
``_overflow``, a row's attributes past the column cap (JSON object). A key's column
whose text is JSON (its values were lists or dicts) carries the field mark.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["EXTRA_COLUMNS", "JSON_FIELD", "NONE_KEYS", "OVERFLOW", "extra_rows", "is_json_field",
           "json_rows", "valid_rows"]

NONE_KEYS = "_none_keys"
OVERFLOW = "_overflow"
#: The reserved columns, which hold no key's values.
EXTRA_COLUMNS = (NONE_KEYS, OVERFLOW)
#: The field metadata key (value ``b"1"``) of a column of JSON text.
JSON_FIELD = b"json"


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
