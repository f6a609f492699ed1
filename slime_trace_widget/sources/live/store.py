"""The live-record store: one row per record a rollout streamed, kept in arrival order.

Files under ``DIR/live/``, written, rolled and recovered as the engine span store's
(:mod:`..engine.durable`): ``wal-<seq>.arrows`` being appended (one record batch per
group commit, fsynced before the senders are answered) and
``records-<first ts ns>-<last ts ns>-<seq>.parquet`` finished files. Rows are never
sorted: a finished file holds its write-ahead file's rows in the same order, so a
reader's place in a file (its row count) stays valid when the file is rolled. Senders
batch at least every 0.5 s, so arrival order is nearly time order and each row group's
statistics of ``ts_ns`` and ``rollout_id`` still narrow a read to a few groups.

Besides the senders' records, the collector writes a ``receiver_start`` row when it
starts and a ``receiver_stop`` row when it stops cleanly (sender
``receiver:<host>:<pid>:<start ns>``): a reader tells from them that the receiver was
down, and for how long at most.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ...schema import (
    LIVE_CLOSE,
    LIVE_HEARTBEAT,
    LIVE_RECEIVER_START,
    LIVE_RECEIVER_STOP,
    RECEIVER_PREFIX,
)
from ...tables.core_tables import UNKNOWN_ROLLOUT as UNKNOWN_ROLLOUT  # -1: no rollout id
from ..engine import durable

SUBDIR = "live"
ROLL_ROWS = 500_000
ROLL_SECONDS = 60.0
#: A sender's own records (its counts, no trace record); all its other rows are trace
#: records (``span_start``, ``span_end``, ``event``, or a type a damaged record holds).
STATUS_RECORDS = (LIVE_HEARTBEAT, LIVE_CLOSE)
#: Rows that are not trace records.
NOT_TRACE_RECORDS = (*STATUS_RECORDS, LIVE_RECEIVER_START, LIVE_RECEIVER_STOP)

SCHEMA = pa.schema([
    ("sender", pa.string()),        # "<host>:<pid>:<start epoch ns>", one per process
    ("seq", pa.int64()),            # the sender's record number (heartbeat: the last one)
    ("record", pa.string()),        # span_start, span_end, event, heartbeat, close, receiver_*
    ("ts_ns", pa.int64()),          # the record's time
    ("trace_id", pa.string()),      # hex, 32 digits ("" for heartbeats and markers)
    ("span_id", pa.string()),       # hex, 16 digits, or null
    ("sample_id", pa.string()),     # as text, or null
    ("group_id", pa.string()),
    ("attempt", pa.int32()),
    ("rollout_id", pa.int64()),     # -1: not known when sent
    ("body", pa.string()),          # the record as compact JSON, as its carrier holds it
    ("dropped", pa.int64()),        # records the sender dropped so far (where it says)
    ("queued", pa.int64()),         # records waiting in the sender (heartbeats)
    ("service", pa.string()),
    ("received_ns", pa.int64()),    # the collector's clock when the request was parsed
])
COLUMNS = tuple(SCHEMA.names)
LAYOUT = durable.Layout(subdir=SUBDIR, prefix="records", schema=SCHEMA, start="ts_ns",
                        end="ts_ns", sort_by="", what="live records", compression="zstd")


def trace_records(table: pa.Table) -> Any:
    """A boolean column: which rows of ``table`` are trace records."""
    return pc.invert(pc.is_in(table["record"], pa.array(NOT_TRACE_RECORDS)))


def marker_table(record: str, identity: str, at_ns: int) -> pa.Table:
    """One collector row (``receiver_start`` or ``receiver_stop``) at ``at_ns``."""
    body = json.dumps({"host": socket.gethostname(), "pid": os.getpid()})
    row = {name: [None] for name in COLUMNS}
    row.update(sender=[identity], seq=[0], record=[record], ts_ns=[at_ns], trace_id=[""],
               attempt=[0], rollout_id=[UNKNOWN_ROLLOUT], body=[body], service=[""],
               received_ns=[at_ns])
    return LAYOUT.rows(row)


def receiver_identity(started_ns: int) -> str:
    return f"{RECEIVER_PREFIX}{socket.gethostname()}:{os.getpid()}:{started_ns}"


class LiveStore(durable.DurableStore):
    """The writing side: one per collector folder, used from one thread."""

    def __init__(self, directory: str | Path, roll_rows: int = ROLL_ROWS,
                 roll_seconds: float = ROLL_SECONDS) -> None:
        super().__init__(directory, LAYOUT, roll_rows, roll_seconds)
