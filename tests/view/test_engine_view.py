"""A generation's engine requests as the view serves them: the request spans' ``gen_ai.*``
figures reach the details panel the same way in the notebook (the kernel's reply to an
``attrs`` message) and in a snapshot (the page's attribute tables), the generation's own
figures beside them, and the engines' load travels in the payload."""

from __future__ import annotations

import gzip
import json
import struct

import numpy as np
import pytest

from slime_trace_widget import TraceTimeline
from slime_trace_widget.view.page.snapshot import data_blocks
from tests.browser.engine_scene import FIRST_FIGURES, LOAD_STEP, Scene, scene
from tests.view.test_page_details import _page_details
from tests.view.test_payload import decode


@pytest.fixture(scope="module")
def engine_scene(tmp_path_factory: pytest.TempPathFactory) -> Scene:
    return scene(tmp_path_factory.mktemp("engine"))


def _requests(timeline: TraceTimeline, generation: int) -> list[int]:
    """Payload indices of the engine request spans under payload span ``generation``."""
    cols = decode(timeline.payload)
    engine = (cols["span_flags"] & 128) > 0
    return np.flatnonzero(engine & (cols["span_parent"] == generation)).tolist()


def _attrs(detail: dict) -> dict:
    return {**(detail.get("start_attrs") or {}), **(detail.get("end_attrs") or {})}


def test_the_kernel_answers_each_request_with_its_figures(engine_scene: Scene) -> None:
    timeline = TraceTimeline(engine_scene.frames)
    sent: list[dict] = []
    timeline.send = sent.append  # type: ignore[method-assign]
    requests = _requests(timeline, engine_scene.generation)
    assert len(requests) == 2, "a prefill and a decode request under the generation"
    figures = []
    for req, index in enumerate([engine_scene.generation, *requests]):
        timeline._on_message(timeline, {"type": "attrs", "kind": "span", "index": index,
                                        "req": req}, [])
        figures.append(_attrs(sent[-1]["detail"]))
    slime, *engine = figures
    assert {"queue_time", "e2e_latency", "prompt_tokens", "finish_reason"} <= set(slime)
    hosts = {attrs["engine.host"]: attrs for attrs in engine}
    assert set(hosts) == {"engine-a", "engine-b"}
    for key, value in FIRST_FIGURES["decode"].items():
        assert hosts["engine-b"][key] == value, key
    for key, value in FIRST_FIGURES["prefill"].items():
        assert hosts["engine-a"][key] == value, key


def test_the_page_holds_the_same_figures(engine_scene: Scene) -> None:
    timeline = TraceTimeline(engine_scene.frames)
    view = timeline._view
    requests = _requests(timeline, engine_scene.generation)
    page = _page_details(data_blocks(engine_scene.frames, view), len(view.span_index), 0)
    for index in requests:
        attrs = _attrs(page["spans"][index])
        assert attrs["gen_ai.request.id"] == attrs["rid"]
        role = "decode" if attrs["engine.host"] == "engine-b" else "prefill"
        for key, value in FIRST_FIGURES[role].items():
            assert attrs[key] == value, key


def test_the_widget_sends_the_engines_load(engine_scene: Scene) -> None:
    timeline = TraceTimeline(engine_scene.frames)
    meta, cols = timeline.payload["meta"], decode(timeline.payload)
    assert meta["load_engines"] == ["engine-a", "engine-b"]
    running = (cols["load_track"] == 0) & (cols["load_engine"] == 0)
    ts, value = cols["load_ts"][running], cols["load_value"][running]
    assert set(value[ts < LOAD_STEP - 0.01]) == {3.0} and set(value[ts >= LOAD_STEP]) == {5.0}
    # retractions are a counter: read as a rate, one more per quarter second
    retractions = cols["load_value"][(cols["load_track"] == 4)]
    np.testing.assert_allclose(retractions, 4.0)
    # the snapshot's data block carries them too, byte for byte
    raw = gzip.decompress(data_blocks(engine_scene.frames, timeline._view).data)
    size = struct.unpack("<I", raw[4:8])[0]
    header = json.loads(raw[8:8 + size])["payload"]
    assert header["meta"]["load_engines"] == meta["load_engines"]
    body = raw[8 + size:]
    for name in ("load_engine", "load_track", "load_ts", "load_value"):
        offset, length = header["buffers"][name]
        assert body[offset:offset + length] == timeline.payload["buffers"][name], name


def test_the_payload_names_each_request_span_s_role(engine_scene: Scene) -> None:
    timeline = TraceTimeline(engine_scene.frames)
    meta, cols = timeline.payload["meta"], decode(timeline.payload)
    roles = meta["engine_roles"]
    assert set(roles.values()) == {"prefill", "decode"}
    names = [meta["names"][code] for code in cols["span_name"][
        _requests(timeline, engine_scene.generation)]]
    assert sorted(roles[name] for name in names) == ["decode", "prefill"], names
