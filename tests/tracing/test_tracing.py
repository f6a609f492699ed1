"""Tests for the recording API: what it writes must be slime's own records, key by key.

The reference is ``tests/fixtures/small.pt`` (written by slime's tracing code): the
carrier layout, the key sequence of every record type, and the PD child spans are
compared against it. The rest covers nesting under concurrency, errors and
cancellation, retries, the decorator, cross-process continuation, and the promise
that tracing never raises into the traced code.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import math
import os
import pickle
import random
import subprocess
import sys
import threading
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from slime_trace_widget import tracing
from slime_trace_widget.tracing import (
    MAX_ERROR_MESSAGE_CHARS,
    TRACE_CHILDREN_KEY,
    TraceHandle,
    bind_trace,
    bind_trace_carrier,
    build_sglang_meta_trace_attrs,
    export_trace,
    get_clock,
    import_trace,
    merge_trace,
    set_clock,
    trace_event,
    trace_function,
    trace_next_attempt,
    trace_span,
    use_clock,
)

FIXTURES = Path(__file__).parents[1] / "fixtures"
REPO = Path(__file__).resolve().parents[2]
LOGGER = "slime_trace_widget.tracing"


@dataclass
class FakeSample:
    """Stands in for slime's ``Sample``: a dataclass with no declared ``trace`` field."""

    index: int = 0
    group_index: int = 0
    response: str = ""


class SlottedSample:
    """A sample that cannot take a ``trace`` attribute."""

    __slots__ = ("group_index", "index")

    def __init__(self, index: int = 0) -> None:
        self.index = index
        self.group_index = 0


class Box:
    """Holds a sample one level down, for ``target_getter``."""

    def __init__(self, sample: FakeSample) -> None:
        self.sample = sample


def events_of(sample: Any) -> list[dict[str, Any]]:
    carrier = sample["trace"] if isinstance(sample, dict) else sample.trace
    return carrier["events"]


def named(sample: Any, name: str, kind: str | None = None) -> list[dict[str, Any]]:
    return [e for e in events_of(sample) if e["name"] == name and kind in (None, e["type"])]


def span_pair(sample: Any, name: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The only start record named ``name`` and its end (None when open)."""
    (start,) = named(sample, name, "span_start")
    ends = [e for e in named(sample, name, "span_end") if e["span_id"] == start["span_id"]]
    assert len(ends) <= 1
    return start, (ends[0] if ends else None)


def step_clock(start: float = 1_000.0, step: float = 0.5):
    """A deterministic clock: each reading is ``step`` later than the previous one."""
    state = {"now": start - step}

    def now() -> float:
        state["now"] += step
        return state["now"]

    return now


@pytest.fixture(scope="module")
def fixture_samples() -> list[dict[str, Any]]:
    return torch.load(FIXTURES / "small.pt", weights_only=False)["samples"]


@pytest.fixture
def debug_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    return caplog


# --------------------------------------------------------------------------- format


def test_new_carrier_has_the_fixture_layout(fixture_samples):
    sample = FakeSample(index=12, group_index=3)
    handle = bind_trace(sample)

    assert list(sample.trace) == list(fixture_samples[0]["trace"])
    assert sample.trace == {
        "version": 1,
        "trace_id": handle.trace_id,
        "events": [],
        "sample_id": 12,
        "group_id": 3,
        "attempt": 0,
    }
    assert uuid.UUID(handle.trace_id).version == 4
    assert uuid.UUID(handle.trace_id).hex == handle.trace_id
    assert bind_trace(sample).carrier is sample.trace


def test_dict_samples_get_their_carrier_under_trace():
    sample = {"index": 5, "group_index": 2}
    with trace_span(sample, "generate"):
        pass
    assert sample["trace"]["sample_id"] == 5
    assert sample["trace"]["group_id"] == 2
    assert [e["type"] for e in events_of(sample)] == ["span_start", "span_end"]


def test_a_carrier_passed_as_target_is_written_directly():
    sample = FakeSample()
    bind_trace(sample)
    with trace_span(sample.trace, "direct"):
        pass
    assert "trace" not in sample.trace
    assert [e["name"] for e in events_of(sample)] == ["direct", "direct"]


@pytest.mark.parametrize("existing", [None, {}, {"trace_id": "abc", "events": None}])
def test_missing_or_partial_carriers_are_completed(existing):
    sample = {"index": 1, "group_index": 0, "trace": existing}
    handle = bind_trace(sample)
    carrier = sample["trace"]
    assert handle.carrier is carrier
    assert carrier["events"] == []
    assert carrier["trace_id"]
    assert carrier["version"] == 1
    assert carrier["attempt"] == 0
    if existing is not None:
        assert carrier is existing


def test_record_key_sequences_match_the_fixture(fixture_samples):
    fixture_shapes = {
        (event["type"], tuple(event)) for s in fixture_samples for event in s["trace"]["events"]
    }
    sample = FakeSample()
    with trace_span(sample, "group", attrs={"group_size": 1}):
        with trace_span(sample, "generate") as span:
            span.set("completion_tokens", 3)
            trace_event(sample, "tool_result", {"chars": 10})
        with trace_span(sample, "reward", attrs={"k": 1}):
            pass
    our_shapes = {(event["type"], tuple(event)) for event in events_of(sample)}

    assert our_shapes == fixture_shapes


def test_records_hold_carrier_identity_clock_time_and_copied_attrs():
    sample = FakeSample(index=7, group_index=2)
    attrs = {"max_new_tokens": 16}
    with use_clock(step_clock(100.0, 1.0)), trace_span(sample, "generate", attrs=attrs) as span:
        span.update({"completion_tokens": 4})
    attrs["max_new_tokens"] = 0

    start, end = span_pair(sample, "generate")
    assert start["ts"] == 100.0
    assert end["ts"] == 101.0
    for record in (start, end):
        assert record["trace_id"] == sample.trace["trace_id"]
        assert (record["sample_id"], record["group_id"], record["attempt"]) == (7, 2, 0)
        assert record["span_id"] == span.span_ids[0]
    assert start["attrs"] == {"max_new_tokens": 16}
    assert end["attrs"] == {"completion_tokens": 4}
    assert "parent_span_id" not in start
    assert "parent_span_id" not in end


def test_empty_attrs_leave_the_key_out():
    sample = FakeSample()
    with trace_span(sample, "s", attrs={}) as span:
        span.update({})
        trace_event(sample, "e", attrs={})
    assert all("attrs" not in event for event in events_of(sample))


# --------------------------------------------------------------------------- nesting


def test_nested_spans_and_events_point_at_the_innermost_open_span():
    sample = FakeSample()
    with trace_span(sample, "outer"):
        trace_event(sample, "in_outer")
        with trace_span(sample, "inner"):
            trace_event(sample, "in_inner")
        with trace_span(sample, "sibling"):
            pass
    trace_event(sample, "after")

    outer, _ = span_pair(sample, "outer")
    inner, _ = span_pair(sample, "inner")
    sibling, _ = span_pair(sample, "sibling")
    assert "parent_span_id" not in outer
    assert inner["parent_span_id"] == outer["span_id"]
    assert sibling["parent_span_id"] == outer["span_id"]
    assert named(sample, "in_outer")[0]["parent_span_id"] == outer["span_id"]
    assert named(sample, "in_inner")[0]["parent_span_id"] == inner["span_id"]
    assert "parent_span_id" not in named(sample, "after")[0]


def test_nesting_is_tracked_per_trace():
    first, second = FakeSample(index=0), FakeSample(index=1)
    with trace_span(first, "a"), trace_span(second, "b"):
        trace_event(first, "first_event")
    a, _ = span_pair(first, "a")
    b, _ = span_pair(second, "b")
    assert "parent_span_id" not in b
    assert named(first, "first_event")[0]["parent_span_id"] == a["span_id"]


def test_group_span_writes_one_pair_per_member():
    group = [FakeSample(index=i, group_index=0) for i in range(4)]
    with (
        use_clock(step_clock()),
        trace_span(group, "group_reward_model", attrs={"group_size": 4}) as span,
    ):
        span.set("score_mean", 0.5)
        with trace_span(group[2], "member_work"):
            pass

    starts = [span_pair(s, "group_reward_model")[0] for s in group]
    ends = [span_pair(s, "group_reward_model")[1] for s in group]
    assert len({start["span_id"] for start in starts}) == 4
    assert list(span.span_ids) == [start["span_id"] for start in starts]
    assert len({start["ts"] for start in starts}) == 1
    assert len({end["ts"] for end in ends}) == 1
    assert all(start["attrs"] == {"group_size": 4} for start in starts)
    assert all(end["attrs"] == {"score_mean": 0.5} for end in ends)
    assert ends[0]["attrs"] is not ends[1]["attrs"]
    member, _ = span_pair(group[2], "member_work")
    assert member["parent_span_id"] == starts[2]["span_id"]


def test_tuples_handles_and_nested_lists_are_targets():
    samples = [FakeSample(index=i) for i in range(3)]
    handle = bind_trace(samples[0])
    with trace_span((handle, [samples[1], (samples[2],)]), "mixed"):
        pass
    assert all(len(events_of(s)) == 2 for s in samples)


def test_async_with_is_supported():
    sample = FakeSample()

    async def main() -> None:
        async with trace_span(sample, "outer"):
            await asyncio.sleep(0)
            async with trace_span(sample, "inner"):
                await asyncio.sleep(0)

    asyncio.run(main())
    outer, outer_end = span_pair(sample, "outer")
    inner, inner_end = span_pair(sample, "inner")
    assert inner["parent_span_id"] == outer["span_id"]
    assert outer_end is not None
    assert inner_end is not None


def test_thousand_concurrent_tasks_never_mix_parents():
    groups = [[FakeSample(index=g * 8 + i, group_index=g) for i in range(8)] for g in range(125)]
    rng = random.Random(7)

    async def rollout(sample: FakeSample) -> None:
        with trace_span(sample, "generate_and_rm"):
            await asyncio.sleep(rng.random() / 1000)
            async with trace_span(sample, "sglang_generate"):
                await asyncio.sleep(0)
                trace_event(sample, "tick")
                await asyncio.sleep(rng.random() / 1000)
            with trace_span(sample, "reward_model"):
                await asyncio.sleep(0)

    async def group_rollout(group: list[FakeSample]) -> None:
        async with trace_span(group, "generate_and_rm_group"):
            await asyncio.gather(*(rollout(sample) for sample in group))

    async def main() -> None:
        await asyncio.gather(*(group_rollout(group) for group in groups))

    asyncio.run(main())
    for sample in (s for group in groups for s in group):
        group_span, group_end = span_pair(sample, "generate_and_rm_group")
        outer, outer_end = span_pair(sample, "generate_and_rm")
        generate, generate_end = span_pair(sample, "sglang_generate")
        reward, reward_end = span_pair(sample, "reward_model")
        (tick,) = named(sample, "tick")
        assert outer["parent_span_id"] == group_span["span_id"]
        assert generate["parent_span_id"] == outer["span_id"]
        assert reward["parent_span_id"] == outer["span_id"]
        assert tick["parent_span_id"] == generate["span_id"]
        assert None not in (group_end, outer_end, generate_end, reward_end)
        assert {e["trace_id"] for e in events_of(sample)} == {sample.trace["trace_id"]}


def test_concurrent_branches_of_one_sample_keep_their_own_parents():
    sample = FakeSample()

    async def branch(tag: str) -> None:
        with trace_span(sample, f"branch_{tag}"):
            await asyncio.sleep(0)
            with trace_span(sample, f"leaf_{tag}"):
                await asyncio.sleep(0)

    async def main() -> None:
        with trace_span(sample, "turn"):
            await asyncio.gather(branch("a"), branch("b"))

    asyncio.run(main())
    turn, _ = span_pair(sample, "turn")
    for tag in "ab":
        branch_start, _ = span_pair(sample, f"branch_{tag}")
        leaf, _ = span_pair(sample, f"leaf_{tag}")
        assert branch_start["parent_span_id"] == turn["span_id"]
        assert leaf["parent_span_id"] == branch_start["span_id"]


# --------------------------------------------------------------------------- errors, cancellation


def test_exception_records_error_attrs_and_reraises():
    sample = FakeSample()
    with pytest.raises(ValueError, match="bad tool"), trace_span(sample, "tool") as span:
        span.set("turn", 2)
        raise ValueError("bad tool")
    _, end = span_pair(sample, "tool")
    assert end["attrs"] == {"turn": 2, "error_type": "ValueError", "error_message": "bad tool"}


def test_record_error_false_ends_the_span_without_error_attrs():
    sample = FakeSample()
    with pytest.raises(KeyError), trace_span(sample, "lookup", record_error=False):
        raise KeyError("x")
    _, end = span_pair(sample, "lookup")
    assert end is not None
    assert "attrs" not in end


def test_error_message_is_truncated_and_unprintable_errors_are_survived():
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no str")

    sample = FakeSample()
    with pytest.raises(RuntimeError), trace_span(sample, "long"):
        raise RuntimeError("x" * 10_000)
    with pytest.raises(Unprintable), trace_span(sample, "odd"):
        raise Unprintable()

    message = span_pair(sample, "long")[1]["attrs"]["error_message"]
    assert message.startswith("x" * MAX_ERROR_MESSAGE_CHARS)
    assert len(message) < MAX_ERROR_MESSAGE_CHARS + 40
    odd = span_pair(sample, "odd")[1]["attrs"]
    assert odd["error_type"] == "Unprintable"
    assert "Unprintable" in odd["error_message"]


def test_cancelled_task_leaves_its_span_open_and_restores_the_parent():
    sample = FakeSample()

    async def main() -> None:
        started = asyncio.Event()

        async def doomed() -> None:
            async with trace_span(sample, "doomed"):
                started.set()
                await asyncio.sleep(10)

        with trace_span(sample, "outer"):
            task = asyncio.create_task(doomed())
            await started.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            with trace_span(sample, "after"):
                pass
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(doomed_again(), timeout=0.01)

    async def doomed_again() -> None:
        with trace_span(sample, "timed_out"):
            await asyncio.sleep(10)

    asyncio.run(main())
    outer, _ = span_pair(sample, "outer")
    doomed, doomed_end = span_pair(sample, "doomed")
    after, _ = span_pair(sample, "after")
    timed_out, timed_out_end = span_pair(sample, "timed_out")
    assert doomed["parent_span_id"] == outer["span_id"]
    assert doomed_end is None
    assert timed_out_end is None
    assert "parent_span_id" not in timed_out
    assert after["parent_span_id"] == outer["span_id"]


def test_keyboard_interrupt_and_generator_exit_leave_spans_open():
    sample = FakeSample()
    with pytest.raises(KeyboardInterrupt), trace_span(sample, "interrupted"):
        raise KeyboardInterrupt

    def stream():
        with trace_span(sample, "streaming"):
            yield 1
            yield 2

    generator = stream()
    next(generator)
    generator.close()
    with trace_span(sample, "next"):
        pass

    assert span_pair(sample, "interrupted")[1] is None
    assert span_pair(sample, "streaming")[1] is None
    assert "parent_span_id" not in span_pair(sample, "next")[0]


# --------------------------------------------------------------------------- retries


def test_span_open_across_next_attempt_starts_and_ends_in_different_attempts():
    sample = FakeSample()
    with trace_span(sample, "generate_and_rm"):
        trace_next_attempt(sample, {"reason": "engine_abort", "attempt": 99})
        with trace_span(sample, "sglang_generate"):
            pass
    trace_next_attempt(sample)

    start, end = span_pair(sample, "generate_and_rm")
    assert (start["attempt"], end["attempt"]) == (0, 1)
    first, second = named(sample, "attempt_start")
    assert first["attrs"] == {"attempt": 1, "reason": "engine_abort"}
    assert list(first["attrs"]) == ["attempt", "reason"]
    assert first["attempt"] == 1
    assert first["parent_span_id"] == start["span_id"]
    assert span_pair(sample, "sglang_generate")[0]["attempt"] == 1
    assert second["attrs"] == {"attempt": 2}
    assert sample.trace["attempt"] == 2


def test_next_attempt_on_a_group_bumps_every_member():
    group = [FakeSample(index=i) for i in range(3)]
    trace_next_attempt(group)
    assert [s.trace["attempt"] for s in group] == [1, 1, 1]


# --------------------------------------------------------------------------- SGLang metadata


def _generation_spans(samples: list[dict[str, Any]]):
    """Each fixture generation span that has PD children: its start and its record slice."""
    for sample in samples:
        events = sample["trace"]["events"]
        for index, start in enumerate(events):
            if start["type"] != "span_start" or start["name"] != "sglang_generate":
                continue
            end_index = next(
                j
                for j in range(index + 1, len(events))
                if events[j]["type"] == "span_end" and events[j]["span_id"] == start["span_id"]
            )
            records = events[index : end_index + 1]
            if any(r["name"].startswith("sglang_pd_") for r in records):
                yield start, records


def _meta_from_records(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The SGLang meta_info that must have produced these fixture records."""
    meta: dict[str, Any] = {}
    for record in records:
        attrs = record.get("attrs", {})
        if record["name"] == "sglang_pd_summary" or (
            record["type"] == "span_end"
            and record["name"].startswith("sglang_pd_")
            and "phase" not in attrs
        ):
            meta.update(attrs)
    end_attrs = dict(records[-1].get("attrs", {}))
    meta["id"] = end_attrs.pop("sglang_request_id")
    meta["finish_reason"] = {"type": end_attrs.pop("finish_reason"), "matched": 2}
    meta.update(end_attrs)
    meta["unused_field"] = "ignored"
    return meta


@pytest.mark.parametrize("fixture", ["small.pt", "rollout_eval_3.pt", "edge_bare_list.pt"])
def test_pd_child_spans_reproduce_the_fixture_records_exactly(fixture):
    loaded = torch.load(FIXTURES / fixture, weights_only=False)
    samples = loaded["samples"] if isinstance(loaded, dict) else loaded
    replayed = 0
    for start, expected in _generation_spans(samples):
        carrier = {
            "version": 1,
            "trace_id": start["trace_id"],
            "events": [],
            "sample_id": start["sample_id"],
            "group_id": start["group_id"],
            "attempt": start["attempt"],
        }
        handle = bind_trace_carrier(carrier, parent_span_id=start.get("parent_span_id"))
        clock = iter([start["ts"], expected[-1]["ts"]]).__next__
        with (
            use_clock(clock),
            trace_span(handle, "sglang_generate", attrs=start.get("attrs")) as span,
        ):
            span.update(build_sglang_meta_trace_attrs(_meta_from_records(expected)))

        ours = carrier["events"]
        assert len(ours) == len(expected)
        ids = {
            a["span_id"]: b["span_id"]
            for a, b in zip(ours, expected, strict=True)
            if "span_id" in a
        }
        renamed = [
            {k: ids.get(v, v) if k in ("span_id", "parent_span_id") else v for k, v in r.items()}
            for r in ours
        ]
        assert [list(r.items()) for r in renamed] == [list(r.items()) for r in expected]
        replayed += 1
    assert replayed > 0


def test_sglang_meta_attrs_mapping():
    meta = {
        "prompt_tokens": 12,
        "completion_tokens": 7,
        "cached_tokens": 3,
        "queue_time": None,
        "e2e_latency": 1.5,
        "decode_throughput": 80.0,
        "finish_reason": {"type": "length", "length": 7},
        "id": "req-1",
        "weight_version": "w3",
    }
    assert build_sglang_meta_trace_attrs(meta) == {
        "prompt_tokens": 12,
        "completion_tokens": 7,
        "cached_tokens": 3,
        "e2e_latency": 1.5,
        "decode_throughput": 80.0,
        "finish_reason": "length",
        "sglang_request_id": "req-1",
    }
    assert build_sglang_meta_trace_attrs({"finish_reason": "stop"}) == {"finish_reason": "stop"}
    assert build_sglang_meta_trace_attrs({"finish_reason": {"type": None}}) == {}


class ExplodingMeta(dict):
    def get(self, key, default=None):
        raise RuntimeError("boom")


@pytest.mark.parametrize("meta", [None, [], "meta", 5, object(), ExplodingMeta(prompt_tokens=1)])
def test_sglang_meta_attrs_never_raise(meta):
    assert build_sglang_meta_trace_attrs(meta) == {}


def test_pd_segments_without_usable_durations_are_left_out():
    meta = {
        "pd_prefill_bootstrap_queue_duration": 0.0,
        "pd_prefill_bootstrap_duration": -1.0,
        "pd_prefill_alloc_wait_duration": float("nan"),
        "pd_prefill_forward_duration": "fast",
        "pd_prefill_transfer_queue_duration": None,
        "pd_decode_prealloc_duration": True,
        "pd_decode_forward_duration": 2.0,
        "pd_transfer_total_mb": 4.5,
        "pd_prefill_retry_count": 0,
    }
    attrs = build_sglang_meta_trace_attrs(meta)
    sample = FakeSample()
    with use_clock(iter([10.0, 11.0]).__next__), trace_span(sample, "sglang_generate") as span:
        span.update(attrs)

    names = [(e["type"], e["name"]) for e in events_of(sample)]
    assert names == [
        ("span_start", "sglang_generate"),
        ("span_start", "sglang_pd_decode"),
        ("span_start", "sglang_pd_decode_forward"),
        ("span_end", "sglang_pd_decode_forward"),
        ("span_end", "sglang_pd_decode"),
        ("event", "sglang_pd_summary"),
        ("span_end", "sglang_generate"),
    ]
    decode, decode_end = span_pair(sample, "sglang_pd_decode")
    assert (decode["ts"], decode_end["ts"]) == (10.0, 12.0)
    assert decode_end["attrs"] == {"phase": "decode", "duration_s": 2.0}
    summary = named(sample, "sglang_pd_summary")[0]
    assert summary["attrs"] == {"pd_transfer_total_mb": 4.5, "pd_prefill_retry_count": 0}
    assert summary["ts"] == 12.0
    assert "attrs" not in span_pair(sample, "sglang_generate")[1]


def test_no_pd_keys_means_no_children_and_pd_keys_never_reach_the_parent():
    assert TRACE_CHILDREN_KEY not in build_sglang_meta_trace_attrs({"prompt_tokens": 1})
    attrs = build_sglang_meta_trace_attrs({"pd_decode_forward_duration": 1.0, "id": "r"})
    assert set(attrs) == {"sglang_request_id", TRACE_CHILDREN_KEY}
    assert json.loads(json.dumps(attrs))[TRACE_CHILDREN_KEY] == attrs[TRACE_CHILDREN_KEY]


def test_pd_children_are_written_into_every_group_member():
    group = [FakeSample(index=i) for i in range(2)]
    attrs = build_sglang_meta_trace_attrs({"pd_prefill_forward_duration": 0.1})
    with trace_span(group, "sglang_generate") as span:
        span.set(TRACE_CHILDREN_KEY, attrs[TRACE_CHILDREN_KEY])
    for member, parent_id in zip(group, span.span_ids, strict=True):
        phase, _ = span_pair(member, "sglang_pd_prefill")
        assert phase["parent_span_id"] == parent_id


# --------------------------------------------------------------------------- decorator


def test_trace_function_sync_with_target_parameter():
    @trace_function("generate_and_rm", target="sample")
    def generate_and_rm(args: Any, sample: FakeSample, evaluation: bool = False) -> str:
        trace_event(sample, "inside")
        return "done"

    sample = FakeSample()
    assert generate_and_rm(None, sample) == "done"
    assert generate_and_rm(None, sample=sample, evaluation=True) == "done"
    starts = named(sample, "generate_and_rm", "span_start")
    assert len(starts) == 2
    assert named(sample, "inside")[0]["parent_span_id"] == starts[0]["span_id"]


def test_trace_function_async_group_with_attrs_getter():
    @trace_function(
        "generate_and_rm_group",
        target="group",
        attrs_getter=lambda args, group, sampling_params, evaluation=False: {
            "group_size": len(group)
        },
    )
    async def generate_and_rm_group(args, group, sampling_params, evaluation=False):
        await asyncio.sleep(0)
        return len(group)

    group = [FakeSample(index=i) for i in range(3)]
    assert asyncio.run(generate_and_rm_group(None, group, {})) == 3
    assert inspect.iscoroutinefunction(generate_and_rm_group)
    for member in group:
        start, end = span_pair(member, "generate_and_rm_group")
        assert start["attrs"] == {"group_size": 3}
        assert end is not None


def test_trace_function_on_methods_and_with_target_getter():
    class Worker:
        @trace_function("work", target="sample")
        def work(self, sample: FakeSample) -> int:
            return 1

        @trace_function("boxed", target_getter=lambda self, box: box.sample)
        async def boxed(self, box: Box) -> int:
            return 2

    sample = FakeSample()
    worker = Worker()
    assert worker.work(sample) == 1
    assert asyncio.run(worker.boxed(Box(sample))) == 2
    assert span_pair(sample, "work")[1] is not None
    assert span_pair(sample, "boxed")[1] is not None


def test_trace_function_preserves_the_signature():
    def plain(args: Any, sample: FakeSample, *, flag: bool = False) -> int:
        """Docstring kept."""
        return 0

    wrapped = trace_function("plain", target="sample")(plain)
    assert inspect.signature(wrapped) == inspect.signature(plain)
    assert wrapped.__name__ == "plain"
    assert wrapped.__doc__ == "Docstring kept."
    assert wrapped.__wrapped__ is plain


def test_trace_function_infers_the_target_and_warns_once(caplog):
    caplog.set_level(logging.WARNING, logger=LOGGER)

    @trace_function("inferred")
    def inferred(args: Any, sampling_params: dict, sample: FakeSample) -> str:
        return "ok"

    sample = FakeSample()
    assert inferred({"x": 1}, {"temperature": 1.0}, sample) == "ok"
    assert inferred({"x": 1}, {"temperature": 1.0}, sample=sample) == "ok"
    warnings = [r for r in caplog.records if "inferred the trace target" in r.getMessage()]
    assert len(warnings) == 1
    assert len(named(sample, "inferred", "span_start")) == 2


def test_trace_function_falls_back_to_the_open_span_or_runs_untraced():
    @trace_function("helper")
    def helper(value: int) -> int:
        return value + 1

    group = [FakeSample(index=i) for i in range(2)]
    with trace_span(group, "outer") as outer:
        assert helper(1) == 2
    assert helper(2) == 3
    for member, parent_id in zip(group, outer.span_ids, strict=True):
        (start,) = named(member, "helper", "span_start")
        assert start["parent_span_id"] == parent_id


def test_trace_function_with_missing_target_argument_just_calls(caplog):
    caplog.set_level(logging.WARNING, logger=LOGGER)

    @trace_function("opt", target="sample")
    def optional(sample: FakeSample | None = None) -> str:
        return "called"

    @trace_function("typo", target="sampel")
    def typo(sample: FakeSample) -> str:
        return "called"

    sample = FakeSample()
    assert optional() == "called"
    assert typo(sample) == "called"
    assert not hasattr(sample, "trace")
    assert any("has no parameter 'sampel'" in r.getMessage() for r in caplog.records)


def test_trace_function_records_errors_and_reraises():
    @trace_function("fails", target="sample")
    async def fails(sample: FakeSample) -> None:
        raise ConnectionError("reward server down")

    sample = FakeSample()
    with pytest.raises(ConnectionError):
        asyncio.run(fails(sample))
    assert span_pair(sample, "fails")[1]["attrs"]["error_type"] == "ConnectionError"


# --------------------------------------------------------------------------- never raises


def _assert_logged(caplog: pytest.LogCaptureFixture) -> None:
    failures = [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.DEBUG]
    assert failures
    assert any(r.exc_info for r in failures)


def test_carrier_replaced_by_a_non_dict_mid_span(debug_log):
    sample = FakeSample()
    with trace_span(sample, "outer") as span:
        sample.trace = "corrupted by user code"
        with trace_span(sample, "inner"):
            trace_event(sample, "event")
        trace_next_attempt(sample)
        span.set("k", 1)
    assert sample.trace == "corrupted by user code"


def test_handle_carrier_replaced_mid_span(debug_log):
    handle = bind_trace(FakeSample())
    with trace_span(handle, "outer"):
        handle.carrier = None
        trace_event(handle, "event")
        trace_next_attempt(handle)
    _assert_logged(debug_log)


@pytest.mark.parametrize("events", ["oops", ("a",), 42])
def test_events_that_are_not_a_list(debug_log, events):
    sample = {"index": 0, "trace": {"trace_id": "t", "events": events, "attempt": 0}}

    @trace_function("work", target="sample")
    def work(sample: dict) -> int:
        trace_event(sample, "tick")
        return 5

    assert work(sample) == 5
    assert sample["trace"]["events"] == events
    _assert_logged(debug_log)


def test_raising_getters_leave_the_call_alone(debug_log):
    def explode(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("getter failed")

    @trace_function("by_getter", target_getter=explode)
    def by_getter(sample: FakeSample) -> str:
        return "ran"

    @trace_function("attrs", target="sample", attrs_getter=explode)
    def with_attrs(sample: FakeSample) -> str:
        return "ran"

    sample = FakeSample()
    assert by_getter(sample) == "ran"
    assert with_attrs(sample) == "ran"
    start, end = span_pair(sample, "attrs")
    assert "attrs" not in start
    assert end is not None
    _assert_logged(debug_log)


def test_odd_attr_values_are_kept_picklable(tmp_path):
    class Local:
        pass

    sample = FakeSample()
    lock = threading.Lock()
    odd = {
        "fn": lambda x: x,
        "obj": object(),
        "local": Local(),
        "lock": lock,
        "nested": {"fn": print, "ok": [1, 2]},
        "array": np.arange(3),
        "tensor": torch.ones(2),
        "scalar": np.float32(1.5),
        "nan": float("nan"),
        7: "int key",
    }
    with trace_span(sample, "odd", attrs=odd) as span:
        span.update(odd)
        trace_event(sample, "odd_event", attrs=odd)
        span.update(["not", "a", "mapping"])
        span.update({TRACE_CHILDREN_KEY: [{"type": "span", "name": "x"}, 5, None]})
        span.set(["unhashable"], 1)

    start, end = span_pair(sample, "odd")
    assert start["attrs"]["fn"].startswith("<function")
    assert start["attrs"]["lock"].startswith("<unlocked _thread.lock")
    assert start["attrs"]["7"] == "int key"
    assert start["attrs"]["nested"] == {"fn": print, "ok": [1, 2]}
    assert start["attrs"]["array"] is odd["array"]
    assert math.isnan(end["attrs"]["nan"])
    path = tmp_path / "odd.pt"
    torch.save({"samples": [sample]}, path)
    loaded = torch.load(path, weights_only=False)["samples"][0]
    assert len(events_of(loaded)) == len(events_of(sample))


def test_samples_that_refuse_attributes_and_none_targets(debug_log):
    slotted = SlottedSample()

    @trace_function("work", target="sample")
    def work(sample: Any) -> str:
        return "ran"

    assert work(slotted) == "ran"
    assert work(None) == "ran"
    with trace_span(None, "nothing") as span:
        span.set("k", 1)
    trace_event(None, "nothing")
    trace_next_attempt(None)
    assert span.span_ids == ()
    assert isinstance(bind_trace(slotted), TraceHandle)
    assert export_trace(None)["trace_id"] is None
    assert merge_trace(None, {"events": []}) == 0
    _assert_logged(debug_log)


def test_a_failing_clock_loses_records_not_the_call(debug_log):
    def broken() -> float:
        raise OSError("clock gone")

    sample = FakeSample()
    with use_clock(broken), trace_span(sample, "s"):
        trace_event(sample, "e")
        result = "ran"
    assert result == "ran"
    assert events_of(sample) == []
    _assert_logged(debug_log)


def test_non_mapping_attrs_are_ignored(debug_log):
    sample = FakeSample()
    with trace_span(sample, "s", attrs=[("a", 1)]):
        trace_event(sample, "e", attrs=np.arange(3))
    assert all("attrs" not in e for e in events_of(sample))


# --------------------------------------------------------------------------- clock


def test_set_clock_is_global_and_use_clock_is_per_context():
    previous = set_clock(lambda: 5.0)
    try:
        sample = FakeSample()
        trace_event(sample, "global")
        with use_clock(lambda: 9.0):
            assert get_clock()() == 9.0
            trace_event(sample, "context")
    finally:
        assert set_clock(previous)() == 5.0
    assert get_clock() is previous
    assert [e["ts"] for e in events_of(sample)] == [5.0, 9.0]


def test_concurrent_simulations_keep_separate_clocks():
    samples = {"a": FakeSample(index=0), "b": FakeSample(index=1)}

    async def simulate(tag: str, now: float) -> None:
        with use_clock(lambda: now):
            await asyncio.sleep(0)
            with trace_span(samples[tag], "step"):
                await asyncio.sleep(0)

    async def main() -> None:
        await asyncio.gather(simulate("a", 1.0), simulate("b", 2.0))

    asyncio.run(main())
    assert {e["ts"] for e in events_of(samples["a"])} == {1.0}
    assert {e["ts"] for e in events_of(samples["b"])} == {2.0}


# --------------------------------------------------------------------------- cross-process

REMOTE_WORKER = """
import json, sys
from slime_trace_widget.tracing import import_trace, trace_event, trace_span

handle = import_trace(json.load(sys.stdin))
with trace_span(handle, "remote_reward", attrs={"pid": 1}) as span:
    with trace_span(handle, "remote_inner"):
        trace_event(handle, "remote_tick")
    span.set("score", 0.75)
trace_event(handle, "remote_done")
json.dump(handle.carrier, sys.stdout)
"""


def test_trace_continues_in_another_process_and_merges_back():
    sample = FakeSample(index=4, group_index=1)
    with trace_span(sample, "reward_model") as local:
        payload = export_trace(sample)
        assert pickle.loads(pickle.dumps(payload)) == payload
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        done = subprocess.run(
            [sys.executable, "-c", REMOTE_WORKER],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            env=env,
            check=True,
            timeout=120,
        )
        remote = json.loads(done.stdout)
        assert merge_trace(sample, remote) == 7  # 6 records and the trace_import mark

    local_id = local.span_ids[0]
    assert payload["parent_span_id"] == local_id
    remote_span, remote_end = span_pair(sample, "remote_reward")
    inner, _ = span_pair(sample, "remote_inner")
    assert remote_span["parent_span_id"] == local_id
    assert inner["parent_span_id"] == remote_span["span_id"]
    assert named(sample, "remote_tick")[0]["parent_span_id"] == inner["span_id"]
    assert named(sample, "remote_done")[0]["parent_span_id"] == local_id
    mark = named(sample, "trace_import")
    assert len(mark) == 1 and mark[0]["parent_span_id"] == local_id
    assert mark[0]["type"] == "event" and "attrs" not in mark[0]
    assert remote_end["attrs"] == {"score": 0.75}
    all_ids = {e["span_id"] for e in events_of(sample) if "span_id" in e}
    links = {e["parent_span_id"] for e in events_of(sample) if "parent_span_id" in e}
    assert links <= all_ids
    assert {(e["sample_id"], e["group_id"]) for e in events_of(sample)} == {(4, 1)}


def test_export_import_merge_in_process():
    group = [FakeSample(index=i) for i in range(2)]
    with trace_span(group, "group_rm"):
        payloads = [export_trace(member) for member in group]
    assert json.loads(json.dumps(payloads)) == payloads
    assert export_trace(group)["trace_id"] is None

    trace_next_attempt(group[1])
    remote = [import_trace(payload) for payload in payloads]
    with trace_span(remote, "remote_group"):
        trace_next_attempt(remote[0])
    stranger = bind_trace(FakeSample(index=9))
    trace_event(stranger, "foreign")

    merged = merge_trace(group, [r.carrier for r in remote] + [stranger])
    assert merged == 7  # 5 records and one trace_import mark per imported member
    assert group[0].trace["attempt"] == 1
    assert group[1].trace["attempt"] == 1
    for member, payload in zip(group, payloads, strict=True):
        start, end = span_pair(member, "remote_group")
        assert start["parent_span_id"] == payload["parent_span_id"]
        assert end is not None
    assert not named(group[0], "foreign")
    assert merge_trace(group[0], events_of(group[1])) == 0


def test_a_failing_clock_loses_the_import_mark_not_the_identity(debug_log):
    sample = FakeSample(index=3)
    with trace_span(sample, "local"):
        payload = export_trace(sample)

    def broken() -> float:
        raise OSError("clock gone")

    with use_clock(broken):
        handle = import_trace(payload)
    assert handle.trace_id == payload["trace_id"] and handle.carrier["events"] == []
    assert handle.parent_span_id == payload["parent_span_id"]
    _assert_logged(debug_log)


def test_import_of_garbage_gives_a_usable_handle(debug_log):
    handle = import_trace("not a payload")
    with trace_span(handle, "s"):
        pass
    assert len(handle.carrier["events"]) == 2
    assert import_trace(export_trace(None)).carrier["events"] == []  # no trace: no mark
    outside = export_trace(FakeSample())  # no open span: no parent to mark under
    assert outside["trace_id"] and import_trace(outside).carrier["events"] == []
    _assert_logged(debug_log)
    assert bind_trace_carrier(None).carrier["events"] == []
    assert bind_trace_carrier(5).carrier["events"] == []


# --------------------------------------------------------------------------- threads, saving


def test_threads_writing_to_one_fresh_carrier_lose_nothing():
    sample = FakeSample()
    per_thread = 500

    def work(worker: int) -> None:
        for i in range(per_thread):
            with trace_span(sample, f"w{worker}", attrs={"i": i}):
                trace_event(sample, "tick")

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(work, range(8)))

    events = events_of(sample)
    assert len(events) == 8 * per_thread * 3
    counts = Counter(e["type"] for e in events)
    assert counts["span_start"] == counts["span_end"] == 8 * per_thread
    starts = {e["span_id"]: e for e in events if e["type"] == "span_start"}
    for tick in (e for e in events if e["type"] == "event"):
        assert tick["parent_span_id"] in starts
    assert all("parent_span_id" not in e for e in starts.values())


def test_samples_survive_torch_save_and_load(tmp_path):
    objects = [FakeSample(index=i, group_index=0) for i in range(2)]
    dicts = [{"index": i, "group_index": 1} for i in range(2)]
    with trace_span(objects + dicts, "group"):
        for sample in objects + dicts:
            with trace_span(sample, "generate") as span:
                span.update(build_sglang_meta_trace_attrs({"pd_decode_forward_duration": 0.5}))
    path = tmp_path / "rollout_0.pt"
    torch.save({"rollout_id": 0, "samples": objects + dicts}, path)
    loaded = torch.load(path, weights_only=False)["samples"]
    assert [s.trace for s in loaded[:2]] == [s.trace for s in objects]
    assert [s["trace"] for s in loaded[2:]] == [s["trace"] for s in dicts]


# --------------------------------------------------------------------------- properties

PROGRAM = st.recursive(
    st.sampled_from(["event", "attempt"]),
    lambda inner: st.lists(inner, max_size=4).map(tuple),
    max_leaves=20,
)


def _run(sample: FakeSample, program: Any, counter: Counter[str]) -> None:
    if program == "event":
        trace_event(sample, "e")
        counter["event"] += 1
    elif program == "attempt":
        trace_next_attempt(sample)
        counter["event"] += 1
    else:
        counter["span"] += 1
        with trace_span(sample, "s"):
            for step in program:
                _run(sample, step, counter)


@settings(max_examples=60, deadline=None, database=None)
@given(PROGRAM)
def test_any_program_gives_a_well_nested_tree(program):
    sample = FakeSample()
    counter: Counter[str] = Counter()
    _run(sample, (program,) if isinstance(program, str) else program, counter)

    open_spans: list[str] = []
    seen: set[str] = set()
    for record in events_of(sample):
        if record["type"] == "span_end":
            assert "parent_span_id" not in record
            assert open_spans.pop() == record["span_id"]
            continue
        assert record.get("parent_span_id") == (open_spans[-1] if open_spans else None)
        if record["type"] == "span_start":
            assert record["span_id"] not in seen
            seen.add(record["span_id"])
            open_spans.append(record["span_id"])
    assert not open_spans
    assert len(seen) == counter["span"]
    assert len(events_of(sample)) == 2 * counter["span"] + counter["event"]
    assert sample.trace["attempt"] == sum(
        1 for e in events_of(sample) if e["name"] == "attempt_start"
    )


def test_span_ids_are_valid_uuid4_hex():
    sample = FakeSample()
    with trace_span(sample, "s") as span:
        pass
    parsed = uuid.UUID(span.span_ids[0])
    assert parsed.version == 4
    assert parsed.hex == span.span_ids[0]
    assert tracing.TRACE_VERSION == 1
