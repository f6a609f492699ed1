"""The loss accounting of a live read (``frames.live``, the live banner's rows) against a
real collector: the row groups a read skips between two it takes (another rollout's,
in a finished file) are received records, not missing ones; and ``dropped`` covers the
numbers read, so records lost in transit in this rollout are not hidden by what the
sender dropped in an earlier one (``docs/live-store.md``, "What was lost")."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq

from slime_trace_widget.sources.live import load_live
from slime_trace_widget.view.live_feed import sender_rows
from tests.sources.test_live_store_reading_walk import T0, collector_runs, post, record
from tests.support.live_wire import Poster, Sender
from tests.support.receiver import Receiver

__all__ = ["collector_runs"]  # the fixture, shared with the walk's tests

#: A finished file's row group (``durable``): three and more groups in one file.
GROUP_ROWS = 65_536


def events(first: int, count: int, trace_every: int = 200) -> list[dict]:
    """``count`` events, ``trace_every`` per trace, a millisecond apart."""
    return [record(f"{1 + (first + n) // trace_every:032x}", "event", None,
                   T0 + (first + n) * 1e-3) for n in range(count)]


def test_skipped_row_groups_of_another_rollout_are_not_missing(
        collector_runs: Callable[[], Receiver], tmp_path: Path) -> None:
    sender = Sender()
    first = collector_runs()
    poster = Poster(first.http_port)
    sent = 0
    for batch in range(28):  # 140,000 records of rollout 4: groups of it alone in the middle
        skip = range(3) if batch == 15 else ()  # 3 dropped at the sender, mid-file
        status, _ = poster.post(sender.request(events(sent, 5000), rollout_id=4, skip=skip))
        assert status == 200
        sent += 5000
    assert poster.post(sender.request(events(sent, 100), rollout_id=5))[0] == 200
    poster.close()
    first.stop()
    second = collector_runs()
    post(second, sender.request([record("f" * 32, "event", None, T0 + 200)], rollout_id=5))
    folder = tmp_path / "collector"
    finished = next((folder / "live").glob("records-*.parquet"))
    assert pq.ParquetFile(finished).metadata.num_row_groups >= 3
    frames = load_live(folder, engine_traces=False)
    assert frames.rollout_ids == [5]
    [health] = frames.live.senders
    assert health.records == 140_101 - 3
    assert (health.missing, health.dropped) == (3, 3)  # the 3 dropped, nothing else
    assert sender_rows(frames.live)[0]["lost"] == 0


def test_dropped_counts_the_numbers_read_not_the_senders_lifetime(
        collector_runs: Callable[[], Receiver], tmp_path: Path) -> None:
    sender = Sender()
    first = collector_runs()
    post(first, sender.request([record("a" * 32, "event", None, T0 + n * 0.01)
                                for n in range(110)], rollout_id=3, skip=range(100)))
    first.stop()  # the steps' records in two files (a restart; a roll alike)
    second = collector_runs()
    post(second, sender.request([record("b" * 32, "event", None, T0 + 10 + n * 0.01)
                                 for n in range(10)], rollout_id=5))
    sender.seq += 5  # five records of rollout 5 lost in transit
    post(second, sender.request([record("b" * 32, "event", None, T0 + 11 + n * 0.01)
                                 for n in range(10)], rollout_id=5, skip=range(2)))
    post(second, sender.heartbeat(int((T0 + 12) * 1e9), 5))
    frames = load_live(tmp_path / "collector", engine_traces=False)
    assert frames.rollout_ids == [5]
    [health] = frames.live.senders
    assert (health.records, health.missing, health.dropped) == (18, 7, 2)
    [row] = sender_rows(frames.live)
    assert (row["received"], row["dropped"], row["lost"]) == (18, 2, 5)
    assert "7 record(s) missing (2 dropped at the sender)" in frames.live.summary()
