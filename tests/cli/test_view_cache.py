"""The page cache's header is what tells whether a cache fits: it is read once per run,
from the file's first bytes, and the blocks are read only for a cache that fits. A cache
that is damaged, hostile or cut short is rebuilt, never served and never a traceback."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import struct
import tracemalloc
from collections import Counter
from pathlib import Path

import pytest

from slime_trace_widget.cli import cache as cache_module
from slime_trace_widget.cli import main
from slime_trace_widget.cli.cache import CACHE_SUFFIX, PageCache
from slime_trace_widget.view.page.htmlpage import MAGIC, Blocks, read_cache
from slime_trace_widget.whole_files import write_whole
from tests.sources.runs import FIXTURES, settle

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


def data_block(header: bytes, damaged: bool = False) -> bytes:
    """A data block whose header is the bytes ``header``; ``damaged``: its deflate
    stream spoiled after its first bytes."""
    data = gzip.compress(MAGIC + struct.pack("<I", len(header)) + header + b"x" * 1000)
    if damaged:
        data = data[:12] + bytes(byte ^ 0xFF for byte in data[12:40]) + data[40:]
    return data


HOSTILE_BLOCKS = {
    "deflate-damaged": data_block(json.dumps({"source": {}}).encode() * 20, damaged=True),
    "header-a-list": data_block(b"[1, 2]"),
    "source-a-string": data_block(json.dumps({"source": "x"}).encode()),
    "nested-too-deep": data_block(b"[" * 200_000 + b"]" * 200_000),
    "header-cut-short": data_block(b'{"source": {}}')[:30],
}


@pytest.mark.parametrize("how", ["view", "demo"])
@pytest.mark.parametrize("name", list(HOSTILE_BLOCKS))
def test_a_hostile_cache_is_rebuilt_never_a_traceback(tmp_path: Path, name: str, how: str,
                                                      capsys) -> None:
    if how == "view":
        dump = tmp_path / "rollout_0.pt"
        shutil.copy(FIXTURES / "small.pt", dump)
        cache, argv = tmp_path / f"rollout_0{CACHE_SUFFIX}", [str(dump), "--no-serve"]
    else:
        dump = tmp_path / "demo_rollout.pt"
        dump.write_bytes(b"")
        cache = tmp_path / f"demo_rollout{CACHE_SUFFIX}"
        argv = ["--demo", "--demo-samples", "4", "--no-serve", "--out-dir", str(tmp_path)]
    settle(dump)
    cache.write_bytes(Blocks(HOSTILE_BLOCKS[name], b"").to_bytes())
    assert main(argv) == 0
    assert "built" in capsys.readouterr().out
    assert PageCache(cache).source()["inputs"]  # the rebuilt cache reads back


def test_a_cache_cut_short_is_rebuilt_not_served(tmp_path: Path, capsys) -> None:
    dump = tmp_path / "rollout_0.pt"
    shutil.copy(FIXTURES / "small.pt", dump)
    settle(dump)
    assert main([str(dump), "--no-serve"]) == 0
    cache = tmp_path / f"rollout_0{CACHE_SUFFIX}"
    whole = read_cache(cache)
    for cut in (len(whole.to_bytes()) - len(whole.details) // 2,  # inside the details
                len(whole.to_bytes()) - len(whole.details) - len(whole.data) // 2):
        cache.write_bytes(whole.to_bytes()[:cut])  # its header still intact
        capsys.readouterr()
        assert main([str(dump), "--no-serve"]) == 0
        assert "built" in capsys.readouterr().out
        blocks = read_cache(cache)
        assert gzip.decompress(blocks.data) and gzip.decompress(blocks.details)


@pytest.mark.parametrize("warnings", [["x"], {"skipped": "many"}, {"skipped": True}, "x"],
                         ids=["a-list", "a-count-text", "a-count-bool", "a-string"])
def test_a_cache_whose_warnings_are_not_counts_is_rebuilt(tmp_path: Path, warnings,
                                                          capsys) -> None:
    """A cache that fits its dump (source, title) but whose ``meta.warnings`` is not
    counts by kind: rebuilt, not a traceback where ``view`` prints the warnings."""
    dump = tmp_path / "rollout_0.pt"
    shutil.copy(FIXTURES / "small.pt", dump)
    settle(dump)
    assert main([str(dump), "--no-serve"]) == 0
    cache = tmp_path / f"rollout_0{CACHE_SUFFIX}"
    header = read_cache(cache).header()
    header["payload"]["meta"]["warnings"] = warnings
    cache.write_bytes(Blocks(data_block(json.dumps(header).encode()), b"").to_bytes())
    newer = dump.stat().st_mtime_ns + 10**9  # than the dump, as a cache that fits is
    os.utime(cache, ns=(newer, newer))
    capsys.readouterr()
    assert main([str(dump), "--no-serve"]) == 0
    assert "built" in capsys.readouterr().out


def test_a_cache_damaged_past_its_header_is_rebuilt_not_served(tmp_path: Path,
                                                               capsys) -> None:
    """A byte flipped deep in the data block (its header, lengths and source intact):
    the blocks do not match their CRC, so the page is rebuilt, not written from them."""
    dump = tmp_path / "rollout_0.pt"
    shutil.copy(FIXTURES / "small.pt", dump)
    settle(dump)
    assert main([str(dump), "--no-serve"]) == 0
    cache = tmp_path / f"rollout_0{CACHE_SUFFIX}"
    raw = bytearray(cache.read_bytes())
    raw[len(raw) - len(read_cache(cache).details) - 200] ^= 0xFF  # in the data block
    cache.write_bytes(bytes(raw))
    newer = dump.stat().st_mtime_ns + 10**9
    os.utime(cache, ns=(newer, newer))
    assert PageCache(cache).source()["inputs"]  # the header still fits
    capsys.readouterr()
    assert main([str(dump), "--no-serve"]) == 0
    assert "built" in capsys.readouterr().out
    blocks = read_cache(cache)
    assert gzip.decompress(blocks.data) and gzip.decompress(blocks.details)


def test_a_dump_replaced_keeping_its_size_and_mtime_is_rebuilt(tmp_path: Path,
                                                               capsys) -> None:
    # cp -p, rsync -t, touch -r: another dump of the same size and mtime, where the
    # page of the old one would be served from its cache.
    dump = tmp_path / "rollout_0.pt"
    shutil.copy2(FIXTURES / "small.pt", dump)
    assert main([str(dump), "--no-serve"]) == 0
    assert "built" in capsys.readouterr().out
    stat = dump.stat()
    replacement = tmp_path / "other.pt"
    replacement.write_bytes((FIXTURES / "small.pt").read_bytes())
    os.utime(replacement, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.replace(replacement, dump)  # same size and mtime, another file
    assert (dump.stat().st_size, dump.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    assert main([str(dump), "--no-serve"]) == 0
    assert "built" in capsys.readouterr().out
