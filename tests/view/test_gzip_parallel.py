"""Blocks deflated in pieces on several threads are one ordinary gzip member."""

from __future__ import annotations

import gzip
import os
import zlib

import pytest

from slime_trace_widget.view.page import gzip_parallel
from slime_trace_widget.view.page.gzip_parallel import gzip_all


@pytest.mark.parametrize("threads", [1, 2, 5])
def test_pieces_join_into_one_member_any_reader_inflates(monkeypatch, threads: int) -> None:
    monkeypatch.setattr(gzip_parallel, "MIN_PIECE", 1000)
    text = b"span sglang_generate " * 3000 + os.urandom(20_000) + b"\x00" * 7
    blobs = [text, b"", b"x", text[:999]]
    packed = gzip_all(blobs, level=4, threads=threads)
    for blob, member in zip(blobs, packed, strict=True):
        assert gzip.decompress(member) == blob
        reader = zlib.decompressobj(wbits=31)  # one member, nothing after it
        assert reader.decompress(member) == blob and reader.eof and not reader.unused_data


def test_pieces_cost_little_ratio(monkeypatch) -> None:
    monkeypatch.setattr(gzip_parallel, "MIN_PIECE", 1 << 16)
    text = b"".join(b"%d attempt=%d finish_reason=stop " % (k, k % 3) for k in range(100_000))
    (pieced,) = gzip_all([text], level=4, threads=8)
    assert len(pieced) < 1.05 * len(gzip.compress(text, compresslevel=4))
