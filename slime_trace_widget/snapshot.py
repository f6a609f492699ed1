"""Standalone HTML snapshot: the widget's bundle and data in one offline file.

The page carries the same JS bundle and payload as the notebook widget, so it
draws the same picture, plus every attribute of the included spans and events
(the notebook fetches those from the kernel; a snapshot has no kernel). It
opens from ``file://`` with the network off: nothing is fetched, and a
Content-Security-Policy forbids any connection should something try.

Data block (gzip, then base64, inside a ``text/plain`` script element):
``b"STW1" | u32 header length | header JSON | column bytes | details JSON``.
The header holds the payload meta with each buffer as ``[offset, length]``,
the synced state (filters, sort, zoom) and where the details JSON lies; the
details are parsed by the page on the first click, not at start-up. Strings in
attributes longer than :data:`SNAPSHOT_MAX_CHARS` are cut with a
``…[truncated N chars]`` marker. Base64 has no ``<``, so nothing in a dump can
close the script element; the title is HTML-escaped.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .details import event_columns, sample_summaries, segment_columns, span_columns
from .frames import TraceFrames
from .payload import EncodedView, encode

SNAPSHOT_MAX_CHARS = 20_000
MAGIC = b"STW1"
_STATIC = Path(__file__).parent / "static"

_CSP = ("default-src 'none'; script-src 'unsafe-inline' blob:; style-src 'unsafe-inline'; "
        "img-src data: blob:; font-src data:")

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{css}</style>
<style>
html, body {{ margin: 0; background: #f3f4f6; }}
body {{ padding: 12px; }}
#stw-error {{ color: #b00020; font-family: monospace; white-space: pre-wrap; }}
@media (prefers-color-scheme: dark) {{
  html, body {{ background: #111214; }}
  #app {{ --jp-layout-color0: #1b1c1f; --jp-layout-color1: #222327;
    --jp-layout-color2: #2c2e33; --jp-ui-font-color0: #ffffff;
    --jp-ui-font-color1: rgba(255,255,255,0.87); --jp-ui-font-color2: rgba(255,255,255,0.54);
    --jp-border-color1: #4b4d52; --jp-border-color2: #36383c; --jp-brand-color1: #42a5f5; }}
}}
</style>
</head>
<body>
<div id="app"></div>
<div id="stw-error"></div>
<script type="text/plain" id="stw-bundle">{bundle}</script>
<script type="text/plain" id="stw-data">{data}</script>
<script type="module">
try {{
  const text = document.getElementById("stw-bundle").textContent.trim();
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  const url = URL.createObjectURL(new Blob([bytes], {{ type: "text/javascript" }}));
  const bundle = await import(url);
  await bundle.bootSnapshot(document.getElementById("stw-data"),
                            document.getElementById("app"), bundle.render);
}} catch (err) {{
  document.getElementById("stw-error").textContent =
    "This snapshot could not be opened: " + (err && err.message ? err.message : err);
}}
</script>
</body>
</html>
"""


def snapshot_html(
    frames: TraceFrames,
    view: EncodedView | None = None,
    *,
    view_state: dict | None = None,
    view_range: list[float] | None = None,
    title: str | None = None,
    max_chars: int = SNAPSHOT_MAX_CHARS,
) -> str:
    """The snapshot page as text: ``view`` (default: everything) of ``frames``."""
    view = view or encode(frames, title=title)
    block = data_block(frames, view, view_state=view_state, view_range=view_range,
                       max_chars=max_chars)
    return page(block, view.payload["meta"]["title"])


def write_snapshot(path: str | Path, frames: TraceFrames, view: EncodedView | None = None,
                   **options: Any) -> Path:
    """Write :func:`snapshot_html` to ``path`` and return the path."""
    target = Path(path)
    target.write_text(snapshot_html(frames, view, **options), encoding="utf-8")
    return target


def data_block(
    frames: TraceFrames,
    view: EncodedView,
    *,
    view_state: dict | None = None,
    view_range: list[float] | None = None,
    max_chars: int = SNAPSHOT_MAX_CHARS,
    source: dict | None = None,
) -> bytes:
    """The gzip-compressed data block of a page; ``source`` notes what it was built from."""
    payload = view.payload
    buffers, offsets = _concatenate(payload["buffers"])
    details = json.dumps(_details(frames, view, max_chars), allow_nan=False,
                         ensure_ascii=False, separators=(",", ":")).encode()
    meta = dict(payload["meta"], attrs_embedded=True)
    header = json.dumps({
        "payload": {"version": payload["version"], "meta": meta, "buffers": offsets},
        "state": {"view_state": view_state or {}, "view_range": list(view_range or []),
                  "selected": {}},
        "details": [len(buffers), len(details)],
        "source": source or {},
    }, allow_nan=False, separators=(",", ":")).encode()
    block = MAGIC + struct.pack("<I", len(header)) + header + buffers + details
    return gzip.compress(block, compresslevel=6, mtime=0)


def block_header(block_path: str | Path) -> dict[str, Any]:
    """The header of a data block file, read without decompressing the rest."""
    with gzip.open(block_path, "rb") as stream:
        start = stream.read(8)
        if len(start) != 8 or start[:4] != MAGIC:
            raise ValueError(f"{block_path}: not a slime-trace-widget data block")
        (length,) = struct.unpack("<I", start[4:])
        return json.loads(stream.read(length))


def page(block: bytes, title: str) -> str:
    """Wrap a data block and the bundle in the offline HTML page."""
    data = base64.b64encode(block).decode()
    bundle = base64.b64encode((_STATIC / "widget.js").read_bytes()).decode()
    css = (_STATIC / "widget.css").read_text().replace("</style", "<\\/style")
    return _PAGE.format(csp=_CSP, title=html.escape(title), css=css, bundle=bundle, data=data)


def _concatenate(buffers: dict[str, bytes]) -> tuple[bytes, dict[str, list[int]]]:
    """One byte string with every column 8-byte aligned, and each column's place in it."""
    parts: list[bytes] = []
    offsets: dict[str, list[int]] = {}
    position = 0
    for name, data in buffers.items():
        offsets[name] = [position, len(data)]
        padding = -len(data) % 8
        parts += [data, b"\0" * padding]
        position += len(data) + padding
    return b"".join(parts), offsets


def _details(frames: TraceFrames, view: EncodedView, max_chars: int) -> dict[str, Any]:
    """Columnar detail tables in payload order (read by ``js/src/snapshot.js``)."""
    segments = segment_columns(frames, view.span_index)
    position = pd.Series(np.arange(len(view.span_index)), index=view.span_index)
    owners = position.loc[segments["owner"]].to_numpy() if segments["owner"] else np.zeros(0)
    order = np.argsort(owners, kind="stable").tolist()
    segments = {name: [values[i] for i in order] for name, values in segments.items()}
    segments["owner"] = owners[order].tolist()
    return {
        "spans": span_columns(frames, view.span_index, max_chars),
        "events": event_columns(frames, view.event_index, max_chars),
        "samples": sample_summaries(frames, view.sample_rows, max_chars),
        "segments": segments,
    }
