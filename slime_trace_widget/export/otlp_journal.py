"""Which spans of one dump an OTLP endpoint has, by span id, kept in a small file that
only ever grows by appends: what lets a stopped export resume without sending a span
twice or leaving one out.

Before each request goes out, its span ids are appended and synced to disk
(``sending``); after the reply, one byte says whether it was taken or not. So the file
tells every span apart as

- *confirmed*: its request was taken;
- *uncertain*: its request went out (or was about to) and no answer was recorded: no
  reply came, or the process was stopped or killed meanwhile. It may have arrived, so
  it is not sent again (at most once); the export counts it in its report;
- anything else was never sent, or was refused, and goes in the next run.

Span ids (:mod:`.otlp_ids`) are fixed by the dump's content, not by request sizes or
order, so a resume sends the right spans whatever its batch options, and also when the
dump's spans change in between (engine traces joined by a later ``convert``).
A record cut short by a crash while it was being written belongs to a request that was
never sent; it is dropped before the next append.

Layout: :data:`MAGIC`, then records: ``b"S"`` + u32 count + count 8-byte span ids
(a request about to go), ``b"T"`` (the last one was taken), ``b"N"`` (it was not).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ..whole_files import fsync_folder

MAGIC = b"STW-OTLP-SPANS-1\n"
_SENDING, _TAKEN, _NOT_TAKEN = b"S", b"T", b"N"
_COUNT = struct.Struct("<I")
_ID_BYTES = 8


class SpanJournal:
    """The journal at ``path`` (created on the first request): the spans confirmed and
    uncertain so far, and the records of the requests this export sends."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = None
        confirmed, uncertain, self._whole = _read(path)
        self.confirmed = _sorted_ids(confirmed)
        self.uncertain = _sorted_ids(uncertain)

    def known(self, span_ids: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """Masks over ``span_ids``: confirmed before, and uncertain before."""
        ids = _as_numbers(span_ids)
        return _members(self.confirmed, ids), _members(self.uncertain, ids)

    def sending(self, span_ids: list[bytes]) -> None:
        """Record, on disk before it returns, that a request of ``span_ids`` goes out."""
        self._append(_SENDING + _COUNT.pack(len(span_ids)) + b"".join(span_ids), sync=True)

    def taken(self) -> None:
        """The request last recorded was taken."""
        self._append(_TAKEN)

    def not_taken(self) -> None:
        """The request last recorded was refused or given up on: it did not arrive."""
        self._append(_NOT_TAKEN)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _append(self, record: bytes, sync: bool = False) -> None:
        """Append ``record`` (a ``T`` or ``N`` needs no sync: lost in a power cut, its
        request only counts as uncertain, which sends nothing twice)."""
        if self._file is None:
            self._open()
        self._file.write(record)
        self._file.flush()
        if sync:
            os.fsync(self._file.fileno())

    def _open(self) -> None:
        """Open for appending, after the last whole record (a cut one is dropped); a new
        file gets the magic and its folder entry synced."""
        created = not self.path.exists()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "ab")  # noqa: SIM115 (kept open for the export)
        if created or self._whole == 0:
            self._file.truncate(0)
            self._file.write(MAGIC)
            self._file.flush()
            os.fsync(self._file.fileno())
            fsync_folder(self.path.parent)
        else:
            self._file.truncate(self._whole)


def _read(path: Path) -> tuple[list[bytes], list[bytes], int]:
    """The confirmed and uncertain span ids (as byte runs) of the journal at ``path``,
    and the length of its whole records; ValueError naming the file when it is not a
    journal. No file: nothing sent."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return [], [], 0
    if not raw.startswith(MAGIC):
        if MAGIC.startswith(raw):  # cut while its first bytes were written
            return [], [], 0
        raise ValueError(f"{path}: not a journal of sent spans; delete it to send "
                         "that dump whole")
    confirmed: list[bytes] = []
    uncertain: list[bytes] = []
    pending: bytes | None = None
    at = whole = len(MAGIC)
    while at < len(raw):
        kind = raw[at:at + 1]
        if kind == _SENDING:
            if at + 1 + _COUNT.size > len(raw):
                break
            (count,) = _COUNT.unpack_from(raw, at + 1)
            end = at + 1 + _COUNT.size + count * _ID_BYTES
            if end > len(raw):
                break
            if pending is not None:
                uncertain.append(pending)
            pending = raw[at + 1 + _COUNT.size:end]
            at = end
        elif kind in (_TAKEN, _NOT_TAKEN) and pending is not None:
            if kind == _TAKEN:
                confirmed.append(pending)
            pending = None
            at += 1
        else:
            raise ValueError(f"{path}: damaged at byte {at}; delete it to send that "
                             "dump whole")
        whole = at
    if pending is not None:
        uncertain.append(pending)
    return confirmed, uncertain, whole


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
