"""gzip on every core, while the bytes are still being made.

A snapshot of a big rollout carries tens of megabytes of details; one zlib
stream takes seconds on them while the other cores wait, and compressing only
once every byte exists leaves those cores idle while Python makes them. Here a
member's bytes are written in order, in sections, and deflated a piece at a
time on a thread pool (zlib lets go of the GIL) as soon as each piece is full.
Each piece is flushed to a byte boundary and a last empty block ends the
stream, so the pieces joined are one ordinary deflate stream: one gzip member
that any reader (the browser's ``DecompressionStream`` among them) inflates as
usual. A section may be written after the ones it follows (a block's header,
which names where its body's buffers are, is known only once they are all
written). Each piece starts without its predecessor's history, which costs
well under 1 % of size at the piece sizes used.
"""

from __future__ import annotations

import os
import struct
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType

__all__ = ["MIN_PIECE", "ParallelGzip", "Section"]

#: A piece is deflated once this many bytes wait (smaller pieces cost ratio).
MIN_PIECE = 1 << 20
_HEADER = b"\x1f\x8b\x08\x00" + b"\x00\x00\x00\x00" + b"\x00\xff"  # deflate, mtime 0, OS unknown
#: The deflate stream's end: an empty final block, after pieces that each end flushed.
_LAST_BLOCK = zlib.compressobj(1, zlib.DEFLATED, -zlib.MAX_WBITS).flush(zlib.Z_FINISH)

Chunk = bytes | memoryview


class ParallelGzip:
    """A thread pool deflating the sections of gzip members as they are written.

    Use it as a context manager: leaving it waits for (or, after an error,
    cancels) what is still being deflated.
    """

    def __init__(self, level: int, threads: int | None = None) -> None:
        self.level = level
        self._pool = ThreadPoolExecutor(max_workers=threads or len(os.sched_getaffinity(0)))

    def __enter__(self) -> ParallelGzip:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._pool.shutdown(wait=True, cancel_futures=error is not None)

    def section(self) -> Section:
        """A new run of bytes, to be placed in a member with :meth:`member`."""
        return Section(self)

    def member(self, sections: list[Section]) -> bytes:
        """One gzip member of the bytes written to ``sections``, in that order."""
        for section in sections:
            section.flush()
        chunks = [chunk for section in sections for piece in section.pieces for chunk in piece]
        # Here, not on the pool, where it would wait behind every piece sent so far
        # (another member's among them); this thread has nothing else to do.
        checksum = _checksum(chunks)
        size = sum(len(chunk) for chunk in chunks)
        deflated = b"".join(future.result() for section in sections
                            for future in section.deflated)
        return _HEADER + deflated + _LAST_BLOCK + struct.pack("<II", checksum, size & 0xFFFFFFFF)

    def deflate(self, piece: list[Chunk]) -> Future[bytes]:
        """The deflated bytes of ``piece``, made on the pool."""
        return self._pool.submit(_deflate, piece, self.level)


class Section:
    """Bytes written in order; every :data:`MIN_PIECE` of them goes to the pool at once."""

    def __init__(self, owner: ParallelGzip) -> None:
        self._owner = owner
        self._waiting: list[Chunk] = []
        self._waiting_bytes = 0
        #: The pieces sent, as written (for the checksum), and their deflated bytes.
        self.pieces: list[list[Chunk]] = []
        self.deflated: list[Future[bytes]] = []

    def write(self, data: Chunk) -> None:
        """Add ``data``; it must not change until the member is made. Data longer
        than a piece is cut into pieces, so that it too is deflated on every core."""
        view = memoryview(data).cast("B")
        start = 0
        while start < len(view):
            take = min(MIN_PIECE - self._waiting_bytes, len(view) - start)
            self._waiting.append(view[start:start + take])
            self._waiting_bytes += take
            start += take
            if self._waiting_bytes >= MIN_PIECE:
                self.flush()

    def flush(self) -> None:
        """Send what waits as a piece, however small."""
        if not self._waiting:
            return
        piece, self._waiting, self._waiting_bytes = self._waiting, [], 0
        self.pieces.append(piece)
        self.deflated.append(self._owner.deflate(piece))


def _deflate(piece: list[Chunk], level: int) -> bytes:
    """Raw deflate of the chunks of ``piece``, flushed to a byte boundary (not ended)."""
    engine = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    return b"".join([*map(engine.compress, piece), engine.flush(zlib.Z_SYNC_FLUSH)])


def _checksum(chunks: list[Chunk]) -> int:
    """The CRC-32 of the chunks end to end, as the gzip trailer holds it."""
    check = 0
    for chunk in chunks:
        check = zlib.crc32(chunk, check)
    return check
