"""Reading the live store back: a rollout or a window through only the row groups that can
hold it, and a tail that reads only what arrived since its last read.

Finished files are immutable, so the statistics of their row groups (rows, least and
greatest ``ts_ns``, ``rollout_id`` and ``sender``) are read from each footer once per
process and kept (:func:`group_stats`). A rollout's rows lie together in time, so a read
of one walks the files from the newest back and stops at the first older file none of
whose groups can hold it (a file of the collector's own rows alone does not stop it): a
rollout in progress reads a few files however long the collector has run. Write-ahead
files are read whole (at most ``ROLL_ROWS`` rows, a minute). Groups skipped between two
read are read for the loss accounting alone (:data:`ACCOUNTING_COLUMNS`). A damaged file
is skipped and named, never raised for (:class:`Selection`, :class:`Tail`).

The latest rollout is the greatest id since the run began (:class:`LatestRollout`),
where a run begins when a new process names a lower id: training resumed from a
checkpoint records lower rollout ids than the run that died.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache, partial
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from ...schema import RECEIVER_PREFIX
from ..engine import durable
from ..engine.durable import read_wal
from .store import LAYOUT, SUBDIR, UNKNOWN_ROLLOUT, trace_records

_WAL = re.compile(r"wal-(\d{6,})\.arrows")
_NS_MAX = 2**63 - 1
_T = TypeVar("_T")


@dataclass(frozen=True)
class Group:
    """One row group of a finished file: its rows, the ranges of time and rollout, and
    whether every row of it is the collector's own (``receiver_start``/``receiver_stop``)."""

    rows: int
    ts: tuple[int, int] | None
    rollouts: tuple[int, int] | None
    collector_only: bool = False

    def may_hold(self, rollout: int | None, low: int, high: int) -> bool:
        if self.ts is not None and (self.ts[0] > high or self.ts[1] < low):
            return False
        return rollout is None or self.rollouts is None or (
            self.rollouts[0] <= rollout <= self.rollouts[1])


@dataclass(frozen=True)
class StoreFile:
    """A file of the live store: its sequence number, path, and whether it is finished."""

    seq: int
    path: Path
    finished: bool


class UnreadableStore(ValueError):
    """A read found none of the records it asked for, and a file it needed was damaged."""

    @classmethod
    def of(cls, unreadable: dict[str, str]) -> UnreadableStore:
        """The error naming the damaged files ``unreadable`` (path: why), on one line."""
        (path, reason), *others = unreadable.items()
        more = f" (and {len(others)} more damaged file(s))" if others else ""
        return cls(f"live records {path}: cannot be read ({reason}){more}; no record of "
                   "the rollout asked for could be read")


#: Errors that say a store file is damaged or gone (a cut or overwritten file).
DAMAGE = (pa.ArrowException, OSError)
#: The columns the loss accounting reads of a row group read for it alone (between two
#: groups a rollout's read takes, :func:`select`); the others are left empty there.
ACCOUNTING_COLUMNS = ("sender", "seq", "record", "ts_ns", "rollout_id", "dropped", "queued",
                      "service", "received_ns")


def store_folder(directory: str | Path) -> Path:
    """The live store's folder of a collector folder (or the folder itself)."""
    root = Path(directory)
    if (root / SUBDIR).is_dir():
        return root / SUBDIR
    if root.is_dir() and (any(root.glob("wal-*.arrows")) or any(root.glob("records-*.parquet"))):
        return root
    raise FileNotFoundError(f"live records {root}: no {SUBDIR}/ folder here (is it the "
                            "folder of 'slime-trace-viewer collect DIR'?)")


def store_files(folder: Path, layout: durable.Layout = LAYOUT) -> list[StoreFile]:
    """The store's files by sequence number (the live store's, or ``layout``'s): a
    finished file stands for its write-ahead file (the roll completed); write-ahead
    files are listed first, so one rolled between the two listings is still found, as
    finished."""
    wals = {int(m.group(1)): path for path in folder.glob("wal-*.arrows")
            if (m := _WAL.fullmatch(path.name))}
    files = {seq: StoreFile(seq, path, False) for seq, path in wals.items()}
    for path in folder.glob(f"{layout.prefix}-*.parquet"):
        match = layout.finished.fullmatch(path.name)
        if match:
            files[int(match.group(3))] = StoreFile(int(match.group(3)), path, True)
    return [files[seq] for seq in sorted(files)]


def group_stats(path: Path) -> tuple[Group, ...]:
    """The row groups of a finished file (read from its footer once per process).
    Raises one of :data:`DAMAGE` for a file that is not a whole Parquet file."""
    stat = path.stat()
    return _group_stats(str(path), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=100_000)
def _group_stats(path: str, size: int, mtime_ns: int) -> tuple[Group, ...]:
    metadata = pq.ParquetFile(path).metadata
    names = metadata.schema.to_arrow_schema().names
    ts_column, rollout_column = names.index("ts_ns"), names.index("rollout_id")
    sender_column = names.index("sender")
    groups = []
    for number in range(metadata.num_row_groups):
        group = metadata.row_group(number)
        senders = _range(group.column(sender_column).statistics, str)
        groups.append(Group(group.num_rows, _range(group.column(ts_column).statistics),
                            _range(group.column(rollout_column).statistics),
                            senders is not None and all(
                                name.startswith(RECEIVER_PREFIX) for name in senders)))
    return tuple(groups)


def _range(statistics: object, kind: type = int) -> tuple[Any, Any] | None:
    """The least and greatest value of a column chunk (every value between two texts
    that begin alike begins alike too)."""
    if statistics is None or not statistics.has_min_max:  # type: ignore[attr-defined]
        return None
    return kind(statistics.min), kind(statistics.max)  # type: ignore[attr-defined]


def read_groups(path: Path, groups: list[int]) -> pa.Table:
    """Row groups ``groups`` of a finished file, as the store's schema."""
    if not groups:
        return LAYOUT.empty()
    table = pq.ParquetFile(path).read_row_groups(groups)
    return table if table.schema.equals(LAYOUT.schema) else table.cast(LAYOUT.schema)


def accounting_groups(path: Path, groups: list[int]) -> pa.Table:
    """Row groups ``groups`` of a finished file as the store's schema, holding only
    :data:`ACCOUNTING_COLUMNS` (the others null): what the loss accounting reads."""
    table = pq.ParquetFile(path).read_row_groups(groups, columns=list(ACCOUNTING_COLUMNS))
    columns = [table[field.name].cast(field.type) if field.name in ACCOUNTING_COLUMNS
               else pa.nulls(len(table), field.type) for field in LAYOUT.schema]
    return pa.Table.from_arrays(columns, schema=LAYOUT.schema)


def read_file(store_file: StoreFile, rollout: int | None, low: int, high: int) -> pa.Table:
    """The rows of one file in the groups that may hold ``rollout`` in ``[low, high]``
    (the caller filters rows). A write-ahead file rolled meanwhile is read finished."""
    if not store_file.finished:
        table = read_wal(store_file.path, LAYOUT)
        if len(table) or store_file.path.exists():
            return table
        rolled = [f for f in store_files(store_file.path.parent)
                  if f.seq == store_file.seq and f.finished]
        if not rolled:
            return table
        store_file = rolled[0]
    stats = group_stats(store_file.path)
    return read_groups(store_file.path, [number for number, group in enumerate(stats)
                                         if group.may_hold(rollout, low, high)])


@dataclass
class Selection:
    """What a read took: every row of the row groups read (``read``: heartbeats, other
    rollouts and the collector's own rows too, which the loss accounting reads, and the
    :data:`ACCOUNTING_COLUMNS` of the groups skipped between two groups read), which of
    them are the rollout's (or window's) trace records (``chosen``), and how many rows
    each file had when it was read (``extent``: where a tail goes on).
    ``everything``: no rollout id is known at all, so every record was chosen.
    ``unreadable``: the damaged files skipped (path: why)."""

    rollout: int
    read: pa.Table
    chosen: np.ndarray
    extent: dict[int, int] = field(default_factory=dict)
    everything: bool = False
    unreadable: dict[str, str] = field(default_factory=dict)

    @property
    def rows(self) -> pa.Table:
        return self.read.filter(pa.array(self.chosen))


class LatestRollout:
    """Which rollout is the latest, from the rows naming a rollout (trace records,
    heartbeats, closes) as they arrive: the greatest rollout id since the run began. A
    run begins when a process never heard before (a sender none of whose rows named a
    rollout yet) names a lower id than that: training resumed from a checkpoint runs in
    new processes and records the checkpoint's ids again. A late record of an earlier
    rollout from a process already heard (a slow sender, heard at least by its
    heartbeats) changes nothing, so a reader never goes back to a rollout the run has
    left. Seeing rows again changes nothing."""

    def __init__(self) -> None:
        self.rollout: int | None = None
        self._senders: set[str] = set()

    def see(self, table: pa.Table) -> int | None:
        """Take in ``table``'s rows (in arrival order; it needs the columns ``sender``
        and ``rollout_id``); the latest rollout after them."""
        named = table.filter(pc.not_equal(table["rollout_id"], UNKNOWN_ROLLOUT))
        if not len(named):
            return self.rollout
        ids = named["rollout_id"].to_numpy()
        senders = pc.dictionary_encode(named["sender"].combine_chunks())
        codes = pc.fill_null(senders.indices, -1).to_numpy(zero_copy_only=False)
        names = senders.dictionary.to_pylist()
        _, firsts = np.unique(codes, return_index=True)
        fresh = sorted(int(first) for first in firsts
                       if codes[first] >= 0 and names[codes[first]] not in self._senders)
        high, begin = self.rollout, 0
        for first in fresh:  # only where a new sender speaks can a run begin
            if first > begin:
                high = _highest(high, ids[begin:first])
            if high is not None and ids[first] < high:
                high = int(ids[first])
            begin = first
        self.rollout = _highest(high, ids[begin:])
        self._senders.update(names[codes[first]] for first in fresh)
        return self.rollout


def _highest(high: int | None, ids: np.ndarray) -> int:
    top = int(ids.max())
    return top if high is None else max(high, top)


@dataclass
class _Part:
    """One file's rows a walk read, in file order: a write-ahead file's, or those of the
    row groups ``groups`` of a finished file whose groups are ``stats``."""

    store_file: StoreFile
    table: pa.Table
    groups: list[int] = field(default_factory=list)
    stats: tuple[Group, ...] = ()


class _Walk:
    """A read of the store's files from the newest back (:func:`select`): the parts read,
    newest first, the rows each file had (``extent``) and the damaged files skipped."""

    def __init__(self, low: int, high: int) -> None:
        self.low, self.high = low, high
        self.parts: list[_Part] = []
        self.extent: dict[int, int] = {}
        self.unreadable: dict[str, str] = {}

    def attempt(self, store_file: StoreFile, read: Callable[[], _T]) -> _T | None:
        """``read()``, or None when ``store_file`` is damaged (noted in ``unreadable``)."""
        try:
            return read()
        except DAMAGE as exc:
            self.unreadable[str(store_file.path)] = damage_reason(exc)
            return None

    def whole(self, store_file: StoreFile) -> _Part:
        """Every row of ``store_file``."""
        if store_file.finished:
            stats = group_stats(store_file.path)
            groups = list(range(len(stats)))
            self.extent[store_file.seq] = sum(group.rows for group in stats)
            return _Part(store_file, read_groups(store_file.path, groups), groups, stats)
        table = read_file(store_file, None, -1, _NS_MAX)
        self.extent[store_file.seq] = len(table)
        return _Part(store_file, table)

    def of_rollout(self, store_file: StoreFile, rollout: int | None) -> _Part | None:
        """The rows of ``store_file`` in the groups that may hold ``rollout`` (None: any)
        or rows sent without one, where the collector's own start and stop rows are (the
        loss accounting reads them); None when the file cannot hold ``rollout`` and holds
        rows of senders (a file of the collector's rows alone is read: it is a collector
        run that received nothing, and the rollout may go on before it)."""
        if not store_file.finished:
            table = read_file(store_file, None, self.low, self.high)
            self.extent[store_file.seq] = len(table)
            return _Part(store_file, table)
        stats = group_stats(store_file.path)
        self.extent[store_file.seq] = sum(group.rows for group in stats)
        if not any(group.may_hold(rollout, self.low, self.high) for group in stats) and \
                not all(group.collector_only for group in stats):
            return None
        groups = [number for number, group in enumerate(stats)
                  if group.may_hold(rollout, self.low, self.high)
                  or group.may_hold(UNKNOWN_ROLLOUT, self.low, self.high)]
        return _Part(store_file, read_groups(store_file.path, groups), groups, stats)

    def latest(self, files: list[StoreFile], latest: LatestRollout) -> tuple[int | None, int]:
        """Read ``files`` (newest first) whole until one holds rows naming a rollout, and
        decide the latest rollout over its rows after those of the file before it (where
        every live sender was heard, by its heartbeats at least); the rollout (None: no
        row names one) and how many files were read."""
        for at, store_file in enumerate(files):
            part = self.attempt(store_file, partial(self.whole, store_file))
            if part is None:
                continue
            self.parts.append(part)
            if pc.any(pc.not_equal(part.table["rollout_id"], UNKNOWN_ROLLOUT)).as_py():
                latest.see(self.naming(files[at + 1:]))
                return latest.see(part.table), at + 1
        return latest.rollout, len(files)

    def naming(self, files: list[StoreFile]) -> pa.Table:
        """The ``sender`` and ``rollout_id`` of every row of the newest of ``files``
        (newest first) that holds a sender's rows and can be read."""
        for store_file in files:
            table = self.attempt(store_file, partial(_senders_and_rollouts, store_file))
            if table is not None:
                return table
        return LAYOUT.empty().select(["sender", "rollout_id"])

    def back(self, files: list[StoreFile], rollout: int, everything: bool, seen: bool) -> None:
        """Read ``files`` (newest first) for ``rollout`` (any, when ``everything``) until
        the first that cannot hold it once its rows were found; files read before its
        rows are found (newer rollouts') are left out of the read (``extent`` only)."""
        for store_file in files:
            part = self.attempt(store_file, partial(self.of_rollout, store_file,
                                                    None if everything else rollout))
            if part is None:
                if str(store_file.path) in self.unreadable:
                    continue
                if seen:
                    break  # a rollout's rows lie together: older ones are of an earlier run
                continue
            seen = seen or (bool(len(part.table)) and (everything or bool(
                pc.any(pc.equal(part.table["rollout_id"], rollout)).as_py())))
            if seen:
                self.parts.append(part)

    def table(self) -> pa.Table:
        """The rows read, in arrival order, with the accounting columns of the row groups
        skipped between two read (their senders' numbers are received, not missing)."""
        parts = self.parts[::-1]
        tables = []
        for number, part in enumerate(parts):
            low = 0 if number else min(part.groups, default=0)
            high = len(part.stats) - 1 if number < len(parts) - 1 else max(part.groups,
                                                                           default=-1)
            skipped = [group for group in range(low, high + 1) if group not in part.groups]
            whole = self.attempt(part.store_file, partial(_with_skipped, part, skipped))
            tables.append(part.table if whole is None else whole)
        return pa.concat_tables(tables) if tables else LAYOUT.empty()


def _senders_and_rollouts(store_file: StoreFile) -> pa.Table | None:
    """The ``sender`` and ``rollout_id`` columns of a file, None when it holds the
    collector's rows alone."""
    if not store_file.finished:
        table = read_file(store_file, None, -1, _NS_MAX)
        return table.select(["sender", "rollout_id"]) if len(table) else None
    if all(group.collector_only for group in group_stats(store_file.path)):
        return None
    return pq.ParquetFile(store_file.path).read(columns=["sender", "rollout_id"])


def _with_skipped(part: _Part, skipped: list[int]) -> pa.Table:
    """``part``'s rows with the accounting columns of its groups ``skipped``, each group
    in its place."""
    if not skipped:
        return part.table
    extra = accounting_groups(part.store_file.path, skipped)
    pieces, at_read, at_extra = [], 0, 0
    for number in sorted([*part.groups, *skipped]):
        rows = part.stats[number].rows
        if number in skipped:
            pieces.append(extra.slice(at_extra, rows))
            at_extra += rows
        else:
            pieces.append(part.table.slice(at_read, rows))
            at_read += rows
    return pa.concat_tables(pieces)


def damage_reason(exc: BaseException) -> str:
    """Why a file could not be read, on one line."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def select(directory: str | Path, rollout: int | None = None, low_ns: int | None = None,
           high_ns: int | None = None, latest: LatestRollout | None = None) -> Selection:
    """The records of ``rollout`` (None: the latest, as ``latest`` (a fresh
    :class:`LatestRollout` by default) finds it in the newest file, after the rows of
    the file before it; -1: those sent without a rollout id, and then every record
    when no rollout id is known at all) whose time is in ``[low_ns, high_ns]`` (either
    may be None), in arrival order. A damaged file is skipped and named in
    ``unreadable``; nothing raises for one."""
    files = store_files(store_folder(directory))[::-1]
    walk = _Walk(-1 if low_ns is None else int(low_ns),
                 _NS_MAX if high_ns is None else int(high_ns))
    wanted, done = (int(rollout), 0) if rollout is not None else walk.latest(
        files, latest or LatestRollout())
    if wanted is None:
        wanted = UNKNOWN_ROLLOUT
    everything = wanted == UNKNOWN_ROLLOUT and rollout is None
    walk.back(files[done:], wanted, everything, seen=rollout is None)
    read = walk.table()
    keep = pc.and_(pc.greater_equal(read["ts_ns"], walk.low),
                   pc.less_equal(read["ts_ns"], walk.high))
    if not everything:
        keep = pc.and_(keep, pc.equal(read["rollout_id"], wanted))
    records = pc.and_(keep, trace_records(read))
    return Selection(wanted, read, records.to_numpy(zero_copy_only=False), walk.extent,
                     everything, walk.unreadable)


class Tail:
    """Reads the rows that arrived since its last read, file by file: the cost of a read
    grows with the new rows (and a write-ahead file's batch count), never with what was
    read before. A finished file's rows are its write-ahead file's in the same order, so
    a place in a file holds across its roll."""

    def __init__(self, directory: str | Path) -> None:
        self.folder = store_folder(directory)
        #: Rows read of each file by sequence number; files before ``first_seq`` are skipped.
        self.rows: dict[int, int] = {}
        self.first_seq = 0
        #: The damaged files met (path: why), skipped and tried again at each read.
        self.unreadable: dict[str, str] = {}

    def start_after(self, extent: dict[int, int]) -> None:
        """Go on after a :class:`Selection` (its ``extent``): its files are read up to
        the rows it saw, and files older than the oldest of them are never read."""
        if extent:
            self.first_seq = min(extent)
        self.rows.update(extent)

    def read(self) -> pa.Table:
        """Every row that arrived since the last read, in arrival order."""
        table, ends = self.read_ahead()
        self.go_on(ends)
        return table

    def read_ahead(self) -> tuple[pa.Table, dict[int, int]]:
        """What :meth:`read` returns, without moving on: the rows, and each file's rows
        read once they are taken (for :meth:`go_on`). Reading again reads them again."""
        tables, ends = [], {}
        for store_file in store_files(self.folder):
            if store_file.seq < self.first_seq:
                continue
            done = self.rows.get(store_file.seq, 0)
            try:
                table = (_finished_after(store_file.path, done) if store_file.finished
                         else wal_after(store_file.path, done))
            except DAMAGE as exc:
                self.unreadable[str(store_file.path)] = damage_reason(exc)
                continue
            ends[store_file.seq] = done + len(table)
            if len(table):
                tables.append(table)
        return (pa.concat_tables(tables) if tables else LAYOUT.empty()), ends

    def go_on(self, ends: dict[int, int]) -> None:
        """Take the rows of a :meth:`read_ahead` as read: the next read starts after them."""
        self.rows.update(ends)


def _finished_after(path: Path, done: int) -> pa.Table:
    """The rows of a finished file after its first ``done``, reading only their groups."""
    groups, first, skip = [], 0, 0
    for number, group in enumerate(group_stats(path)):
        if first + group.rows > done:
            if not groups:
                skip = done - first
            groups.append(number)
        first += group.rows
    return read_groups(path, groups).slice(skip) if groups else LAYOUT.empty()


def wal_after(path: Path, done: int, layout: durable.Layout = LAYOUT) -> pa.Table:
    """The complete batches of a write-ahead file (the live store's, or ``layout``'s) after
    its first ``done`` rows, through a memory map (the batches skipped are not copied). A
    batch being written, or a file rolled meanwhile, is read next time."""
    batches = []
    try:
        reader = ipc.open_stream(pa.memory_map(str(path)))
        if not reader.schema.equals(layout.schema):
            return layout.empty()
        seen = 0
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                break
            if seen + batch.num_rows > done:
                batches.append(batch.slice(max(done - seen, 0)))
            seen += batch.num_rows
    except (pa.ArrowInvalid, OSError, EOFError):
        pass  # gone, or its last batch is being written
    if not batches:
        return layout.empty()
    return pa.Table.from_batches(batches, layout.schema)
