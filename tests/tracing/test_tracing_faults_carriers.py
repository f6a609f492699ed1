"""Fault injection: user code damaging the trace state while spans are open.

Carriers replaced, cleared or deleted, event lists swapped or cleared, records
mutated, trace ids broken, with three nested spans open, on object and dict
samples; a group member whose carrier is broken costs only its own records;
handles pointed at garbage; deep-copied samples sharing one trace id; and one span
object entered twice.

Every case checks that the user's code gets its own result or its own exception
(the very object), and that the samples still save, load and flatten
(``assert_loadable``). Injected faults are counted for ``test_tracing_faults_total.py``.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

import pytest

from slime_trace_widget.tracing import (
    TRACE_CHILDREN_KEY,
    bind_trace,
    build_sglang_meta_trace_attrs,
    trace_event,
    trace_next_attempt,
    trace_span,
)
from tests.support.trace_faults import Result, assert_loadable, assert_well_formed, inject
from tests.support.traced_samples import FakeSample, carrier_of, end_of, events_of, starts

pytestmark = pytest.mark.usefixtures("isolated_context")


# --------------------------------------------------------------------------- corrupted carriers


def _replace_carrier(value: Any) -> Callable[[Any], None]:
    def corrupt(sample: Any) -> None:
        if isinstance(sample, dict):
            sample["trace"] = value
        else:
            sample.trace = value

    return corrupt


def _set_events(value: Any) -> Callable[[Any], None]:
    def corrupt(sample: Any) -> None:
        carrier_of(sample)["events"] = value

    return corrupt


def _delete_trace(sample: Any) -> None:
    if isinstance(sample, dict):
        del sample["trace"]
    else:
        del sample.trace


def _mutate_records(sample: Any) -> None:
    """Damage the records already written, the way user code poking at them could."""
    events = events_of(sample)
    events[0]["ts"] = "yesterday"
    del events[1]["span_id"]
    events[1]["attrs"] = ["not", "a", "dict"]
    events[1]["attempt"] = "third"
    events.append(None)
    events.append({"type": "span_end", "name": 7})
    events.append({"type": "mystery", "name": "x", "ts": 1.0})


def _clear_carrier(sample: Any) -> None:
    carrier_of(sample).clear()


def _unhashable_trace_id(sample: Any) -> None:
    carrier_of(sample)["trace_id"] = ["not", "hashable"]


def _drop_trace_id(sample: Any) -> None:
    del carrier_of(sample)["trace_id"]


def _damage_attempt(sample: Any) -> None:
    carrier_of(sample)["attempt"] = None


CORRUPTIONS: dict[str, Callable[[Any], None]] = {
    "carrier -> str": _replace_carrier("corrupted by user code"),
    "carrier -> list": _replace_carrier([1, 2, 3]),
    "carrier -> int": _replace_carrier(42),
    "carrier -> None": _replace_carrier(None),
    "carrier -> empty dict": _replace_carrier({}),
    "carrier cleared in place": _clear_carrier,
    "trace attribute deleted": _delete_trace,
    "events -> tuple": _set_events(("a", "b")),
    "events -> None": _set_events(None),
    "events -> str": _set_events("events"),
    "events -> dict": _set_events({"0": {}}),
    "events list cleared": lambda sample: events_of(sample).clear(),
    "records mutated": _mutate_records,
    "trace_id unhashable": _unhashable_trace_id,
    "trace_id deleted": _drop_trace_id,
    "attempt -> None": _damage_attempt,
}


def _corrupted_rollout(target: Any, member: Any, corrupt: Callable[[Any], None]) -> Result:
    """Nested spans on ``target`` with ``member``'s carrier damaged while three are open."""
    result = Result()
    with trace_span(target, "group", attrs={"size": 4}) as group:
        with trace_span(member, "generate") as generate:
            trace_event(member, "before")
            with trace_span(target, "turn"):
                corrupt(member)
                with trace_span(member, "tool", attrs={"k": 1}) as tool:
                    trace_event(target, "tick", {"n": 1})
                    tool.update(build_sglang_meta_trace_attrs({"pd_decode_forward_duration": 1}))
                trace_next_attempt(member, {"why": "fault"})
            generate.set("tokens", 3)
        group.set("done", True)
    return result


@pytest.mark.parametrize("dict_sample", [False, True], ids=["object", "dict"])
@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_carrier_corrupted_while_nested_spans_are_open(corruption, dict_sample, tmp_path):
    def make(i: int) -> Any:
        return {"index": i, "group_index": 0} if dict_sample else FakeSample(index=i)

    group = [make(i) for i in range(4)]
    for sample in group:
        bind_trace(sample)
    inject(f"carrier: {corruption}")

    result = _corrupted_rollout(group, group[1], CORRUPTIONS[corruption])

    assert isinstance(result, Result)
    for healthy in (group[0], group[2], group[3]):
        assert_well_formed(healthy)
        for name in ("group", "turn"):
            (start,) = starts(healthy, name)
            assert end_of(healthy, start) is not None
        assert len([e for e in events_of(healthy) if e["name"] == "tick"]) == 1
    assert_loadable(group, tmp_path / "corrupted.pt")


def test_group_member_with_a_broken_carrier_costs_only_its_own_records():
    """Regression: one unhashable trace id made the whole group span lose its records."""
    group = [FakeSample(index=i) for i in range(4)]
    for sample in group:
        bind_trace(sample)
    group[1].trace["trace_id"] = ["broken"]
    inject("group member with unhashable trace_id")

    with trace_span(group, "group_reward_model") as span:
        trace_event(group, "scored")
    assert len(span.span_ids) == 3
    assert events_of(group[1]) == []
    for healthy in (group[0], group[2], group[3]):
        (start,) = starts(healthy, "group_reward_model")
        assert end_of(healthy, start) is not None
        (scored,) = [e for e in events_of(healthy) if e["name"] == "scored"]
        assert scored["parent_span_id"] == start["span_id"]


def test_handle_whose_carrier_is_swapped_for_garbage_mid_group(tmp_path):
    group = [FakeSample(index=i) for i in range(3)]
    handles = [bind_trace(sample) for sample in group]
    inject("handle.carrier replaced", 3)
    with trace_span(handles, "group"):
        handles[0].carrier = None
        handles[1].carrier = "garbage"
        handles[2].carrier = {"events": None}
        trace_event(handles, "tick")
        with trace_span(handles, "inner") as inner:
            inner.update({TRACE_CHILDREN_KEY: build_sglang_meta_trace_attrs(
                {"pd_prefill_forward_duration": 0.1})[TRACE_CHILDREN_KEY]})
    assert inner.span_ids == ()
    assert_loadable(group, tmp_path / "handles.pt")


def test_deep_copied_samples_keep_their_own_parents(tmp_path):
    """slime fans a prompt out into a group with deepcopy: copies share one trace_id.

    Regression: nesting was keyed by trace id alone, so every member's child span
    took the last member's group span as parent, an id its own carrier lacks.
    """
    prompt = FakeSample()
    bind_trace(prompt)
    group = [copy.deepcopy(prompt) for _ in range(4)]
    for index, member in enumerate(group):
        member.index = index
    inject("deep-copied carriers share a trace_id", len(group))

    async def rollout(member: FakeSample) -> None:
        async with trace_span(member, "generate"):
            await asyncio.sleep(0)
            trace_event(member, "tick")

    async def main() -> None:
        with trace_span(group, "group_generate"):
            for member in group:
                with trace_span(member, "prepare"):
                    trace_event(member, "ready")
            await asyncio.gather(*(rollout(member) for member in group))

    asyncio.run(main())
    for member in group:
        assert_well_formed(member)
        (group_start,) = starts(member, "group_generate")
        for name in ("prepare", "generate"):
            (start,) = starts(member, name)
            assert start["parent_span_id"] == group_start["span_id"]
    assert_loadable(group, tmp_path / "copies.pt")


# --------------------------------------------------------------------------- span reuse


def test_a_span_entered_twice_records_one_pair_and_leaks_no_parent():
    """Regression: re-entering one span object left it active in the context for good."""
    sample = FakeSample()
    span = trace_span(sample, "reused")
    inject("span entered twice (nested)")
    with span, span:
        trace_event(sample, "inside")
    inject("span entered again after closing")
    with span:
        pass
    trace_event(sample, "after")

    (start,) = starts(sample, "reused")
    assert end_of(sample, start) is not None
    inside = next(e for e in events_of(sample) if e["name"] == "inside")
    after = next(e for e in events_of(sample) if e["name"] == "after")
    assert inside["parent_span_id"] == start["span_id"]
    assert "parent_span_id" not in after
    assert_well_formed(sample)
