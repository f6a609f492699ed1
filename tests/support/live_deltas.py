"""A live delta read back as a renderer holds it, for the live view's tests: the same
arithmetic as ``js/src/live/splice.js`` applied to a whole delta; and the payload a
snapshot page (the one a live page hands over to) holds."""

from __future__ import annotations

import base64
import gzip
import json
import re
import struct

import numpy as np

from slime_trace_widget.view.contract import COLUMN_DTYPES, column_bytes, column_values
from slime_trace_widget.view.live_blocks import LiveDelta, code_tables, split_blocks


def absolute_items(delta: LiveDelta) -> dict[str, np.ndarray]:
    """The item columns of a full delta with block-relative pointers made absolute:
    the payload a renderer that applied it holds."""
    meta = delta.meta
    columns = {name: column_values(name, data).astype(np.float64
               if COLUMN_DTYPES[name][0] == "f" else np.int64)
               for name, data in delta.buffers.items()}
    span_starts = np.concatenate([[0], np.cumsum(meta["counts"]["span"])])[:-1]
    for name, owner in (("span_parent", "span"), ("ev_parent", "ev"), ("seg_span", "seg")):
        block_of_row = np.repeat(np.arange(len(meta["positions"])), meta["counts"][owner])
        values = columns[name]
        columns[name] = np.where(values >= 0, values + span_starts[block_of_row], -1)
    return columns


def as_payload(delta: LiveDelta) -> dict:
    """A whole delta as the payload a renderer holds after applying it."""
    columns = absolute_items(delta)
    meta = delta.meta
    packed = {name: column_bytes(name, values) for name, values in columns.items()}
    return {"meta": {**{k: meta[k] for k in ("names", "statuses", "sources", "rollouts")},
                     "samples": meta["samples"]}, "buffers": packed}


def blocks_by_trace(payload: dict) -> dict:
    """A payload's per-sample blocks by trace id, each with its names table."""
    tables = code_tables()
    blocks = split_blocks(payload, tables)
    return {str(b.strings["trace_id"]): (b, tables["names"].values) for b in blocks}


def assert_same_rows(live: dict, dump: dict, trace_ids: set[str]) -> None:
    """The live rows are the dump's rows: the same samples (``trace_ids``) with the
    same spans, segments and events, at the same times (within a millisecond)."""
    live_blocks, dump_blocks = blocks_by_trace(live), blocks_by_trace(dump)
    assert set(live_blocks) == set(dump_blocks) == trace_ids
    for trace_id, (block, names) in live_blocks.items():
        other, other_names = dump_blocks[trace_id]
        for column in ("span_start", "span_end", "span_lane", "span_depth", "span_flags",
                       "span_parent", "seg_start", "seg_end", "ev_ts", "ev_parent"):
            np.testing.assert_allclose(block.items[column], other.items[column],
                                       rtol=0, atol=1e-3, err_msg=column)
        for column in ("span_name", "ev_name", "seg_name"):
            assert [names[c] for c in block.items[column]] == \
                   [other_names[c] for c in other.items[column]], column


def page_payload(html: bytes) -> dict:
    """The payload a snapshot page's data block holds (``view/page/snapshot.py``)."""
    data = re.search(rb'<script type="text/plain" id="stw-data">([^<]*)</script>', html)
    assert data, "no data block in the page"
    raw = gzip.decompress(base64.b64decode(data[1]))
    assert raw[:4] == b"STW1"
    (length,) = struct.unpack("<I", raw[4:8])
    header = json.loads(raw[8:8 + length])
    body = raw[8 + length:]
    payload = header["payload"]
    return {"meta": payload["meta"], "buffers": {
        name: body[start:start + size] for name, (start, size) in payload["buffers"].items()}}
