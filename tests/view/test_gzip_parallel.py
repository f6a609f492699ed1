"""Sections deflated in pieces on several threads, as they are written, are one
ordinary gzip member, in the order the member names them."""

from __future__ import annotations

import gzip
import os
import threading
import zlib

import pytest

from slime_trace_widget.view.page import gzip_parallel
from slime_trace_widget.view.page.gzip_parallel import ParallelGzip


def _inflates_to(member: bytes, expected: bytes) -> None:
    assert gzip.decompress(member) == expected
    reader = zlib.decompressobj(wbits=31)  # one member, nothing after it
    assert reader.decompress(member) == expected and reader.eof and not reader.unused_data


@pytest.mark.parametrize("threads", [1, 2, 5])
def test_sections_join_into_one_member_any_reader_inflates(monkeypatch, threads: int) -> None:
    monkeypatch.setattr(gzip_parallel, "MIN_PIECE", 1000)
    text = b"span sglang_generate " * 3000 + os.urandom(20_000) + b"\x00" * 7
    with ParallelGzip(4, threads=threads) as packer:
        head, body, alone, empty = (packer.section() for _ in range(4))
        for start in range(0, len(text), 333):  # chunks smaller than a piece, and views
            body.write(memoryview(text)[start:start + 333])
        head.write(b"header written last, placed first")  # as a block's JSON header is
        alone.write(b"x")
        joined = packer.member([head, body])
        single = packer.member([alone])
        nothing = packer.member([empty])
    assert len(body.pieces) > 1
    _inflates_to(joined, b"header written last, placed first" + text)
    _inflates_to(single, b"x")
    _inflates_to(nothing, b"")


def test_pieces_are_deflated_while_the_rest_is_still_written(monkeypatch) -> None:
    monkeypatch.setattr(gzip_parallel, "MIN_PIECE", 1 << 16)
    deflating = threading.Event()
    real = gzip_parallel._deflate

    def noted(piece: list, level: int) -> bytes:
        deflating.set()
        return real(piece, level)

    monkeypatch.setattr(gzip_parallel, "_deflate", noted)
    with ParallelGzip(4, threads=2) as packer:
        section = packer.section()
        section.write(os.urandom(1 << 16))  # a full piece: it goes to the pool now
        assert deflating.wait(timeout=60), "the first piece waited for the member"
        section.write(b"more")
        member = packer.member([section])
    assert len(gzip.decompress(member)) == (1 << 16) + 4


def test_pieces_cost_little_ratio() -> None:
    text = b"".join(b"%d attempt=%d finish_reason=stop " % (k, k % 3) for k in range(100_000))
    with ParallelGzip(4, threads=8) as packer:
        section = packer.section()
        section.write(text)  # 3.5 MB: cut into pieces of the real size
        pieced = packer.member([section])
    assert len(section.pieces) > 2
    assert len(pieced) < 1.02 * len(gzip.compress(text, compresslevel=4))


def test_pieces_of_a_large_write_keep_their_order(monkeypatch) -> None:
    monkeypatch.setattr(gzip_parallel, "MIN_PIECE", 4096)
    parts = [os.urandom(size) for size in (5000, 1, 4095, 9000, 0, 3)]
    with ParallelGzip(1, threads=3) as packer:
        section = packer.section()
        for part in parts:
            section.write(part)
        member = packer.member([section])
    _inflates_to(member, b"".join(parts))
