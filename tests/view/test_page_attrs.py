"""Attribute tables a page embeds: written by Python, read back by the page's own
decoder (``js/src/page/page_attrs.js``, run in Node), row for row what the kernel sends."""

from __future__ import annotations

import base64
import itertools
import json
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from slime_trace_widget.tables import attr_columns
from slime_trace_widget.tables.attr_columns import AttrTable
from slime_trace_widget.values import exact_in_browser, json_safe
from slime_trace_widget.view.page import page_attrs
from slime_trace_widget.view.page.page_attrs import page_attr_table

DECODER = Path(__file__).parents[2] / "js" / "src" / "page" / "page_attrs.js"
MAX_CHARS = 40

#: Every kind a column can have, absent keys, explicit Nones, text past the cut,
#: NaN and infinities, ints past 2**53 and past int64, nesting, odd keys.
ROWS = [
    {"turn": 1, "tool": "python", "ok": True, "latency": 0.5, "id": 2**60 + 1},
    None,
    {"turn": 2, "latency": math.nan, "reason": None, "long": "x" * 100},
    {"nested": {"hits": [1, 2], "text": "y" * 100}, "mixed": 1, "latency": math.inf},
    {"mixed": "text", "tool": "search", "huge": 2**70, "ok": False, "__proto__": "p"},
    {},
    {"latency": -math.inf, "turn": None, "tool": "<b>bold</b>", "ok": None},
    {"turn": 3, "tool": "python", "nested": [1, "two", None]},
]


def _table(attrs: AttrTable, positions: np.ndarray) -> tuple[dict, dict[str, bytes]]:
    buffers: dict[str, bytes] = {}
    return page_attr_table(attrs, positions, MAX_CHARS, buffers), buffers


def _decoded(written: tuple[dict, dict[str, bytes]], rows: int, expected: list) -> None:
    """Decode every row of a written table in Node and compare with ``expected`` there
    (JSON parsed by the same engine), keys in order. Each buffer sits at an odd
    offset of its own ArrayBuffer, as no block guarantees alignment to the reader."""
    table, buffers = written
    node = shutil.which("node")
    assert node, "Node is needed for the front end's tests"
    script = f"""
import {{ attrRow }} from {json.dumps(DECODER.as_uri())};
import {{ readFileSync }} from "node:fs";
const [table, encoded, expected] = JSON.parse(readFileSync(0, "utf8"));
const views = {{}};
for (const [name, text] of Object.entries(encoded)) {{
  const bytes = Buffer.from(text, "base64");
  const holder = new Uint8Array(bytes.length + 1);
  holder.set(bytes, 1);
  views[name] = new DataView(holder.buffer, 1, bytes.length);
}}
const got = [];
for (let row = 0; row < {rows}; row++) got.push(attrRow(table, row, views));
const same = JSON.stringify(got.map((r) => r && Object.entries(r))) ===
  JSON.stringify(expected.map((r) => r && Object.entries(r)));
if (!same) {{ console.log(JSON.stringify({{ got, expected }})); process.exit(1); }}
if (attrRow(table, {rows}, views) !== null || attrRow(table, -1, views) !== null) process.exit(2);
"""
    result = subprocess.run([node, "--input-type=module", "-e", script],
                            input=json.dumps([table, {name: base64.b64encode(data).decode()
                                                      for name, data in buffers.items()},
                                               expected], allow_nan=False),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_row_reads_back_as_the_kernel_sends_it() -> None:
    attrs = AttrTable.from_dicts(ROWS)
    every = np.arange(len(ROWS))
    _decoded(_table(attrs, every), len(ROWS), attrs.json_rows(every, MAX_CHARS))


def test_rows_in_the_order_asked_and_keys_past_the_cap(monkeypatch) -> None:
    monkeypatch.setattr(attr_columns, "MAX_ATTR_COLUMNS", 3)
    attrs = AttrTable.from_dicts(ROWS)
    order = np.array([7, 0, 4, 4, 2])
    written = _table(attrs, order)
    assert written[0]["overflow"]  # keys past the cap ride per row
    _decoded(written, len(order), attrs.json_rows(order, MAX_CHARS))


def test_texts_written_once_numbers_as_bytes() -> None:
    rows = [{"model": "qwen3-4b", "tokens": k} for k in range(1000)]
    table, buffers = _table(AttrTable.from_dicts(rows), np.arange(1000))
    columns = {column["key"]: column for column in table["columns"]}
    assert buffers[columns["model"]["data"]] == b"qwen3-4b"
    assert buffers[columns["model"]["codes"]] == bytes(4000)
    tokens = columns["tokens"]
    assert tokens["kind"] == "i64" and "valid" not in tokens
    assert np.frombuffer(buffers[tokens["values"]], "<i8").tolist() == list(range(1000))


@pytest.mark.parametrize("rows", [[], [None, {}]])
def test_tables_without_attributes(rows: list) -> None:
    attrs = AttrTable.from_dicts(rows)
    every = np.arange(len(rows))
    _decoded(_table(attrs, every), len(rows), attrs.json_rows(every, MAX_CHARS))


def test_ints_past_2_53_reach_the_browser_as_their_digits() -> None:
    """A browser reads JSON numbers as doubles: 2**60 + 1 would show as ...6976. The
    kernel sends such ints as their digits, at the top and inside a list or dict, and
    the page reads its int64 bytes and its JSON texts the same way."""
    rows = [{"seed": 2**60 + 1, "small": 2**53 - 1, "low": -(2**53), "inner": {"id": 2**60 + 3}},
            {"seed": 7, "inner": [1, 2**61]},
            {"seed": -(2**62)}]
    attrs = AttrTable.from_dicts(rows)
    every = np.arange(len(rows))
    sent = attrs.json_rows(every, MAX_CHARS)
    assert sent == [
        {"seed": str(2**60 + 1), "small": 2**53 - 1, "low": str(-(2**53)),
         "inner": {"id": str(2**60 + 3)}},
        {"seed": 7, "inner": [1, str(2**61)]},
        {"seed": str(-(2**62))}]
    _decoded(_table(attrs, every), len(rows), sent)


#: Nested NaN and infinities, short enough that no text is cut: the tables keep them as
#: Python's JSON writes them, which the browser's ``JSON.parse`` refuses.
NON_FINITE_ROWS = [{"scores": [1.0, math.nan], "deep": {"x": -math.inf}, "label": "NaN"},
                   {"scores": [math.inf, 2**60 + 5], "deep": {"x": 1.5}},
                   {"deep": {"note": "Infinity is a word"}, "label": "ok"}]


def test_nested_non_finite_numbers_reach_the_browser_as_the_kernel_sends_them() -> None:
    attrs = AttrTable.from_dicts(NON_FINITE_ROWS)
    every = np.arange(len(NON_FINITE_ROWS))
    sent = attrs.json_rows(every, 1000)
    assert sent[0]["scores"] == [1.0, "NaN"] and sent[1]["scores"] == ["Infinity", str(2**60 + 5)]
    buffers: dict[str, bytes] = {}
    _decoded((page_attr_table(attrs, every, 1000, buffers), buffers), len(every), sent)


@pytest.mark.parametrize("max_chars", [None, 1000, 5])
def test_json_texts_for_the_page_are_strict_json(max_chars: int | None) -> None:
    """Every JSON text a page gets reads with a strict parser (no NaN, no Infinity) as
    the value the kernel would send, also when texts are not cut (``max_chars`` None)."""
    attrs = AttrTable.from_dicts(NON_FINITE_ROWS)
    for key in ("scores", "deep"):
        buffers: dict[str, bytes] = {}
        column = page_attrs._column(key, attrs.column(key).combine_chunks(), True, max_chars,
                                    buffers)
        assert column["kind"] == "json"
        offsets = np.frombuffer(buffers[column["offsets"]], "<i4").tolist()
        data = buffers[column["data"]]
        got = [json.loads(data[start:end].decode(), parse_constant=_refuse)
               for start, end in itertools.pairwise(offsets)]
        values = [row[key] for row in NON_FINITE_ROWS if key in row]
        assert got == [exact_in_browser(json_safe(value, max_chars or 1000))
                       for value in values]


def _refuse(constant: str) -> None:
    raise ValueError(f"{constant} is not strict JSON")
