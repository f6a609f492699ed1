"""One writer thread in front of a durable store: many submitters, one fsync per group.

Submitters (request handlers, scrapers) hand over tables from any thread; the writer
appends whatever has gathered as one durable write and then releases them all, so a
submitter returns only once its rows are on disk. A quiet writer still rolls its
write-ahead file after the store's ``roll_seconds``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import pyarrow as pa

from .durable import DurableStore


class Busy(RuntimeError):
    """The writer has no room now (or is stopping, or the disk failed): retry later."""


@dataclass
class _Item:
    table: pa.Table
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


class GroupWriter:
    """Accepts tables from any thread, one durable write at a time (see the module)."""

    def __init__(self, store: DurableStore, max_pending_rows: int, name: str) -> None:
        self.store = store
        self.max_pending_rows = max_pending_rows
        self.accepted_rows = 0
        self.refused = 0
        self.roll_errors = 0
        self.last_roll_error = ""
        self._items: list[_Item] = []
        self._pending = 0
        self._closed = False
        self._condition = threading.Condition()
        self._thread = threading.Thread(target=self._write_loop, name=name, daemon=True)
        self._thread.start()

    @property
    def pending_rows(self) -> int:
        """Rows handed over and not yet on disk."""
        with self._condition:
            return self._pending

    def submit_table(self, table: pa.Table) -> None:
        """Keep ``table`` durably; returns once it is on disk. :class:`Busy` when full,
        stopping, or when the write failed (then nothing of it is kept)."""
        if not len(table):
            return
        item = _Item(table)
        with self._condition:
            if self._closed:
                raise Busy("the collector is stopping")
            if self._pending and self._pending + len(table) > self.max_pending_rows:
                self.refused += 1
                raise Busy("too many rows are waiting to be written")
            self._pending += len(table)
            self._items.append(item)
            self._condition.notify()
        while not item.done.wait(timeout=1.0):
            if not self._thread.is_alive():
                raise Busy("the writer has stopped")
        if item.error is not None:
            raise Busy(f"the rows could not be written ({item.error})")

    def close(self) -> None:
        """Write what is waiting, finish the files, stop the writer."""
        with self._condition:
            self._closed = True
            self._condition.notify()
        self._thread.join()
        self.store.close()

    def _write_loop(self) -> None:
        while True:
            with self._condition:
                while not self._items and not self._closed:
                    if not self._condition.wait(timeout=self.store.roll_seconds):
                        self._roll_quietly()
                items, self._items = self._items, []
                if not items and self._closed:
                    return
            try:
                self.store.append(pa.concat_tables([item.table for item in items]))
            except Exception as exc:  # a full disk: the submitters retry, nothing half-kept
                for item in items:
                    item.error = exc
            else:
                self.accepted_rows += sum(len(item.table) for item in items)
            with self._condition:
                self._pending -= sum(len(item.table) for item in items)
            for item in items:
                item.done.set()

    def _roll_quietly(self) -> None:
        """A quiet collector still finishes its write-ahead file after a while; a roll that
        fails is tried again at the next quiet spell, or on close (its WAL stays)."""
        try:
            self.store.roll()
        except Exception as exc:  # the writer thread must outlive it, or submitters hang
            self.roll_errors += 1
            self.last_roll_error = f"{type(exc).__name__}: {exc}"[:300]
