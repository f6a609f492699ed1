"""TraceTimeline's Python side: pandas round trip, selection, attribute requests."""

from __future__ import annotations

import base64
import gc
import json
import weakref
from pathlib import Path

import pytest

from slime_trace_widget import TraceTimeline
from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.view.contract import REQUEST_ECHOES

FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.fixture
def timeline() -> TraceTimeline:
    return TraceTimeline.from_dump(FIXTURES / "small.pt")


def _replies(timeline: TraceTimeline) -> list[dict]:
    sent: list[dict] = []
    timeline.send = sent.append  # type: ignore[method-assign]
    return sent


def test_dataframes_are_exposed(timeline: TraceTimeline) -> None:
    assert len(timeline.samples) == 8
    assert "attr.prompt_tokens" in timeline.spans.columns
    assert set(timeline.events["kind"]) == {"instant"}
    assert timeline.frames.paths[0].endswith("small.pt")


def test_show_filters_in_place_and_resets(timeline: TraceTimeline) -> None:
    before = timeline.payload
    timeline.show(spans=timeline.spans[timeline.spans.duration > 10])
    assert timeline.payload is not before
    rows = timeline.view.sample_rows.tolist()
    assert rows == sorted(timeline.spans[timeline.spans.duration > 10]["sample_row"].unique())
    timeline.show(samples=timeline.samples.query("reward < 0.5"))
    assert len(timeline.view.sample_rows) == int((timeline.samples.reward < 0.5).sum())
    timeline.show()
    assert len(timeline.view.sample_rows) == 8


def test_show_takes_a_pandas_mask_as_the_rows_it_keeps(timeline: TraceTimeline) -> None:
    """``show(samples=tl.samples.reward > 0)`` read the mask's True/False as the labels 1
    and 0 and drew samples 0 and 1; a span mask drew nothing."""
    rewarded = timeline.samples.reward > 0.5
    timeline.show(samples=rewarded)
    assert timeline.view.sample_rows.tolist() == timeline.samples.index[rewarded].tolist()
    long = timeline.spans.duration > 10
    timeline.show(spans=long)
    assert sorted(set(timeline.view.span_index.tolist()) & set(timeline.spans.index)) == \
        sorted(timeline.spans.index[long])
    timeline.show(samples=rewarded, query="name:sglang*")
    assert set(timeline.view.sample_rows.tolist()) <= set(timeline.samples.index[rewarded])
    with pytest.raises(TypeError, match="a boolean array names no rows"):
        timeline.show(samples=rewarded.to_numpy())


def test_selection_gets_span_id_and_row(timeline: TraceTimeline) -> None:
    seen: list[dict] = []
    timeline.observe(lambda change: seen.append(change["new"]), "selected")
    timeline.selected = {"kind": "span", "index": 5, "sample_row": 1, "name": "x"}
    frame_index = int(timeline.view.span_index[5])
    assert timeline.selected["span_id"] == timeline.spans.loc[frame_index, "span_id"]
    assert timeline.selected_span.name == frame_index
    assert seen and seen[-1]["frame_index"] == frame_index
    timeline.selected = {"kind": "span", "index": 10**9}
    assert timeline.selected == {} and timeline.selected_span is None
    timeline.selected = {"kind": "span", "index": float("inf")}  # raised OverflowError
    assert timeline.selected == {}


def test_event_selection(timeline: TraceTimeline) -> None:
    timeline.selected = {"kind": "event", "index": 0}
    event = timeline.selected_event
    assert event is not None and event["kind"] == "instant"
    assert timeline.selected_span is None


def test_attrs_request_answers_with_json(timeline: TraceTimeline) -> None:
    sent = _replies(timeline)
    timeline._on_message(timeline, {"type": "attrs", "kind": "span", "index": 3, "req": 7}, [])
    reply = sent[-1]
    assert reply["req"] == 7 and "detail" in reply
    json.dumps(reply, allow_nan=False)
    detail = reply["detail"]
    assert detail["sample"]["source"] in {"math500", "deepsearch_webwalker"}
    timeline._on_message(timeline, {"type": "attrs", "kind": "span", "index": -1, "req": 8}, [])
    assert "error" in sent[-1]
    timeline._on_message(timeline, "not a dict", [])
    assert len(sent) == 2


@pytest.mark.parametrize("request_type", sorted(REQUEST_ECHOES))
def test_a_reply_repeats_what_the_contract_names(timeline: TraceTimeline,
                                                 request_type: str) -> None:
    """Every reply carries its request's type, ``req`` and the keys ``request_echoes``
    names for it (the page's local model repeats the same ones), answered or not."""
    sent = _replies(timeline)
    request = {"type": request_type, "req": 11, "kind": "span", "index": 0, "sample": 0,
               "field": "prompt", "view": "not this view", "terms": []}
    timeline._on_message(timeline, request, [])
    [reply] = sent
    assert reply["type"] == request_type and reply["req"] == 11
    for key in REQUEST_ECHOES[request_type]:
        assert reply[key] == request[key], key
    unnamed = {"kind", "index", "sample", "field", "view"} - set(REQUEST_ECHOES[request_type])
    assert not unnamed & set(reply), unnamed & set(reply)


def test_virtual_span_detail_has_segments(timeline: TraceTimeline) -> None:
    sent = _replies(timeline)
    core = timeline.frames.span_core
    position = next(i for i, idx in enumerate(timeline.view.span_index) if core.loc[idx, "virtual"])
    timeline._on_message(timeline, {"type": "attrs", "kind": "span", "index": position,
                                    "req": 1}, [])
    segments = sent[-1]["detail"]["segments"]
    assert segments and {"name", "start", "end", "duration"} <= set(segments[0])


def test_payload_inline_answers_the_shown_payload_as_text(timeline: TraceTimeline) -> None:
    """A front end that lost the binary buffers (Colab) asks for an inline copy: the
    reply is plain JSON (no bytes that could be lost again) and decodes to the payload."""
    sent = _replies(timeline)
    timeline.show(samples=timeline.samples.query("reward < 0.5"))
    shown = timeline.view.payload
    timeline._on_message(timeline, {"type": "payload_inline", "req": 11}, [])
    reply = json.loads(json.dumps(sent[-1]))
    assert reply["type"] == "payload_inline" and reply["req"] == 11 and "error" not in reply
    copy = reply["payload"]
    assert copy["meta"] == json.loads(json.dumps(shown["meta"]))
    assert copy["version"] == shown["version"]
    assert set(copy["buffers"]) == set(shown["buffers"]) == set(copy["meta"]["columns"])
    for name, data in shown["buffers"].items():
        assert base64.b64decode(copy["buffers"][name], validate=True) == data
    assert len(copy["meta"]["samples"]["row"]) == int((timeline.samples.reward < 0.5).sum())
    assert isinstance(timeline.payload["buffers"]["span_start"], bytes)  # the trait keeps bytes


def test_from_frames_accepts_raw_samples() -> None:
    frames = load_frames(FIXTURES / "small.pt")
    assert TraceTimeline.from_frames(frames).frames is frames
    raw = TraceTimeline.from_frames([{"index": 0, "trace": None}])
    assert len(raw.samples) == 1


def test_view_range_is_a_synced_trait(timeline: TraceTimeline) -> None:
    timeline.view_range = [1.0, 5.0]
    state = timeline.get_state()
    assert state["view_range"] == [1.0, 5.0]
    assert "payload" in state


def test_a_closed_timeline_is_freed() -> None:
    """anywidget hooks a widget made from its bundle's path to the file's change signal
    for good: every timeline, with its frames, lived as long as the kernel."""
    timeline = TraceTimeline.from_dump(FIXTURES / "small.pt")
    frames = weakref.ref(timeline.frames)
    gone = weakref.ref(timeline)
    timeline.close()
    del timeline
    gc.collect()
    assert gone() is None and frames() is None


def test_an_unknown_alignment_is_refused() -> None:
    """A typo ("Global") drew one clock without the engines' load tracks, silently."""
    with pytest.raises(ValueError, match="align must be 'global' or 'rollout', not 'Global'"):
        TraceTimeline.from_dump(FIXTURES / "small.pt", align="Global")


def test_to_html_takes_a_path_from_home_as_from_dump_does(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    monkeypatch.chdir(tmp_path)
    written = TraceTimeline.from_dump(FIXTURES / "small.pt").to_html("~/view.html")
    assert written == tmp_path / "home" / "view.html" and written.read_text().startswith("<")
    assert not (tmp_path / "~").exists()


def test_following_or_watching_a_folder_that_is_not_there_says_so(tmp_path: Path) -> None:
    missing = tmp_path / "debug_rollout"  # a typo: the view would wait for ever
    with pytest.raises(FileNotFoundError, match="debug_rollout: not a folder"):
        TraceTimeline.follow(missing)
    with pytest.raises(FileNotFoundError, match="collector folder"):
        TraceTimeline.live(missing)
    with pytest.raises(FileNotFoundError, match="dump folder"):
        TraceTimeline.live(tmp_path, dumps=missing)
