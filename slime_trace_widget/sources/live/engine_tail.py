"""The engine span store of a collector folder read on from where the last read stopped, so
a live reader sees the engines' exports as they land at a cost that grows with them.

A write-ahead file is read through a memory map from the row the last read stopped at
(``read.wal_after``). A finished engine file is sorted by start time, so a place in its
write-ahead file does not hold in it: the spans read from a write-ahead file are
remembered by (trace id, span id) until it is rolled, and only the finished file's
other spans are new then. A finished file never seen as write-ahead is new whole.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..engine.store import LAYOUT, SUBDIR
from .read import store_files, wal_after


class EngineTail:
    """The spans stored in ``directory``'s engine span store since the last read."""

    def __init__(self, directory: str | Path) -> None:
        self.folder = Path(directory) / SUBDIR
        #: Rows read of each write-ahead file, and the (trace id, span id) of those rows.
        self._rows: dict[int, int] = {}
        self._seen: dict[int, set[str]] = {}
        #: Finished files read (or present when the tail started).
        self._finished: set[int] = set()

    def skip_present(self) -> None:
        """Take what is stored now as read: its requests are joined when samples are
        flattened, only what lands later is news."""
        self.read()

    def read(self) -> pa.Table:
        """Every span stored since the last read (the store's schema)."""
        if not self.folder.is_dir():
            return LAYOUT.empty()
        tables = []
        for store_file in store_files(self.folder, LAYOUT):
            seq = store_file.seq
            if store_file.finished:
                if seq in self._finished:
                    continue
                table = self._finished_news(store_file.path, self._seen.pop(seq, set()))
                self._rows.pop(seq, None)
                self._finished.add(seq)
            else:
                done = self._rows.get(seq, 0)
                table = wal_after(store_file.path, done, LAYOUT)
                self._rows[seq] = done + len(table)
                self._seen.setdefault(seq, set()).update(_keys(table))
            if len(table):
                tables.append(table)
        return pa.concat_tables(tables) if tables else LAYOUT.empty()

    @staticmethod
    def _finished_news(path: Path, seen: set[str]) -> pa.Table:
        """The spans of a finished file not read from its write-ahead file."""
        try:
            if seen:
                ids = pq.read_table(path, columns=["trace_id", "span_id"])
                new = np.array([key not in seen for key in _keys(ids)], dtype=bool)
                if not new.any():
                    return LAYOUT.empty()
            table = pq.read_table(path, schema=LAYOUT.schema)
        except (pa.ArrowException, OSError):
            return LAYOUT.empty()  # removed or unreadable: the join reports it when it reads
        return table.filter(pa.array(new)) if seen else table


def _keys(table: pa.Table) -> list[str]:
    return pc.binary_join_element_wise(pc.fill_null(table["trace_id"], ""),
                                       pc.fill_null(table["span_id"], ""), ":").to_pylist()
