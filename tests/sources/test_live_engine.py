"""Engine exports that land after a sample's last live record: a rollout streamed to the
real receiver and polled to its end, then SGLang-shaped requests exported by the SDK
into the same collector (matched by rid, or by the W3C context a client sent); the next
poll names the samples they belong to without any new record, and their frames hold
the engine's slices under the generation spans, as ``load_live`` gives them."""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import torch

from slime_trace_widget.demo import make_demo_samples
from slime_trace_widget.frames import build_frames
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.schema import CARRIER_EVENTS, SAMPLE_TRACE_KEY, w3c_span_id, w3c_trace_id
from slime_trace_widget.sources.engine.store import SpanStore
from slime_trace_widget.sources.handover import new_dumps_watcher
from slime_trace_widget.sources.live import LiveDelta, LiveReader, load_live
from slime_trace_widget.sources.live.carriers import LiveTrace, NewRecord
from slime_trace_widget.sources.live.engine_marks import EngineMarks
from slime_trace_widget.sources.live.engine_tail import EngineTail
from slime_trace_widget.tracing import bind_trace, trace_span, use_clock
from slime_trace_widget.view.live import LiveSession
from slime_trace_widget.view.live_feed import ReaderFeed
from slime_trace_widget.view.page.live_server import Handover
from slime_trace_widget.view.widget import TraceTimeline
from tests.support.engine_builder import T0, Engine, plain_slices
from tests.support.engine_traces import replay, requests_for
from tests.support.live_deltas import as_payload, assert_same_rows, page_payload
from tests.support.live_wire import Poster, Sender, recording_order, wire_id
from tests.support.receiver import start_receiver

ROLLOUT = 3
CHUNK = 400


@dataclass
class Exported:
    folder: Path
    reader: LiveReader
    before: list[LiveDelta]
    after: LiveDelta
    #: The wire keys of the samples whose generation spans got a request.
    owners: set[str]
    others: set[str]
    #: A live view's session fed by its own reader, polled alongside: the block
    #: positions the export changed, and each block's span count before and after it.
    session: LiveSession
    changed: list[int]
    spans_before: dict[str, int]
    spans_after: dict[str, int]
    #: The rollout's samples as its dump holds them.
    samples: list[dict]


def key_of(trace_id: object) -> str:
    return wire_id(trace_id, 16).hex()


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Exported:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    samples = make_demo_samples(12, seed=5, rollout_id=ROLLOUT)
    frames = build_frames(samples)
    core, sample_traces = frames.span_core, frames.samples["trace_id"]
    # the even samples get their engine's requests, the odd ones none
    requests = [r for r in requests_for(frames) if int(core.at[r.span, "sample_row"]) % 2 == 0]
    for number, request in enumerate(requests):
        if number % 2:  # matched by trace context: a rid no generation span carries
            trace = sample_traces[int(core.at[request.span, "sample_row"])]
            span = core.at[request.span, "span_id"]
            requests[number] = replace(request, rid=f"client-{number:04d}-unrelated",
                                       traceparent=f"00-{w3c_trace_id(trace)}-"
                                                   f"{w3c_span_id(span)}-01")
    rows = {int(core.at[r.span, "sample_row"]) for r in requests}
    owners = {key_of(sample_traces[row]) for row in rows}
    others = {key_of(t) for row, t in sample_traces.items() if row not in rows}
    records = recording_order(samples)
    folder = tmp_path_factory.mktemp("live_engine") / "collector"
    sender = Sender()
    with start_receiver(folder) as receiver:
        reader = LiveReader(folder)
        session = LiveSession(ReaderFeed(folder))
        poster = Poster(receiver.http_port)
        before = []
        for start in range(0, len(records), CHUNK):
            status, answer = poster.post(sender.request(records[start:start + CHUNK],
                                                        rollout_id=ROLLOUT))
            assert status == 200, answer
            before.append(reader.poll())
            session.poll()
        poster.close()
        spans_before = block_spans(session)
        replay(requests, lambda host: OTLPSpanExporter(endpoint=receiver.traces_url), {},
               batch=True)
        after = reader.poll()
        changed = session.poll()
    return Exported(folder, reader, before, after, owners, others, session, changed,
                    spans_before, block_spans(session), samples)


def block_spans(session: LiveSession) -> dict[str, int]:
    """The spans in each sample's block as a live view holds it, by sample key."""
    return {key: session.blocks.block_count(position, "span")
            for position, key in enumerate(session.blocks.keys())}


def engine_spans_per_trace(frames: TraceFrames) -> Counter[str]:
    engine = frames.span_core[(frames.span_core["origin"] == "engine").to_numpy()]
    traces = frames.samples["trace_id"].to_numpy()[engine["sample_row"].to_numpy()]
    return Counter(key_of(trace) for trace in traces)


def test_engine_spans_after_the_last_record_reach_the_next_delta(exported: Exported) -> None:
    after = exported.after
    assert after.records == 0 and not after.rollout_changed and not after.empty
    assert set(after.engine["key"]) == exported.owners
    assert set(after.samples["key"]) == exported.owners
    assert len(exported.owners) == len(exported.others) == 6
    assert not after.samples["new"].any() and (after.engine["spans"] > 0).all()
    assert not any(len(delta.engine) for delta in exported.before)


def test_the_marked_samples_frames_hold_the_engine_slices(exported: Exported) -> None:
    now = time.time()
    keys = list(exported.after.samples["key"])
    frames = exported.reader.frames(now, keys)
    found = engine_spans_per_trace(frames)
    assert set(found) == exported.owners
    whole = load_live(exported.folder, now=now)
    assert engine_spans_per_trace(whole) == found  # every request placed, as load_live does
    spans = frames.span_core
    roots = spans[((spans["origin"] == "engine")
                   & spans["name"].astype(str).str.startswith("sglang")).to_numpy()]
    parents = spans.loc[roots["parent_index"].to_numpy()]
    assert (parents["origin"] != "engine").all()  # under the sample's own span
    assert exported.reader.poll().empty  # nothing stored since


def test_the_engine_tail_reads_each_span_once_across_a_roll(tmp_path: Path) -> None:
    """The real store: spans read from a write-ahead file are not read again from the
    finished file it rolls into (sorted by start, not in arrival order)."""
    store = SpanStore(tmp_path, roll_spans=1_000_000, roll_seconds=3600.0)
    written: list[int] = []

    def request(start: float) -> None:
        engine = Engine()
        engine.request(f"rid-{start}", start, start + 5.0,
                       slices=plain_slices(start + 0.1, start + 4.9, loops=3))
        store.append(engine.table())
        written.append(len(engine.table()))

    try:
        request(1_700_000_100.0)
        tail = EngineTail(tmp_path)
        tail.skip_present()
        request(1_700_000_050.0)  # starts earlier: sorted before the first in the roll
        assert len(tail.read()) == written[-1]
        request(1_700_000_000.0)
        store.roll()
        assert len(tail.read()) == written[-1]
        assert len(tail.read()) == 0
        request(1_700_000_200.0)
        assert len(tail.read()) == written[-1]
    finally:
        store.close()
    assert len(tail.read()) == 0  # the last write-ahead file rolled on close: nothing new
    assert len(EngineTail(tmp_path).read()) == sum(written)


def test_a_live_view_redraws_the_samples_the_engine_spans_belong_to(exported: Exported
                                                                    ) -> None:
    keys = exported.session.blocks.keys()
    assert sorted(keys[p] for p in exported.changed) == sorted(exported.owners)
    delta = exported.session.delta_since(exported.session.seq - 1).meta
    assert sorted(keys[p] for p in delta["positions"]) == sorted(exported.owners)
    counts = dict(zip(delta["positions"], delta["counts"]["span"], strict=True))
    for position in delta["positions"]:
        assert exported.session.blocks.block_count(position, "span") == counts[position]
    found = engine_spans_per_trace(exported.reader.frames(time.time()))
    for key in exported.owners:  # the engine's spans joined into the block
        assert exported.spans_after[key] == exported.spans_before[key] + found[key]
    for key in exported.others:
        assert exported.spans_after[key] == exported.spans_before[key]


def _same_rid_samples(spans: dict[str, tuple[float, float]]) -> dict[str, dict]:
    """One sample per key, its generation span (start, end seconds from T0) sent with one
    rid, ``same-rid`` (slime sending a generation again with its rid), but the sample
    ``known``'s, sent with rid ``known``."""
    samples = {}
    for index, (key, (start, end)) in enumerate(spans.items()):
        sample = {"index": index, "group_index": index, "status": "completed"}
        now = [T0 + start]
        bind_trace(sample)
        with use_clock(lambda now=now: now[0]), trace_span(sample, "sglang_generate") as span:
            now[0] = T0 + end
            span.update({"sglang_request_id": "known" if key == "known" else "same-rid"})
        samples[key] = sample
    return samples


def test_a_reused_rids_request_marks_the_sample_the_join_places_it_in(tmp_path: Path
                                                                     ) -> None:
    """Two samples whose generations carry one rid: a request of it overlapping the
    second's span marks that sample alone, as the join places it (its host's clock known
    from the request of ``known``); one overlapping neither (the join leaves it unmatched
    here) marks both, for the join to decide."""
    samples = _same_rid_samples({"first": (0.0, 5.0), "second": (6.0, 12.0),
                                 "known": (30.0, 40.0)})
    store = SpanStore(tmp_path)
    marks = EngineMarks(tmp_path)
    marks.index([NewRecord(LiveTrace(key, 0, trace_id=sample[SAMPLE_TRACE_KEY]["trace_id"]),
                           record, 0.0)
                 for key, sample in samples.items()
                 for record in sample[SAMPLE_TRACE_KEY][CARRIER_EVENTS]])

    def frames_of(keys: list[str]) -> TraceFrames:
        return build_frames([samples[key] for key in keys])

    def marked(start: float, end: float) -> set[str]:
        engine = Engine()
        engine.request("same-rid", T0 + start, T0 + end,
                       slices=plain_slices(T0 + start + 0.1, T0 + end))
        store.append(engine.table())  # durable once it returns
        return set(marks.marks(frames_of))

    known = Engine()  # read with the first request only: marks read what is new
    known.request("known", T0 + 30.5, T0 + 39.5)
    store.append(known.table())
    try:
        assert marked(6.5, 11.5) == {"second", "known"}
        assert marked(20.0, 22.0) == {"first", "second"}
    finally:
        store.close()


def _step_dump_lands(exported: Exported, folder: Path) -> None:
    """The rollout's dump written into ``folder`` (slime's dump folder), complete."""
    dump = folder / f"rollout_{ROLLOUT}.pt"
    torch.save({"rollout_id": ROLLOUT, "samples": exported.samples}, dump)
    old = time.time() - 60
    os.utime(dump, (old, old))  # complete: not modified within the settle time


def test_the_steps_dump_keeps_the_engine_slices_shown_live(exported: Exported,
                                                           tmp_path: Path) -> None:
    """The hand-over joins the dump with the collector folder the live frames joined:
    the engine slices stay where they were (the widget and the page both hand over
    through the session)."""
    watcher = new_dumps_watcher(tmp_path)
    _step_dump_lands(exported, tmp_path)
    found = exported.session.step_dump(watcher)
    assert found is not None and found[0] == str(tmp_path / f"rollout_{ROLLOUT}.pt")
    live = engine_spans_per_trace(exported.session.frames())
    assert set(live) == exported.owners
    assert engine_spans_per_trace(found[1]) == live


def test_the_page_hands_over_to_a_dump_with_the_live_engine_slices(exported: Exported,
                                                                   tmp_path: Path) -> None:
    handover = Handover(new_dumps_watcher(tmp_path))
    _step_dump_lands(exported, tmp_path)
    assert handover.look(exported.session) is True
    assert handover.page_bytes is not None
    live = as_payload(exported.session.delta_since(0))
    # the same rows, engine slices included (their spans, lanes and flags)
    assert_same_rows(live, page_payload(handover.page_bytes),
                     {s["trace"]["trace_id"] for s in exported.samples})


def test_the_widget_hands_over_to_a_dump_with_the_live_engine_slices(exported: Exported,
                                                                     tmp_path: Path) -> None:
    timeline = TraceTimeline.live(exported.folder, dumps=tmp_path, interval=3600)
    timeline.send = lambda content, buffers=None: None  # type: ignore[method-assign]
    try:
        live = timeline._live
        assert live is not None
        live.look()
        shown = engine_spans_per_trace(live.session.frames())
        assert set(shown) == exported.owners
        _step_dump_lands(exported, tmp_path)
        live.look()
        assert timeline._live is None  # handed over
        assert engine_spans_per_trace(timeline.frames) == shown
    finally:
        timeline.stop_following()
