"""The senders a live view shows are the rollout's: over a real live store read by the
collector's reader, a process that died during an earlier rollout (silent, never
closed) is not among the senders of a later one, so it cannot turn that view's border
red; it is named apart in ``live.absent``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow as pa

from slime_trace_widget.schema import w3c_trace_id
from slime_trace_widget.sources.live.store import COLUMNS, LAYOUT, LiveStore
from slime_trace_widget.view.live import LiveSession
from slime_trace_widget.view.live_feed import ReaderFeed

SECOND = 10**9


def rows(sender: str, rollout: int, trace: str, received_ns: int) -> pa.Table:
    """A span start and its end, as the collector stores them."""
    columns: dict[str, list] = {name: [] for name in COLUMNS}
    ts = received_ns / SECOND
    for seq, kind in ((1, "span_start"), (2, "span_end")):
        record = {"type": kind, "name": "generate", "ts": ts + seq, "trace_id": trace,
                  "span_id": "s", "sample_id": 0, "group_id": 0}
        row = {"sender": sender, "seq": seq, "record": kind, "ts_ns": received_ns + seq,
               "trace_id": w3c_trace_id(trace), "span_id": None, "sample_id": "0",
               "group_id": "0", "attempt": 0, "rollout_id": rollout,
               "body": json.dumps(record), "dropped": None, "queued": None,
               "service": "rollout", "received_ns": received_ns}
        for name in COLUMNS:
            columns[name].append(row[name])
    return LAYOUT.rows(columns)


def test_a_sender_dead_in_an_earlier_rollout_is_not_this_ones(tmp_path: Path) -> None:
    now_ns = time.time_ns()
    store = LiveStore(tmp_path, roll_rows=10**9, roll_seconds=10**9)
    # died in rollout 5 half an hour ago, without a close; the worker runs rollout 7 now
    store.append(rows("gpu-2:77:1", 5, "dead", now_ns - 1800 * SECOND))
    store.append(rows("gpu-1:411:1", 7, "now", now_ns))
    session = LiveSession(ReaderFeed(tmp_path))
    assert session.poll() == [0]
    live = session.live_meta()
    assert [s["sender"] for s in live["senders"]] == ["gpu-1:411"]
    assert not any(s["silent"] for s in live["senders"])
    assert [(s["sender"], s["last_rollout"]) for s in live["absent"]] == [("gpu-2:77", 5)]
    assert live["absent"][0]["quiet_s"] > 1700
    store.close()
