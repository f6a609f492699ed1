"""Reading the live store back: a rollout or a window through only the row groups that can
hold it, and a tail that reads only what arrived since its last read.

Finished files are immutable, so the statistics of their row groups (rows, least and
greatest ``ts_ns`` and ``rollout_id``) are read from each footer once per process and
kept (:func:`group_stats`). A rollout's rows lie together in time, so a read of one
walks the files from the newest back and stops at the first older file none of whose
groups can hold it: a rollout in progress reads a few files however long the collector
has run. Write-ahead files are read whole (at most ``ROLL_ROWS`` rows, a minute).

The latest rollout is the greatest id since the run began (:class:`LatestRollout`),
where a run begins when a new process sends a lower id: training resumed from a
checkpoint records lower rollout ids than the run that died.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from ..engine import durable
from ..engine.durable import read_wal
from .store import LAYOUT, SUBDIR, UNKNOWN_ROLLOUT, trace_records

_WAL = re.compile(r"wal-(\d{6,})\.arrows")
_NS_MAX = 2**63 - 1


@dataclass(frozen=True)
class Group:
    """One row group of a finished file: its rows and the ranges of time and rollout."""

    rows: int
    ts: tuple[int, int] | None
    rollouts: tuple[int, int] | None

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
    """The row groups of a finished file (read from its footer once per process)."""
    stat = path.stat()
    return _group_stats(str(path), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=100_000)
def _group_stats(path: str, size: int, mtime_ns: int) -> tuple[Group, ...]:
    metadata = pq.ParquetFile(path).metadata
    names = metadata.schema.to_arrow_schema().names
    ts_column, rollout_column = names.index("ts_ns"), names.index("rollout_id")
    groups = []
    for number in range(metadata.num_row_groups):
        group = metadata.row_group(number)
        groups.append(Group(group.num_rows, _range(group.column(ts_column).statistics),
                            _range(group.column(rollout_column).statistics)))
    return tuple(groups)


def _range(statistics: object) -> tuple[int, int] | None:
    if statistics is None or not statistics.has_min_max:  # type: ignore[attr-defined]
        return None
    return int(statistics.min), int(statistics.max)  # type: ignore[attr-defined]


def read_groups(path: Path, groups: list[int]) -> pa.Table:
    """Row groups ``groups`` of a finished file, as the store's schema."""
    if not groups:
        return LAYOUT.empty()
    table = pq.ParquetFile(path).read_row_groups(groups)
    return table if table.schema.equals(LAYOUT.schema) else table.cast(LAYOUT.schema)


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
    rollouts and the collector's own rows too, which the loss accounting reads), which
    of them are the rollout's (or window's) trace records (``chosen``), and how many
    rows each file had when it was read (``extent``: where a tail goes on).
    ``everything``: no rollout id is known at all, so every record was chosen."""

    rollout: int
    read: pa.Table
    chosen: np.ndarray
    extent: dict[int, int] = field(default_factory=dict)
    everything: bool = False

    @property
    def rows(self) -> pa.Table:
        return self.read.filter(pa.array(self.chosen))


class LatestRollout:
    """Which rollout is the latest, from the trace records as they arrive: the greatest
    rollout id since the run began. A run begins when a process never heard before
    (a sender) sends a lower id than that: training resumed from a checkpoint runs in
    new processes and records the checkpoint's ids again. A late record of an earlier
    rollout from a process already heard (a slow sender) changes nothing, so a reader
    never goes back to a rollout the run has left. Seeing rows again changes nothing."""

    def __init__(self) -> None:
        self.rollout: int | None = None
        self._senders: set[str] = set()

    def see(self, table: pa.Table) -> int | None:
        """Take in ``table``'s rows (in arrival order); the latest rollout after them."""
        named = table.filter(pc.and_(trace_records(table),
                                     pc.not_equal(table["rollout_id"], UNKNOWN_ROLLOUT)))
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


def select(directory: str | Path, rollout: int | None = None, low_ns: int | None = None,
           high_ns: int | None = None, latest: LatestRollout | None = None) -> Selection:
    """The records of ``rollout`` (None: the latest, as ``latest`` (a fresh
    :class:`LatestRollout` by default) finds it in the newest file; -1: those sent
    without a rollout id, and then every record when no rollout id is known at all)
    whose time is in ``[low_ns, high_ns]`` (either may be None), in arrival order."""
    files = store_files(store_folder(directory))
    low = -1 if low_ns is None else int(low_ns)
    high = _NS_MAX if high_ns is None else int(high_ns)
    wanted = None if rollout is None else int(rollout)
    latest = latest or LatestRollout()
    tables, extent = [], {}
    seen = False
    for store_file in reversed(files):
        if wanted is None:  # the latest rollout: that of the last record naming one
            table = read_file(store_file, None, -1, _NS_MAX)
            extent[store_file.seq] = (sum(group.rows for group in group_stats(store_file.path))
                                      if store_file.finished else len(table))
            tables.append(table)
            wanted = latest.see(table)
            seen = wanted is not None
            continue
        everything = wanted == UNKNOWN_ROLLOUT and rollout is None
        if store_file.finished:
            stats = group_stats(store_file.path)
            extent[store_file.seq] = sum(group.rows for group in stats)
            holds = everything or any(g.may_hold(wanted, low, high) for g in stats)
            if not holds and seen:
                break  # a rollout's rows lie together: older ones are of an earlier run
            # the groups of the rollout, and those of rows sent without one, where the
            # collector's own start and stop rows are (the loss accounting reads them)
            table = read_groups(store_file.path, [
                number for number, group in enumerate(stats)
                if everything or group.may_hold(wanted, low, high)
                or group.may_hold(UNKNOWN_ROLLOUT, low, high)])
        else:
            table = read_file(store_file, None, low, high)
            extent[store_file.seq] = len(table)
        seen = seen or (bool(len(table)) and (everything or bool(
            pc.any(pc.equal(table["rollout_id"], wanted)).as_py())))
        tables.append(table)
    if wanted is None:
        wanted = UNKNOWN_ROLLOUT
    everything = wanted == UNKNOWN_ROLLOUT and rollout is None
    read = pa.concat_tables(tables[::-1]) if tables else LAYOUT.empty()
    keep = pc.and_(pc.greater_equal(read["ts_ns"], low), pc.less_equal(read["ts_ns"], high))
    if not everything:
        keep = pc.and_(keep, pc.equal(read["rollout_id"], wanted))
    records = pc.and_(keep, trace_records(read))
    return Selection(wanted, read, records.to_numpy(zero_copy_only=False), extent, everything)


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
            table = (_finished_after(store_file.path, done) if store_file.finished
                     else wal_after(store_file.path, done))
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
