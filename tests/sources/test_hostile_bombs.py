"""Hostile ``.pt`` files that ask for unbounded time or memory in their values.

A value of 2**60 leaves shared by reference (a few hundred bytes pickled) in any
field, a few bytes that ask for gigabytes (a huge memo index, ``list(range)``), a
list nested 200,000 deep: loading, flattening, showing a span and writing the
page all stay bounded, and the benign sample beside the bomb still loads.
"""

from __future__ import annotations

import resource
from pathlib import Path

import pytest
import torch

from slime_trace_widget import DumpError, TraceTimeline
from slime_trace_widget.sources.loading import load_dump, load_frames
from slime_trace_widget.view.details import span_detail
from tests.support.hostile_pickles import (
    BENIGN_SPANS,
    EMPTY_LIST,
    NONE,
    benign_sample,
    benign_spans,
    dag,
    dump_stream,
    hostile_sample,
    op_call,
    op_global,
    op_value,
    time_limit,
    write_zip,
)


@pytest.mark.parametrize("where", ["attrs", "name", "span_id", "source", "status", "label",
                                   "reward", "trace_id", "attr_key"])
def test_shared_reference_bombs_stay_bounded(tmp_path: Path, where: str) -> None:
    """A 2**60-leaf value (a few hundred bytes pickled) in any field: str(), repr() and the
    value converters used to expand it; everything must stay bounded."""
    bomb: object = dag(60)
    sample = hostile_sample("none")
    start, _, end = sample["trace"]["events"]
    targets = {"attrs": (end, "attrs", {"bomb": bomb}), "name": (start, "name", bomb),
               "span_id": (end, "span_id", bomb), "source": (sample["metadata"], "source", bomb),
               "status": (sample, "status", bomb), "label": (sample, "label", bomb),
               "reward": (sample, "reward", {"parts": bomb}),
               "trace_id": (sample["trace"], "trace_id", bomb),
               "attr_key": (end, "attrs", {frozenset({"k"}): bomb})}
    holder, key, value = targets[where]
    holder[key] = value
    path = tmp_path / "rollout_1.pt"
    torch.save([benign_sample(), sample], path)
    with time_limit(60):
        frames = load_frames(path)
        assert len(frames.spans) == 3
        for index in frames.span_core.index:
            span_detail(frames, index)
        TraceTimeline(frames).to_html(tmp_path / "page.html")
    assert benign_spans(frames) == BENIGN_SPANS


@pytest.mark.parametrize("bomb", [
    b"N" + b"r" + (2**26).to_bytes(4, "little"),  # LONG_BINPUT: the memo grows to 2**27 slots
    op_call(op_global("builtins", "list"),
            op_call(op_global("builtins", "range"), op_value(3 * 10**7))),
], ids=["memo index", "list(range)"])
def test_memory_bombs_fail_within_the_budget(tmp_path: Path, bomb: bytes) -> None:
    """A few bytes asking for gigabytes (a 2**30 memo index zero-fills 16 GiB: the fuzzer's
    mutations of small.pt got the test process OOM-killed) fail as a DumpError in the
    rehearsal child, whose cap is lowered so these 1 GB versions show it without needing
    the real sizes. This process's own limits are never touched."""
    limits = resource.getrlimit(resource.RLIMIT_DATA)
    path = tmp_path / "rollout_1.pt"
    write_zip(path, dump_stream(bomb, "metadata"))
    with pytest.raises(DumpError, match="memory"):
        load_dump(path, memory_limit=256 << 20)
    assert resource.getrlimit(resource.RLIMIT_DATA) == limits
    benign = tmp_path / "rollout_2.pt"
    write_zip(benign, dump_stream(NONE, "metadata"))
    assert benign_spans(load_frames(benign)) == BENIGN_SPANS


@pytest.mark.parametrize("where", ["span_end_attrs", "metadata", "label", "event_name"])
def test_deeply_nested_values_stay_bounded(tmp_path: Path, where: str) -> None:
    """A list nested 200,000 deep (pickle builds it without recursion; torch.save could
    not write it): every converter stops at a fixed depth, nothing recurses into it."""
    n = 200_000
    path = tmp_path / "rollout_1.pt"
    write_zip(path, dump_stream(EMPTY_LIST * n + b"a" * (n - 1), where))
    with time_limit(60):
        widget = TraceTimeline.from_dump(path)
        frames = widget.frames
        assert len(frames.spans) == 3 and len(frames.events) == 1
        for index in frames.span_core.index:
            span_detail(frames, index)
        widget.to_html(tmp_path / "page.html")
    assert benign_spans(frames) == BENIGN_SPANS
