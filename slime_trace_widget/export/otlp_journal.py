"""Which spans of one dump an OTLP endpoint has, by span id, kept in a small file that
only ever grows by appends: what lets a stopped export resume without sending a span
twice or leaving one out.

Before each attempt at a request, its span ids are appended and synced to disk
(``sending``); after the reply, one record says whether it was taken or not (a
receiver's "send it later" is a *not taken*, recorded before the wait, and the next
attempt records its spans again). So the file tells every span apart as

- *confirmed*: its request was taken;
- *uncertain*: its request went out (or was about to) and no answer was recorded: no
  reply came, or the process was stopped or killed meanwhile. It may have arrived, so
  it is not sent again (at most once); the export counts it in its report;
- anything else was never sent, or was refused, and goes in the next run.

Span ids (:mod:`.otlp_ids`) are fixed by the dump's content, not by request sizes or
order, so a resume sends the right spans whatever its batch options, and also when the
dump's spans change in between (engine traces joined by a later ``convert``).

One export at a time: :meth:`SpanJournal.begin` takes an exclusive lock on the file
(refusing at once when another export holds it) and reads it again under the lock.
Each record carries a CRC-32. A last record cut short by a crash while it was written
(its end past the end of the file), or cut by a tail of zero bytes a power cut can leave
(the file at its new size, its last blocks zero from anywhere in that record: an ``S``
record is synced before its request goes, so one cut so never went out), is dropped
before the next append; any other record that does not match its CRC makes the file
*damaged*: a ValueError naming it, never a silent cut.

Layout: :data:`MAGIC`, a 16-byte hash of the journal's *identity* (the endpoint and
dump it is for: a journal put where another's goes is refused), then records:
``b"S"`` + u32 count + u32 CRC of those 5 bytes + count 8-byte span ids + u32 CRC of
the ids (a request about to go), ``b"T"`` + u32 CRC (the last one was taken),
``b"N"`` + u32 CRC (it was not).

Durability: an ``S`` record is synced before its request goes; a ``T`` or ``N`` is
written through to the system at once but reaches the disk with the next ``S`` (a sync
writes the whole file) or at :meth:`SpanJournal.close`. A process killed at any point
loses no record. A power cut can lose only the answer to the last request: its spans
then read as *uncertain*, so none is sent twice, but the next export counts them in
its ``unanswered_spans`` where they were taken (rather than ``resumed_spans``), and
leaves them out, counted the same way, where they were refused.
"""

from __future__ import annotations

import hashlib
import os
import struct
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

import numpy as np

from ..file_locks import locked_file
from ..whole_files import fsync_folder

MAGIC = b"STW-OTLP-SPANS-2\n"
_SENDING, _TAKEN, _NOT_TAKEN = b"S", b"T", b"N"
_U32 = struct.Struct("<I")
_ID_BYTES = 8
_IDENTITY_BYTES = 16
_START = len(MAGIC) + _IDENTITY_BYTES
_DELETE_HINT = "delete it to send that dump whole"


class SpanJournal:
    """The journal at ``path`` of the export of one dump to one endpoint, named by
    ``identity`` (any text; a file written for another is refused): the spans
    confirmed and uncertain so far, and the records of the requests an export sends.
    Each export (``to_otlp``) runs between :meth:`begin` and :meth:`close`; the object
    may serve several in turn."""

    def __init__(self, path: Path, identity: str = "") -> None:
        self.path = path
        self._identity = hashlib.blake2b(identity.encode(), digest_size=_IDENTITY_BYTES
                                         ).digest()
        self._file: BinaryIO | None = None
        # read now, unlocked, so a journal can be looked into (and a foreign or damaged
        # file is refused, named) without an export; begin() reads again under the
        # lock, as another export may have appended since
        self._load(_read_bytes(path))

    def begin(self) -> None:
        """Lock the file for this export (ValueError naming it when another export
        holds it) and read it again; a new file gets the magic and identity, synced."""
        if self._file is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            file = locked_file(self.path)  # kept open, and locked, for the export
        except BlockingIOError:
            raise ValueError(f"{self.path}: another export of this dump to this endpoint "
                             "is under way") from None
        try:
            file.seek(0)
            whole = self._load(file.read())
            file.truncate(whole)
            if whole == 0:
                file.write(MAGIC + self._identity)
                _sync(file)
                fsync_folder(self.path.parent)
        except BaseException:
            file.close()
            raise
        self._file = file

    def known(self, span_ids: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """Masks over ``span_ids``: confirmed before, and uncertain before."""
        ids = _as_numbers(span_ids)
        return _members(self.confirmed, ids), _members(self.uncertain, ids)

    def sending(self, span_ids: list[bytes]) -> None:
        """Record, on disk before it returns, that a request of ``span_ids`` goes out."""
        head = _SENDING + _U32.pack(len(span_ids))
        body = b"".join(span_ids)
        self._append(head + _crc(head) + body + _crc(body), sync=True)

    def taken(self) -> None:
        """The request last recorded was taken."""
        self._append(_TAKEN + _crc(_TAKEN))

    def not_taken(self) -> None:
        """The request last recorded was refused or given up on: it did not arrive."""
        self._append(_NOT_TAKEN + _crc(_NOT_TAKEN))

    def close(self) -> None:
        """Sync the records and release the lock; the next export begins afresh."""
        if self._file is not None:
            try:
                _sync(self._file)
            finally:
                self._file.close()
                self._file = None

    def _append(self, record: bytes, sync: bool = False) -> None:
        """Append ``record``, synced when ``sync`` (a ``T`` or ``N`` goes to disk with
        the next synced record or on close: see the module's *Durability*)."""
        if self._file is None:
            self.begin()
        self._file.write(record)
        self._file.flush()
        if sync:
            os.fsync(self._file.fileno())

    def _load(self, raw: bytes) -> int:
        """Take the state of the journal bytes ``raw``; the length of its whole records
        (0: nothing written yet)."""
        confirmed, uncertain, whole = _parse(self.path, raw, self._identity)
        self.confirmed = _sorted_ids(confirmed)
        self.uncertain = _sorted_ids(uncertain)
        return whole


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def _parse(path: Path, raw: bytes, identity: bytes) -> tuple[list[bytes], list[bytes], int]:
    """The confirmed and uncertain span ids (as byte runs) of the journal bytes ``raw``,
    and the length of its whole records; ValueError naming ``path`` when it is not a
    journal of ``identity``, or damaged."""
    if len(raw) < _START and ((MAGIC + identity).startswith(raw) or not raw.strip(b"\0")):
        return [], [], 0  # cut while its first bytes were written
    if not raw.startswith(MAGIC):
        raise ValueError(f"{path}: not a journal of sent spans (or one of an older copy); "
                         f"{_DELETE_HINT}")
    if raw[len(MAGIC):_START] != identity:
        raise ValueError(f"{path}: a journal of another endpoint or dump (or damaged); "
                         f"{_DELETE_HINT} to this endpoint")
    confirmed: list[bytes] = []
    uncertain: list[bytes] = []
    pending: bytes | None = None
    at = _START
    zeros_from = len(raw.rstrip(b"\0"))  # where a tail of zero bytes starts
    while at < zeros_from:
        kind = raw[at:at + 1]
        if kind == _SENDING:
            head_end = at + 1 + 2 * _U32.size
            if head_end > len(raw):
                break  # cut while written
            if not _whole(path, raw, at, head_end - _U32.size, zeros_from):
                break
            (count,) = _U32.unpack_from(raw, at + 1)
            end = head_end + count * _ID_BYTES + _U32.size
            if end > len(raw):
                break
            if not _whole(path, raw, head_end, end - _U32.size, zeros_from):
                break
            if pending is not None:
                uncertain.append(pending)
            pending = raw[head_end:end - _U32.size]
        elif kind in (_TAKEN, _NOT_TAKEN) and pending is not None:
            end = at + 1 + _U32.size
            if end > len(raw):
                break
            if not _whole(path, raw, at, at + 1, zeros_from):
                break
            if kind == _TAKEN:
                confirmed.append(pending)
            pending = None
        else:
            raise _damaged(path, at)
        at = end
    if pending is not None:
        uncertain.append(pending)
    return confirmed, uncertain, at


def _whole(path: Path, raw: bytes, start: int, end: int, zeros_from: int) -> bool:
    """Whether ``raw[start:end]`` is followed by its CRC; False (a record cut by a power
    cut) when it is not but every byte from ``zeros_from``, before the CRC's end, to the
    end of ``raw`` is zero; ValueError naming ``path`` otherwise (damage)."""
    if _crc(raw[start:end]) == raw[end:end + _U32.size]:
        return True
    if zeros_from < end + _U32.size:
        return False
    raise _damaged(path, start)


def _damaged(path: Path, at: int) -> ValueError:
    return ValueError(f"{path}: damaged at byte {at}; {_DELETE_HINT}")


def _crc(data: bytes) -> bytes:
    return _U32.pack(zlib.crc32(data))


def _sync(file: BinaryIO) -> None:
    file.flush()
    os.fsync(file.fileno())


def _sorted_ids(runs: Iterable[bytes]) -> np.ndarray:
    """Span ids (runs of 8-byte ids) as sorted unique numbers."""
    joined = b"".join(runs)
    return np.unique(np.frombuffer(joined, dtype="<u8"))


def _as_numbers(span_ids: list[bytes]) -> np.ndarray:
    return np.frombuffer(b"".join(span_ids), dtype="<u8")


def _members(sorted_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Which of ``ids`` are in ``sorted_ids``."""
    if not len(sorted_ids):
        return np.zeros(len(ids), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_ids, ids), len(sorted_ids) - 1)
    return sorted_ids[at] == ids
