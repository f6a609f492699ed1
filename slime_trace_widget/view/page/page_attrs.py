"""Attribute tables and item detail fields as a snapshot page embeds them: column
by column, numbers and texts as bytes (read by ``js/src/page/page_attrs.js``).

Not one JSON dict per row, which repeats every key on every row and escapes
every text: as columns, numbers are their bytes, a text repeated across rows is
written once, and texts reach the page as Arrow's own UTF-8 buffers, neither
escaped nor parsed. The layout of a table is in ``docs/payload.md`` ("Snapshot
attribute tables"); texts are cut to ``max_chars`` as everywhere else, and
non-finite floats read as the text ``json_safe`` gives them, inside JSON too: the
tables keep nested NaN and infinities as Python's JSON writes them, which a
browser's ``JSON.parse`` refuses, so a JSON text holding one is written again.

The spans', events' and PD segments' own detail fields (name, ids, times...) use
the same columns (:func:`page_item_table`), not JSON lists, for the same
reasons.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...tables.attr_columns import AttrTable, text_array
from ...values import exact_in_browser, json_safe, truncate

#: What may make a JSON text unfit for a browser as it is: a run of digits as long as an
#: int past 2**53 is written in (16 or more), which ``JSON.parse`` reads with other
#: digits, and the non-finite numbers ``NaN``, ``Infinity`` and ``-Infinity``, which it
#: refuses. Matched inside strings too: a text that only looks unfit is written again
#: unchanged.
NOT_FOR_BROWSER = r"\d{16,}|NaN|Infinity"


class Buffers(Protocol):
    """Where a table's byte strings go, each under the name it is given: a dict, or
    a snapshot block's body, which compresses them as they come."""

    def __len__(self) -> int: ...

    def __setitem__(self, name: str, data: bytes) -> None: ...


def page_attr_table(attrs: AttrTable, positions: np.ndarray | list[int], max_chars: int,
                    buffers: Buffers) -> dict[str, Any]:
    """The rows of ``attrs`` at ``positions``, in that order, in the page's form; its
    byte strings are added to ``buffers`` under names the table refers to."""
    table = attrs.take(positions)
    return {
        "rows": len(table),
        "columns": [_column(key, table.column(key).combine_chunks(), table.is_json(key),
                            max_chars, buffers) for key in table.keys],
        "nones": {str(position): keys for position, keys in table.explicit_nones().items()},
        "overflow": {str(position): exact_in_browser(json_safe(row, max_chars))
                     for position, row in table.overflow().items()},
    }


def page_item_table(fields: dict[str, np.ndarray], buffers: Buffers) -> dict[str, Any]:
    """Detail fields of items (``details.span_fields`` and the like: float, int, bool
    or text arrays of one length) in the page's column form. Every row has every
    field; a none (a text's None, a number that is not finite) is a cleared bit of
    the column's ``valid`` bitmap and reads back as null, as in the kernel's reply."""
    rows = len(next(iter(fields.values()))) if fields else 0
    return {"rows": rows,
            "columns": [_column(key, _item_array(values), False, None, buffers)
                        for key, values in fields.items()]}


def _item_array(values: np.ndarray) -> pa.Array:
    """One field as Arrow data: nulls where a number is not finite or a text None."""
    if values.dtype.kind == "f":
        return pa.array(values, type=pa.float64(), mask=~np.isfinite(values))
    if values.dtype.kind == "O":
        return text_array(values)
    return pa.array(values)


def _column(key: str, column: pa.Array, is_json: bool, max_chars: int | None,
            buffers: Buffers) -> dict[str, Any]:
    """One column in the page's form; texts cut to ``max_chars`` (None: as they are)."""
    def put(data: np.ndarray | bytes) -> str:
        name = str(len(buffers))
        buffers[name] = data.tobytes() if isinstance(data, np.ndarray) else data
        return name

    out: dict[str, Any] = {"key": truncate(key, 1000)}
    if column.null_count:
        out["valid"] = put(np.packbits(~np.asarray(column.is_null().to_numpy(
            zero_copy_only=False)), bitorder="little"))
    kind = column.type
    if pa.types.is_boolean(kind):
        values = column.fill_null(False).to_numpy(zero_copy_only=False).astype(np.uint8)
        return {**out, "kind": "bool", "values": put(values)}
    if pa.types.is_integer(kind):
        values = column.cast(pa.int64()).fill_null(0).to_numpy().astype("<i8", copy=False)
        return {**out, "kind": "i64", "values": put(values)}
    if pa.types.is_floating(kind):
        values = column.cast(pa.float64()).fill_null(0.0).to_numpy().astype("<f8", copy=False)
        return {**out, "kind": "f64", "values": put(values)}
    coded = pc.dictionary_encode(column.cast(pa.string()))
    codes = coded.indices.fill_null(-1).to_numpy().astype("<i4", copy=False)
    texts = coded.dictionary
    if is_json:
        texts = _browser_json(texts, max_chars)
    elif max_chars is not None:
        texts = _cut(texts, max_chars)
    offsets, data = _utf8(texts)
    return {**out, "kind": "json" if is_json else "text", "codes": put(codes),
            "offsets": put(offsets), "data": put(data)}


def _cut(texts: pa.Array, max_chars: int) -> pa.Array:
    """``texts`` with every text cut to ``max_chars``."""
    if not len(texts) or pc.max(pc.utf8_length(texts)).as_py() <= max_chars:
        return texts  # the common case: nothing to cut, nothing to copy
    return pa.array([truncate(text, max_chars) for text in texts.to_pylist()], type=pa.string())


def _browser_json(texts: pa.Array, max_chars: int | None) -> pa.Array:
    """JSON ``texts`` as strict JSON a browser reads as the kernel's reply has the value:
    every string inside cut to ``max_chars`` (None: none cut), NaN and infinities as
    the texts ``json_safe`` makes of them and every int past 2**53 as its digits
    (:func:`values.exact_in_browser`). Texts are decoded only when one may need it
    (:data:`NOT_FOR_BROWSER`, or one longer than ``max_chars``); all are then written
    again, a text that needed nothing as it was."""
    if not len(texts):
        return texts
    too_long = max_chars is not None and pc.max(pc.utf8_length(texts)).as_py() > max_chars
    if not too_long and not pc.any(pc.match_substring_regex(texts, NOT_FOR_BROWSER)).as_py():
        return texts  # the common case: nothing to cut, nothing to copy
    return pa.array([_browser_text(text, max_chars) for text in texts.to_pylist()],
                    type=pa.string())


def _browser_text(text: str, max_chars: int | None) -> str:
    """One JSON text as :func:`_browser_json` writes it. Without ``max_chars`` no string
    inside is cut: none is longer than the text, nor are all of them together."""
    value = json.loads(text)
    safe = json_safe(value, len(text) if max_chars is None else max_chars)
    return json.dumps(exact_in_browser(safe), ensure_ascii=False, allow_nan=False)


def _utf8(texts: pa.Array) -> tuple[np.ndarray, bytes]:
    """Arrow's int32 offsets (from 0) and UTF-8 bytes of a string array, as they are."""
    _, offset_buffer, data_buffer = texts.buffers()
    offsets = np.frombuffer(offset_buffer, dtype="<i4", count=len(texts) + 1,
                            offset=texts.offset * 4) if offset_buffer else np.zeros(1, "<i4")
    first, last = int(offsets[0]), int(offsets[-1])
    data = data_buffer.slice(first, last - first).to_pybytes() if data_buffer else b""
    return offsets - first, data
