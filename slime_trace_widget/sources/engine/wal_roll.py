"""A write-ahead file rolled into a finished Parquet file in bounded memory.

The write-ahead file (an Arrow IPC stream) is mapped, not read: its record batches are
views of the file. Only the sort column, the time bounds and each row's size are
gathered from them; the rows are then written in sort order (stably) in pieces of at
most :data:`PIECE_BYTES` and :data:`ROW_GROUP_ROWS` rows, one row group each, every
piece taken from the batches that hold its rows, and the mapped pages are let go after
each piece. So a roll holds a piece and its Parquet encoding at a time, plus a few
bytes a row, whatever the file's size: recovering a large write-ahead file at start-up
needs no more memory than rolling a small one. (A companion derived from the whole
file, where the store keeps one, reads it whole from the mapping.)
"""

from __future__ import annotations

import contextlib
import mmap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

#: Rows per row group of a finished file: a read keeps only the groups whose statistics
#: overlap what it asks for.
ROW_GROUP_ROWS = 65_536
#: Largest piece of rows a roll takes from the write-ahead file and encodes at a time (a
#: single row larger than this is a piece of its own).
PIECE_BYTES = 64 << 20


@dataclass
class WalRows:
    """The complete record batches of a write-ahead file, as views of its mapping."""

    batches: list[pa.RecordBatch]
    schema: pa.Schema
    _mapping: mmap.mmap | None = None

    @property
    def rows(self) -> int:
        return sum(batch.num_rows for batch in self.batches)

    def table(self) -> pa.Table:
        """All the rows as one table (views of the mapping, nothing copied)."""
        return pa.Table.from_batches(self.batches, self.schema)

    def let_pages_go(self) -> None:
        """Drop the mapped pages read so far from this process (the file's data stays in
        the page cache, read again from there when a view is next touched)."""
        if self._mapping is not None and hasattr(mmap, "MADV_DONTNEED"):
            with contextlib.suppress(OSError):
                self._mapping.madvise(mmap.MADV_DONTNEED)


@contextlib.contextmanager
def mapped_wal(path: Path, schema: pa.Schema) -> Iterator[WalRows]:
    """The complete batches of the write-ahead file at ``path``: none when it is empty,
    cut in its schema, or of another ``schema``; a last batch cut short is left out.
    The mapping is closed when the block ends (the views must not outlive it)."""
    mapping = _mapped(path)
    if mapping is None:
        yield WalRows([], schema)
        return
    rows = WalRows(complete_batches(pa.py_buffer(mapping), schema), schema, mapping)
    try:
        yield rows
    finally:
        rows.batches.clear()
        rows._mapping = None
        with contextlib.suppress(BufferError):  # a view still held elsewhere: the GC closes it
            mapping.close()


def _mapped(path: Path) -> mmap.mmap | None:
    """The file at ``path`` mapped for reading; None when it is missing or empty."""
    try:
        with open(path, "rb") as handle:
            return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # ValueError: an empty file cannot be mapped
        return None


def complete_batches(source: Any, schema: pa.Schema) -> list[pa.RecordBatch]:
    """The complete record batches of a write-ahead stream (a buffer or an open file):
    none when it is another store's (another schema); a cut last batch is left out."""
    batches: list[pa.RecordBatch] = []
    try:
        reader = ipc.open_stream(source)
        if not reader.schema.equals(schema):
            return []  # another store's file
        while True:
            try:
                batches.append(reader.read_next_batch())
            except StopIteration:
                break
    except (pa.ArrowInvalid, OSError, EOFError):
        pass  # empty, or cut in its schema or in its last batch
    return batches


def time_bounds(rows: WalRows, start: str, end: str) -> tuple[int, int]:
    """The least value of the ``start`` column and the greatest of the ``end`` column."""
    firsts = [pc.min(batch.column(start)).as_py() for batch in rows.batches]
    lasts = [pc.max(batch.column(end)).as_py() for batch in rows.batches]
    return (int(min(value for value in firsts if value is not None)),
            int(max(value for value in lasts if value is not None)))


def write_sorted(rows: WalRows, target: Path, sort_by: str, compression: str,
                 piece_bytes: int | None = None) -> None:
    """``rows`` as a Parquet file at ``target``, sorted stably by ``sort_by`` ("" keeps
    their order), written a piece at a time (see the module)."""
    order = _order(rows, sort_by)
    sizes = np.concatenate([_row_sizes(batch) for batch in rows.batches])[order]
    offsets = np.cumsum([0] + [batch.num_rows for batch in rows.batches])
    limit = PIECE_BYTES if piece_bytes is None else piece_bytes
    with pq.ParquetWriter(target, rows.schema, compression=compression) as writer:
        for low, high in _pieces(sizes, limit):
            piece = _take(rows, offsets, order[low:high])
            writer.write_table(piece, row_group_size=ROW_GROUP_ROWS)
            del piece
            rows.let_pages_go()


def _order(rows: WalRows, sort_by: str) -> np.ndarray:
    """Row numbers across the batches in the order they are written."""
    if not sort_by:
        return np.arange(rows.rows, dtype=np.int64)
    keys = pa.chunked_array([batch.column(sort_by) for batch in rows.batches],
                            type=rows.schema.field(sort_by).type)
    return pc.sort_indices(keys).to_numpy().astype(np.int64, copy=False)


def _row_sizes(batch: pa.RecordBatch) -> np.ndarray:
    """About how many bytes each row of ``batch`` holds (text and binary exactly)."""
    sizes = np.zeros(batch.num_rows, dtype=np.int64)
    for column in batch.columns:
        kind = column.type
        if (pa.types.is_string(kind) or pa.types.is_binary(kind)
                or pa.types.is_large_string(kind) or pa.types.is_large_binary(kind)):
            sizes += pc.fill_null(pc.binary_length(column), 0).to_numpy()
        else:
            try:
                sizes += max(kind.bit_width // 8, 1)
            except ValueError:  # not of fixed width: its share of the column
                sizes += column.nbytes // max(len(column), 1)
    return sizes


def _pieces(sizes: np.ndarray, limit: int) -> Iterator[tuple[int, int]]:
    """Consecutive ranges of rows, each of at most ``limit`` bytes by ``sizes`` (or one
    row) and at most :data:`ROW_GROUP_ROWS` rows."""
    ends = np.cumsum(sizes)
    low = 0
    while low < len(sizes):
        before = int(ends[low - 1]) if low else 0
        high = int(np.searchsorted(ends, before + limit, side="right"))
        high = min(max(high, low + 1), low + ROW_GROUP_ROWS)
        yield low, high
        low = high


def _take(rows: WalRows, offsets: np.ndarray, numbers: np.ndarray) -> pa.Table:
    """The rows ``numbers`` (across the batches; ``offsets`` are where each batch begins)
    in that order: each batch's share taken (or sliced, when it is a run) on its own, so
    nothing is gathered from the batches it does not touch."""
    batch_of = np.searchsorted(offsets, numbers, side="right") - 1
    grouped = np.argsort(batch_of, kind="stable")
    local = (numbers - offsets[batch_of])[grouped]
    batches = batch_of[grouped]
    cuts = np.flatnonzero(np.diff(batches)) + 1
    parts = []
    for low, high in zip(np.r_[0, cuts].tolist(), np.r_[cuts, len(batches)].tolist(),
                         strict=True):
        source, wanted = rows.batches[int(batches[low])], local[low:high]
        if (np.diff(wanted) == 1).all():  # a run of rows: a view, nothing copied
            parts.append(source.slice(int(wanted[0]), high - low))
        else:
            parts.append(source.take(pa.array(wanted)))
    table = pa.Table.from_batches(parts, rows.schema)
    if (np.diff(batch_of) >= 0).all():
        return table  # already in the order asked for
    return table.combine_chunks().take(pa.array(np.argsort(grouped)))
