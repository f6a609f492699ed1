"""The details a snapshot page shows for a clicked span or event: read by the page's
own code (``js/src/page/snapshot.js``, run in Node) from the details block Python
wrote, field for field what the kernel sends the notebook for the same item."""

from __future__ import annotations

import base64
import gzip
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from slime_trace_widget import load_frames
from slime_trace_widget.view.details import (
    event_columns,
    event_detail,
    json_columns,
    span_detail,
)
from slime_trace_widget.view.page.page_attrs import page_item_table
from slime_trace_widget.view.page.snapshot import data_blocks
from slime_trace_widget.view.payload import encode
from tests.support.dump_samples import events_or_empty, span_sample

FIXTURES = Path(__file__).parents[1] / "fixtures"
SNAPSHOT_JS = Path(__file__).parents[2] / "js" / "src" / "page" / "snapshot.js"
PAGE_ATTRS_JS = Path(__file__).parents[2] / "js" / "src" / "page" / "page_attrs.js"
#: What the kernel's reply has beyond the item's own fields: the page assembles
#: those from other parts of the block, tested elsewhere.
ELSEWHERE = ("sample", "start_attrs", "end_attrs", "attrs")


def _node(script: str, data: object) -> object:
    node = shutil.which("node")
    assert node, "Node is needed for the front end's tests"
    result = subprocess.run([node, "--input-type=module", "-e", script],
                            input=json.dumps(data, allow_nan=False), capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout)


def _page_details(blocks: object, spans: int, events: int) -> dict:
    """Every payload span's and event's detail as the page assembles it."""
    script = f"""
import {{ parseBlock, parseDetails, detailFor }} from {json.dumps(SNAPSHOT_JS.as_uri())};
import {{ readFileSync }} from "node:fs";
const [data, details] = JSON.parse(readFileSync(0, "utf8")).map((text) => {{
  const bytes = Buffer.from(text, "base64");
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length);
}});
const {{ payload }} = parseBlock(data);
const parsed = parseDetails(details);
const out = {{ spans: [], events: [] }};
for (let i = 0; i < {spans}; i++) out.spans.push(detailFor(parsed, payload, "span", i));
for (let i = 0; i < {events}; i++) out.events.push(detailFor(parsed, payload, "event", i));
out.beyond = [detailFor(parsed, payload, "span", {spans}), detailFor(parsed, payload, "event", -1)];
console.log(JSON.stringify(out));
"""
    raw = [base64.b64encode(gzip.decompress(block)).decode()
           for block in (blocks.data, blocks.details)]  # type: ignore[attr-defined]
    return _node(script, raw)  # type: ignore[return-value]


def _own_fields(detail: dict) -> list:
    return [[key, value] for key, value in detail.items() if key not in ELSEWHERE]


@pytest.mark.parametrize("fixture", ["small", "legacy_v1_pd", "edge_open_span",
                                     "edge_orphan_end", "edge_malformed_events"])
def test_page_details_are_the_kernels(fixture: str) -> None:
    """Open spans (no end: null), unmatched ends, PD segments of virtual spans, in
    payload order: the same fields, values and key order as the notebook's reply."""
    frames = load_frames(FIXTURES / f"{fixture}.pt", progress=False)
    view = encode(frames)
    page = _page_details(data_blocks(frames, view), len(view.span_index), len(view.event_index))
    kernel_spans = [json.loads(json.dumps(span_detail(frames, int(index))))
                    for index in view.span_index]
    kernel_events = [json.loads(json.dumps(event_detail(frames, int(index))))
                     for index in view.event_index]
    assert [_own_fields(d) for d in page["spans"]] == [_own_fields(d) for d in kernel_spans]
    assert [_own_fields(d) for d in page["events"]] == [_own_fields(d) for d in kernel_events]
    assert page["beyond"] == [None, None]
    assert any(d["segments"] for d in kernel_spans) or fixture != "legacy_v1_pd"


def test_item_fields_are_bytes_written_once() -> None:
    """Numbers go as their bytes, a name repeated over every row as one text, a none
    as a cleared bit: no JSON per row."""
    frames = load_frames(FIXTURES / "edge_open_span.pt", progress=False)
    fields = {"end": frames.span_core["end"].to_numpy(),
              "name": np.array(["generate"] * len(frames.span_core), dtype=object)}
    buffers: dict[str, bytes] = {}
    table = page_item_table(fields, buffers)
    end, name = table["columns"]
    assert table["rows"] == len(frames.span_core)
    assert end["kind"] == "f64" and "valid" in end
    open_rows = np.flatnonzero(np.isnan(fields["end"]))
    valid = np.unpackbits(np.frombuffer(buffers[end["valid"]], np.uint8), bitorder="little")
    assert np.flatnonzero(valid[:len(fields["end"])] == 0).tolist() == open_rows.tolist()
    assert name["kind"] == "text" and buffers[name["data"]] == b"generate"


def test_item_rows_null_where_none() -> None:
    """A text's None and a number that is not finite read as null; a row or field the
    table lacks as null too, never as undefined or an exception."""
    buffers: dict[str, bytes] = {}
    fields = {"ts": np.array([1.5, np.nan, np.inf]), "id": np.array(["a", None, "a"], dtype=object),
              "attempt": np.array([0, 1, 2]), "virtual": np.array([True, False, True])}
    table = page_item_table(fields, buffers)
    script = f"""
import {{ itemRow, itemField }} from {json.dumps(PAGE_ATTRS_JS.as_uri())};
import {{ readFileSync }} from "node:fs";
const [table, encoded] = JSON.parse(readFileSync(0, "utf8"));
const views = {{}};
for (const [name, text] of Object.entries(encoded)) {{
  const bytes = Buffer.from(text, "base64");
  views[name] = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
}}
const rows = [0, 1, 2, 3, -1].map((row) => itemRow(table, row, views));
console.log(JSON.stringify({{ rows, missing: itemField(table, "nope", views)(0) }}));
"""
    out = _node(script, [table, {name: base64.b64encode(data).decode()
                                 for name, data in buffers.items()}])
    expected = [dict(zip(fields, values, strict=True))
                for values in zip(*json_columns(fields).values(), strict=True)]
    assert expected[1] == {"ts": None, "id": None, "attempt": 1, "virtual": False}
    assert out == {"rows": [*expected, None, None], "missing": None}


def test_event_columns_keep_their_json_form() -> None:
    """The notebook's lists: not-finite numbers None, ints and flags as Python values."""
    frames = load_frames(FIXTURES / "edge_orphan_end.pt", progress=False)
    columns = event_columns(frames, frames.event_core.index)
    assert columns["kind"].count("unmatched_end") == 4
    assert all(type(value) is int for value in columns["attempt"] + columns["index"])
    json.dumps(columns, allow_nan=False)


def test_nested_non_finite_attributes_of_a_dump_show_on_the_page(tmp_path: Path) -> None:
    """A dump's nested NaN, infinities and ints past 2**53: the attribute tables keep
    them as Python's JSON writes them, the page gets strict JSON it parses, and each
    span's and event's attributes read there as the kernel sends them."""
    attrs = {"scores": [1.0, float("nan"), float("inf")], "big": [2**70],
             "deep": {"x": float("-inf"), "y": [{"z": float("nan")}]}, "top": float("nan")}
    sample = span_sample(0, attrs)
    start = events_or_empty(sample)[0]
    events_or_empty(sample).insert(1, {**start, "type": "event", "name": "scored",
                                       "span_id": "e" * 32, "ts": 1.5, "attrs": attrs})
    path = tmp_path / "rollout_1.pt"
    torch.save({"rollout_id": 1, "samples": [sample, span_sample(1, {"deep": {"x": 1}})]},
               path)
    frames = load_frames(path, progress=False)
    view = encode(frames)
    page = _page_details(data_blocks(frames, view), len(view.span_index), len(view.event_index))
    kernel_spans = [span_detail(frames, int(index)) for index in view.span_index]
    kernel_events = [event_detail(frames, int(index)) for index in view.event_index]
    assert [[d["start_attrs"], d["end_attrs"]] for d in page["spans"]] == \
        [[d["start_attrs"], d["end_attrs"]] for d in kernel_spans]
    assert [d["attrs"] for d in page["events"]] == [d["attrs"] for d in kernel_events]
    shown = next(d["end_attrs"] for d in page["spans"] if "scores" in d["end_attrs"])
    assert shown == {"scores": [1.0, "NaN", "Infinity"], "big": [str(2**70)],
                     "deep": {"x": "-Infinity", "y": [{"z": "NaN"}]}, "top": "NaN"}
