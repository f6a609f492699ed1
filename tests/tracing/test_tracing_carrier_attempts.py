"""A carrier whose ``attempt`` is not a whole int: what the recording API writes.

The format's attempt is a whole number from 0, and the loader reads a record's with
``values.bounded_int`` (numeric text, floats, numpy and tensor scalars that hold a
whole number are that number; anything else counts as ``bad_attempt`` and reads as
0). New records, retries, exports, imports and merges carry the same int the loader
would read, so a dump the recorder wrote never needs that repair, and every record
of one attempt carries one value.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from slime_trace_widget.frames import TraceFrames, build_frames
from slime_trace_widget.sources.dumps import save_dump
from slime_trace_widget.sources.loading import load_dump
from slime_trace_widget.tracing import (
    bind_trace_carrier,
    export_trace,
    import_trace,
    merge_trace,
    trace_event,
    trace_next_attempt,
    trace_span,
)
from tests.support.traced_samples import LOGGER, FakeSample, events_of, named

#: Values the loader reads as attempt 2.
READ_AS_TWO = ["2", 2.0, np.int64(2), torch.tensor(2)]
#: Values the loader counts as ``bad_attempt`` and reads as 0.
READ_AS_BAD = [None, True, 2.5, "two", -1, 2**40, [2]]


def _sample_with_attempt(value: Any) -> FakeSample:
    sample = FakeSample(index=3, group_index=1)
    sample.trace = bind_trace_carrier(None, sample_id=3, group_id=1).carrier
    sample.trace["attempt"] = value
    return sample


def _record_one_turn(sample: FakeSample) -> None:
    with trace_span(sample, "generate"):
        trace_event(sample, "tick")


def _loaded(sample: FakeSample, path: Path) -> TraceFrames:
    save_dump(path, [sample], rollout_id=0)
    return build_frames(load_dump(path))


def _attempts(sample: FakeSample) -> list[Any]:
    return [event["attempt"] for event in events_of(sample)]


@pytest.mark.parametrize("value", READ_AS_TWO, ids=repr)
def test_records_carry_the_whole_number_the_loader_reads(value, tmp_path):
    sample = _sample_with_attempt(value)
    _record_one_turn(sample)
    assert _attempts(sample) == [2, 2, 2]
    assert all(type(attempt) is int for attempt in _attempts(sample))
    assert type(sample.trace["attempt"]) is int
    trace_next_attempt(sample)
    assert named(sample, "attempt_start")[0]["attrs"] == {"attempt": 3}
    assert export_trace(sample)["attempt"] == 3
    frames = _loaded(sample, tmp_path / "two.pt")
    assert list(frames.spans["attempt"]) == [2]
    assert "bad_attempt" not in frames.warnings


@pytest.mark.parametrize("value", READ_AS_BAD, ids=repr)
def test_an_attempt_the_loader_rejects_is_recorded_as_zero_and_logged(value, tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    sample = _sample_with_attempt(value)
    _record_one_turn(sample)
    assert _attempts(sample) == [0, 0, 0]
    assert all(type(attempt) is int for attempt in _attempts(sample))
    assert any("attempt" in record.getMessage() for record in caplog.records
               if record.name == LOGGER)
    trace_next_attempt(sample)
    assert named(sample, "attempt_start")[0]["attrs"] == {"attempt": 1}
    frames = _loaded(sample, tmp_path / "bad.pt")
    assert "bad_attempt" not in frames.warnings


def test_an_attempt_damaged_while_a_span_is_open_is_read_again():
    sample = _sample_with_attempt(0)
    with trace_span(sample, "generate"):
        sample.trace["attempt"] = "1"
    assert _attempts(sample) == [0, 1]
    assert type(_attempts(sample)[1]) is int


def _merge_from_remote_attempt(value: Any) -> FakeSample:
    local = FakeSample(index=0)
    with trace_span(local, "reward"):
        payload = export_trace(local)
    remote = import_trace(payload)
    with trace_span(remote, "remote_rm"):
        pass
    remote.carrier["attempt"] = value
    assert merge_trace(local, remote.carrier) == 3
    return local


@pytest.mark.parametrize("value", [*READ_AS_TWO, 2], ids=repr)
def test_merge_raises_the_local_attempt_to_the_remote_whole_number(value):
    local = _merge_from_remote_attempt(value)
    assert local.trace["attempt"] == 2 and type(local.trace["attempt"]) is int


@pytest.mark.parametrize("value", READ_AS_BAD, ids=repr)
def test_merge_keeps_the_local_attempt_when_the_remote_one_is_no_whole_number(value):
    local = _merge_from_remote_attempt(value)
    assert local.trace["attempt"] == 0 and type(local.trace["attempt"]) is int


def test_a_payload_with_a_bad_attempt_still_continues_its_trace():
    local = FakeSample()
    with trace_span(local, "reward") as span:
        payload = export_trace(local)
    payload["attempt"] = "second"
    handle = import_trace(payload)
    assert handle.trace_id == local.trace["trace_id"]
    assert handle.carrier["attempt"] == 0
    (mark,) = named({"trace": handle.carrier}, "trace_import")
    assert mark["parent_span_id"] == span.span_ids[0]
