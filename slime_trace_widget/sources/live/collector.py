"""The writer side of the live store: decoded records from any handler thread, kept with
one durable write per group (:mod:`..engine.group_commit`), and the collector's own
start and stop rows."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ...schema import LIVE_RECEIVER_START, LIVE_RECEIVER_STOP
from ..engine.group_commit import GroupWriter
from .otlp_logs import LiveRows
from .store import (
    LAYOUT,
    LiveStore,
    marker_table,
    receiver_identity,
)

#: Records waiting for the writer beyond which new requests are asked to come back later.
MAX_PENDING_RECORDS = 1_000_000


class LiveCollector(GroupWriter):
    """Accepts live records from any thread; an answer waits until they are on disk."""

    def __init__(self, directory: str | Path,
                 max_pending_records: int = MAX_PENDING_RECORDS) -> None:
        super().__init__(LiveStore(directory), max_pending_records, "live-record-writer")
        self.started_ns = time.time_ns()
        self.identity = receiver_identity(self.started_ns)
        self._foreign = 0
        self._foreign_lock = threading.Lock()
        self._markers = 0
        self._mark(LIVE_RECEIVER_START, self.started_ns)

    @property
    def accepted_records(self) -> int:
        """Sender records kept (the collector's own start row left out)."""
        return self.accepted_rows - self._markers

    @property
    def foreign_records(self) -> int:
        """Log records taken and not kept: not slime's (no ``slime.record``)."""
        return self._foreign

    def submit(self, rows: LiveRows) -> None:
        """Keep ``rows`` durably; returns once they are on disk. ``Busy`` when full."""
        if rows.foreign:
            with self._foreign_lock:
                self._foreign += rows.foreign
        if len(rows):
            self.submit_table(LAYOUT.rows(rows.columns))

    def close(self) -> None:
        """Write the stop row and what is waiting, finish the files, stop the writer."""
        try:
            self._mark(LIVE_RECEIVER_STOP, time.time_ns())
        finally:
            super().close()

    def _mark(self, record: str, at_ns: int) -> None:
        self.submit_table(marker_table(record, self.identity, at_ns))
        self._markers += 1
