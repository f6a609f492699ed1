"""The live view's per-sample blocks: built from records as they arrive, equal to the dump's."""

from __future__ import annotations

import numpy as np
import pytest

from slime_trace_widget.demo import make_demo_samples
from slime_trace_widget.frames.flatten import build_frames
from slime_trace_widget.view.live_blocks import (
    ITEM_COLUMNS,
    LiveBlocks,
    code_tables,
    split_blocks,
)
from slime_trace_widget.view.payload import encode
from tests.support.live_deltas import absolute_items
from tests.support.live_feeds import RecordTraces, sample_key


class Stream:
    """Records arriving in batches: each batch's samples flattened and put in place."""

    def __init__(self) -> None:
        self.traces = RecordTraces()
        self.blocks = LiveBlocks()

    def add(self, records: list[dict], now: float | None = None) -> list[int]:
        keys = self.traces.add(records)
        return self.blocks.replace(keys, self.traces.frames(keys, now))

#: Sample columns the records decide (status, reward, source and fate come with the dump).
RECORD_SAMPLE_COLUMNS = ("smp_start", "smp_end", "smp_attempts", "smp_lanes", "smp_open")


@pytest.fixture(scope="module")
def demo() -> list[dict]:
    return make_demo_samples(24, seed=3)


def _arrival_order(samples: list[dict]) -> list[dict]:
    """Records interleaved across samples as a live stream sees them (by time, each
    sample's own records kept in recording order)."""
    tagged = [(r["ts"], n, i, r) for n, s in enumerate(samples)
              for i, r in enumerate(s["trace"]["events"])]
    # A sample's records stay in recording order even where a child's ts precedes
    # its parent's (PD children are written after their parent, dated before it).
    by_sample: dict[int, list] = {}
    for ts, n, i, record in tagged:
        by_sample.setdefault(n, []).append((ts, i, record))
    merged = []
    for n, rows in by_sample.items():
        running = -np.inf
        for ts, i, record in rows:
            running = max(running, ts)
            merged.append((running, n, i, record))
    merged.sort(key=lambda row: (row[0], row[1], row[2]))
    return [row[3] for row in merged]


def _dump_blocks(samples: list[dict], t0: float) -> dict[str, object]:
    frames = build_frames({"samples": samples, "rollout_id": None, "path": "live"})
    payload = encode(frames, t0=t0, summaries=False).payload
    tables = code_tables()
    blocks = split_blocks(payload, tables)
    names = tables["names"].values
    return {str(b.strings["trace_id"]): (b, names) for b in blocks}


def _named(block, names: list[str]) -> dict[str, np.ndarray]:
    items = dict(block.items)
    for column in ("span_name", "seg_name", "ev_name"):
        items[column] = np.array([names[c] for c in items[column]], dtype=object)
    return items


def test_live_blocks_equal_the_dumps_blocks(demo: list[dict]) -> None:
    records = _arrival_order(demo)
    stream = Stream()
    live = stream.blocks
    for lo in range(0, len(records), 997):
        stream.add(records[lo:lo + 997])
    assert live.n_samples == len(demo)
    dump = _dump_blocks(demo, live.t0)
    live_names = live._tables["names"].values
    for position in range(live.n_samples):
        block = live._blocks[position]
        dump_block, dump_names = dump[str(block.strings["trace_id"])]
        live_items, dump_items = _named(block, live_names), _named(dump_block, dump_names)
        for name in (n for names in ITEM_COLUMNS.values() for n in names):
            if name in ("span_sample", "ev_sample"):
                continue  # positions: arrival order live, dump order in the dump
            np.testing.assert_array_equal(live_items[name], dump_items[name], err_msg=name)
        for name in RECORD_SAMPLE_COLUMNS:
            assert block.sample[name] == pytest.approx(dump_block.sample[name], nan_ok=True), name


def test_an_open_span_closes_in_a_later_delta() -> None:
    start = {"type": "span_start", "name": "generate", "ts": 100.0, "trace_id": "t1",
             "sample_id": 0, "group_id": 0, "attempt": 0, "span_id": "s1"}
    stream = Stream()
    live = stream.blocks
    stream.add([start], now=102.0)
    first = live.delta_since(0, now=103.0)
    flags = np.frombuffer(first.buffers["span_flags"], dtype="<u1")
    assert flags[0] & 1, "open"
    assert first.meta["now"] == pytest.approx(3.0)
    seq = first.meta["seq"]
    stream.add([{**start, "type": "span_end", "ts": 104.5}], now=105.0)
    second = live.delta_since(seq, now=105.0)
    assert second.meta["positions"] == [0] and second.meta["since"] == seq
    assert not np.frombuffer(second.buffers["span_flags"], dtype="<u1")[0] & 1
    assert np.frombuffer(second.buffers["span_end"], dtype="<f4")[0] == pytest.approx(4.5)


def test_a_delta_holds_only_the_samples_that_moved(demo: list[dict]) -> None:
    stream = Stream()
    live = stream.blocks
    stream.add([r for s in demo[:5] for r in s["trace"]["events"]])
    seq = live.seq
    stream.add(demo[2]["trace"]["events"][:1] + demo[7]["trace"]["events"])
    delta = live.delta_since(seq, now=0.0)
    assert delta.meta["positions"] == [2, 5]
    assert delta.meta["n_samples"] == 6
    spans = delta.meta["counts"]["span"]
    assert len(np.frombuffer(delta.buffers["span_start"], dtype="<f4")) == sum(spans)
    assert live.delta_since(live.seq, now=0.0).meta["positions"] == []


def test_pointers_travel_block_relative_and_read_back_absolute(demo: list[dict]) -> None:
    stream = Stream()
    live = stream.blocks
    stream.add([r for s in demo[:4] for r in s["trace"]["events"]])
    full = live.delta_since(0, now=0.0)
    columns = absolute_items(full)
    parents = columns["span_parent"]
    samples = columns["span_sample"]
    has_parent = parents >= 0
    assert has_parent.any()
    # a parent is a span of the same sample, before or after it in the block
    assert (samples[parents[has_parent]] == samples[has_parent]).all()
    owners = columns["seg_span"]
    assert (owners >= 0).all() and (owners < len(samples)).all()


def test_records_without_a_trace_id_group_by_sample_and_group() -> None:
    assert sample_key({"sample_id": 3, "group_id": 1}) == "sample 3 group 1"
    assert sample_key({"trace_id": "abc"}) == "abc"


def test_items_name_their_samples_position_when_one_sample_moves_alone(demo: list[dict]) -> None:
    stream = Stream()
    live = stream.blocks
    stream.add([r for s in demo[:3] for r in s["trace"]["events"]])
    seq = live.seq
    stream.add(demo[1]["trace"]["events"][-1:])
    delta = live.delta_since(seq, now=0.0)
    assert delta.meta["positions"] == [1]
    assert set(np.frombuffer(delta.buffers["span_sample"], dtype="<u4")) == {1}
    assert set(np.frombuffer(delta.buffers["ev_sample"], dtype="<u4")) <= {1}


def test_statuses_past_the_code_cap_share_the_overflow_entry(demo: list[dict]) -> None:
    """Across batches the live tables only grow: values past what a column's type
    codes share one overflow entry rather than wrapping round to another value."""
    tables = code_tables()
    statuses = tables["statuses"]
    codes = [statuses.code(f"status {n}") for n in range(300)]
    assert codes[:255] == list(range(255)) and set(codes[255:]) == {255}
    assert statuses.values[255] == "<more statuses>" and len(statuses.values) == 256
    assert statuses.code("status 7") == 7 and statuses.code("<more statuses>") == 255
    assert max(tables["names"].code(f"name {n}") for n in range(70_000)) == 65_535
