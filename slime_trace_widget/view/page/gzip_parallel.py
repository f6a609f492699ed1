"""gzip on every core: a page's blocks cut into pieces deflated side by side.

A snapshot of a big rollout carries tens of megabytes of details; one zlib
stream takes seconds on them while the other cores wait. Each piece here is
deflated on its own thread (zlib lets go of the GIL) and flushed to a byte
boundary, so the pieces joined are one ordinary deflate stream: one gzip
member that any reader (the browser's ``DecompressionStream`` among them)
inflates as usual. Each piece starts without its predecessor's history, which
costs well under 1 % of size at the piece sizes used.
"""

from __future__ import annotations

import os
import struct
import zlib
from concurrent.futures import ThreadPoolExecutor

#: Pieces smaller than this are not worth a thread (and cost ratio).
MIN_PIECE = 1 << 20
_HEADER = b"\x1f\x8b\x08\x00" + b"\x00\x00\x00\x00" + b"\x00\xff"  # deflate, mtime 0, OS unknown


def gzip_all(blobs: list[bytes], level: int, threads: int | None = None) -> list[bytes]:
    """Each of ``blobs`` as a gzip member, compressed at ``level`` on ``threads``
    threads (default: the cores this process may use)."""
    threads = threads or len(os.sched_getaffinity(0))
    total = sum(len(blob) for blob in blobs)
    piece = max(MIN_PIECE, -(-total // threads))
    jobs = [[memoryview(blob)[start:start + piece] for start in range(0, len(blob), piece)]
            or [memoryview(blob)] for blob in blobs]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        deflated = [[pool.submit(_deflate, part, level, last=k == len(parts) - 1)
                     for k, part in enumerate(parts)] for parts in jobs]
        checks = [pool.submit(zlib.crc32, blob) for blob in blobs]
        return [_HEADER + b"".join(future.result() for future in futures)
                + struct.pack("<II", check.result(), len(blob) & 0xFFFFFFFF)
                for futures, check, blob in zip(deflated, checks, blobs, strict=True)]


def _deflate(part: memoryview, level: int, last: bool) -> bytes:
    """Raw deflate of ``part``: ended if ``last``, else flushed to a byte boundary."""
    engine = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    return engine.compress(part) + engine.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH)
