"""A durable, crash-safe table store in a subfolder of a collector folder, read by time.

Both of the collector's stores are one of these, each over its own schema and
subfolder (:class:`Layout`): the engines' spans (``store``) and the engines' load
(``load_store``). Files under ``DIR/<subdir>/``:

* ``wal-<seq>.arrows``: an Arrow IPC stream being appended, one record batch per
  append, flushed and fsynced before :meth:`DurableStore.append` returns. A crash can
  cut its last batch short; reading stops before it.
* ``<prefix>-<first ns>-<last ns>-<seq>.parquet``: finished files. A write-ahead file
  is rolled into one once it holds ``roll_rows`` rows, ``roll_bytes`` bytes (by
  default :data:`ROLL_BYTES`) or is ``roll_seconds`` old, and on close: sorted by the
  layout's sort column, written aside, fsynced, renamed, and only then is the
  write-ahead file removed. The roll streams the file (:mod:`.wal_roll`): its memory
  is a bounded piece at a time, not the file. The name carries the time the rows
  cover (the least of the start column, the greatest of the end column), so a window
  is read without opening the files outside it.

Recovery is the same roll: a write-ahead file left by a killed collector becomes a
finished file when the store next opens (a finished file of the same ``seq`` means
the roll had completed, and the leftover is removed). A write-ahead file holds at
most ``roll_bytes`` and one append, and the roll's memory does not grow with it, so
recovery needs no more memory than a roll.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from ...file_locks import locked_file
from ...whole_files import TEMPORARY_SUFFIX, fsync_folder, replaced
from .wal_roll import (
    ROW_GROUP_ROWS,
    WalRows,
    complete_batches,
    mapped_wal,
    time_bounds,
    write_sorted,
)

Source = str | os.PathLike | Iterable[str | os.PathLike]
#: Bytes written to a write-ahead file after which it is rolled (the first append that
#: reaches it rolls it), whatever its rows and age: what a roll and a recovery read.
ROLL_BYTES = 256 << 20
_WAL = re.compile(r"wal-(\d{6,})\.arrows")
#: A finished file of any layout: in a list of files, one of another layout is left out.
_ANY_FINISHED = re.compile(r"([a-z_]+)-\d{1,20}-\d{1,20}-\d{6,}\.parquet")


@dataclass(frozen=True)
class Layout:
    """What one store keeps and where: its rows' ``schema``, its ``subdir`` of the
    collector folder, the ``prefix`` of its finished files, the int64 nanosecond
    columns a row's time runs from (``start``) and to (``end``), and the column its
    finished files are sorted by (stably; "" keeps the order rows were written in, so a
    finished file's rows are its write-ahead file's, row for row). ``what`` names the
    store in warnings; ``compression`` is the finished files' Parquet codec."""

    subdir: str
    prefix: str
    schema: pa.Schema
    start: str
    end: str
    sort_by: str
    what: str
    compression: str = "snappy"
    #: A companion written beside each finished file (``<name>.<companion>.parquet``):
    #: ``derive`` of its rows, with ``derived_schema``. A read may take it instead.
    companion: str = ""
    derive: Callable[[pa.Table], pa.Table] | None = field(default=None, compare=False)
    derived_schema: pa.Schema | None = None
    #: Whether a finished file's rows are worth a companion (None: always).
    worth_deriving: Callable[[pa.Table], bool] | None = field(default=None, compare=False)

    def wants_companion(self, table: pa.Table) -> bool:
        return self.derive is not None and (self.worth_deriving is None
                                            or self.worth_deriving(table))
    finished: re.Pattern = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        pattern = re.compile(rf"{re.escape(self.prefix)}-(\d{{1,20}})-(\d{{1,20}})-(\d{{6,}})"
                             r"\.parquet")
        object.__setattr__(self, "finished", pattern)

    def empty(self) -> pa.Table:
        return self.schema.empty_table()

    def rows(self, columns: dict[str, list]) -> pa.Table:
        """Decoded rows (a list per column, every column of the schema) as a table of
        the schema."""
        return pa.table({field.name: pa.array(columns[field.name], type=field.type)
                         for field in self.schema}, schema=self.schema)

    def companion_of(self, finished: Path) -> Path:
        return finished.with_name(f"{finished.stem}.{self.companion}.parquet")


class DurableStore:
    """The writing side of one layout: one per collector folder, used from one thread."""

    def __init__(self, directory: str | Path, layout: Layout, roll_rows: int,
                 roll_seconds: float, roll_bytes: int = ROLL_BYTES) -> None:
        self.layout = layout
        self.folder = Path(directory) / layout.subdir
        self.folder.mkdir(parents=True, exist_ok=True)
        self._lock = _lock_folder(self.folder, layout)
        self.roll_rows, self.roll_seconds = roll_rows, roll_seconds
        self.roll_bytes = roll_bytes
        self._writer: ipc.RecordBatchStreamWriter | None = None
        self._stream: object | None = None
        self._wal_seq = 0
        self._wal_rows = 0
        self._wal_opened = 0.0
        self._next_seq = self._recover()

    def append(self, table: pa.Table) -> None:
        """Write ``table`` to the write-ahead file and make it durable; roll when due
        (by rows, bytes written or age)."""
        if not len(table):
            return
        if self._writer is None:
            self._open_wal()
        assert self._writer is not None and self._stream is not None
        try:
            self._writer.write_table(table)
            self._stream.flush()  # type: ignore[attr-defined]
            os.fsync(self._stream.fileno())  # type: ignore[attr-defined]
        except BaseException:
            # A batch cut short (a full disk) ends what a reader takes of this file: nothing
            # after it may be acknowledged here. Finish the file with what came before it;
            # the next append opens a new one.
            self._abandon()
            raise
        self._wal_rows += len(table)
        written = self._stream.tell()  # type: ignore[attr-defined]
        if (self._wal_rows >= self.roll_rows or written >= self.roll_bytes
                or time.monotonic() - self._wal_opened >= self.roll_seconds):
            self.roll()

    def roll(self) -> None:
        """Turn the current write-ahead file into a finished file (nothing when empty)."""
        if self._writer is None:
            return
        self._writer.close()
        self._stream.close()  # type: ignore[attr-defined]
        self._writer = self._stream = None
        finish(self.folder, self._wal_seq, self.layout)

    def close(self) -> None:
        try:
            self.roll()
        finally:
            self._lock.close()  # the lock goes with the file

    def _abandon(self) -> None:
        writer, stream = self._writer, self._stream
        self._writer = self._stream = None
        for closing in (writer, stream):
            with contextlib.suppress(Exception):
                closing.close()  # type: ignore[union-attr]
        with contextlib.suppress(Exception):  # the WAL stays; recovery finishes it
            finish(self.folder, self._wal_seq, self.layout)

    def _open_wal(self) -> None:
        self._wal_seq, self._next_seq = self._next_seq, self._next_seq + 1
        path = self.folder / f"wal-{self._wal_seq:06d}.arrows"
        self._stream = open(path, "xb")  # noqa: SIM115 (closed by roll)
        self._writer = ipc.new_stream(self._stream, self.layout.schema)
        fsync_folder(self.folder)
        self._wal_rows, self._wal_opened = 0, time.monotonic()

    def _recover(self) -> int:
        """Roll write-ahead files a killed collector left; the next free sequence number."""
        seqs = [0]
        for path in sorted(self.folder.iterdir()):
            if path.name.startswith(".") and path.name.endswith(TEMPORARY_SUFFIX):
                path.unlink(missing_ok=True)  # a roll cut short: its WAL is still there
                continue
            wal, done = _WAL.fullmatch(path.name), self.layout.finished.fullmatch(path.name)
            if done:
                seqs.append(int(done.group(3)))
            elif wal:
                seqs.append(int(wal.group(1)))
        for path in sorted(self.folder.glob("wal-*.arrows")):
            match = _WAL.fullmatch(path.name)
            if match:
                finish(self.folder, int(match.group(1)), self.layout)
        return max(seqs) + 1


class StoreInUse(RuntimeError):
    """A store's folder is locked by another collector (one collector per folder)."""


def _lock_folder(folder: Path, layout: Layout) -> Any:
    """An exclusive lock on the folder for this store's life: a second writer would roll
    and delete the write-ahead file the first is appending to."""
    try:
        return locked_file(folder / ".lock")  # held until close
    except BlockingIOError:
        raise StoreInUse(f"{layout.what} {folder}: another collector is writing to this "
                           "folder (one collector per folder)") from None


def finish(folder: Path, seq: int, layout: Layout) -> None:
    """Roll ``wal-<seq>`` into a finished Parquet file, durably, then drop the WAL. The
    rows are streamed from the file (:mod:`.wal_roll`), not read whole."""
    wal = folder / f"wal-{seq:06d}.arrows"
    done = [p for p in folder.glob(f"{layout.prefix}-*-{seq:06d}.parquet")
            if layout.finished.fullmatch(p.name)]
    if done:  # rolled before a crash; the WAL outlived it, the companion may be missing
        if layout.derive is not None and not layout.companion_of(done[0]).exists():
            _derive_missing_companion(done[0], wal, layout)
        wal.unlink(missing_ok=True)
        fsync_folder(folder)
        return
    with mapped_wal(wal, layout.schema) as rows:
        if rows.rows:
            _finish_rows(rows, folder, seq, layout)
    wal.unlink(missing_ok=True)
    fsync_folder(folder)


def _finish_rows(rows: WalRows, folder: Path, seq: int, layout: Layout) -> None:
    """The finished file of a write-ahead file's ``rows`` (and its companion), durably."""
    first, last = time_bounds(rows, layout.start, layout.end)
    final = folder / f"{layout.prefix}-{first}-{last}-{seq:06d}.parquet"
    with replaced(final, durable=True) as temporary:
        write_sorted(rows, temporary, layout.sort_by, layout.compression)
    if layout.derive is not None:
        table = rows.table()
        if layout.wants_companion(table):
            _write_durably(layout.derive(table), layout.companion_of(final), layout)
        rows.let_pages_go()


def _derive_missing_companion(finished: Path, wal: Path, layout: Layout) -> None:
    """The companion of ``finished``, from the rows of the write-ahead file it was rolled
    from (mapped, as a roll reads them; the finished file's rows are the same), or from
    the finished file when that write-ahead file is gone."""
    with mapped_wal(wal, layout.schema) as rows:
        table = (rows.table() if rows.rows
                 else pq.read_table(finished, schema=layout.schema))
        if layout.wants_companion(table):
            _write_durably(layout.derive(table), layout.companion_of(finished), layout)
        del table  # its views of the mapping go before the mapping does


def _write_durably(table: pa.Table, final: Path, layout: Layout) -> None:
    """``table`` at ``final``: written aside, fsynced, renamed into place."""
    ordered = table.sort_by(layout.sort_by) if layout.sort_by else table
    with replaced(final, durable=True) as temporary:
        pq.write_table(ordered, temporary, row_group_size=ROW_GROUP_ROWS,
                       compression=layout.compression)


def read_wal(path: Path, layout: Layout) -> pa.Table:
    """The complete record batches of a write-ahead file (a cut last one is left out)."""
    try:
        with open(path, "rb") as handle:
            batches = complete_batches(handle, layout.schema)
    except OSError:  # gone or unreadable: nothing of it is known
        batches = []
    if not batches:
        return layout.empty()
    table = pa.Table.from_batches(batches)
    return table if table.schema.equals(layout.schema) else layout.empty()


# --------------------------------------------------------------------------- reading


def read_rows(layout: Layout, source: Source, low_ns: int | None = None,
              high_ns: int | None = None, dictionaries: tuple[str, ...] = (),
              derived: bool = False, unreadable: dict[str, str] | None = None) -> pa.Table:
    """Stored rows of ``layout`` that overlap ``[low_ns, high_ns]`` (all when neither is
    given): a row overlaps when its start is at most ``high_ns`` and its end at least
    ``low_ns``. ``source`` is a collector folder (its finished files, chosen by their
    names, and its write-ahead files) or a list of files. A file that cannot be read is
    skipped: put in ``unreadable`` (its path, the reason) when given, for the caller to
    count and name, else warned of by name. The text columns named in ``dictionaries`` come
    dictionary-encoded (a text repeated on most rows is then held once). ``derived``:
    the rows as ``layout.derive`` makes them, from each finished file's companion where
    it has one (the others, and write-ahead files, are derived as they are read)."""
    derive = layout.derive if derived else None
    base = layout.derived_schema if derive is not None else layout.schema
    schema = _with_dictionaries(base, dictionaries)
    low = -1 if low_ns is None else int(low_ns)
    high = 2**63 - 1 if high_ns is None else int(high_ns)
    windowed = low_ns is not None or high_ns is not None
    tables = []
    for path, bounds in files_of(layout, source):
        if bounds is not None and (bounds[0] > high or bounds[1] < low):
            continue
        try:
            table = _read_one(path, layout, low, high, schema, derive, dictionaries)
            if path.suffix == ".arrows" and not len(table) and not path.exists():
                # rolled between the listing and the read: its rows are in its finished file
                finished = _finished_of(path, layout)
                if finished is not None:
                    table = _read_one(finished, layout, low, high, schema, derive, dictionaries)
        except (pa.ArrowException, OSError, ValueError) as exc:
            if unreadable is None:
                warnings.warn(f"skipped {layout.what} {path}: {exc}", RuntimeWarning,
                              stacklevel=3)
            else:
                unreadable[str(path)] = str(exc)
            continue
        if windowed:
            keep = pc.and_(pc.less_equal(table[layout.start], high),
                           pc.greater_equal(table[layout.end], low))
            if not pc.all(keep).as_py():  # a filter copies every column, even all kept
                table = table.filter(keep)
        tables.append(table)
    return pa.concat_tables(tables) if tables else schema.empty_table()


def _read_finished(path: Path, layout: Layout, low: int, high: int, schema: pa.Schema
                   ) -> pa.Table:
    """The row groups of a finished file whose statistics overlap ``[low, high]`` (the
    file is sorted by time, so a window reads only its own groups), as ``schema``. The
    caller filters the rows."""
    dictionaries = [field.name for field in schema if pa.types.is_dictionary(field.type)]
    parquet = pq.ParquetFile(path, read_dictionary=dictionaries)
    names = parquet.schema_arrow.names
    if layout.start not in names or layout.end not in names:
        raise ValueError(f"no {layout.start} or {layout.end} column")
    start, end = names.index(layout.start), names.index(layout.end)
    groups = []
    for number in range(parquet.metadata.num_row_groups):
        group = parquet.metadata.row_group(number)
        first, last = group.column(start).statistics, group.column(end).statistics
        if (first is None or last is None or not first.has_min_max or not last.has_min_max
                or (first.min <= high and last.max >= low)):
            groups.append(number)
    table = parquet.read_row_groups(groups) if groups else parquet.schema_arrow.empty_table()
    return table if table.schema.equals(schema) else table.cast(schema)


def _read_one(path: Path, layout: Layout, low: int, high: int, schema: pa.Schema,
              derive: Callable[[pa.Table], pa.Table] | None, dictionaries: tuple[str, ...]
              ) -> pa.Table:
    """One file's rows as ``schema``: a finished file's companion when ``derive`` is asked
    for and it has one; else the file, derived as it is read when asked for."""
    companion = layout.companion_of(path) if derive is not None else None
    if companion is not None and path.suffix != ".arrows" and companion.exists():
        return _read_finished(companion, layout, low, high, schema)
    if path.suffix != ".arrows" and derive is None:
        return _read_finished(path, layout, low, high, schema)
    table = (read_wal(path, layout) if path.suffix == ".arrows" else
             pq.read_table(path, schema=layout.schema))
    table = derive(table) if derive is not None else table
    for name in dictionaries:
        table = table.set_column(table.schema.get_field_index(name), name,
                                 pc.dictionary_encode(table[name]))
    return table


def _finished_of(wal: Path, layout: Layout) -> Path | None:
    match = _WAL.fullmatch(wal.name)
    if match is None:
        return None
    done = [p for p in wal.parent.glob(f"{layout.prefix}-*-{match.group(1)}.parquet")
            if layout.finished.fullmatch(p.name)]
    return done[0] if done else None


def _with_dictionaries(schema: pa.Schema, names: tuple[str, ...]) -> pa.Schema:
    for name in names:
        index = schema.get_field_index(name)
        schema = schema.set(index, schema.field(index).with_type(
            pa.dictionary(pa.int32(), schema.field(index).type)))
    return schema


def files_of(layout: Layout, source: Source) -> list[tuple[Path, tuple[int, int] | None]]:
    """The files of ``source`` for ``layout``, with the time bounds their names give
    (None: unknown). In a list, a finished file named by another layout is left out."""
    if isinstance(source, (str, os.PathLike)):
        root = Path(source)
        if root.is_dir():
            folder = root / layout.subdir if (root / layout.subdir).is_dir() else root
            # Write-ahead files first: one rolled meanwhile is then listed as finished (and
            # a listed one that vanished reads as empty), never missed.
            wals = {int(m.group(1)): path for path in sorted(folder.glob("wal-*.arrows"))
                    if (m := _WAL.fullmatch(path.name))}
            finished: dict[int, tuple[Path, tuple[int, int]]] = {}
            for path in sorted(folder.glob(f"{layout.prefix}-*.parquet")):
                match = layout.finished.fullmatch(path.name)
                if match:
                    finished[int(match.group(3))] = (
                        path, (int(match.group(1)), int(match.group(2))))
            files: list[tuple[Path, tuple[int, int] | None]] = list(finished.values())
            files += [(path, None) for seq, path in wals.items() if seq not in finished]
            return files
        if not root.exists():
            raise FileNotFoundError(f"{layout.what} {root}: no such file or folder")
        source = [root]
    out: list[tuple[Path, tuple[int, int] | None]] = []
    for item in source:
        path = Path(item)
        if not path.is_file():
            raise FileNotFoundError(f"{layout.what} {path}: no such file")
        match = layout.finished.fullmatch(path.name)
        other = _ANY_FINISHED.fullmatch(path.name)
        if match is None and other is not None and other.group(1) != layout.prefix:
            continue
        out.append((path, (int(match.group(1)), int(match.group(2))) if match else None))
    return out


def holds_rows(layout: Layout, source: Source) -> bool:
    """Whether ``source`` (a collector folder, or files) holds a row of ``layout``: a
    finished file named by the store (written only with rows), a write-ahead file with a
    complete batch of rows, or another file with rows. A store opened and never appended
    to (the ``.lock`` alone) holds none."""
    for path, bounds in files_of(layout, source):
        if bounds is not None:
            return True
        try:
            if path.suffix == ".arrows":
                if _wal_holds_rows(path, layout):
                    return True
            elif pq.ParquetFile(path).metadata.num_rows:
                return True
        except (pa.ArrowException, OSError):
            continue  # unreadable: no row of it is known
    return False


def _wal_holds_rows(path: Path, layout: Layout) -> bool:
    """Whether a write-ahead file of ``layout`` has a complete batch of rows (read up to
    the first, not the whole file)."""
    with open(path, "rb") as handle:
        try:
            reader = ipc.open_stream(handle)
            if not reader.schema.equals(layout.schema):
                return False
            return any(batch.num_rows for batch in reader)
        except (pa.ArrowInvalid, EOFError):
            return False  # empty, or cut in its schema or before a complete batch


def window_files(layout: Layout, source: str | Path, start_ns: int, end_ns: int) -> list[list]:
    """The finished files of ``layout`` in a collector folder that overlap
    ``[start_ns, end_ns]``, as ``[name, size]``."""
    return sorted([path.name, path.stat().st_size] for path, bounds in files_of(layout, source)
                  if bounds is not None and bounds[0] <= end_ns and bounds[1] >= start_ns)
