"""The page's data block kept beside the dumps, reused while it matches them.

``rollout_0.trace_timeline_cache.stw`` holds the page's blocks (payload and attributes,
plain data, no pickle). It is reused only when newer than every input dump and built
from the same files (path, size, mtime), engine-store files (:func:`engine_files`),
loader (``--trusted`` or not) and blocks layout by the same version: anything else
rebuilds, so a stale page is never served. A set of dumps one of which failed to load,
or whose engine join skipped a store file it could not read, is not cached at all (the
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
    """What a cache was built from: version and blocks' layout, every input's path, size,
    mtime, inode and ctime (a copy that keeps the size and mtime, ``cp -p`` or
    ``rsync -t``, still changes the ctime, which no user sets), whether torch's full
    unpickler read them (``trusted``), the same of each
    engine-store file the join may read (:func:`engine_files`; a collector adds and
    appends to them as spans and scrapes arrive) and, for ``--demo``, the sample count
    the demo dump was written with."""
    note: dict = {"version": __version__, "blocks_format": BLOCKS_FORMAT,
                  "inputs": [_input_stamp(p) for p in inputs],
                  "trusted": trusted}
    if demo_samples is not None:
        note["demo_samples"] = demo_samples
    if engine_traces is not None:
        stamps = (_stamp(path) for path in engine_files(engine_traces))
        note["engine_traces"] = [stamp for stamp in stamps if stamp is not None]
    return note


def _input_stamp(path: Path) -> list:
    """An input's path, size, mtime, inode and ctime, from one look at it; its path alone
    when it cannot be looked at (a link to a dump gone: the load names it, skipped)."""
    try:
        stat = path.stat()
    except OSError:
        return [path_text(path)]
    return [path_text(path), stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_ctime_ns]


def engine_files(engine_traces: str) -> list[Path]:
    """Every file the engine join of ``engine_traces`` (a collector folder, a store's
    folder or a store file) may open, sorted: the span and load stores' finished and
    write-ahead files, as the stores' reader lists them
    (:func:`~..sources.engine.durable.files_of`), and the folded companion beside a
    finished span file, which a join reads instead of it. All of them, not only those of
    the dumps' time: which overlap it is known only once the dumps are read, a store
    with any span file counts spans missing where one without does not, and a span
    waiting for its request makes the join read beyond that time. Nothing else of a
    collector folder is read (its live records, its scrape status, its locks), so
    nothing else is here."""
    # Imported here: the stores' reader imports pyarrow, which a page served from its
    # cache without engine traces does without.
    from ..sources.engine.durable import files_of
    from ..sources.engine.traces_source import LAYOUTS

    files: set[Path] = set()
    for layout in LAYOUTS:
        for path, _bounds in files_of(layout, engine_traces):
            files.add(path)
            if layout.companion and path.suffix != ".arrows":
                companion = layout.companion_of(path)
                if companion.exists():
                    files.add(companion)
    return sorted(files)


def _stamp(path: Path) -> list | None:
    """``path``'s resolved text, size and mtime; None when it is gone (a write-ahead file
    rolled since it was listed: the next run lists its finished file, which differs from
    this note, so that run rebuilds rather than trusting this one)."""
    try:
        status = path.stat()
    except FileNotFoundError:
        return None
    return [path_text(path), status.st_size, status.st_mtime_ns]


def path_text(path: Path) -> str:
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

    def built_from(self) -> list[str]:
        """The paths (:func:`path_text`) of the dumps the cache was built from, as its
        note records them; empty when there is no readable cache."""
        inputs = self.source().get("inputs")
        stamps = inputs if isinstance(inputs, list) else []
        return [stamp[0] for stamp in stamps
                if isinstance(stamp, list) and stamp and isinstance(stamp[0], str)]

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
