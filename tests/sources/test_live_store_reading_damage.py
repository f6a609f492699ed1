"""A damaged file in the live store (a finished file cut in half: a full disk, a copy
that stopped) against a real collector: a read skips it and names it, in
``frames.warnings``, ``frames.live`` and the live banner's line; ``load_live`` raises
one line naming it only when it found no record of the rollout at all, and a
``LiveReader`` never raises for it (``docs/live-store.md``, "Damaged files")."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from slime_trace_widget.sources.live import LiveReader, load_live
from slime_trace_widget.sources.live.load import UNREADABLE_FILE
from slime_trace_widget.sources.live.read import UnreadableStore
from slime_trace_widget.view.live_feed import ReaderFeed
from tests.sources.test_live_store_reading_walk import T0, collector_runs, post, record
from tests.support.live_wire import Sender
from tests.support.receiver import Receiver

__all__ = ["collector_runs"]  # the fixture, shared with the walk's tests


def cut_in_half(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def finished_files(folder: Path) -> list[Path]:
    return sorted((folder / "live").glob("records-*.parquet"), key=lambda p: p.name[-14:])


def test_a_store_of_one_damaged_file_is_named_not_read(
        collector_runs: Callable[[], Receiver], tmp_path: Path) -> None:
    run = collector_runs()
    post(run, Sender().request([record("a" * 32, "span_start", "s1", T0)], rollout_id=1))
    run.stop()
    folder = tmp_path / "collector"
    [damaged] = finished_files(folder)
    cut_in_half(damaged)
    with pytest.raises(UnreadableStore) as raised:
        load_live(folder, engine_traces=False)
    message = str(raised.value)
    assert str(damaged) in message and "\n" not in message
    health = LiveReader(folder, engine_traces=False).poll().health  # a reader goes on
    assert [line.split(": ")[0] for line in health.unreadable] == [str(damaged)]
    banner = ReaderFeed(folder).poll().receiver_gap
    assert damaged.name in banner and "could not be read" in banner


def test_a_damaged_file_is_skipped_and_the_rest_read(
        collector_runs: Callable[[], Receiver], tmp_path: Path) -> None:
    sender = Sender()
    first = collector_runs()
    post(first, sender.request([record("a" * 32, "span_start", "s1", T0)], rollout_id=1))
    first.stop()
    second = collector_runs()
    post(second, sender.request([record("b" * 32, "span_start", "s2", T0 + 1, sample=1)],
                                rollout_id=1))
    second.stop()
    folder = tmp_path / "collector"
    damaged = finished_files(folder)[0]
    cut_in_half(damaged)
    frames = load_live(folder, engine_traces=False)
    assert list(frames.samples["trace_id"]) == ["b" * 32]
    assert frames.warnings[UNREADABLE_FILE] == 1
    assert [line.split(": ")[0] for line in frames.live.unreadable] == [str(damaged)]
    assert damaged.name in frames.live.summary()
    reader = LiveReader(folder, engine_traces=False)
    delta = reader.poll()
    assert delta.records == 1 and str(damaged) in delta.health.unreadable[0]
    assert reader.frames().warnings[UNREADABLE_FILE] == 1
    third = collector_runs()  # the reader follows on; the damaged file stays named once
    post(third, sender.request([record("b" * 32, "span_end", "s2", T0 + 2, sample=1)],
                               rollout_id=1))
    later = reader.poll()
    assert later.records == 1 and len(later.health.unreadable) == 1
