"""The live widget's kernel side: a session over a feed, its deltas and replies."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from slime_trace_widget.demo import make_demo_samples
from slime_trace_widget.view.live import LiveSession
from slime_trace_widget.view.live_blocks import LiveDelta
from slime_trace_widget.view.widget import TraceTimeline
from tests.support.live_deltas import as_payload, assert_same_rows
from tests.support.live_feeds import RecordQueue


@pytest.fixture(scope="module")
def demo() -> list[dict]:
    return make_demo_samples(6, seed=5)


def _records(samples: list[dict]) -> list[dict]:
    return [r for s in samples for r in s["trace"]["events"]]


def test_session_deltas_carry_health_and_the_clock(demo: list[dict]) -> None:
    feed = RecordQueue()
    feed.senders = [{"sender": "hostA:12", "received": 10, "lost": 3, "dropped": 2,
                     "silent": False}]
    session = LiveSession(feed, stall_after=5.0, clock=lambda: 1000.0)
    feed.put(_records(demo[:2]))
    assert session.poll() == [0, 1]
    delta = session.delta_since(0)
    assert delta.meta["live"]["senders"][0]["lost"] == 3
    assert delta.meta["live"]["stall_after"] == 5.0
    assert delta.meta["now"] == pytest.approx(1000.0 - session.blocks.t0)
    assert session.poll() == []
    assert session.delta_since(session.seq).meta["positions"] == []


def test_a_bad_stall_after_is_refused() -> None:
    with pytest.raises(ValueError, match="stall_after"):
        LiveSession(RecordQueue(), stall_after=0)


def test_detail_of_a_live_span_comes_from_its_sample(demo: list[dict]) -> None:
    feed = RecordQueue()
    session = LiveSession(feed)
    feed.put(_records(demo[:3]))
    session.poll()
    counts = [session.blocks.block_count(p, "span") for p in range(3)]
    index = counts[0] + 1  # the second span of the second sample
    detail = session.detail("span", index)
    names = session.blocks._tables["names"].values
    name_codes = session.blocks._blocks[1].items["span_name"]  # the block as sent
    assert detail["name"] == names[int(name_codes[1])]
    assert detail["sample"]["trace_id"] == demo[1]["trace"]["trace_id"]
    with pytest.raises(IndexError):
        session.detail("span", sum(counts))


def test_widget_answers_live_sync_and_stops(demo: list[dict]) -> None:
    feed = RecordQueue()
    feed.put(_records(demo))
    timeline = TraceTimeline.live(feed=feed, interval=3600)
    sent: list[tuple[dict, list]] = []
    timeline.send = lambda content, buffers=None: sent.append((content, buffers))  # type: ignore[method-assign]
    assert timeline.payload["meta"]["live"]["following"] is True
    timeline._live.session.poll()
    timeline._on_message(timeline, {"type": "live_sync", "since": 0}, [])
    content, buffers = sent[-1]
    assert content["type"] == "live_delta" and content["positions"] == list(range(len(demo)))
    spans = np.frombuffer(buffers[content["buffer_names"].index("span_start")], dtype="<f4")
    assert len(spans) == sum(content["counts"]["span"]) > 0
    timeline._on_message(timeline, {"type": "attrs", "kind": "span", "index": 0, "req": 4}, [])
    assert sent[-1][0]["req"] == 4 and sent[-1][0]["detail"]["name"]
    timeline._on_message(timeline, {"type": "query_attrs", "terms": [], "req": 5}, [])
    assert "error" in sent[-1][0]
    timeline.stop_following()
    assert sent[-1][0]["live"]["following"] is False
    assert len(timeline.frames.samples) == len(demo)


def test_a_live_widget_answers_from_its_live_frames(demo: list[dict], tmp_path: Path) -> None:
    """samples, spans and events read the empty frames the widget was made with (0 rows
    while tl.frames held them all), to_html wrote an empty page, and show() replaced the
    live view with an empty static one while deltas kept coming."""
    import base64
    import gzip
    import json
    import re
    import struct

    feed = RecordQueue()
    feed.put(_records(demo))
    timeline = TraceTimeline.live(feed=feed, interval=3600)
    timeline.send = lambda content, buffers=None: None  # type: ignore[method-assign]
    timeline._live.session.poll()
    try:
        assert len(timeline.samples) == len(demo)
        assert len(timeline.spans) == len(timeline.frames.spans) > 0
        assert len(timeline.events) == len(timeline.frames.events)
        page = timeline.to_html(tmp_path / "live.html").read_text(encoding="utf-8")
        data = re.search(r'id="stw-data">(.*?)</script>', page, re.S)
        raw = gzip.decompress(base64.b64decode(data[1]))
        header = json.loads(raw[8:8 + struct.unpack("<I", raw[4:8])[0]])
        assert header["payload"]["meta"]["n_samples_total"] == len(demo)
        with pytest.raises(RuntimeError, match="a live view shows the rollout as it runs"):
            timeline.show(query="name:tool_call")
        assert timeline.payload["meta"]["live"]["following"] is True  # still live
    finally:
        timeline.stop_following()


def test_the_live_view_hands_over_to_the_steps_dump(tmp_path: Path) -> None:
    samples = make_demo_samples(8, seed=2)
    (tmp_path / "rollout_4.pt").write_bytes(b"an earlier step's dump, never read")
    feed = RecordQueue()
    feed.put(_records(samples))
    timeline = TraceTimeline.live(feed=feed, dumps=tmp_path, interval=3600)
    sent: list[tuple[dict, list]] = []
    timeline.send = lambda content, buffers=None: sent.append((content, buffers))  # type: ignore[method-assign]
    timeline._live.look()
    live_delta = LiveDelta({k: v for k, v in sent[-1][0].items() if k != "buffer_names"},
                           dict(zip(sent[-1][0]["buffer_names"], sent[-1][1], strict=True)))
    assert "live" in timeline.payload["meta"]

    dump = tmp_path / "rollout_5.pt"
    torch.save({"rollout_id": 5, "samples": samples}, dump)
    old = time.time() - 60
    os.utime(dump, (old, old))  # complete: not modified within the settle time
    timeline._live.look()
    assert timeline._live is None
    assert "live" not in timeline.payload["meta"]
    assert sent[-1][0]["live"]["following"] is False  # the views were told first

    # the live rows are the dump's rows: the same samples with the same spans
    assert_same_rows(as_payload(live_delta), timeline.view.payload,
                     {s["trace"]["trace_id"] for s in samples})
