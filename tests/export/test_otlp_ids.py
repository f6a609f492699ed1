"""OTLP ids are the W3C ids the package sends elsewhere: the span a ``traceparent`` names
as parent (``trace_headers``, the live stream) is the span the export sends, in the
trace it names, for every member of a group, also when they share the prompt's span.
Only a repeat (a dump given twice) gets derived ids."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest

from slime_trace_widget.frames import build_frames
from slime_trace_widget.schema import w3c_span_id, w3c_trace_id
from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.tracing import bind_trace, trace_headers, trace_span
from tests.export.test_otlp import decoded

FIXTURES = Path(__file__).parents[1] / "fixtures"


def group_with_headers(members: int, prompt_span: bool = False
                       ) -> tuple[list[dict], list[str]]:
    """A group made as slime makes one (a prompt deep-copied per member, so the members
    share its trace id, and with ``prompt_span`` the span the prompt recorded before the
    copy), each member generating under a span; the ``traceparent`` each generation
    sent."""
    prompt = {"index": 0, "group_index": 0}
    bind_trace(prompt)
    if prompt_span:
        with trace_span(prompt, "prepare_prompt"):
            pass
    group = [copy.deepcopy(prompt) for _ in range(members)]
    headers = []
    for index, sample in enumerate(group):
        sample["index"] = index
        with trace_span(sample, "sglang_generate"):
            headers.append(trace_headers(sample)["traceparent"])
    return group, headers


@pytest.mark.parametrize("prompt_span", [False, True], ids=["bare-prompt", "prompt-span"])
def test_each_generation_is_sent_as_the_span_its_traceparent_named(prompt_span: bool) -> None:
    """With a span the members share (the prompt's, copied into each), members past the
    first were taken for repeats: their traces and spans got derived ids, and the spans
    their requests to SGLang named were never sent."""
    group, headers = group_with_headers(3, prompt_span)
    spans = decoded(build_frames({"rollout_id": 1, "samples": group}))
    by_ids = {(span["trace"], span["id"]): span for span in spans}
    roots = {span["id"]: span for span in spans if span["name"] == "sample"}
    for index, header in enumerate(headers):
        _, trace, parent, _ = header.split("-")
        sent = by_ids[(trace, parent)]  # the engine's spans hang under an exported span
        assert sent["name"] == "sglang_generate"
        assert roots[sent["parent"]]["attrs"]["slime.sample_index"] == index
    assert len(roots) == 3 and len({span["id"] for span in spans}) == len(spans)
    assert len({span["trace"] for span in spans}) == 1  # the group's one trace


def test_a_dump_given_twice_keeps_the_w3c_ids_for_its_first_copy(tmp_path: Path) -> None:
    copies = [tmp_path / "a.pt", tmp_path / "b.pt"]
    for path in copies:
        shutil.copyfile(FIXTURES / "small.pt", path)
    frames = load_frames(copies)
    spans = decoded(frames)
    first = [span for span in spans if span["resource"]["slime.dump"] == "a.pt"]
    second = [span for span in spans if span["resource"]["slime.dump"] == "b.pt"]
    assert len(first) == len(second) > 0
    own = {w3c_trace_id(text) for text in frames.samples["trace_id"]}
    assert {span["trace"] for span in first} <= own
    assert not {span["trace"] for span in second} & own
    for span in first:
        if span["name"] != "sample":
            assert span["id"] == w3c_span_id(span["attrs"]["slime.span_id"])
    assert len({span["id"] for span in spans}) == len(spans)
