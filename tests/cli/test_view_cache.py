"""The page cache's header is what tells whether a cache fits: it is read once per run,
from the file's first bytes, and the blocks are read only for a cache that fits."""

from __future__ import annotations

import tracemalloc
from collections import Counter
from pathlib import Path

import pytest

from slime_trace_widget.cli import cache as cache_module
from slime_trace_widget.cli import main
from slime_trace_widget.cli.cache import CACHE_SUFFIX, PageCache
from slime_trace_widget.view.page.htmlpage import Blocks, read_cache
from slime_trace_widget.whole_files import write_whole

#: Zero bytes added to a real cache's details block: a body far larger than its header.
BIG_BODY = 64 << 20


@pytest.fixture
def demo_cache(tmp_path: Path) -> Path:
    """A ``--demo`` run's folder, its page cache (4 samples) padded with a big body."""
    assert main(["--demo", "--demo-samples", "4", "--no-serve", "--out-dir", str(tmp_path)]) == 0
    cache = tmp_path / f"demo_rollout{CACHE_SUFFIX}"
    blocks = read_cache(cache)
    write_whole(cache, Blocks(blocks.data, blocks.details + bytes(BIG_BODY)).to_bytes())
    return cache


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """Per path, how often it was read whole (``Path.read_bytes``), and under
    ``"header"`` how often a cache's header was read."""
    counts: Counter = Counter()
    read_bytes, read_header = Path.read_bytes, cache_module.read_cache_header

    def counted_read(path: Path) -> bytes:
        counts[path.name] += 1
        return read_bytes(path)

    def counted_header(path: Path) -> dict:
        counts["header"] += 1
        return read_header(path)

    monkeypatch.setattr(Path, "read_bytes", counted_read)
    monkeypatch.setattr(cache_module, "read_cache_header", counted_header)
    return counts


def test_the_header_is_read_without_the_body(demo_cache: Path) -> None:
    tracemalloc.start()
    try:
        source = PageCache(demo_cache).source()
        held = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert source["demo_samples"] == 4
    assert held < BIG_BODY // 8


def test_a_fitting_demo_cache_is_read_once_header_included(demo_cache: Path, reads: Counter,
                                                           capsys) -> None:
    folder = demo_cache.parent
    capsys.readouterr()
    assert main(["--demo", "--demo-samples", "4", "--no-serve", "--out-dir", str(folder)]) == 0
    assert "reusing" in capsys.readouterr().out
    assert reads[demo_cache.name] == 1 and reads["header"] == 1


def test_a_demo_cache_of_other_samples_is_never_read_whole(demo_cache: Path, reads: Counter,
                                                           capsys) -> None:
    folder = demo_cache.parent
    capsys.readouterr()
    assert main(["--demo", "--demo-samples", "5", "--no-serve", "--out-dir", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "wrote demo dump" in out and "built" in out
    assert reads[demo_cache.name] == 0 and reads["header"] == 1
