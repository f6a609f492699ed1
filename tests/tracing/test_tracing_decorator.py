"""``trace_function``: each call of a decorated function is one span.

Sync and async functions, methods, a ``target`` parameter, a ``target_getter``
and an ``attrs_getter``; the signature and metadata are kept; without a target
the decorator infers one (warning once), falls back to the open span, or just
calls the function; errors are recorded and re-raised.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any

import pytest

from slime_trace_widget.tracing import trace_event, trace_function, trace_span
from tests.support.traced_samples import LOGGER, Box, FakeSample, named, span_pair


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


def test_inference_passes_over_plain_dicts_with_an_index():
    """A model's ``choices`` (dicts with an ``index`` key) came before the sample: they
    were taken for the target, got a carrier written into them, and the sample none.
    A dict sample that holds a carrier is still a target."""

    @trace_function("parse_choices")
    def parse(choices: list[dict], sample: FakeSample) -> int:
        return len(choices)

    choices = [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}]
    sample = FakeSample(index=3)
    assert parse(choices, sample) == 1
    assert list(choices[0]) == ["index", "message", "finish_reason"]
    assert len(named(sample, "parse_choices", "span_start")) == 1

    @trace_function("score")
    def score(record: dict) -> None:
        return None

    bound = {"index": 5}
    with trace_span(bound, "setup"):  # gives the dict sample its carrier
        pass
    score(bound)
    assert len(named(bound, "score", "span_start")) == 1


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
