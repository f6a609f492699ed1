"""Nested attribute values of a real ``.pt`` dump read back as recorded: through the
loader's workers, in this process, and through a run dataset's Parquet, in
``spans``' ``start_attrs``/``end_attrs``/``attr.<key>``, ``events``' ``attrs`` and
``span_attrs``. NaN and infinities inside lists and dicts stay floats, ints past
int64 stay ints, strings past the widget's cut stay whole."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from slime_trace_widget import load_frames
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.dataset import convert, open_dataset
from slime_trace_widget.values import MAX_STRING_CHARS, json_safe, plain_value
from tests.sources.runs import settle
from tests.support.dump_samples import events_or_empty, span_sample
from tests.support.same_values import same, same_row

pytestmark = pytest.mark.usefixtures("no_fixture_marker")

RECORDED = {"scores": [1.0, float("nan"), float("inf")], "big": [2**70],
            "deep": {"x": float("-inf"), "y": [{"z": float("nan")}]},
            "texts": ["w" * (MAX_STRING_CHARS + 10)], "top": float("nan")}
EVENT_ATTRS = {"losses": [float("nan"), -0.0, 2**64], "flag": True}


def write_dump(path: Path) -> Path:
    """A slime-format dump: sample 0's span ends with ``RECORDED`` and has an instant
    event with ``EVENT_ATTRS``; sample 1's span has plain attributes."""
    first = span_sample(0, RECORDED)
    start = events_or_empty(first)[0]
    events_or_empty(first).insert(1, {**start, "type": "event", "name": "scored",
                                      "span_id": "e" * 32, "ts": 1.5, "attrs": EVENT_ATTRS})
    torch.save({"rollout_id": 3, "samples": [first, span_sample(1, {"scores": [0.5]})]}, path)
    settle(path)
    return path


def assert_recorded(frames: TraceFrames) -> None:
    spans = frames.spans.sort_values("sample_row")
    end_attrs = spans["end_attrs"].tolist()
    assert same_row(end_attrs[0], RECORDED) and end_attrs[1] == {"scores": [0.5]}
    assert same(json.loads(spans["attr.scores"].iloc[0]), plain_value(RECORDED["scores"]))
    assert same(json.loads(spans["attr.deep"].iloc[0]), RECORDED["deep"])
    assert math.isnan(spans["attr.top"].iloc[0])
    _, (end,) = frames.span_attrs(spans.index[:1])
    assert same_row(end, RECORDED)
    (attrs,) = frames.events["attrs"].tolist()
    assert same_row(attrs, EVENT_ATTRS)


@pytest.mark.parametrize("trusted", [False, True], ids=["workers", "in process"])
def test_a_dump_reads_back_its_nested_values(tmp_path: Path, trusted: bool) -> None:
    assert_recorded(load_frames(write_dump(tmp_path / "rollout_3.pt"), trusted=trusted,
                                progress=False))


def test_a_run_dataset_reads_back_its_nested_values(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    write_dump(tmp_path / "run" / "rollout_3.pt")
    report = convert(str(tmp_path / "run" / "*.pt"), tmp_path / "ds", progress=False)
    assert len(report.converted) == 1 and not report.failed
    assert_recorded(open_dataset(tmp_path / "ds"))


def test_a_string_shared_all_over_one_value_is_cut_and_counted(tmp_path: Path) -> None:
    """A few hundred kilobytes pickled that would be 10 GB of JSON written out whole: the
    worker writes the value cut, as ``json_safe`` does, counts it, and the benign
    attributes beside it read back exactly."""
    bomb = ["s" * 100_000] * 100_000
    path = tmp_path / "rollout_2.pt"
    torch.save({"rollout_id": 2, "samples": [span_sample(0, {"bomb": bomb,
                                                             "scores": [float("nan")]})]},
               path)
    frames = load_frames(path, progress=False)
    assert frames.warnings["attr_value_cut"] == 1
    (end,) = frames.spans["end_attrs"].tolist()
    assert end["bomb"] == json_safe(bomb)  # strings cut, 400,000 characters kept in all
    assert same(end["scores"], [float("nan")])
