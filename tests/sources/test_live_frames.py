"""Live frames: a demo rollout recorded with our recording API, streamed to the real
receiver as the live wire carries it, read back with ``load_live`` and ``LiveReader``;
once the rollout has ended its frames equal those of its dump (saved with torch.save as
slime does, loaded with ``load_frames``), the engine's requests included."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from slime_trace_widget.demo import make_demo_samples
from slime_trace_widget.frames import build_frames
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.dumps import save_dump
from slime_trace_widget.sources.live import LiveDelta, LiveReader, load_live
from slime_trace_widget.sources.loading import load_frames
from tests.support.engine_traces import replay, requests_for
from tests.support.live_wire import Poster, Sender, recording_order
from tests.support.receiver import start_receiver

ROLLOUT = 7
CHUNK = 700
#: Span columns that name other rows by position; compared through the ids they point at.
POSITIONAL = ("sample_row", "parent_index")


@dataclass
class Streamed:
    folder: Path
    dump: Path
    samples: list[dict]
    records: list[dict]
    deltas: list
    reader: LiveReader
    #: The poll after the engine's export: its samples, without a new record.
    engine_delta: LiveDelta


@pytest.fixture(scope="module")
def streamed(tmp_path_factory: pytest.TempPathFactory) -> Streamed:
    """The rollout streamed in chunks, a reader polled after each, the engine's requests
    exported by the SDK into the same collector; the dump saved as slime saves it."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    work = tmp_path_factory.mktemp("live")
    samples = make_demo_samples(24, seed=11, rollout_id=ROLLOUT)
    dump = Path(save_dump(work / f"rollout_{ROLLOUT}.pt", samples, rollout_id=ROLLOUT))
    records = recording_order(samples)
    folder = work / "collector"
    sender = Sender()
    deltas = []
    with start_receiver(folder) as receiver:
        reader = LiveReader(folder)
        poster = Poster(receiver.http_port)
        for start in range(0, len(records), CHUNK):
            status, answer = poster.post(sender.request(records[start:start + CHUNK],
                                                        rollout_id=ROLLOUT))
            assert status == 200, answer
            deltas.append(reader.poll())
        poster.post(sender.heartbeat(time.time_ns(), ROLLOUT, kind="close"))
        poster.close()
        replay(requests_for(build_frames(samples)),
               lambda host: OTLPSpanExporter(endpoint=receiver.traces_url), {}, batch=True)
        engine_delta = reader.poll()
    return Streamed(folder, dump, samples, records, deltas, reader, engine_delta)


def by_trace(frames: TraceFrames) -> pd.DataFrame:
    """Spans keyed by (trace id, span id, name), positional columns turned into ids."""
    spans = frames.span_core
    trace = frames.samples["trace_id"].to_numpy()[spans["sample_row"].to_numpy()]
    parents = spans["parent_index"].to_numpy()
    parent_ids = np.where(parents >= 0, spans["span_id"].to_numpy()[np.maximum(parents, 0)],
                          None)
    keyed = spans.drop(columns=list(POSITIONAL)).assign(trace=trace, parent_of=parent_ids)
    return keyed.sort_values(["trace", "start", "span_id", "name"], kind="stable"
                             ).reset_index(drop=True)


def test_live_frames_equal_the_dumps_once_the_rollout_ends(streamed: Streamed) -> None:
    dump = load_frames(str(streamed.dump), progress=False, engine_traces=str(streamed.folder))
    live = load_live(streamed.folder, now=time.time())
    assert live.rollout_ids == [ROLLOUT]
    assert len(live.samples) == len(dump.samples)
    assert (live.span_core["origin"] == "engine").sum() > 0  # the engine's requests joined
    expected, found = by_trace(dump), by_trace(live)
    assert list(found.columns) == list(expected.columns)
    for column in expected.columns:
        pd.testing.assert_series_equal(found[column], expected[column], check_names=False,
                                       check_categorical=False, obj=column)
    samples = ["trace_id", "sample_index", "group_index", "attempts", "start", "end",
               "n_spans", "n_open_spans", "n_events", "n_lanes", "rollout_id"]
    pd.testing.assert_frame_equal(
        live.samples[samples].sort_values("trace_id").reset_index(drop=True),
        dump.samples[samples].sort_values("trace_id").reset_index(drop=True),
        check_categorical=False)
    assert [s.missing for s in live.live.senders] == [0]
    assert live.live.senders[0].closed and not live.live.senders[0].silent


def test_each_poll_reads_only_what_arrived(streamed: Streamed) -> None:
    counts = [delta.records for delta in streamed.deltas]
    assert counts == [len(streamed.records[i:i + CHUNK])
                      for i in range(0, len(streamed.records), CHUNK)]
    assert streamed.deltas[0].rollout_changed and streamed.deltas[0].rollout == ROLLOUT
    assert not any(delta.rollout_changed for delta in streamed.deltas[1:])
    starts = sum(r["type"] == "span_start" for r in streamed.records)
    assert sum(len(delta.opened) for delta in streamed.deltas) == starts
    assert sum(len(delta.closed) for delta in streamed.deltas) == starts  # all ended
    assert streamed.deltas[-1].open_spans.empty
    new = pd.concat([delta.samples[delta.samples["new"]] for delta in streamed.deltas])
    assert sorted(new["trace_id"]) == sorted(s["trace"]["trace_id"] for s in streamed.samples)
    middle = streamed.deltas[len(streamed.deltas) // 2]
    assert len(middle.open_spans) and (middle.open_spans["start"] <= middle.now).all()
    engine = streamed.engine_delta  # the engine's export, after the last record
    assert engine.records == 0 and len(engine.samples) and not engine.samples["new"].any()
    assert streamed.reader.poll().empty  # nothing new since


def test_the_readers_frames_are_load_lives(streamed: Streamed) -> None:
    now = time.time()
    pd.testing.assert_frame_equal(by_trace(streamed.reader.frames(now)),
                                  by_trace(load_live(streamed.folder, now=now)))


def test_a_rollout_in_progress_has_open_spans_drawn_to_now(tmp_path: Path) -> None:
    samples = make_demo_samples(8, seed=2, rollout_id=1)
    records = recording_order(samples)
    half = records[: len(records) // 2]
    sender = Sender()
    with start_receiver(tmp_path / "collector") as receiver:
        poster = Poster(receiver.http_port)
        assert poster.post(sender.request(half, rollout_id=1))[0] == 200
        poster.close()
    now = max(r["ts"] for r in half) + 30.0
    live = load_live(tmp_path / "collector", now=now, engine_traces=False)
    spans = live.span_core[~live.span_core["virtual"]]
    running = spans[spans["state"] == "open"]
    assert len(running) and running["end"].isna().all()
    ancestors_closed = running["clip_reason"] == "ancestor_end"
    assert (running.loc[~ancestors_closed, "display_end"] == now).all()
    assert (~ancestors_closed).any()
    starts = sum(r["type"] == "span_start" for r in half)
    assert len(spans) == starts
    assert math.isclose(live.t1, max(r["ts"] for r in half))


def test_a_reader_moves_to_a_newer_rollout(tmp_path: Path) -> None:
    first = recording_order(make_demo_samples(4, seed=1, rollout_id=0))
    second = recording_order(make_demo_samples(4, seed=2, rollout_id=1))
    sender = Sender()
    with start_receiver(tmp_path / "collector") as receiver:
        reader = LiveReader(tmp_path / "collector", engine_traces=False)
        assert reader.poll().records == 0  # nothing yet
        poster = Poster(receiver.http_port)
        poster.post(sender.request(first, rollout_id=0))
        assert reader.poll().rollout == 0
        part = second[: len(second) // 2]
        poster.post(sender.request(part, rollout_id=1))
        moved = reader.poll()
        poster.close()
    assert moved.rollout_changed and moved.rollout == 1 and moved.records == len(part)
    assert len(reader.frames().samples) == len({r["trace_id"] for r in part})
    assert load_live(tmp_path / "collector", rollout=0,
                     engine_traces=False).rollout_ids == [0]


def test_a_rollout_streamed_by_the_sender_equals_its_dump(tmp_path: Path) -> None:
    """The issue's case end to end: a demo rollout on a real clock, recorded with our
    recording API while ``tracing.live`` streams it, then dumped as slime dumps."""
    from slime_trace_widget.tracing import live as streaming

    folder = tmp_path / "collector"
    with start_receiver(folder) as receiver:
        stream = streaming.install(f"http://127.0.0.1:{receiver.http_port}")
        try:
            streaming.set_rollout(5)
            samples = make_demo_samples(12, seed=6, rollout_id=5, real_time_scale=0.002)
        finally:
            streaming.set_rollout(None)
            stats = stream.close()
    assert stats.dropped == 0 and stats.queued == 0
    dump = Path(save_dump(tmp_path / "rollout_5.pt", samples, rollout_id=5))
    live = load_live(folder, now=time.time())
    expected = by_trace(load_frames(str(dump), progress=False))
    pd.testing.assert_frame_equal(by_trace(live), expected, check_categorical=False)
    assert live.rollout_ids == [5]
    (sender,) = live.live.senders
    assert (sender.records, sender.missing, sender.closed) == (stats.sent, 0, True)


def test_a_rollout_in_progress_has_the_load_of_engines_that_export_no_span(
        tmp_path: Path) -> None:
    """The collector's span store is empty (SGLang without tracing) and its scrapes fill
    the load store: the live frames hold the load of their window all the same."""
    from slime_trace_widget.sources.engine.store import holds_spans
    from tests.sources.test_engine_load import store_scrapes

    samples = make_demo_samples(4, seed=3, rollout_id=2)
    records = recording_order(samples)
    half = records[: len(records) // 2]
    folder = tmp_path / "collector"
    with start_receiver(folder) as receiver:
        poster = Poster(receiver.http_port)
        assert poster.post(Sender().request(half, rollout_id=2))[0] == 200
        poster.close()
    first, last = min(r["ts"] for r in half), max(r["ts"] for r in half)
    store_scrapes(folder, "engine-0", np.arange(first - 5.0, last + 5.0),
                  {"sglang:num_running_reqs": lambda t: t % 5})
    assert not holds_spans(folder)
    live = load_live(folder, now=last + 1.0)
    assert len(live.engine_load) >= int(last - first) + 10
    assert set(live.engine_load["engine"]) == {"engine-0"}
    assert (live.span_core["origin"] == "engine").sum() == 0
    assert not load_live(folder, now=last + 1.0, engine_traces=False).engine_load.size
