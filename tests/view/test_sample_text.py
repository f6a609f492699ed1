"""A sample's prompt, response, label and metadata in the details panel's data.

The panel gets the start of each text with the summary of a clicked item, and
the whole text of one field on "show all": from the kernel (a custom message
the widget answers) or from what a snapshot embeds. The texts can be megabytes,
so every cut must be visible (a length to compare with), every bad request
must get an error reply rather than an exception in the comm handler, and a
snapshot must stay bounded however many long texts a rollout holds.
"""

from __future__ import annotations

import gzip
import json
import struct
from typing import Any

import pytest

from slime_trace_widget import TraceTimeline
from slime_trace_widget.demo import make_demo_samples
from slime_trace_widget.frames import TraceFrames, build_frames
from slime_trace_widget.view.contract import SAMPLE_TEXT_FIELDS
from slime_trace_widget.view.details import (
    FULL_TEXT_CHARS,
    TEXT_PREVIEW_CHARS,
    sample_summaries,
    sample_text,
)
from slime_trace_widget.view.page.snapshot import SNAPSHOT_MAX_CHARS, data_blocks, equal_share
from slime_trace_widget.view.payload import encode

#: Longer than the preview, the snapshot's cut and ``json_safe``'s 100,000-character
#: limit, so each of them would show if it were applied where it must not be.
LONG = 300_000


def _text(n: int, seed: str) -> str:
    """``n`` characters that differ along the way, so a cut at the wrong place shows."""
    words = (f"{seed}{k} " for k in range(n))
    return "".join(words)[:n]


def _samples() -> list[dict[str, Any]]:
    """Demo samples with texts of every kind: long, short, empty, absent, non-ASCII."""
    samples = make_demo_samples(6)
    samples[0].update(prompt=_text(LONG, "p"), response=_text(LONG // 2, "r"),
                      label=_text(5_000, "l"), metadata={"source": "gsm8k", "note": "n" * 3000})
    samples[1].update(prompt="😀" * 2500, response="", label=None, metadata=None)
    samples[2].update(prompt=[{"role": "user", "content": "hi"}], response="short")
    return samples


@pytest.fixture(scope="module")
def frames() -> TraceFrames:
    return build_frames(_samples())


@pytest.fixture
def timeline(frames: TraceFrames) -> TraceTimeline:
    return TraceTimeline(frames)


def _replies(timeline: TraceTimeline) -> list[dict]:
    sent: list[dict] = []
    timeline.send = sent.append  # type: ignore[method-assign]
    return sent


def _ask(timeline: TraceTimeline, content: Any) -> list[dict]:
    sent = _replies(timeline)
    timeline._on_message(timeline, content, [])
    for reply in sent:
        json.dumps(reply, allow_nan=False)  # what the comm would send
    return sent


def _position(timeline: TraceTimeline, row: int) -> int:
    """Payload sample index of frame row ``row``."""
    return timeline.view.sample_rows.tolist().index(row)


def _span_of(timeline: TraceTimeline, row: int) -> int:
    """Payload index of the first span of frame row ``row``."""
    rows = timeline.frames.span_core.loc[timeline.view.span_index, "sample_row"]
    return rows.tolist().index(row)


# ---------------------------------------------------------------------- summaries


def test_summary_has_each_text_cut_to_the_preview_with_its_length(frames: TraceFrames) -> None:
    first, emoji, chat = sample_summaries(frames, [0, 1, 2])
    full = frames.samples.loc[0]
    for field in ("prompt", "response", "label", "metadata"):
        assert first[field] == full[field][:TEXT_PREVIEW_CHARS], field
        assert first[f"{field}_chars"] == len(full[field]), field
    assert first["prompt_chars"] == LONG
    # Characters are code points: 2,500 emoji are 2,500 characters, cut at 2,000.
    assert (emoji["prompt"], emoji["prompt_chars"]) == ("😀" * TEXT_PREVIEW_CHARS, 2500)
    assert (emoji["response"], emoji["response_chars"]) == ("", 0)
    assert emoji["label"] is emoji["label_chars"] is None
    assert emoji["metadata"] is emoji["metadata_chars"] is None
    # A chat prompt arrives as JSON text; short texts come whole.
    assert json.loads(chat["prompt"]) == [{"role": "user", "content": "hi"}]
    assert (chat["response"], chat["response_chars"]) == ("short", 5)
    # The other fields are still there.
    assert {"row", "id", "reward", "status", "attempts", "duration"} <= set(first)


def test_summary_cut_is_not_shrunk_by_a_small_string_limit(frames: TraceFrames) -> None:
    """The snapshot passes its own limit for attribute strings; the previews keep theirs."""
    [summary] = sample_summaries(frames, [0], max_chars=100)
    assert len(summary["prompt"]) == TEXT_PREVIEW_CHARS
    assert "truncated" not in summary["prompt"]


def test_attrs_reply_carries_the_previews(timeline: TraceTimeline) -> None:
    [reply] = _ask(timeline, {"type": "attrs", "kind": "span", "index": _span_of(timeline, 0),
                              "req": 1})
    sample = reply["detail"]["sample"]
    assert sample["row"] == 0 and sample["prompt_chars"] == LONG
    assert sample["prompt"] == timeline.samples.at[0, "prompt"][:TEXT_PREVIEW_CHARS]
    row = int(timeline.frames.event_core.at[timeline.view.event_index[0], "sample_row"])
    [reply] = _ask(timeline, {"type": "attrs", "kind": "event", "index": 0, "req": 2})
    sample = reply["detail"]["sample"]
    assert sample["row"] == row
    assert sample["response_chars"] == len(timeline.samples.at[row, "response"])


# ---------------------------------------------------------------------- show all


@pytest.mark.parametrize("field", SAMPLE_TEXT_FIELDS)
def test_sample_text_sends_the_whole_text(timeline: TraceTimeline, field: str) -> None:
    position = _position(timeline, 0)
    [reply] = _ask(timeline, {"type": "sample_text", "sample": position, "field": field,
                              "req": 9})
    whole = timeline.samples.at[0, field]
    assert reply == {"type": "sample_text", "req": 9, "sample": position, "field": field,
                     "view": None, "text": whole, "chars": len(whole)}


def test_sample_text_follows_the_view(timeline: TraceTimeline) -> None:
    """Payload sample 0 is whichever sample the current view shows first."""
    timeline.show(samples=timeline.samples.loc[[2, 1]])
    rows = timeline.view.sample_rows.tolist()
    for position, row in enumerate(rows):
        [reply] = _ask(timeline, {"type": "sample_text", "sample": position,
                                  "field": "response", "req": position})
        assert reply["text"] == timeline.samples.at[row, "response"]
    [reply] = _ask(timeline, {"type": "sample_text", "sample": len(rows),
                              "field": "response", "req": 5})
    assert "error" in reply and "text" not in reply


def test_a_request_for_a_view_no_longer_shown_is_refused(timeline: TraceTimeline) -> None:
    """A click's request names its view: once show() has swapped it, the same payload
    position is another sample, so the kernel says so instead of sending its text."""
    before = timeline.view.payload["meta"]["view_id"]
    timeline.show(samples=timeline.samples.loc[[2, 1]])
    now = timeline.view.payload["meta"]["view_id"]
    [stale] = _ask(timeline, {"type": "sample_text", "sample": 0, "field": "response",
                              "view": before, "req": 4})
    assert stale["view"] == before and "text" not in stale
    assert stale["error"] == f"ValueError: view {before!r} is no longer shown"
    [fresh] = _ask(timeline, {"type": "sample_text", "sample": 0, "field": "response",
                              "view": now, "req": 5})
    assert fresh["text"] == timeline.samples.at[timeline.view.sample_rows[0], "response"]


def test_absent_text_is_none(timeline: TraceTimeline) -> None:
    [reply] = _ask(timeline, {"type": "sample_text", "sample": _position(timeline, 1),
                              "field": "label", "req": 3})
    assert (reply["text"], reply["chars"]) == (None, None) and "error" not in reply


def test_whole_text_is_capped_with_its_length(frames: TraceFrames) -> None:
    assert sample_text(frames, 0, "prompt", max_chars=10) == {
        "text": frames.samples.at[0, "prompt"][:10], "chars": LONG}
    assert FULL_TEXT_CHARS >= 2_000_000  # what the loader keeps of a prompt or response


def test_a_text_past_what_the_loader_keeps_says_it_was_cut() -> None:
    """A response of 2,500,007 characters was kept as its first 2,000,000 with no mark:
    the frames, the summary and "show all" all passed the cut text off as whole."""
    from slime_trace_widget.tables.samples import SAMPLE_TEXT_LIMIT

    samples = make_demo_samples(1)
    samples[0]["response"] = "a" * (SAMPLE_TEXT_LIMIT + 500_000) + "THE END.."
    frames = build_frames(samples)
    kept = frames.samples.at[0, "response"]
    assert kept == "a" * SAMPLE_TEXT_LIMIT + "…[truncated 500009 chars]"


def test_lone_surrogates_leave_as_replacement_characters() -> None:
    """Pickles keep lone surrogates; UTF-8, and so the comm, cannot carry them."""
    from jupyter_client.session import json_packer

    samples = make_demo_samples(2)
    samples[0].update(prompt="a\ud800b" * 1000, label="x\udfff")
    timeline = TraceTimeline(build_frames(samples))
    position = _position(timeline, 0)
    [attrs] = _ask(timeline, {"type": "attrs", "kind": "span", "index": _span_of(timeline, 0),
                              "req": 1})
    assert attrs["detail"]["sample"]["label"] == "x\ufffd"
    [prompt] = _ask(timeline, {"type": "sample_text", "sample": position, "field": "prompt",
                               "req": 2})
    [label] = _ask(timeline, {"type": "sample_text", "sample": position, "field": "label",
                              "req": 3})
    for reply in (attrs, prompt, label):
        json_packer(reply)
    assert (prompt["text"], prompt["chars"]) == ("a\ufffdb" * 1000, 3000)
    assert label["text"] == "x\ufffd"


@pytest.mark.parametrize("content", [
    {"type": "sample_text", "sample": 0, "field": "tokens", "req": 1},
    {"type": "sample_text", "sample": 0, "field": "__class__", "req": 1},
    {"type": "sample_text", "sample": 0, "field": ["prompt"], "req": 1},
    {"type": "sample_text", "sample": 0, "field": None, "req": 1},
    {"type": "sample_text", "sample": 0, "req": 1},
    {"type": "sample_text", "sample": 6, "field": "prompt", "req": 1},
    {"type": "sample_text", "sample": -1, "field": "prompt", "req": 1},
    {"type": "sample_text", "sample": 10**30, "field": "prompt", "req": 1},
    {"type": "sample_text", "sample": True, "field": "prompt", "req": 1},
    {"type": "sample_text", "sample": 0.0, "field": "prompt", "req": 1},
    {"type": "sample_text", "sample": "0", "field": "prompt", "req": 1},
    {"type": "sample_text", "sample": None, "field": "prompt", "req": 1},
    {"type": "sample_text", "field": "prompt", "req": 1},
    {"type": "sample_text"},
], ids=lambda content: repr(content)[:60])
def test_bad_request_gets_an_error_reply(timeline: TraceTimeline, content: dict) -> None:
    [reply] = _ask(timeline, content)
    assert reply["type"] == "sample_text" and reply["req"] == content.get("req")
    assert reply["sample"] == content.get("sample") and reply["field"] == content.get("field")
    assert reply["error"] and "text" not in reply


@pytest.mark.parametrize("content", ["not a dict", None, [], {"type": "other"}, {"req": 1},
                                     {"type": ["attrs"]}, {"type": {"attrs": 1}}])
def test_other_messages_are_ignored(timeline: TraceTimeline, content: Any) -> None:
    assert _ask(timeline, content) == []


# ---------------------------------------------------------------------- snapshot


def _embedded(frames: TraceFrames, **options: Any) -> dict[tuple[str, int], dict[str, Any]]:
    """What a snapshot of every sample of ``frames`` holds of each (field, row): the
    summary's ``preview`` and ``chars``, the ``longer`` cut and the ``whole`` text."""
    view = encode(frames)
    blocks = data_blocks(frames, view, **options)
    raw = gzip.decompress(blocks.details)
    (length,) = struct.unpack("<I", raw[4:8])
    details = json.loads(raw[8:8 + length])
    assert set(details["sample_texts"]) == set(SAMPLE_TEXT_FIELDS)
    return {(field, row): {"preview": details["samples"][position][field],
                           "chars": details["samples"][position][f"{field}_chars"],
                           "longer": details["sample_texts"][field][position],
                           "whole": frames.samples.at[row, field]}
            for field in SAMPLE_TEXT_FIELDS
            for position, row in enumerate(view.sample_rows.tolist())}


def _held(text: dict[str, Any]) -> str:
    """The most of a text the page holds (what "show all" shows)."""
    return text["longer"] if text["longer"] is not None else text["preview"]


def test_snapshot_embeds_long_texts_cut_to_its_limit(frames: TraceFrames) -> None:
    for key, text in _embedded(frames).items():
        whole = text["whole"]
        if whole is None:
            assert text == {"preview": None, "chars": None, "longer": None, "whole": None}, key
            continue
        assert (text["preview"], text["chars"]) == (whole[:TEXT_PREVIEW_CHARS], len(whole)), key
        if len(whole) > TEXT_PREVIEW_CHARS:
            assert text["longer"] == whole[:SNAPSHOT_MAX_CHARS], key
        else:  # the preview is all of it
            assert text["longer"] is None, key


def test_snapshot_texts_share_a_budget(frames: TraceFrames) -> None:
    """The long texts of sample 0 (300,000 and 150,000 characters, a 5,000 label,
    metadata over 3,000) and 2,500 emoji, with the demo's short texts: in 25,000
    characters all but the two longest fit whole, and those two get the rest."""
    budget = 25_000
    texts = _embedded(frames, text_budget=budget)
    for key in (("label", 0), ("metadata", 0), ("prompt", 1)):
        assert _held(texts[key]) == texts[key]["whole"], key
    cut = len(_held(texts["prompt", 0]))
    assert len(_held(texts["response", 0])) == cut > 5_000
    held = sum(len(_held(t)) for t in texts.values() if t["whole"] is not None)
    assert budget - len(texts) <= held <= budget  # shares round down
    assert all(t["preview"] == t["whole"][:TEXT_PREVIEW_CHARS]
               for t in texts.values() if t["whole"] is not None)


def test_snapshot_previews_shrink_when_even_they_pass_the_budget(frames: TraceFrames) -> None:
    texts = _embedded(frames, text_budget=400)
    prompt = texts["prompt", 0]
    assert 0 < len(prompt["preview"]) < 400 and prompt["chars"] == LONG
    assert prompt["preview"] == prompt["whole"][:len(prompt["preview"])]
    assert all(t["longer"] is None for t in texts.values())
    assert sum(len(t["preview"]) for t in texts.values() if t["whole"] is not None) <= 400


def test_snapshot_of_many_long_texts_stays_bounded() -> None:
    samples = make_demo_samples(40)
    for sample in samples:
        sample.update(prompt=_text(100_000, "p"), response=_text(100_000, "r"))
    budget = 1_000_000
    texts = _embedded(build_frames(samples), text_budget=budget)
    held = sum(len(_held(t)) for t in texts.values() if t["whole"] is not None)
    assert budget - len(texts) <= held <= budget
    long_cut = {len(_held(texts[field, row])) for field in ("prompt", "response")
                for row in range(40)}
    assert len(long_cut) == 1 and SNAPSHOT_MAX_CHARS > long_cut.pop() > TEXT_PREVIEW_CHARS


@pytest.mark.parametrize(("lengths", "budget", "share"), [
    ([], 100, 0),
    ([10, 20], 100, 20),  # everything fits
    ([10, 20, 300], 100, 70),  # the short ones whole, the long one the rest
    ([50, 50, 50], 100, 33),
    ([5, 1000, 1000], 105, 50),
    ([1000], 0, 0),
])
def test_equal_share(lengths: list[int], budget: int, share: int) -> None:
    assert equal_share(lengths, budget) == share
    assert sum(min(n, share) for n in lengths) <= budget
