"""The page's data block kept beside the dumps, reused while it matches them.

``rollout_0.trace_timeline_cache.stw`` holds the page's blocks (payload and attributes,
plain data, no pickle). It is reused only when newer than every input dump and built
from the same files (path, size, mtime), engine-trace files, loader (``--trusted`` or
not) and blocks layout by the same version: anything else rebuilds, so a stale page is
never served. A set of dumps one of which failed to load is not cached at all (the
``view`` command), so each run tries it again and names the failure again.
"""

from __future__ import annotations

import os
from pathlib import Path

from .._version import __version__
from ..view.page.htmlpage import BLOCKS_FORMAT, Blocks, read_cache, read_cache_header

CACHE_SUFFIX = ".trace_timeline_cache.stw"


def source_note(inputs: list[Path], engine_traces: str | None = None, trusted: bool = False,
                demo_samples: int | None = None) -> dict:
    """What a cache was built from: version and blocks' layout, every input's path, size
    and mtime, whether torch's full unpickler read them (``trusted``), the files of the
    engine-trace folder (a collector adds files as spans arrive) and, for ``--demo``,
    the sample count the demo dump was written with."""
    note: dict = {"version": __version__, "blocks_format": BLOCKS_FORMAT,
                  "inputs": [[_path_text(p), p.stat().st_size, p.stat().st_mtime_ns]
                             for p in inputs],
                  "trusted": trusted}
    if demo_samples is not None:
        note["demo_samples"] = demo_samples
    if engine_traces is not None:
        root = Path(engine_traces)
        files = sorted(root.rglob("*")) if root.is_dir() else [root]
        note["engine_traces"] = [[_path_text(f), f.stat().st_size, f.stat().st_mtime_ns]
                                 for f in files if f.is_file()]
    return note


def _path_text(path: Path) -> str:
    """``path``, resolved, as text that reads back the same from the cache: the bytes of
    a name that is not UTF-8 as ``\\xNN`` escapes (a lone surrogate would be cleaned
    on the way into the cache, and the note would never match again)."""
    return os.fsencode(path.resolve()).decode("utf-8", "backslashreplace")


class PageCache:
    """The cache file of a view, whose header (what it was built from) is read once,
    from the file's first bytes, when first asked: telling whether the cache fits never
    reads its blocks."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._header: dict | None = None
        self._header_read = False

    def header(self) -> dict:
        """The data block's header (empty when there is no readable cache: absent, cut
        short, damaged or not one of ours, each rebuilt rather than trusted)."""
        if not self._header_read:
            self._header_read = True
            try:
                self._header = read_cache_header(self.path)
            except (OSError, ValueError):
                self._header = {}
        return self._header or {}

    def source(self) -> dict:
        """The note the cache was built from (empty when there is no readable cache)."""
        source = self.header().get("source")
        return source if isinstance(source, dict) else {}

    def fresh_blocks(self, inputs: list[Path], source: dict) -> Blocks | None:
        """The cached blocks when newer than every input and built from ``source``; the
        blocks are read only then (and checked again: a cache rewritten meanwhile by
        another run is not taken for the one whose header matched, nor one cut short)."""
        try:
            if any(self.path.stat().st_mtime_ns <= p.stat().st_mtime_ns for p in inputs):
                return None
        except FileNotFoundError:
            return None
        if self.source() != source:
            return None
        try:
            blocks = read_cache(self.path)
            header = blocks.header()
        except (OSError, ValueError):
            return None
        return blocks if header.get("source") == source and _has_meta(header) else None


def _has_meta(header: dict) -> bool:
    """Whether a data block's header holds the payload's meta the page is written from:
    a title, and load warnings absent or counts by kind (``view`` prints them)."""
    payload = header.get("payload")
    meta = payload.get("meta") if isinstance(payload, dict) else None
    if not isinstance(meta, dict) or not isinstance(meta.get("title"), str):
        return False
    warnings = meta.get("warnings", {})
    return isinstance(warnings, dict) and all(
        isinstance(kind, str) and type(count) is int for kind, count in warnings.items())
