"""Recorded attribute values are frozen when their record is written.

Each value is recorded as the plain data a reader of the dump makes of it, so a
caller mutating a list or dict it recorded changes nothing recorded, a large
tensor is not held until the dump is saved, and for a value left alone the dump
reads back exactly as when the value itself was stored.
"""

from __future__ import annotations

import collections
import datetime
import decimal
import gc
import json
import math
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from slime_trace_widget.sources.dumps import save_dump
from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.tracing import trace_event, trace_span
from tests.support.traced_samples import end_of, events_of, starts

pytestmark = pytest.mark.usefixtures("isolated_context")


def test_mutating_a_recorded_value_changes_nothing_recorded():
    tokens = [1, 2, 3]
    meta = {"stops": ["</s>"], "ids": (7, [8])}
    members = [{"index": k, "group_index": 0} for k in range(2)]
    sample = members[0]
    with trace_span(members, "group", attrs={"tokens": tokens}):
        with trace_span(sample, "generate", attrs={"tokens": tokens, "meta": meta}) as span:
            trace_event(sample, "chunk", attrs={"tokens": tokens})
            span.set("meta", meta)
        span.set("late", tokens)  # after the close: added to the end record now
    tokens.append(4)
    meta["stops"].append("<eos>")
    meta["ids"][1].append(9)
    meta["new"] = 1

    (start,) = starts(sample, "generate")
    assert start["attrs"] == {"tokens": [1, 2, 3], "meta": {"stops": ["</s>"], "ids": [7, [8]]}}
    assert end_of(sample, start)["attrs"] == {
        "meta": {"stops": ["</s>"], "ids": [7, [8]]}, "late": [1, 2, 3]}
    (chunk,) = [record for record in events_of(sample) if record["name"] == "chunk"]
    assert chunk["attrs"] == {"tokens": [1, 2, 3]}
    for member in members:
        (group,) = starts(member, "group")
        assert group["attrs"] == {"tokens": [1, 2, 3]}


def test_a_large_tensor_is_not_held_by_its_record():
    sample = {"index": 0, "group_index": 0}
    logits = torch.zeros(4096, 8)
    alive = weakref.ref(logits)
    trace_event(sample, "logits", attrs={"logits": logits, "small": torch.arange(3)})
    del logits
    gc.collect()
    assert alive() is None, "the record still holds the tensor"
    (record,) = events_of(sample)
    assert record["attrs"] == {"logits": "<Tensor shape=(4096, 8) dtype=torch.float32>",
                               "small": [0, 1, 2]}


def _values() -> dict[str, Any]:
    """Values a rollout records, none of them summarised or an object of its own."""
    return {
        "tokens": list(range(50)),
        "tuple": (1, "a", None),
        "nested": {"a": [1, {"b": (2.5, True)}], 3: "int key", "nan": [math.nan]},
        "set": {5},
        "deque": collections.deque([1, 2]),
        "ordered": collections.OrderedDict(b=1, a=2),
        "array": np.arange(4, dtype=np.int32),
        "matrix": np.ones((2, 3), dtype=np.float32),
        "tensor": torch.tensor([[1.5, 2.0]]),
        "float32": np.float32(0.25),
        "int64": np.int64(-3),
        "bool": np.bool_(True),
        "big int": [2**80],
        "bytes": b"\x00\x01",
        "decimal": decimal.Decimal("1.25"),
        "date": datetime.date(2024, 5, 6),
        "text": "naïve ✓",
    }


def _dump(path: Path, values: dict[str, Any], frozen: bool) -> Path:
    """A dump with one span and one event carrying ``values``: recorded through the
    API (frozen), or the same records holding the values themselves, as a recorder
    that stores values unchanged writes them."""
    sample = {"index": 0, "group_index": 0}
    with trace_span(sample, "generate", attrs=values):
        trace_event(sample, "tick", attrs=values)
    if not frozen:
        for record in events_of(sample):
            if "attrs" in record:
                record["attrs"] = dict(values)
    save_dump(path, [sample], rollout_id=0)
    return path


def _read_back(path: Path) -> str:
    """The attributes the loader reads from the dump, as comparable text."""
    frames = load_frames(path)
    starts_, _ = frames.span_attrs(frames.spans.index)
    events = frames.event_attrs_json(frames.events.index, 1_000_000)
    return json.dumps([starts_, events], default=repr, sort_keys=True)


def test_the_dump_reads_back_as_when_the_values_themselves_were_stored(tmp_path):
    frozen = _read_back(_dump(tmp_path / "frozen.pt", _values(), frozen=True))
    stored = _read_back(_dump(tmp_path / "stored.pt", _values(), frozen=False))
    assert frozen == stored
    assert '"tokens": [0, 1, 2' in frozen and '"text": "na\\u00efve \\u2713"' in frozen


def test_a_bfloat16_tensor_value_leaves_the_dump_readable(tmp_path):
    """The frames worker reads tensors without torch and knows no bfloat16: stored as a
    tensor, such a value made the whole dump unreadable."""
    path = _dump(tmp_path / "bf16.pt", {"scores": torch.ones(2, dtype=torch.bfloat16)},
                 frozen=True)
    frames = load_frames(path)
    (start,), _ = frames.span_attrs(frames.spans.index)
    assert start == {"scores": [1.0, 1.0]}


def test_an_int_too_long_to_print_is_recorded_as_readers_show_it(tmp_path):
    """``str`` refuses an int of more than 4,300 digits: stored as it is at the top
    level, such a value made the whole dump unloadable (ValueError); nested in a list,
    a dict or a tuple, it stayed an int in the dump, which readers then showed as text
    and ``json.dumps`` (a reader of the raw dump) failed on."""
    huge = 10**5000
    text = "<int of 16610 bits>"
    path = _dump(tmp_path / "huge.pt", {"top": huge, "nested": [huge], "fits": 2**70,
                                        "tokens": [1, -huge], "by_key": {"n": huge},
                                        "deep": ([huge, "x"],)}, frozen=True)
    sample = torch.load(path, weights_only=False)["samples"][0]
    (start,) = starts(sample, "generate")
    stored = {"top": text, "nested": [text], "fits": 2**70, "tokens": [1, text],
              "by_key": {"n": text}, "deep": [[text, "x"]]}
    assert start["attrs"] == stored
    assert json.loads(json.dumps(start["attrs"])) == stored
    frames = load_frames(path)
    (read,), _ = frames.span_attrs(frames.spans.index)
    assert read == {**stored, "fits": "1180591620717411303424"}


def test_a_value_cut_when_recorded_reads_back_with_the_recorders_marker(tmp_path):
    """Past ``MAX_STEPS`` (100,000) elements the recorder cuts a value with a marker; the
    loader walks the recorded value again and must keep that marker, as it shows the
    value stored whole."""
    values = {"tokens": list(range(200_000)),
              "by_id": {f"k{i}": i for i in range(150_000)}}
    frozen = _read_back(_dump(tmp_path / "frozen.pt", values, frozen=True))
    stored = _read_back(_dump(tmp_path / "stored.pt", values, frozen=False))
    assert frozen == stored
    assert '99998, "\\u2026[100001 more items]"]' in frozen
    assert '"\\u2026": "[50001 more keys]"' in frozen


def test_keys_of_one_text_are_all_recorded():
    """``{1: "int", "1": "str"}`` kept only one of its keys, at the top and nested."""
    sample = {"index": 0, "group_index": 0}
    trace_event(sample, "tick", attrs={1: "int", "1": "str", "nested": {1: "int", "1": "str"}})
    (record,) = events_of(sample)
    both = {"1": "int", "1 (str)": "str"}
    assert record["attrs"] == {**both, "nested": both}


class _Unwalkable(dict):
    """A dict whose items cannot be read: its walk fails and it is described instead."""

    def items(self):  # type: ignore[override]
        raise RuntimeError("changed size during iteration")


def test_a_value_whose_walk_fails_is_described_as_readers_describe_objects():
    value = _Unwalkable({f"key{k}": k for k in range(300)})
    sample = {"index": 0, "group_index": 0}
    trace_event(sample, "tick", attrs={"v": value})
    (record,) = events_of(sample)
    text = record["attrs"]["v"]
    assert text == repr(value)[:500] + f"…[truncated {len(repr(value)) - 500} chars]"


class _Watched(torch.Tensor):
    """A tensor subclass (as a DTensor is) that fails the test if its data is read."""

    def tolist(self):  # type: ignore[override]
        raise AssertionError("the recorder read the data of a tensor subclass")

    def item(self):  # type: ignore[override]
        raise AssertionError("the recorder read the data of a tensor subclass")


def test_a_tensor_off_the_cpu_or_of_a_subclass_is_summarised_without_its_data():
    """Reading a GPU tensor's data waits for the device on every record (and breaks a
    CUDA graph being captured); a DTensor's can start a collective. Such tensors,
    however small, are recorded as their summary; a meta tensor stands for one off
    the CPU (no GPU here)."""
    sample = {"index": 0, "group_index": 0}
    watched = torch.Tensor._make_subclass(_Watched, torch.ones(3))
    trace_event(sample, "tick", attrs={"meta": torch.empty(3, device="meta"),
                                       "subclass": watched, "nested": [watched],
                                       "cpu": torch.ones(2), "param": torch.nn.Parameter(
                                           torch.ones(2))})
    (record,) = events_of(sample)
    assert record["attrs"] == {
        "meta": "<Tensor shape=(3,) dtype=torch.float32 device=meta>",
        "subclass": "<_Watched shape=(3,) dtype=torch.float32 device=cpu>",
        "nested": ["<_Watched shape=(3,) dtype=torch.float32 device=cpu>"],
        "cpu": [1.0, 1.0], "param": [1.0, 1.0]}
