"""The loss accounting of the live stream, per sending process: numbers never received,
drops the sender reports, repeats counted once, silence, and receiver restarts."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from slime_trace_widget.frames.live_health import (
    SILENT_SECONDS,
    HealthTracker,
    SeqRanges,
    process_name,
)
from slime_trace_widget.sources.live.store import COLUMNS, LAYOUT, marker_table
from slime_trace_widget.view.live_feed import sender_rows

SECOND = 10**9
T0 = 1_800_000_000 * SECOND


def rows(sender: str, seqs: list[int], kind: str = "span_start", received: int = T0,
         dropped: int | None = None, queued: int | None = None,
         behind: int = 0) -> pa.Table:
    """Store rows of ``sender``; ``behind``: nanoseconds its clock is behind the
    collector's (its rows' times are that much earlier than their arrival)."""
    columns: dict[str, list] = {name: [] for name in COLUMNS}
    for n, seq in enumerate(seqs):
        row = {"sender": sender, "seq": seq, "record": kind, "ts_ns": received + n - behind,
               "trace_id": "ab" * 16, "span_id": None, "sample_id": None, "group_id": None,
               "attempt": 0, "rollout_id": 0, "body": "{}",
               "dropped": dropped if n == len(seqs) - 1 else None, "queued": queued,
               "service": "rollout", "received_ns": received + n}
        for name in COLUMNS:
            columns[name].append(row[name])
    return LAYOUT.rows(columns)


def test_seq_ranges_hold_numbers_as_few_ranges() -> None:
    ranges = SeqRanges()
    ranges.add(np.array([5, 1, 2, 3, 9, 3]))
    assert ranges.lo.tolist() == [1, 5, 9] and ranges.hi.tolist() == [3, 5, 9]
    ranges.add(np.array([4, 6, 7, 8]))
    assert ranges.lo.tolist() == [1] and ranges.hi.tolist() == [9] and ranges.count == 9
    assert ranges.contains(np.array([0, 1, 9, 10])).tolist() == [False, True, True, False]


def test_gaps_drops_and_repeats_per_sender() -> None:
    tracker = HealthTracker()
    fresh = tracker.observe(rows("a:1:5", [1, 2, 3, 6, 7], dropped=1))
    assert fresh.tolist() == [True] * 5
    again = tracker.observe(rows("a:1:5", [6, 7, 8, 8]))  # a batch sent twice, and one more
    assert again.tolist() == [False, False, True, False]
    tracker.observe(rows("b:2:5", [1, 2]))
    tracker.observe(rows("a:1:5", [10], kind="heartbeat", dropped=2))
    health = tracker.health(now=T0 / SECOND + 1)
    a, b = health.senders
    assert (a.process, a.records, a.missing, a.dropped, a.highest_seq) == ("a:1", 6, 4, 2, 10)
    assert (b.records, b.missing, b.dropped) == (2, 0, 0)
    assert health.missing == 4 and health.dropped == 2
    assert "a:1: 4 record(s) missing (2 dropped at the sender)" in health.summary()
    assert list(health.frame()["process"]) == ["a:1", "b:2"]


def test_numbers_still_queued_at_a_heartbeat_are_not_missing() -> None:
    """A heartbeat says the last number given out; the ones still queued behind it are
    not lost until a later heartbeat or record says they are due."""
    tracker = HealthTracker()
    tracker.observe(rows("a:1:5", [1, 2, 3]))
    tracker.observe(rows("a:1:5", [8], kind="heartbeat", dropped=0, queued=5))
    assert tracker.health(now=T0 / SECOND + 1).missing == 0
    tracker.observe(rows("a:1:5", [9], kind="heartbeat", dropped=0, queued=0))
    assert tracker.health(now=T0 / SECOND + 1).missing == 6


def test_a_sender_heard_only_through_heartbeats_misses_nothing() -> None:
    """Numbers are counted from the first record read: with none read (an idle process,
    its records in files not read), nothing is missing, whatever its heartbeat says."""
    tracker = HealthTracker()
    tracker.observe(rows("b:2:5", [100], kind="heartbeat", dropped=0, queued=0))
    (idle,) = tracker.health(now=T0 / SECOND + 1).senders
    assert (idle.records, idle.missing, idle.highest_seq) == (0, 0, 100)
    tracker.observe(rows("b:2:5", [101, 103]))
    tracker.observe(rows("b:2:5", [104], kind="heartbeat", dropped=0, queued=0))
    (idle,) = tracker.health(now=T0 / SECOND + 1).senders
    assert (idle.records, idle.missing) == (2, 2)  # 102 and 104, from 101 on


def test_a_sender_goes_silent_unless_it_closed() -> None:
    tracker = HealthTracker()
    tracker.observe(rows("a:1:5", [1, 2]))
    tracker.observe(rows("b:2:5", [1]))
    tracker.observe(rows("b:2:5", [1], kind="close"))
    later = T0 / SECOND + SILENT_SECONDS + 1
    health = tracker.health(now=later)
    assert health.silent == ["a:1"] and health.senders[1].closed
    assert not tracker.health(now=T0 / SECOND + 1).silent


def test_receiver_restarts_are_gaps_from_the_last_row_heard() -> None:
    tracker = HealthTracker()
    tracker.observe(marker_table("receiver_start", "receiver:h:1:0", T0 - SECOND))
    tracker.observe(rows("a:1:5", [1, 2], received=T0))
    killed_at = T0 + 1  # the last row's time: the collector was killed after it
    tracker.observe(pa.concat_tables([
        marker_table("receiver_start", "receiver:h:2:0", T0 + 30 * SECOND),
        rows("a:1:5", [9], received=T0 + 31 * SECOND),
        marker_table("receiver_stop", "receiver:h:2:0", T0 + 40 * SECOND),
        marker_table("receiver_start", "receiver:h:3:0", T0 + 50 * SECOND)]))
    killed, stopped = tracker.health(now=T0 / SECOND).restarts
    assert (killed.down_after, killed.up_at, killed.clean) == (killed_at / SECOND,
                                                               T0 / SECOND + 30, False)
    assert (stopped.down_after, stopped.up_at, stopped.clean) == (T0 / SECOND + 40,
                                                                  T0 / SECOND + 50, True)


def test_process_names() -> None:
    assert process_name("node-3:4242:1767225600000000000") == "node-3:4242"
    assert process_name("odd") == "odd"


def test_a_sender_whose_clock_is_off_the_collectors_is_named_with_it() -> None:
    """The live view judges running times and stalls by the collector's clock: a sender
    120 s behind had its samples flagged stalled at once, one 90 s ahead hid a hang, and
    nothing said why. The least delay from a row's time to its arrival tells it."""
    tracker = HealthTracker()
    tracker.observe(rows("late:1:5", [1, 2], behind=120 * SECOND))
    tracker.observe(rows("late:1:5", [3], received=T0 + 5 * SECOND, behind=125 * SECOND))
    tracker.observe(rows("early:2:5", [1, 2], behind=-90 * SECOND))
    tracker.observe(rows("fine:3:5", [1, 2], behind=SECOND // 2))
    health = tracker.health(now=T0 / SECOND + 6)
    early, fine, late = health.senders
    assert late.clock_behind == 120.0 and late.clock_off
    assert early.clock_behind == -90.0 and early.clock_off
    assert fine.clock_behind == 0.5 and not fine.clock_off
    summary = health.summary()
    assert "late:1: clock up to 2.0 min behind the collector's" in summary
    assert "early:2: clock 90.0 s ahead of the collector's" in summary
    assert "fine:3: clock" not in summary
    shown = {row["sender"]: row.get("clock") for row in sender_rows(health)}
    assert shown == {"late:1": "up to 2.0 min behind", "early:2": "90.0 s ahead of",
                     "fine:3": None}
