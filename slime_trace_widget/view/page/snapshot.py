"""Standalone HTML snapshot: the widget's bundle and data in one offline file.

The page carries the notebook widget's JS bundle and payload, so it draws the
same picture, plus what the notebook asks the kernel for: every attribute of
the included spans and events (column by column, ``page_attrs``) and the
samples' texts. It opens from ``file://`` with the network off (``htmlpage``
has the page and its two blocks). Attribute strings longer than
:data:`SNAPSHOT_MAX_CHARS` are cut with a ``…[truncated N chars]`` marker; each
sample text is cut to :data:`SNAPSHOT_MAX_CHARS`, or less when all of them
together would pass :data:`SNAPSHOT_TEXT_BUDGET` (thousands of long agent
transcripts would make a page of hundreds of megabytes), and the panel says
how much the page leaves out.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...frames.model import TraceFrames
from ...values import clean_text
from ...whole_files import write_whole
from ..contract import SAMPLE_TEXT_FIELDS
from ..details import (
    TEXT_PREVIEW_CHARS,
    cut_text,
    event_fields,
    sample_summaries,
    segment_fields,
    span_fields,
)
from ..payload import EncodedView, encode
from .gzip_parallel import ParallelGzip, Section
from .htmlpage import MAGIC, Blocks, page
from .page_attrs import Buffers, page_attr_table, page_item_table

SNAPSHOT_MAX_CHARS = 20_000
#: Characters of sample text one page holds: about 4 MB of page for natural text
#: after gzip and base64 (at most twice that, counting the previews that the
#: summaries repeat from the longer cuts).
SNAPSHOT_TEXT_BUDGET = 8_000_000
#: zlib level of the page's data: below zlib's default (6), as a page is compressed
#: on every save and its columns of small codes compress nearly as well at level 4.
COMPRESS_LEVEL = 4


def snapshot_html(
    frames: TraceFrames,
    view: EncodedView | None = None,
    *,
    view_state: dict | None = None,
    view_range: list[float] | None = None,
    title: str | None = None,
    max_chars: int = SNAPSHOT_MAX_CHARS,
    text_budget: int = SNAPSHOT_TEXT_BUDGET,
) -> str:
    """The snapshot page as text: ``view`` (default: everything) of ``frames``."""
    view = view or encode(frames, title=title)
    blocks = data_blocks(frames, view, view_state=view_state, view_range=view_range,
                         max_chars=max_chars, text_budget=text_budget)
    return page(blocks, view.payload["meta"]["title"])


def write_snapshot(path: str | Path, frames: TraceFrames, view: EncodedView | None = None,
                   **options: Any) -> Path:
    """Write :func:`snapshot_html` to ``path`` and return the path."""
    return write_whole(path, snapshot_html(frames, view, **options))


def data_blocks(
    frames: TraceFrames,
    view: EncodedView,
    *,
    view_state: dict | None = None,
    view_range: list[float] | None = None,
    max_chars: int = SNAPSHOT_MAX_CHARS,
    text_budget: int = SNAPSHOT_TEXT_BUDGET,
    source: dict | None = None,
) -> Blocks:
    """The compressed data and details blocks of a page; ``source`` notes its inputs.

    Each block's buffers are compressed as they are made (``gzip_parallel``), so on
    a 50k-span rollout the other cores deflate the attribute tables while this
    thread builds the rest of the details and their JSON."""
    payload = view.payload
    with ParallelGzip(COMPRESS_LEVEL) as gzip:
        data_head, data_body = gzip.section(), _Body(gzip.section())
        for name, buffer in payload["buffers"].items():
            data_body[name] = buffer
        meta = dict(payload["meta"], attrs_embedded=True)
        data_head.write(_head({
            "payload": {"version": payload["version"], "meta": meta,
                        "buffers": data_body.offsets},
            "state": {"view_state": view_state or {}, "view_range": list(view_range or []),
                      "selected": {}},
            "source": source or {},
        }))
        # The data block is complete: its last pieces go now, not behind the details'.
        for section in (data_head, data_body.section):
            section.flush()
        details_body = _Body(gzip.section())
        details = _details(frames, view, max_chars, text_budget, details_body)
        details["buffers"] = details_body.offsets
        details_head = gzip.section()
        details_head.write(_head(details))
        return Blocks(gzip.member([data_head, data_body.section]),
                      gzip.member([details_head, details_body.section]))


def _head(header: dict[str, Any]) -> bytes:
    """A block's start, ``MAGIC | u32 header length | header JSON``, its body after it.
    The JSON is padded with spaces so that the body, whose buffers are 8-byte
    aligned, starts aligned too."""
    text = _utf8(json.dumps(header, allow_nan=False, ensure_ascii=False,
                            separators=(",", ":")))
    text += b" " * (-(len(MAGIC) + 4 + len(text)) % 8)
    return MAGIC + struct.pack("<I", len(text)) + text


def _utf8(text: str) -> bytes:
    """``text`` as UTF-8; a lone surrogate (a path that is not UTF-8, in the source
    note) becomes U+FFFD, as every text of a dump does (``values.clean_text``)."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return clean_text(text).encode()


class _Body:
    """A block's body, its buffers given one by one (``page_attrs`` names them): each
    written on to the section 8-byte aligned, ``offsets`` saying where."""

    def __init__(self, section: Section) -> None:
        self.section = section
        self.offsets: dict[str, list[int]] = {}
        self._position = 0

    def __len__(self) -> int:
        return len(self.offsets)

    def __setitem__(self, name: str, data: bytes) -> None:
        self.offsets[name] = [self._position, len(data)]
        padding = -len(data) % 8
        self.section.write(data)
        self.section.write(b"\0" * padding)
        self._position += len(data) + padding


def _details(frames: TraceFrames, view: EncodedView, max_chars: int, text_budget: int,
             buffers: Buffers) -> dict[str, Any]:
    """Columnar detail tables in payload order (read by ``js/src/page/snapshot.js``); the
    attribute tables' bytes go to ``buffers`` first, since they are most of the bytes
    to compress, then the items' own fields."""
    span_rows = frames.span_core.index.get_indexer(view.span_index)
    event_rows = frames.event_core.index.get_indexer(view.event_index)
    attrs = {name: page_attr_table(table, rows, max_chars, buffers) for name, table, rows in (
        ("span_start_attrs", frames.span_start_attrs, span_rows),
        ("span_end_attrs", frames.span_end_attrs, span_rows),
        ("event_attrs", frames.event_attrs, event_rows))}
    preview, texts = _sample_texts(frames, view.sample_rows, max_chars, text_budget)
    return {
        "spans": page_item_table(span_fields(frames, view.span_index), buffers),
        "events": page_item_table(event_fields(frames, view.event_index), buffers),
        **attrs,
        "samples": sample_summaries(frames, view.sample_rows, max_chars, preview),
        "sample_texts": texts,
        "segments": page_item_table(_segments_by_owner(frames, view.span_index), buffers),
    }


def _segments_by_owner(frames: TraceFrames, span_index: np.ndarray) -> dict[str, np.ndarray]:
    """The PD segments of the payload's spans, their owner the span's payload position,
    sorted by it (the page finds a span's segments by binary search)."""
    segments = segment_fields(frames, span_index)
    position = pd.Series(np.arange(len(span_index)), index=span_index)
    segments["owner"] = position.loc[segments["owner"]].to_numpy(dtype=np.int64)
    order = np.argsort(segments["owner"], kind="stable")
    return {name: values[order] for name, values in segments.items()}


def _sample_texts(frames: TraceFrames, rows: np.ndarray, max_chars: int,
                  budget: int) -> tuple[int, dict[str, list[str | None]]]:
    """How many characters of each text the summaries preview, and per field, per
    payload sample, the longer cut "show all" shows (None where the preview is all
    the page holds).

    All texts share ``budget`` equally, each up to ``max_chars``; with many long
    texts the previews get shorter than the notebook's, so the page stays bounded.
    """
    columns = {field: frames.samples.loc[rows, field].tolist() for field in SAMPLE_TEXT_FIELDS}
    lengths = [min(len(v), max_chars) for values in columns.values() for v in values
               if isinstance(v, str)]
    cap = equal_share(lengths, budget)
    preview = min(TEXT_PREVIEW_CHARS, cap)
    longer = cap > preview  # else the previews are all the page can hold
    return preview, {
        field: [cut_text(v, cap)[0] if longer and isinstance(v, str) and len(v) > preview
                else None for v in values]
        for field, values in columns.items()}


def equal_share(lengths: list[int], budget: int) -> int:
    """The largest cut at which texts of ``lengths`` fit ``budget`` characters together.

    Texts shorter than the cut stay whole and leave their unused share to the
    longer ones, which are all cut at the same length.
    """
    remaining, left = budget, len(lengths)
    for length in sorted(lengths):
        share = remaining // left
        if length > share:
            return share
        remaining -= length
        left -= 1
    return max(lengths, default=0)
