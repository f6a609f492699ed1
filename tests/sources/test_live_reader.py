"""The live reader and ``load_live`` on a real store (``LiveStore`` files): the latest
rollout is the greatest since the run began, a run beginning where a new process sends
a lower id, so a run resumed from a checkpoint (its rollout ids lower than the dead
run's) is followed and a slow sender's late record never pulls the view back; a record
that cannot be read is counted and the rest of its poll kept; a poll's sample counts are
of the records read."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from slime_trace_widget.schema import w3c_trace_id
from slime_trace_widget.sources.live import LiveReader, load_live
from slime_trace_widget.sources.live.carriers import UNREADABLE
from slime_trace_widget.sources.live.store import COLUMNS, LAYOUT, LiveStore

SECOND = 10**9
T0 = 1_800_000_000.0
#: A time no float holds: ``float()`` of it overflows.
HUGE_TS = "1" + "0" * 400


def live_rows(records: list[dict | str], *, sender: str, rollout: int, first_seq: int = 1,
              trace: str = "t") -> pa.Table:
    """Store rows of trace records as the collector writes them, numbered from
    ``first_seq``: a body each (a record, or text as it was received). A row's trace key
    is its record's ``trace_id`` on the wire (``trace``'s for a text body)."""
    columns: dict[str, list] = {name: [] for name in COLUMNS}
    received = int(T0 * SECOND)
    for n, record in enumerate(records):
        fields = record if isinstance(record, dict) else {"trace_id": trace}
        ts = fields.get("ts")
        row = {"sender": sender, "seq": first_seq + n, "record": fields.get("type", "event"),
               "ts_ns": int(ts * SECOND) if type(ts) is float else received,
               "trace_id": w3c_trace_id(fields["trace_id"]), "span_id": None,
               "sample_id": "0", "group_id": "0", "attempt": 0, "rollout_id": rollout,
               "body": record if isinstance(record, str) else json.dumps(record),
               "dropped": None, "queued": None, "service": "rollout",
               "received_ns": received}
        for name in COLUMNS:
            columns[name].append(row[name])
    return LAYOUT.rows(columns)


def span(trace: str, span_id: str, ts: float, end: bool = False) -> dict:
    return {"type": "span_end" if end else "span_start", "name": "generate", "ts": ts,
            "trace_id": trace, "span_id": span_id, "sample_id": 0}


def store_in(folder: Path) -> LiveStore:
    """A store that never rolls by itself (the tests roll it)."""
    return LiveStore(folder, roll_rows=10**9, roll_seconds=10**9)


def test_a_reader_follows_a_run_resumed_at_a_lower_rollout(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    # the first run crashes in rollout 120: its span never ends
    store.append(live_rows([span("old", "s1", T0)], sender="a:1:0", rollout=120))
    reader = LiveReader(tmp_path, engine_traces=False)
    assert reader.poll(now=T0 + 1).rollout == 120
    # training resumes from the checkpoint of step 100 in a new process
    store.append(live_rows([span("new", "n1", T0 + 50), span("new", "n1", T0 + 51, end=True)],
                           sender="b:2:0", rollout=101))
    moved = reader.poll(now=T0 + 60)
    assert moved.rollout_changed and moved.rollout == 101 and moved.records == 2
    assert moved.open_spans.empty  # the dead run's span is not shown as running
    assert list(reader.frames(now=T0 + 60).samples["trace_id"]) == ["new"]
    fresh = load_live(tmp_path, now=T0 + 60, engine_traces=False)
    assert fresh.rollout_ids == [101] and list(fresh.samples["trace_id"]) == ["new"]
    store.close()


def test_a_late_record_of_the_rollout_before_does_not_pull_the_reader_back(
        tmp_path: Path) -> None:
    store = store_in(tmp_path)
    store.append(live_rows([span("r7", "s1", T0)], sender="a:1:0", rollout=7))
    store.append(live_rows([span("r7b", "s2", T0)], sender="b:2:0", rollout=7))
    reader = LiveReader(tmp_path, engine_traces=False)
    assert reader.poll(now=T0 + 1).rollout == 7
    store.append(live_rows([span("r8", "s3", T0 + 10)], sender="a:1:0", rollout=8,
                           first_seq=2))
    assert reader.poll(now=T0 + 11).rollout_changed
    # sender b, slower, still delivers the end of its rollout-7 span after rollout 8 began
    store.append(live_rows([span("r7b", "s2", T0 + 9, end=True)], sender="b:2:0",
                           rollout=7, first_seq=2))
    late = reader.poll(now=T0 + 12)
    assert not late.rollout_changed and late.rollout == 8 and late.records == 0
    assert load_live(tmp_path, now=T0 + 12, engine_traces=False).rollout_ids == [8]
    store.close()


def test_load_live_reads_the_resumed_runs_rollout_not_the_dead_runs(tmp_path: Path) -> None:
    """The dead run's rollout 101 is in an older file, and rollout 120 (a file of its own)
    lies between: the walk back stops there."""
    store = store_in(tmp_path)
    store.append(live_rows([span("run1-r101", "s", T0), span("run1-r101", "s", T0 + 1, True)],
                           sender="a:1:0", rollout=101))
    store.roll()
    store.append(live_rows([span("run1-r120", "s", T0 + 100)], sender="a:1:0", rollout=120,
                           first_seq=3))
    store.roll()
    store.append(live_rows([span("run1-r120", "t", T0 + 110)], sender="a:1:0", rollout=120,
                           first_seq=4))  # its last record, in the file the resumed run writes to
    store.append(live_rows([span("run2-r101", "s", T0 + 500)], sender="b:2:0", rollout=101))
    frames = load_live(tmp_path, now=T0 + 600, engine_traces=False)
    assert frames.rollout_ids == [101]
    assert list(frames.samples["trace_id"]) == ["run2-r101"]  # not the first run's 101
    store.close()


def test_a_new_rollout_is_followed_from_its_first_record(tmp_path: Path) -> None:
    """The reader moves to a newer rollout at its first record, read from there; the
    rollout left behind is not shown again."""
    store = store_in(tmp_path)
    store.append(live_rows([span("r5", "s", T0)], sender="a:1:0", rollout=5))
    reader = LiveReader(tmp_path, engine_traces=False)
    assert reader.poll(now=T0 + 1).rollout == 5
    store.append(pa.concat_tables([
        live_rows([span("r6", "s", T0 + 10)], sender="b:2:0", rollout=6),
        live_rows([span("r5", "s", T0 + 11, end=True)], sender="a:1:0", rollout=5,
                  first_seq=2)]))
    moved = reader.poll(now=T0 + 12)
    assert moved.rollout_changed and moved.rollout == 6 and moved.records == 1
    assert moved.closed.empty and len(moved.open_spans) == 1
    store.append(live_rows([span("r6", "s", T0 + 20, end=True)], sender="b:2:0", rollout=6,
                           first_seq=2))
    ended = reader.poll(now=T0 + 21)
    assert not ended.rollout_changed and ended.rollout == 6 and ended.records == 1
    assert list(ended.closed["start"]) == [T0 + 10] and ended.open_spans.empty
    assert list(reader.frames(now=T0 + 21).samples["trace_id"]) == ["r6"]
    store.close()


def test_records_whose_time_is_no_number_are_counted_and_the_poll_goes_on(
        tmp_path: Path) -> None:
    store = store_in(tmp_path)
    store.append(live_rows([span("a", "s1", T0)], sender="a:1:0", rollout=3))
    reader = LiveReader(tmp_path, engine_traces=False)
    assert reader.poll(now=T0 + 1).records == 1
    bad = [f'{{"type":"event","name":"x","trace_id":"a","ts":{ts}}}'
           for ts in (HUGE_TS, "NaN", "Infinity", '"soon"')]
    store.append(live_rows([*bad, span("a", "s1", T0 + 1, end=True)], sender="a:1:0",
                           rollout=3, first_seq=2, trace="a"))
    delta = reader.poll(now=T0 + 2)
    assert delta.records == 1 and list(delta.closed["span_id"]) == ["s1"]
    assert delta.open_spans.empty and delta.events.empty
    frames = reader.frames(now=T0 + 2)
    assert frames.warnings[UNREADABLE] == len(bad)
    assert list(frames.spans["state"]) == ["closed"]
    # a trace continued by a second sender is merged by time: its bad record is counted
    store.append(live_rows([bad[0]], sender="b:2:0", rollout=3, trace="a"))
    assert reader.poll(now=T0 + 3).records == 0
    again = load_live(tmp_path, now=T0 + 3, engine_traces=False)
    assert again.warnings[UNREADABLE] == len(bad) + 1 and len(again.spans) == 1
    store.close()


def test_a_samples_record_count_is_of_the_records_read(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    store.append(live_rows([span("z", "s", T0)], sender="a:1:0", rollout=1))
    reader = LiveReader(tmp_path, engine_traces=False)
    reader.poll(now=T0 + 1)
    store.append(live_rows([span("a", "s1", T0 + 1), '{"type":"event","trace_id":"a",}'],
                           sender="a:1:0", rollout=1, first_seq=2, trace="a"))
    delta = reader.poll(now=T0 + 2)
    (sample,) = delta.samples.itertuples()
    assert (sample.trace_id, sample.n_records, sample.new) == ("a", 1, True)
    assert reader.frames(now=T0 + 2).warnings[UNREADABLE] == 1
    store.close()


def test_a_span_named_with_a_lone_surrogate_is_shown_with_the_replacement(
        tmp_path: Path) -> None:
    """The recording API keeps lone surrogates; Arrow text in the delta's tables cannot
    hold one. Every poll failed while such a span was open, and what those polls took in
    was never shown (3 samples recorded, 0 shown once it closed)."""
    store = store_in(tmp_path)
    odd = {**span("a", "s1", T0), "name": "tool:\ud800", "trace_id": "a\udfff"}
    store.append(live_rows([span("z", "s", T0), odd], sender="a:1:0", rollout=1))
    reader = LiveReader(tmp_path, engine_traces=False)
    first = reader.poll(now=T0 + 1)
    assert sorted(first.open_spans["name"]) == ["generate", "tool:\ufffd"]
    assert "a\ufffd" in set(first.samples["trace_id"])
    store.append(live_rows([{**span("a\udfff", "s1", T0 + 1, end=True), "name": "tool:\ud800"},
                            span("y", "s", T0 + 1)], sender="a:1:0", rollout=1, first_seq=3))
    second = reader.poll(now=T0 + 2)
    assert list(second.closed["name"]) == ["tool:\ufffd"]
    assert len(reader.frames(now=T0 + 2).samples) == 3
    store.close()


def test_a_poll_that_fails_midway_is_read_again_whole_by_the_next(
        tmp_path: Path, monkeypatch) -> None:
    """Once a poll has taken rows in, a failure would leave them out for good: the next
    poll reads the rollout so far again."""
    store = store_in(tmp_path)
    store.append(live_rows([span("z", "s", T0)], sender="a:1:0", rollout=1))
    reader = LiveReader(tmp_path, engine_traces=False)
    reader.poll(now=T0 + 1)
    store.append(live_rows([span("a", "s1", T0 + 1)], sender="a:1:0", rollout=1, first_seq=2))
    failing = LiveReader._delta

    def fail_once(self, *args, **kwargs):
        monkeypatch.setattr(LiveReader, "_delta", failing)
        raise RuntimeError("a delta that could not be built")

    monkeypatch.setattr(LiveReader, "_delta", fail_once)
    with pytest.raises(RuntimeError, match="could not be built"):
        reader.poll(now=T0 + 2)
    again = reader.poll(now=T0 + 3)
    assert again.rollout_changed and set(again.samples["trace_id"]) == {"z", "a"}
    assert len(again.open_spans) == 2
    store.close()
