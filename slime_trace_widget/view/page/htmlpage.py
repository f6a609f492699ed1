"""The offline HTML page around a snapshot's two blocks, with no heavy imports.

Kept apart from ``snapshot`` (which builds the blocks from frames and needs
pandas) so the CLI's cached path, which only rewraps blocks it stored, starts
in a fraction of a second.

A page carries the JS bundle and two gzip-then-base64 blocks, each in its own
``text/plain`` script element, both laid out as ``b"STW1" | u32 header length |
header JSON | bytes``: the *data block* (payload columns) and the *details
block* (item fields, sample texts and attribute tables, inflated by the page
on the first click only).
Base64 has no ``<``, so nothing in a dump can close a script element; the title
is HTML-escaped; a Content-Security-Policy forbids any network access. The page
template and its palette come from js/ (``src/page.html``, ``src/styles.css`` and
the sheets it imports) through the built ``static/`` files, so no node is needed at
run time.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import os
import re
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAGIC = b"STW1"
#: A cache file: ``CACHE_MAGIC | u32 data length | u32 details length | u32 CRC-32 of
#: data then details | data | details``, so that a file cut short (or grown) is told by
#: its size, and one damaged in place by its CRC when its blocks are read. ("STWC", with
#: only the data length, and "STC2", without the CRC, were the layouts before: such a
#: file is not a cache to this copy, and rebuilt.)
CACHE_MAGIC = b"STC3"
_CACHE_HEAD = struct.Struct("<4sIII")
#: The layout of the blocks this copy writes (the payload contract's version, the
#: details' tables): raised with any change to either, so that the CLI rebuilds a
#: cache of another layout instead of serving it to a page that cannot read it.
#: 2: the items' own fields in the details block are byte columns.
#: 3: the payload carries the samples' fates (``smp_fate``) and the ledger (``meta.ledger``).
#: 4: item times are offsets from each sample's float64 base (``smp_base``), and the meta
#: carries the load warnings: a cache of 3 would keep float32 times from the dump's start.
#: 5: the payload carries each span's recorded duration (``span_dur``): a cache of 4 lacks
#: it, and the page's duration filter would match no span.
BLOCKS_FORMAT = 5
_STATIC = Path(__file__).parents[1] / "static"

_CSP = ("default-src 'none'; script-src 'unsafe-inline' blob:; style-src 'unsafe-inline'; "
        "img-src data: blob:; font-src data:")

#: ``@@NAME@@`` slots of the page template (js/src/page.html, copied into static/ by the build).
_SLOT = re.compile(r"@@([A-Z]+)@@")


@dataclass(frozen=True)
class Blocks:
    """A snapshot's compressed data block and details block."""

    data: bytes
    details: bytes

    def to_bytes(self) -> bytes:
        """One file's worth (the CLI cache): both blocks behind a small container header."""
        return _CACHE_HEAD.pack(CACHE_MAGIC, len(self.data), len(self.details),
                                _crc(self.data, self.details)) + self.data + self.details

    @classmethod
    def from_bytes(cls, raw: bytes) -> Blocks:
        """The blocks of a cache file's bytes; ValueError when they are not a whole cache
        file (another file, one cut short, or one whose bytes changed since written)."""
        data, details = _block_lengths(raw[:_CACHE_HEAD.size], len(raw))
        start = _CACHE_HEAD.size
        blocks = cls(raw[start:start + data], raw[start + data:start + data + details])
        if _crc(blocks.data, blocks.details) != _CACHE_HEAD.unpack_from(raw)[3]:
            raise ValueError("a damaged cache file (its blocks do not match their CRC)")
        return blocks

    def header(self) -> dict[str, Any]:
        """The data block's header, inflating only its first bytes (ValueError when it
        is not a data block's)."""
        return _header_of(_Bytes(self.data))


def _block_lengths(start: bytes, size: int) -> tuple[int, int]:
    """The data and details blocks' lengths from a cache file's first bytes, given the
    file's ``size``; ValueError when they are not a cache file's or the file is not as
    long as its blocks say (cut short while written or copied)."""
    if len(start) < _CACHE_HEAD.size or start[:4] != CACHE_MAGIC:
        raise ValueError("not a slime-trace-widget cache file")
    _, data, details, _ = _CACHE_HEAD.unpack(start)
    if size != _CACHE_HEAD.size + data + details:
        raise ValueError(f"a cache file of {size} bytes whose blocks need "
                         f"{_CACHE_HEAD.size + data + details}")
    return data, details


def _crc(data: bytes, details: bytes) -> int:
    """The CRC-32 of both blocks, one after the other."""
    return zlib.crc32(details, zlib.crc32(data))


def _header_of(data_block: Any) -> dict[str, Any]:
    """The header of the data block that ``data_block`` (a file-like object) reads,
    inflating only its first bytes; ValueError for anything that is not a data block's
    header (damaged deflate, a header that is not a JSON object, or nested too deep)."""
    try:
        stream = gzip.GzipFile(fileobj=data_block)
        start = stream.read(8)
        if len(start) != 8 or start[:4] != MAGIC:
            raise ValueError("not a slime-trace-widget data block")
        (length,) = struct.unpack("<I", start[4:])
        text = stream.read(length)
        if len(text) != length:
            raise ValueError("the data block's header is cut short")
        header = json.loads(text)
    except (zlib.error, EOFError, gzip.BadGzipFile, RecursionError,
            UnicodeDecodeError) as exc:
        raise ValueError(f"a damaged data block ({type(exc).__name__})") from None
    if not isinstance(header, dict):
        raise ValueError("the data block's header is not a JSON object")
    return header


class _Bytes:
    """The smallest file-like object GzipFile needs, without copying ``data``."""

    def __init__(self, data: bytes) -> None:
        self._view = memoryview(data)
        self._position = 0

    def read(self, size: int = -1) -> bytes:
        end = len(self._view) if size < 0 else min(len(self._view), self._position + size)
        chunk = self._view[self._position:end].tobytes()
        self._position = end
        return chunk


def page(blocks: Blocks, title: str, follow: bool = False) -> str:
    """Wrap both blocks and the bundle in the offline HTML page; ``follow``: a served
    page of a followed run, which may fetch its state file from its own origin."""
    bundle = base64.b64encode((_STATIC / "widget.js").read_bytes()).decode()
    css = (_STATIC / "widget.css").read_text().replace("</style", "<\\\\/style")
    csp = f"{_CSP}; connect-src 'self'" if follow else _CSP
    slots = {"CSP": csp, "TITLE": html.escape(title), "CSS": css, "BUNDLE": bundle,
             "DATA": base64.b64encode(blocks.data).decode(),
             "DETAILS": base64.b64encode(blocks.details).decode()}
    template = (_STATIC / "page.html").read_text(encoding="utf-8")
    # One pass: text put into a slot is never scanned for slots again.
    return _SLOT.sub(lambda m: slots[m[1]], template)


def read_cache(path: str | Path) -> Blocks:
    """The blocks of the cache file at ``path``; ValueError when it is not a whole one."""
    return Blocks.from_bytes(Path(path).read_bytes())


def read_cache_header(path: str | Path) -> dict[str, Any]:
    """The header of the cache file's data block (``Blocks.header``), read from the
    file's first bytes: its blocks are not read, so a caller can tell whether a cache
    fits before reading it. ValueError when the file is not a whole cache file."""
    with Path(path).open("rb") as file:
        _block_lengths(file.read(_CACHE_HEAD.size), os.fstat(file.fileno()).st_size)
        return _header_of(file)
