"""The query grammar (``slime_trace_widget/answers/query.py``) on the cases the widget shares.

``js/test/fixtures/query_cases.json`` holds parse cases and a hand-built trace
with what each query keeps; ``js/test/query.test.js`` runs the same cases over
``js/test/fixtures/query_trace.json``, that trace's payload and attribute tables
as a snapshot embeds them, written here. Regenerate it after a deliberate
change with ``PYTHONPATH=. python tests/answers/test_query.py``.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from slime_trace_widget import TraceTimeline
from slime_trace_widget.answers import query
from slime_trace_widget.frames import TraceFrames
from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.view.page.snapshot import _details
from slime_trace_widget.view.payload import encode
from tests.frames.test_frames import frames_of, rec, sample

ROOT = Path(__file__).parents[2]
FIXTURES = Path(__file__).parents[1] / "fixtures"
CASES_FILE = ROOT / "js" / "test" / "fixtures" / "query_cases.json"
TRACE_FILE = ROOT / "js" / "test" / "fixtures" / "query_trace.json"
CASES = json.loads(CASES_FILE.read_text(encoding="utf-8"))


def case_frames() -> TraceFrames:
    """The shared cases' trace as frames."""
    samples = []
    for spec in CASES["trace"]:
        records = [rec(kind, name, ts, sid, pid, attempt, attrs)
                   for kind, name, ts, sid, pid, attempt, attrs in spec["records"]]
        samples.append(sample(*records, index=spec["index"], metadata={"source": spec["source"]},
                              status=spec["status"], label=spec["label"]))
    return frames_of(*samples)


def _span_ids(frames: TraceFrames) -> list[str]:
    core = frames.span_core
    index = frames.samples["sample_index"].to_numpy()[core["sample_row"].to_numpy()]
    return [f"{i}:{s}" for i, s in zip(index, core["span_id"], strict=True)]


def _event_ids(frames: TraceFrames) -> list[str]:
    core = frames.event_core
    index = frames.samples["sample_index"].to_numpy()[core["sample_row"].to_numpy()]
    return [f"{i}:{n}" for i, n in zip(index, core["name"], strict=True)]


def trace_fixture() -> dict[str, Any]:
    """The cases' trace as the widget gets it: the payload, the id of each payload
    span / event / sample, and the attribute tables a snapshot page embeds."""
    frames = case_frames()
    view = encode(frames)
    buffers: dict[str, bytes] = {}
    details = _details(frames, view, 2000, 10_000, buffers)
    spans, events = _span_ids(frames), _event_ids(frames)
    span_rows = frames.span_core.index.get_indexer(view.span_index)
    event_rows = frames.event_core.index.get_indexer(view.event_index)
    return {
        "payload": {**view.payload, "buffers": {name: base64.b64encode(raw).decode()
                                                for name, raw in view.payload["buffers"].items()}},
        "spans": [spans[i] for i in span_rows],
        "events": [events[i] for i in event_rows],
        "samples": [int(v) for v in frames.samples["sample_index"].iloc[view.sample_rows]],
        "attrs": {key: details[key] for key in ("span_start_attrs", "span_end_attrs",
                                                "event_attrs")},
        "attr_buffers": {name: base64.b64encode(raw).decode() for name, raw in buffers.items()},
    }


def trace_text() -> str:
    return json.dumps(trace_fixture(), indent=1, sort_keys=True, allow_nan=False) + "\n"


def test_trace_fixture_is_current() -> None:
    assert TRACE_FILE.read_text(encoding="utf-8") == trace_text(), (
        f"{TRACE_FILE.relative_to(ROOT)} is stale: regenerate with "
        f"PYTHONPATH=. python {Path(__file__).relative_to(ROOT)}")


# --------------------------------------------------------------------------- parsing


@pytest.mark.parametrize("case", CASES["parse"], ids=lambda c: c["text"] or "(empty)")
def test_parse_cases(case: dict) -> None:
    if "error" in case:
        with pytest.raises(query.QueryError) as caught:
            query.parse(case["text"])
        assert (caught.value.message, caught.value.pos) == (case["error"]["message"],
                                                            case["error"]["pos"])
        assert isinstance(caught.value, ValueError)
        assert f"at character {case['error']['pos'] + 1}" in str(caught.value)
    else:
        assert query.parse(case["text"]) == case["terms"]


# --------------------------------------------------------------------------- evaluation


@pytest.mark.parametrize("case", CASES["evaluate"], ids=lambda c: c["query"] or "(empty)")
def test_evaluate_cases(case: dict) -> None:
    frames = case_frames()
    found = query.match(frames, case["query"])
    index = frames.samples["sample_index"].to_numpy()
    assert sorted(int(i) for i in index[found.samples]) == case["samples"]
    assert found.item_terms == case.get("items", True)
    drawn = ~frames.span_core["pd_detail"].to_numpy()
    spans = [s for s, keep in zip(_span_ids(frames), found.spans & drawn, strict=True) if keep]
    events = [e for e, keep in zip(_event_ids(frames), found.events, strict=True) if keep]
    if case.get("items", True):
        assert sorted(spans) == sorted(case["spans"])
        assert sorted(events) == sorted(case["events"])
    else:  # every item of the kept samples
        kept = {f"{i}:" for i in case["samples"]}
        assert {s.split(":")[0] + ":" for s in spans} <= kept
        assert len(spans) == int(drawn[np.isin(frames.span_core["sample_row"],
                                               np.flatnonzero(found.samples))].sum())


@pytest.mark.parametrize("case", CASES["glob"],
                         ids=lambda c: f"{c['pattern'][:24]!r}~{c['text'][:24]!r}")
def test_glob_cases(case: dict) -> None:
    assert query.glob_match(case["pattern"], case["text"]) is case["match"]


@pytest.mark.parametrize("case", CASES["fold"], ids=lambda c: c["text"])
def test_fold_cases(case: dict) -> None:
    assert query.fold_case(case["text"]) == case["folded"]


def test_a_word_folds_alike_wherever_it_stands() -> None:
    """Lower-casing writes "Σ" as "ς" at a word's end and "σ" inside one, so a word's fold
    depended on what followed it: "ΟΔΟΣ" alone and in "ΟΔΟΣΟΣ", or before a glob's star.
    Folded, a text is its pieces folded one by one, which is what lets a glob's pieces
    and a bare word's substring search fold apart from the text around them."""
    pieces = [case["text"] for case in CASES["fold"]] + ["*", " ", "\x01", "a"]
    for first in pieces:
        for second in pieces:
            assert query.fold_case(first + second) == (
                query.fold_case(first) + query.fold_case(second)), (first, second)


def _names(frames: TraceFrames, mask: np.ndarray) -> list[str]:
    return sorted(frames.span_core["name"].astype(str)[mask])


def test_a_pathological_glob_on_a_long_value_is_linear() -> None:
    """``*a*a*a*a*b`` on 300 a's took 34 s as a backtracking regex (and the kernel's
    query_attrs handler with it); ten stars would never end."""
    long = "a" * 300
    frames = frames_of(sample(rec("span_start", "hit", 0, "h", None, 0, {"v": long + "b"}),
                              rec("span_end", "hit", 1, "h"),
                              rec("span_start", "miss", 0, "m", None, 0, {"v": long}),
                              rec("span_end", "miss", 1, "m"),
                              rec("event", "e", 0.5, None, None, 0, {"v": long})))
    found = query.match(frames, "v=*a*a*a*a*a*a*a*a*a*a*b")
    assert _names(frames, found.spans) == ["hit"] and not found.events.any()
    assert _names(frames, query.match(frames, f"-v={long} v=a*").spans) == ["hit"]


def test_globs_run_once_per_distinct_value(monkeypatch: pytest.MonkeyPatch) -> None:
    records = []
    for i in range(40):
        records += [rec("span_start", "tool", i, f"s{i}", None, 0,
                        {"tool": ["python", "search"][i % 2]}),
                    rec("span_end", "tool", i + 1, f"s{i}")]
    frames = frames_of(sample(*records))
    calls: list[str] = []
    real = query.glob_match
    monkeypatch.setattr(query, "glob_match", lambda p, t: calls.append(t) or real(p, t))
    assert query.match(frames, "tool=py*").spans.sum() == 20
    assert sorted(calls) == ["python", "search"]
    calls.clear()
    assert query.match(frames, "name:t*").spans.sum() == 40
    # per table (spans, events): its categories, and "" that a missing name reads
    assert sorted(calls) == ["", "", "tool"]


def test_int64_attributes_past_2_53_compare_without_raising() -> None:
    """A seed of 1700000000000000001 does not fit a double exactly: it rounds (as in the
    widget's numbers) instead of failing the whole query."""
    seed = 1_700_000_000_000_000_001
    frames = frames_of(sample(rec("span_start", "big", 0, "b", None, 0, {"seed": seed}),
                              rec("span_end", "big", 1, "b"),
                              rec("span_start", "one", 0, "o", None, 0, {"seed": 1}),
                              rec("span_end", "one", 1, "o"),
                              rec("event", "e", 0.5, None, None, 0, {"seed": seed})))
    for text, spans, events in (("seed=1", ["one"], 0), ("seed>1", ["big"], 1),
                                ("-seed=1", ["big"], 1), (f"seed={seed}", ["big"], 1),
                                ("seed!=1", ["big"], 1)):
        found = query.match(frames, text)
        assert (_names(frames, found.spans), int(found.events.sum())) == (spans, events), text
    spans, events = query.attr_masks(frames, query.parse("seed>1"), frames.span_core.index,
                                     frames.event_core.index)
    assert _names(frames, spans) == ["big"] and events.all()


def test_an_attempt_past_int64_compares_as_the_nearest_double() -> None:
    """As the widget reads it: 10**308 stays a double, more digits are infinite; neither
    overflows comparing with the attempts nor trips Python's 4,300-digit int limit."""
    frames = frames_of(sample(rec("span_start", "first", 0, "a", None, 0),
                              rec("span_end", "first", 1, "a"),
                              rec("span_start", "retry", 1, "b", None, 1),
                              rec("span_end", "retry", 2, "b")))
    for text, spans in (("attempt:" + "9" * 309, []), ("attempt<1" + "0" * 308, ["first", "retry"]),
                        ("attempt<" + "9" * 5000, ["first", "retry"]),
                        ("attempt>=" + "9" * 19, []), ("attempt:1", ["retry"])):
        assert _names(frames, query.match(frames, text).spans) == spans, text[:30]


def test_a_key_typed_differently_at_start_and_end_compares_per_span() -> None:
    """``mix`` is a number in the start records and text in the end records: each span
    compares its own value (end over start) as what it is, as a snapshot page does."""
    frames = frames_of(sample(rec("span_start", "a", 0, "a", None, 0, {"mix": 5}),
                              rec("span_end", "a", 1, "a"),
                              rec("span_start", "b", 0, "b", None, 0, {"mix": 7}),
                              rec("span_end", "b", 1, "b", None, 0, {"mix": "x"}),
                              rec("span_start", "c", 0, "c", None, 0, {"mix": 9}),
                              rec("span_end", "c", 1, "c", None, 0, {"mix": "9"}),
                              rec("span_start", "d", 0, "d"),
                              rec("span_end", "d", 1, "d", None, 0, {"mix": None})))
    expected = {"mix>3": ["a"], "mix=5": ["a"], "mix=5.0": ["a"], "mix=x": ["b"],
                "mix=9": ["c"], "mix>8": [], "mix=7": [], "mix!=5": ["b", "c"],
                "-mix>3": ["b", "c", "d"], "has:mix": ["a", "b", "c"], "mix=*": ["b", "c"]}
    for text, names in expected.items():
        assert _names(frames, query.match(frames, text).spans) == names, text


def test_real_pd_spans_match_but_never_keep_a_row() -> None:
    """Child-form PD: the real sglang_pd_* spans are rows of spans (select finds them),
    but the timeline draws their [P]/[D] twins, so they alone keep no row."""
    frames = case_frames()
    samples, spans, _ = query.select(frames, "name:sglang_pd_*")
    assert sorted(spans["span_id"]) == ["d", "p"]
    assert samples.empty
    samples, spans, _ = query.select(frames, "name:generate* duration=3s")
    assert list(spans["span_id"]) == ["g [D]"] and list(samples["sample_index"]) == [0]


def test_select_returns_frames_rows_with_attributes() -> None:
    frames = case_frames()
    samples, spans, events = query.select(frames, "tool=python")
    assert list(spans["attr.tool"]) == ["python", "python"]
    assert list(events["attr.lines"]) == [3]
    assert list(samples["sample_index"]) == [0, 12]


def test_attr_masks_follow_the_given_order() -> None:
    frames = case_frames()
    terms = query.parse("has:group_size -turn>5")
    order = frames.span_core.index[::-1]
    spans, events = query.attr_masks(frames, terms, order, frames.event_core.index)
    ids = np.array(_span_ids(frames))[frames.span_core.index.get_indexer(order)]
    assert sorted(ids[spans]) == ["0:grp", "1:grp"]
    assert not events.any()


def test_attr_masks_refuse_labels_these_frames_do_not_hold() -> None:
    """A label from another view must fail, not read the last row (get_indexer's -1)."""
    frames = case_frames()
    terms = query.parse("has:group_size")
    missing = np.array([len(frames.span_core) + 5])
    with pytest.raises(KeyError, match="do not hold"):
        query.attr_masks(frames, terms, missing, frames.event_core.index)
    with pytest.raises(KeyError):
        query.attr_masks(frames, terms, frames.span_core.index, missing)


def test_check_terms_refuses_what_is_not_an_attribute_term() -> None:
    good = query.parse("k=v n>2 has:x -k!=*")
    assert query.check_terms(good) == good
    for bad in ([{"kind": "name", "neg": False, "value": "x"}],
                [{"kind": "attr", "neg": False, "key": "k", "op": ">", "value": "3"}],
                [{"kind": "attr", "neg": False, "key": "k", "op": "~", "value": "3"}],
                [{"kind": "has", "neg": 0, "key": "k"}], "k=v"):
        with pytest.raises(ValueError):
            query.check_terms(bad)


# --------------------------------------------------------------------------- the widget


def test_show_query_encodes_only_the_matches() -> None:
    frames = case_frames()
    timeline = TraceTimeline(frames)
    ids, event_ids = np.array(_span_ids(frames)), np.array(_event_ids(frames))
    timeline.show(query="name:tool*")
    view = timeline.view
    assert sorted(ids[view.span_index]) == ["0:t1", "0:t2", "12:x"]
    assert list(event_ids[view.event_index]) == ["0:tool_log"]
    assert list(frames.samples["sample_index"].iloc[view.sample_rows]) == [0, 12]
    # a top-level event (no parent span) that matches stays, its row too
    timeline.show(query="level=info")
    assert list(event_ids[timeline.view.event_index]) == ["12:note"]
    assert len(timeline.view.span_index) == 0 and len(timeline.view.sample_rows) == 1
    # with the pandas filters: a span filter keeps its spans' events, as it does alone
    timeline.show(samples=frames.samples.index[[0]], query="name:tool* -tool=search")
    assert list(ids[timeline.view.span_index]) == ["0:t1"]
    assert list(event_ids[timeline.view.event_index]) == ["0:tool_log"]
    spans = frames.span_core[frames.span_core["name"] == "tool"]
    timeline.show(spans=spans, query="tool=python")
    assert sorted(ids[timeline.view.span_index]) == ["0:t1", "12:x"]
    # sample terms only: whole rows
    timeline.show(query="status:failed")
    assert sorted(ids[timeline.view.span_index]) == ["1:a", "1:b", "1:grp"]
    assert list(event_ids[timeline.view.event_index]) == ["1:tick"]
    timeline.show()
    assert len(timeline.view.sample_rows) == len(CASES["trace"])
    with pytest.raises(ValueError, match=r'unknown is: value "bad" .*at character 8'):
        timeline.show(query="name:x -is:bad")


def test_kernel_answers_attribute_terms_per_payload_item() -> None:
    frames = case_frames()
    timeline = TraceTimeline(frames)
    sent: list[dict] = []
    timeline.send = sent.append  # type: ignore[method-assign]
    terms = query.parse("tool=python")
    timeline._on_message(timeline, {"type": "query_attrs", "req": 7, "terms": terms}, [])
    reply = sent[-1]
    assert reply["req"] == 7 and reply["n_spans"] == len(timeline.view.span_index)
    bits = np.unpackbits(np.frombuffer(base64.b64decode(reply["spans"]), np.uint8),
                         bitorder="little")[:reply["n_spans"]].astype(bool)
    ids = np.array(_span_ids(frames))[timeline.view.span_index]
    assert sorted(ids[bits]) == ["0:t1", "12:x"]
    timeline._on_message(timeline, {"type": "query_attrs", "req": 8,
                                    "terms": [{"kind": "is", "neg": False}]}, [])
    assert sent[-1]["req"] == 8 and "not an attribute term" in sent[-1]["error"]


def _bits(reply: dict, key: str) -> np.ndarray:
    n = reply["n_" + key]
    return np.unpackbits(np.frombuffer(base64.b64decode(reply[key]), np.uint8),
                         bitorder="little")[:n].astype(bool)


def test_query_attrs_answers_for_the_view_it_names() -> None:
    """Each encode gets a fresh ``meta.view_id``; the request may name one, and the
    reply echoes it: two views of equal size (the same rows, filtered otherwise) are
    told apart, and a request for a view no longer shown gets an error, not bits."""
    frames = case_frames()
    timeline = TraceTimeline(frames)
    sent: list[dict] = []
    timeline.send = sent.append  # type: ignore[method-assign]
    first = timeline.payload["meta"]["view_id"]
    assert isinstance(first, str) and timeline.view.payload["meta"]["view_id"] == first
    terms = query.parse("tool=python")
    timeline._on_message(timeline, {"type": "query_attrs", "req": 1, "terms": terms,
                                    "view": first}, [])
    assert sent[-1]["view"] == first and "error" not in sent[-1]
    timeline.show()  # the same size, another view
    second = timeline.payload["meta"]["view_id"]
    assert second != first and len(timeline.view.span_index) == sent[-1]["n_spans"]
    timeline._on_message(timeline, {"type": "query_attrs", "req": 2, "terms": terms,
                                    "view": first}, [])
    assert sent[-1]["view"] == first and "no longer shown" in sent[-1]["error"]
    assert "spans" not in sent[-1]
    timeline._on_message(timeline, {"type": "query_attrs", "req": 3, "terms": terms,
                                    "view": second}, [])
    ids = np.array(_span_ids(frames))[timeline.view.span_index]
    assert sent[-1]["view"] == second and sorted(ids[_bits(sent[-1], "spans")]) == [
        "0:t1", "12:x"]
    timeline._on_message(timeline, {"type": "query_attrs", "req": 4, "terms": terms}, [])
    assert sent[-1]["view"] is None and _bits(sent[-1], "spans").sum() == 2


def test_query_attrs_fails_rather_than_misread_a_view_of_other_frames() -> None:
    """The poller of ``follow()`` swaps frames and view while the comm thread answers:
    a view whose rows the frames do not hold is an error reply, not wrong bits."""
    frames = case_frames()
    timeline = TraceTimeline(frames)
    sent: list[dict] = []
    timeline.send = sent.append  # type: ignore[method-assign]
    bigger = frames_of(*[sample(rec("span_start", "s", 0, f"s{i}"),
                                rec("span_end", "s", 1, f"s{i}"), index=i) for i in range(40)])
    assert len(bigger.span_core) > len(frames.span_core)
    timeline._view = encode(bigger)  # a view of frames the timeline does not hold
    timeline._on_message(timeline, {"type": "query_attrs", "req": 5,
                                    "terms": query.parse("has:tool")}, [])
    assert sent[-1]["req"] == 5 and "KeyError" in sent[-1]["error"]


# --------------------------------------------------------------------------- a real dump


def test_a_real_dump_through_the_loader() -> None:
    frames = load_frames(FIXTURES / "small.pt")
    samples, spans, events = query.select(frames, "name:tool_call tool=python")
    assert len(spans) and set(spans["name"]) == {"tool_call"}
    assert (spans["attr.tool"] == "python").all()
    assert set(spans["sample_row"]) == set(samples.index)
    assert events.empty or set(events["name"]) == {"tool_call"}
    slow = query.match(frames, "duration>5s")
    durations = frames.span_core["duration"].to_numpy()[slow.spans]
    assert (durations > 5).all()
    assert slow.spans.sum() == int((frames.span_core["duration"] > 5).sum())
    failed = query.match(frames, "is:error")
    assert failed.spans.sum() == frames.span_core["error"].sum()
    word = query.match(frames, "math500")
    assert word.samples.sum() == int((frames.samples["source"] == "math500").sum())
    assert not word.item_terms


if __name__ == "__main__":
    TRACE_FILE.write_text(trace_text(), encoding="utf-8")
    sys.stdout.write(f"wrote {TRACE_FILE.relative_to(ROOT)}\n")
