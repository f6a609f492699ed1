"""The engine-trace store: spans appended durably, read back by time window.

Files under ``DIR/engine_spans/``:

* ``wal-<seq>.arrows``: an Arrow IPC stream being appended, one record batch per
  accepted request (or group of requests), flushed and fsynced before the clients
  are answered. A crash can cut its last batch short; reading stops before it.
* ``spans-<first start ns>-<last end ns>-<seq>.parquet``: finished files. A
  write-ahead file is rolled into one once it holds :data:`ROLL_SPANS` spans or
  is :data:`ROLL_SECONDS` old, and on shutdown: written aside, fsynced, renamed,
  and only then is the write-ahead file removed. Their names carry the time they
  cover, so a window is read without opening the files outside it.

Recovery is the same roll: a write-ahead file left by a killed collector becomes
a finished file when the store next opens (a finished file of the same ``seq``
means the roll had completed, and the leftover is removed).
"""

from __future__ import annotations

import json
import os
import re
import time
import warnings
from collections.abc import Iterable
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

SUBDIR = "engine_spans"
ROLL_SPANS = 250_000
ROLL_SECONDS = 60.0
SCHEMA = pa.schema([
    ("trace_id", pa.string()), ("span_id", pa.string()), ("parent_id", pa.string()),
    ("name", pa.string()), ("start_ns", pa.int64()), ("end_ns", pa.int64()),
    ("service", pa.string()), ("status", pa.int8()), ("attributes", pa.string()),
    ("resource", pa.string()), ("events", pa.string()), ("links", pa.string()),
])
#: Columns of a stored span, in order.
COLUMNS = tuple(SCHEMA.names)
_WAL = re.compile(r"wal-(\d{6,})\.arrows")
_FINISHED = re.compile(r"spans-(\d{1,20})-(\d{1,20})-(\d{6,})\.parquet")


def rows_table(columns: dict[str, list]) -> pa.Table:
    """Decoded spans (a list per column) as a table of the store's schema."""
    return pa.table({name: pa.array(columns[name], type=SCHEMA.field(name).type)
                     for name in COLUMNS}, schema=SCHEMA)


class SpanStore:
    """The writing side: one per collector folder, used from one thread."""

    def __init__(self, directory: str | Path, roll_spans: int = ROLL_SPANS,
                 roll_seconds: float = ROLL_SECONDS) -> None:
        self.folder = Path(directory) / SUBDIR
        self.folder.mkdir(parents=True, exist_ok=True)
        self.roll_spans, self.roll_seconds = roll_spans, roll_seconds
        self._writer: ipc.RecordBatchStreamWriter | None = None
        self._stream: object | None = None
        self._wal_seq = 0
        self._wal_spans = 0
        self._wal_opened = 0.0
        self._wal_bounds = (0, 0)
        self._next_seq = self._recover()

    def append(self, table: pa.Table) -> None:
        """Write ``table`` to the write-ahead file and make it durable; roll when due."""
        if not len(table):
            return
        if self._writer is None:
            self._open_wal()
        assert self._writer is not None and self._stream is not None
        self._writer.write_table(table)
        self._stream.flush()  # type: ignore[attr-defined]
        os.fsync(self._stream.fileno())  # type: ignore[attr-defined]
        low, high = self._wal_bounds
        first = pc.min(table["start_ns"]).as_py()
        last = pc.max(table["end_ns"]).as_py()
        self._wal_bounds = (min(low, first) if self._wal_spans else first, max(high, last))
        self._wal_spans += len(table)
        if (self._wal_spans >= self.roll_spans
                or time.monotonic() - self._wal_opened >= self.roll_seconds):
            self.roll()

    def roll(self) -> None:
        """Turn the current write-ahead file into a finished file (nothing when empty)."""
        if self._writer is None:
            return
        self._writer.close()
        self._stream.close()  # type: ignore[attr-defined]
        self._writer = self._stream = None
        _finish(self.folder, self._wal_seq)

    def close(self) -> None:
        self.roll()

    def _open_wal(self) -> None:
        self._wal_seq, self._next_seq = self._next_seq, self._next_seq + 1
        path = self.folder / f"wal-{self._wal_seq:06d}.arrows"
        self._stream = open(path, "xb")  # noqa: SIM115 (closed by roll)
        self._writer = ipc.new_stream(self._stream, SCHEMA)
        _fsync_folder(self.folder)
        self._wal_spans, self._wal_opened, self._wal_bounds = 0, time.monotonic(), (0, 0)

    def _recover(self) -> int:
        """Roll write-ahead files a killed collector left; the next free sequence number."""
        seqs = [0]
        for path in sorted(self.folder.iterdir()):
            if path.name.startswith(".") and path.name.endswith(".tmp"):
                path.unlink(missing_ok=True)  # a roll cut short: its WAL is still there
                continue
            wal, finished = _WAL.fullmatch(path.name), _FINISHED.fullmatch(path.name)
            if finished:
                seqs.append(int(finished.group(3)))
            elif wal:
                seqs.append(int(wal.group(1)))
        for path in sorted(self.folder.glob("wal-*.arrows")):
            match = _WAL.fullmatch(path.name)
            if match:
                _finish(self.folder, int(match.group(1)))
        return max(seqs) + 1


def _finish(folder: Path, seq: int) -> None:
    """Roll ``wal-<seq>`` into a finished Parquet file, durably, then drop the WAL."""
    wal = folder / f"wal-{seq:06d}.arrows"
    if any(_FINISHED.fullmatch(p.name) for p in folder.glob(f"spans-*-{seq:06d}.parquet")):
        wal.unlink(missing_ok=True)  # rolled before a crash; the WAL outlived it
        return
    table = _read_wal(wal)
    if len(table):
        first = int(pc.min(table["start_ns"]).as_py())
        last = int(pc.max(table["end_ns"]).as_py())
        final = folder / f"spans-{first}-{last}-{seq:06d}.parquet"
        temp = folder / f".{final.name}.tmp"
        table = table.sort_by("start_ns")
        pq.write_table(table, temp, row_group_size=65_536)
        with open(temp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(temp, final)
        _fsync_folder(folder)
    wal.unlink(missing_ok=True)
    _fsync_folder(folder)


def _read_wal(path: Path) -> pa.Table:
    """The complete record batches of a write-ahead file (a cut last one is left out)."""
    batches = []
    try:
        with open(path, "rb") as handle:
            reader = ipc.open_stream(handle)
            while True:
                try:
                    batches.append(reader.read_next_batch())
                except StopIteration:
                    break
    except (pa.ArrowInvalid, OSError, EOFError):
        pass  # empty, or cut in its schema or in its last batch
    if not batches:
        return SCHEMA.empty_table()
    table = pa.Table.from_batches(batches)
    return table if table.schema.equals(SCHEMA) else SCHEMA.empty_table()


def _fsync_folder(folder: Path) -> None:
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


# --------------------------------------------------------------------------- reading


def read_spans(source: str | Path | Iterable[str | Path], start_ns: int | None = None,
               end_ns: int | None = None) -> pa.Table:
    """Stored spans that overlap ``[start_ns, end_ns]`` (all when not given), as a table.

    ``source`` is a collector folder (its finished files, chosen by their names, and
    its write-ahead files) or a list of finished files. A file that cannot be read is
    skipped with a warning naming it.
    """
    low = -1 if start_ns is None else int(start_ns)
    high = 2**63 - 1 if end_ns is None else int(end_ns)
    tables = []
    for path, bounds in _files(source):
        if bounds is not None and (bounds[0] > high or bounds[1] < low):
            continue
        windowed = start_ns is not None or end_ns is not None
        try:
            if path.suffix == ".arrows":
                table = _read_wal(path)
            else:  # sorted by start: the row groups' statistics skip what lies outside
                table = pq.read_table(path, schema=SCHEMA, filters=[
                    ("start_ns", "<=", high), ("end_ns", ">=", low)] if windowed else None)
        except (pa.ArrowException, OSError, ValueError) as exc:
            warnings.warn(f"skipped engine traces {path}: {exc}", RuntimeWarning, stacklevel=3)
            continue
        if windowed:
            keep = pc.and_(pc.less_equal(table["start_ns"], high),
                                   pc.greater_equal(table["end_ns"], low))
            table = table.filter(keep)
        tables.append(table)
    return pa.concat_tables(tables) if tables else SCHEMA.empty_table()


def _files(source: str | Path | Iterable[str | Path]) -> list[tuple[Path, tuple[int, int] | None]]:
    """The files of ``source`` with the time bounds their names give (None: unknown)."""
    if isinstance(source, (str, os.PathLike)):
        root = Path(source)
        if root.is_dir():
            folder = root / SUBDIR if (root / SUBDIR).is_dir() else root
            # Write-ahead files first: one rolled meanwhile is then listed as finished (and
            # a listed one that vanished reads as empty), never missed.
            wals = {int(m.group(1)): path for path in sorted(folder.glob("wal-*.arrows"))
                    if (m := _WAL.fullmatch(path.name))}
            finished: dict[int, tuple[Path, tuple[int, int]]] = {}
            for path in sorted(folder.glob("spans-*.parquet")):
                match = _FINISHED.fullmatch(path.name)
                if match:
                    finished[int(match.group(3))] = (
                        path, (int(match.group(1)), int(match.group(2))))
            files: list[tuple[Path, tuple[int, int] | None]] = list(finished.values())
            files += [(path, None) for seq, path in wals.items() if seq not in finished]
            return files
        if not root.exists():
            raise FileNotFoundError(f"engine traces {root}: no such file or folder")
        source = [root]
    out: list[tuple[Path, tuple[int, int] | None]] = []
    for item in source:  # type: ignore[union-attr]
        path = Path(item)
        if not path.is_file():
            raise FileNotFoundError(f"engine traces {path}: no such file")
        match = _FINISHED.fullmatch(path.name)
        out.append((path, (int(match.group(1)), int(match.group(2))) if match else None))
    return out


def window_files(source: str | Path, start_ns: int, end_ns: int) -> list[list]:
    """The finished files of a collector folder that overlap ``[start_ns, end_ns]``, as
    ``[name, size]``: what a join over that window read, to notice when it changes."""
    return sorted([path.name, path.stat().st_size] for path, bounds in _files(source)
                  if bounds is not None and bounds[0] <= end_ns and bounds[1] >= start_ns)


def load_engine_traces(source: str | Path | Iterable[str | Path], start: float | None = None,
                       end: float | None = None) -> pd.DataFrame:
    """The engines' spans of a collector folder (``slime-trace-viewer collect DIR``), or of
    its files, that overlap ``[start, end]`` (epoch seconds; all when not given).

    One row per span: ``trace_id``, ``span_id``, ``parent_id`` (hex), ``name``,
    ``start``/``end`` (epoch seconds) and ``start_ns``/``end_ns`` (exact),
    ``service``, ``status`` (OTLP status code), ``attributes`` and ``resource``
    (dicts), ``events`` (list of name, time_ns, attributes) and ``links``.
    """
    table = read_spans(source, None if start is None else int(start * 1e9),
                       None if end is None else int(end * 1e9))
    frame = table.to_pandas()
    for column in ("attributes", "resource"):
        frame[column] = [json.loads(text) for text in frame[column]]
    for column in ("events", "links"):
        frame[column] = [json.loads(text) for text in frame[column]]
    frame.insert(4, "start", frame["start_ns"].to_numpy() / 1e9)
    frame.insert(5, "end", frame["end_ns"].to_numpy() / 1e9)
    return frame
