"""Fault injection against the recording API: tracing must never cost the traced code.

``test_tracing.py`` covers the common failures one by one; this module attacks
the promise "tracing never raises into user code" systematically: raising
getters on every kind of callable, carriers corrupted while nested spans are
open, cancellation at every await point, ``BaseException`` escapes, sixteen
threads writing into one group, broken clocks, and attribute values that refuse
``repr`` or pickling. Every case checks two things: the user's code gets its own
result or its own exception (the very object, not an equal one), and the samples
afterwards still save with ``save_dump``, load with ``load_dump`` and flatten with
``build_frames``, because a trace that breaks the dump would cost the user their
rollout data. Every injected fault is counted in :data:`FAULTS`; the last test
checks the total against :data:`MIN_FAULTS` so a run reports how much was tried.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import math
import pickle
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from slime_trace_widget import tracing
from slime_trace_widget.frames import TraceFrames, build_frames
from slime_trace_widget.sources.dumps import save_dump
from slime_trace_widget.sources.loading import load_dump
from slime_trace_widget.tracing import (
    MAX_REPR_CHARS,
    TRACE_CHILDREN_KEY,
    bind_trace,
    build_sglang_meta_trace_attrs,
    set_clock,
    trace_event,
    trace_function,
    trace_next_attempt,
    trace_span,
    use_clock,
)

#: Faults injected by this module, by kind; filled as the tests run.
FAULTS: Counter[str] = Counter()
#: The full module injects at least this many faults of this many kinds (checked last).
MIN_FAULTS = 700
MIN_FAULT_KINDS = 50

THREADS = 16
PER_THREAD = 60
GROUP_SIZE = 8


def inject(kind: str, count: int = 1) -> None:
    """Count one injected fault of ``kind``."""
    FAULTS[kind] += count


# --------------------------------------------------------------------------- samples


@dataclass
class FakeSample:
    """Stands in for slime's ``Sample``: a dataclass with no declared ``trace`` field."""

    index: int = 0
    group_index: int = 0


class Result:
    """A value only the user's code can have made: results are checked by identity."""


class UserError(Exception):
    """The user's own exception: it must come out of a traced call as the same object."""


def carrier_of(sample: Any) -> Any:
    return sample.get("trace") if isinstance(sample, dict) else getattr(sample, "trace", None)


def events_of(sample: Any) -> list[dict[str, Any]]:
    return carrier_of(sample)["events"]


def starts(sample: Any, name: str) -> list[dict[str, Any]]:
    return [e for e in events_of(sample) if e["type"] == "span_start" and e["name"] == name]


def end_of(sample: Any, start: dict[str, Any]) -> dict[str, Any] | None:
    ends = [e for e in events_of(sample)
            if e["type"] == "span_end" and e["span_id"] == start["span_id"]]
    assert len(ends) <= 1
    return ends[0] if ends else None


def assert_well_formed(sample: Any) -> None:
    """Every record of an undamaged carrier: finite time, resolvable parent, one end per start."""
    events = events_of(sample)
    ids = {e["span_id"] for e in events if e["type"] == "span_start"}
    assert len(ids) == sum(e["type"] == "span_start" for e in events)
    ended: Counter[str] = Counter()
    for event in events:
        assert math.isfinite(event["ts"])
        assert event.get("parent_span_id") in ids | {None}
        if event["type"] == "span_end":
            assert event["span_id"] in ids
            ended[event["span_id"]] += 1
    assert all(count == 1 for count in ended.values())


def assert_loadable(samples: list[Any], path: Path) -> TraceFrames:
    """The samples survive slime's save, the safe loader and the flattening."""
    save_dump(path, samples, rollout_id=0)
    loaded = load_dump(path)
    assert len(loaded.samples) == len(samples)
    frames = build_frames(loaded)
    assert len(frames.samples) == len(samples)
    return frames


@pytest.fixture(autouse=True)
def isolated_context() -> Iterator[None]:
    """Fail a test that leaves a span marked active in the test's own context.

    A leaked entry would make every later span in the process adopt a stale parent;
    it is cleared here so that one leak fails one test, not every test after it.
    """
    yield
    leaked = tracing._ACTIVE.get()
    tracing._ACTIVE.set(None)
    assert leaked is None


# --------------------------------------------------------------------------- getters


def _raise_runtime(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("getter failed")


class BrokenMapping(dict):
    """A mapping whose contents cannot be read."""

    def items(self) -> Any:
        raise RuntimeError("items failed")

    def __iter__(self) -> Any:
        raise RuntimeError("iteration failed")

    def keys(self) -> Any:
        raise RuntimeError("keys failed")


def _loop() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


#: name -> (target_getter, attrs_getter, whether the call is still traced)
GETTERS: dict[str, tuple[Callable[..., Any] | None, Callable[..., Any] | None, bool]] = {
    "attrs_getter raises": (None, _raise_runtime, True),
    "attrs_getter gives an unreadable mapping": (None, lambda *a, **k: BrokenMapping(x=1), True),
    "attrs_getter gives a non-mapping": (None, lambda *a, **k: ["not", "a", "mapping"], True),
    "target_getter raises": (_raise_runtime, None, False),
    "target_getter gives an int": (lambda *a, **k: 5, None, False),
    "target_getter gives a string": (lambda *a, **k: "sample", None, False),
    "target_getter gives a self-containing list": (lambda *a, **k: _loop(), None, False),
    "both raise": (_raise_runtime, _raise_runtime, False),
}


def _sample_getter(target_getter: Callable[..., Any] | None) -> Callable[..., Any]:
    """The real getter (reads ``sample`` from the arguments) unless a faulty one is given."""
    if target_getter is not None:
        return target_getter

    def real(*args: Any, **kwargs: Any) -> Any:
        return kwargs.get("sample", next(a for a in args if isinstance(a, FakeSample)))

    return real


def _callables(
    target_getter: Callable[..., Any] | None, attrs_getter: Callable[..., Any] | None
) -> dict[str, tuple[Callable[..., Any], bool]]:
    """Every kind of traced callable, each returning or raising what it is given."""
    getter = _sample_getter(target_getter)

    def traced(fn: Callable[..., Any]) -> Any:
        return trace_function("work", target_getter=getter, attrs_getter=attrs_getter)(fn)

    @traced
    def function(sample: FakeSample, outcome: Any) -> Any:
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    @traced
    async def coroutine(sample: FakeSample, outcome: Any) -> Any:
        await asyncio.sleep(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    class Worker:
        @traced
        def method(self, sample: FakeSample, outcome: Any) -> Any:
            return function.__wrapped__(sample, outcome)

        @traced
        async def async_method(self, sample: FakeSample, outcome: Any) -> Any:
            return await coroutine.__wrapped__(sample, outcome)

        @traced
        @staticmethod
        def static(sample: FakeSample, outcome: Any) -> Any:
            return function.__wrapped__(sample, outcome)

        @traced
        @classmethod
        def klass(cls, sample: FakeSample, outcome: Any) -> Any:
            assert cls is Worker
            return function.__wrapped__(sample, outcome)

        @traced
        @staticmethod
        async def async_static(sample: FakeSample, outcome: Any) -> Any:
            return await coroutine.__wrapped__(sample, outcome)

    worker = Worker()
    return {
        "function": (function, False),
        "async function": (coroutine, True),
        "method": (worker.method, False),
        "async method": (worker.async_method, True),
        "staticmethod via instance": (worker.static, False),
        "staticmethod via class": (Worker.static, False),
        "classmethod via instance": (worker.klass, False),
        "classmethod via class": (Worker.klass, False),
        "async staticmethod": (worker.async_static, True),
    }


def _call(fn: Callable[..., Any], is_async: bool, *args: Any) -> Any:
    return asyncio.run(fn(*args)) if is_async else fn(*args)


@pytest.mark.parametrize("getters", list(GETTERS))
def test_faulty_getters_on_every_kind_of_callable(getters, tmp_path):
    target_getter, attrs_getter, traced = GETTERS[getters]
    samples = []
    for kind, (fn, is_async) in _callables(target_getter, attrs_getter).items():
        sample = FakeSample(index=len(samples))
        samples.append(sample)
        result = Result()
        error = UserError(kind)
        inject(f"getter: {getters}", 2)

        assert _call(fn, is_async, sample, result) is result, kind
        with pytest.raises(UserError) as raised:
            _call(fn, is_async, sample, error)
        assert raised.value is error, kind

        if traced:
            assert len(starts(sample, "work")) == 2, kind
            for start in starts(sample, "work"):
                assert "attrs" not in start
            assert end_of(sample, starts(sample, "work")[1])["attrs"]["error_type"] == "UserError"
            assert_well_formed(sample)
        else:
            assert carrier_of(sample) is None, kind
    assert_loadable(samples, tmp_path / "getters.pt")


def test_healthy_getters_trace_static_and_class_methods(tmp_path):
    """The regression behind the matrix above: the descriptor must survive the decorator."""
    samples = []
    for kind, (fn, is_async) in _callables(None, lambda *a, **k: {"kind": "ok"}).items():
        sample = FakeSample(index=len(samples))
        samples.append(sample)
        result = Result()
        assert _call(fn, is_async, sample, result) is result, kind
        (start,) = starts(sample, "work")
        assert start["attrs"] == {"kind": "ok"}
        assert end_of(sample, start) is not None
    assert_loadable(samples, tmp_path / "methods.pt")


def test_getter_raising_a_base_exception_reaches_the_caller_untouched():
    """A Ctrl-C inside the user's own getter is the user's: it must not be swallowed."""
    interrupt = KeyboardInterrupt()
    ran = []

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise interrupt

    @trace_function("work", target="sample", attrs_getter=interrupted)
    def work(sample: FakeSample) -> None:
        ran.append(sample)

    inject("getter raises KeyboardInterrupt")
    with pytest.raises(KeyboardInterrupt) as raised:
        work(FakeSample())
    assert raised.value is interrupt
    assert not ran


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


# --------------------------------------------------------------------------- cancellation

#: Spans open at each await point of :func:`_nested_work`, in order.
OPEN_AT = [
    {"outer"},
    {"outer", "middle"},
    {"outer", "middle", "inner"},
    {"outer", "middle", "inner"},
    {"outer", "middle"},
    {"outer"},
    {"outer", "tail"},
]
SPAN_NAMES = {"outer", "middle", "inner", "tail"}


@trace_function("inner", target="sample")
async def _inner_step(sample: FakeSample, checkpoint: Callable[[int], Any]) -> None:
    await checkpoint(2)
    trace_event(sample, "tick")
    await checkpoint(3)


async def _nested_work(sample: FakeSample, stop_at: int, reached: asyncio.Event,
                       absorb: bool = False) -> Result:
    """Nested spans (``with``, ``async with``, a decorated coroutine) with seven await points.

    The await point ``stop_at`` blocks for an hour; every other one yields once.
    With ``absorb`` the cancellation is caught inside the outer span.
    """

    async def checkpoint(point: int) -> None:
        if point == stop_at:
            reached.set()
            await asyncio.sleep(3600)
        await asyncio.sleep(0)

    result = Result()
    async with trace_span(sample, "outer"):
        try:
            await checkpoint(0)
            with trace_span(sample, "middle"):
                await checkpoint(1)
                await _inner_step(sample, checkpoint)
                await checkpoint(4)
            await checkpoint(5)
            with trace_span(sample, "tail"):
                await checkpoint(6)
        except asyncio.CancelledError:
            if not absorb:
                raise
    return result


def _check_cancelled_trace(sample: FakeSample, stop_at: int, absorbed: bool) -> None:
    open_names = OPEN_AT[stop_at] - ({"outer"} if absorbed else set())
    started = {e["name"] for e in events_of(sample) if e["type"] == "span_start"}
    for name in started & SPAN_NAMES:
        (start,) = starts(sample, name)
        end = end_of(sample, start)
        assert (end is None) == (name in open_names), (stop_at, name)
        assert end is None or "error_type" not in end.get("attrs", {})
    assert_well_formed(sample)


@pytest.mark.parametrize("absorb", [False, True], ids=["propagates", "absorbed"])
@pytest.mark.parametrize("stop_at", range(len(OPEN_AT)))
def test_cancellation_at_every_await_point(stop_at, absorb, tmp_path):
    sample = FakeSample()
    outcome: dict[str, Any] = {}

    async def driver() -> None:
        reached = asyncio.Event()
        with trace_span(sample, "driver") as driver_span:
            task = asyncio.create_task(_nested_work(sample, stop_at, reached, absorb))
            await reached.wait()
            inject("task cancelled at an await point")
            task.cancel()
            try:
                outcome["result"] = await task
            except asyncio.CancelledError:
                outcome["cancelled"] = task.cancelled()
            with trace_span(sample, "after"):
                pass
        outcome["driver"] = driver_span.span_ids[0]

    asyncio.run(driver())

    if absorb:
        assert isinstance(outcome["result"], Result)
    else:
        assert outcome["cancelled"] is True
    (after,) = starts(sample, "after")
    assert after["parent_span_id"] == outcome["driver"]
    assert starts(sample, "outer")[0]["parent_span_id"] == outcome["driver"]
    _check_cancelled_trace(sample, stop_at, absorb)
    assert_loadable([sample], tmp_path / "cancelled.pt")


@pytest.mark.parametrize("stop_at", range(len(OPEN_AT)))
def test_wait_for_timeout_at_every_await_point(stop_at, tmp_path):
    sample = FakeSample()

    async def main() -> TimeoutError:
        with trace_span(sample, "deadline") as deadline:
            inject("asyncio.wait_for timeout")
            try:
                await asyncio.wait_for(_nested_work(sample, stop_at, asyncio.Event()), 0.02)
            except TimeoutError as exc:
                deadline.set("timed_out", True)
                caught = exc
            with trace_span(sample, "after"):
                pass
        return caught

    assert isinstance(asyncio.run(main()), TimeoutError)
    (deadline,) = starts(sample, "deadline")
    assert end_of(sample, deadline)["attrs"] == {"timed_out": True}
    assert starts(sample, "after")[0]["parent_span_id"] == deadline["span_id"]
    _check_cancelled_trace(sample, stop_at, absorbed=False)
    assert_loadable([sample], tmp_path / "timeout.pt")


def test_timeout_escaping_a_traced_span_is_recorded_as_an_error():
    """TimeoutError is an ``Exception``: the span around ``wait_for`` ends with it."""
    sample = FakeSample()

    @trace_function("bounded", target="sample")
    async def bounded(sample: FakeSample) -> None:
        await asyncio.wait_for(asyncio.sleep(3600), 0.01)

    inject("wait_for timeout through a decorated coroutine")
    with pytest.raises(TimeoutError):
        asyncio.run(bounded(sample))
    (start,) = starts(sample, "bounded")
    assert end_of(sample, start)["attrs"]["error_type"] == "TimeoutError"


# --------------------------------------------------------------------------- BaseException


class CustomBaseException(BaseException):
    """A BaseException that is none of the standard ones."""


BASE_EXCEPTIONS: dict[str, Callable[[], BaseException]] = {
    "KeyboardInterrupt": KeyboardInterrupt,
    "SystemExit": lambda: SystemExit(3),
    "GeneratorExit": GeneratorExit,
    "CancelledError": asyncio.CancelledError,
    "custom BaseException": CustomBaseException,
}


def _escape_sync_with(sample: FakeSample, error: BaseException) -> None:
    with trace_span(sample, "outer"), trace_span([sample], "escaping") as span:
        span.set("partial", 1)
        raise error


def _escape_decorated(sample: FakeSample, error: BaseException) -> None:
    @trace_function("escaping", target="sample")
    def escaping(sample: FakeSample) -> None:
        raise error

    with trace_span(sample, "outer"):
        escaping(sample)


def _awaited(coroutine: Any) -> None:
    """Await ``coroutine`` in a task and re-raise here what reached the awaiting code.

    The exception is caught by the awaiting coroutine, because that is the user
    code that must see the very object: past the task boundary asyncio itself
    replaces a CancelledError with a new one and treats KeyboardInterrupt specially.
    """

    async def main() -> BaseException | None:
        try:
            await coroutine
        except BaseException as exc:  # what the awaiting user code receives
            return exc
        return None

    caught = asyncio.run(main())
    if caught is not None:
        raise caught


def _escape_async_with(sample: FakeSample, error: BaseException) -> None:
    async def escaping() -> None:
        async with trace_span(sample, "outer"), trace_span(sample, "escaping"):
            await asyncio.sleep(0)
            raise error

    _awaited(escaping())


def _escape_async_decorated(sample: FakeSample, error: BaseException) -> None:
    @trace_function("escaping", target="sample")
    async def escaping(sample: FakeSample) -> None:
        await asyncio.sleep(0)
        raise error

    async def outer() -> None:
        with trace_span(sample, "outer"):
            await escaping(sample)

    _awaited(outer())


def _escape_generator(sample: FakeSample, error: BaseException) -> None:
    def stream() -> Iterator[int]:
        with trace_span(sample, "outer"), trace_span(sample, "escaping"):
            yield 1
            raise error

    generator = stream()
    next(generator)
    next(generator)


ESCAPES: dict[str, Callable[[FakeSample, BaseException], None]] = {
    "with": _escape_sync_with,
    "decorated": _escape_decorated,
    "async with": _escape_async_with,
    "async decorated": _escape_async_decorated,
    "generator": _escape_generator,
}


@pytest.mark.parametrize("how", list(ESCAPES))
@pytest.mark.parametrize("kind", list(BASE_EXCEPTIONS))
def test_base_exceptions_escape_unchanged_and_leave_spans_open(kind, how, tmp_path):
    sample = FakeSample()
    error = BASE_EXCEPTIONS[kind]()
    inject(f"{kind} escaping a span")

    with pytest.raises(BaseException) as raised:
        ESCAPES[how](sample, error)

    assert raised.value is error
    for name in ("outer", "escaping"):
        (start,) = starts(sample, name)
        assert end_of(sample, start) is None
    with trace_span(sample, "next"):
        pass
    assert "parent_span_id" not in starts(sample, "next")[0]
    assert_well_formed(sample)
    assert_loadable([sample], tmp_path / "escaped.pt")


# --------------------------------------------------------------------------- threads


def _thread_work(group: list[FakeSample], group_span: Any, worker: int) -> int:
    """Group spans, member spans, events and end attributes, all into the shared group."""
    for step in range(PER_THREAD):
        member = group[(worker + step) % len(group)]
        with trace_span(group, "group_step", attrs={"worker": worker}) as group_step:
            with trace_span(member, "member_step", attrs={"worker": worker}):
                trace_event(member, "tick", {"worker": worker})
                group_span.set(f"w{worker}_{step}", step)
            group_step.set("step", step)
        trace_event(group, "group_tick", {"worker": worker})
    return worker


@pytest.mark.parametrize("inherit", [False, True], ids=["own-context", "copy_context"])
def test_sixteen_threads_write_into_one_group(inherit, tmp_path):
    group = [FakeSample(index=i, group_index=0) for i in range(GROUP_SIZE)]
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often so that races get a chance
    try:
        with trace_span(group, "group_generate") as group_span, ThreadPoolExecutor(
            THREADS
        ) as pool:
            if inherit:
                futures = [pool.submit(contextvars.copy_context().run, _thread_work, group,
                                       group_span, worker) for worker in range(THREADS)]
            else:
                futures = [pool.submit(_thread_work, group, group_span, worker)
                           for worker in range(THREADS)]
            assert [future.result() for future in futures] == list(range(THREADS))
    finally:
        sys.setswitchinterval(previous)
    inject("concurrent writer threads", THREADS)

    for member in group:
        assert_well_formed(member)
        events = events_of(member)
        by_id = {e["span_id"]: e for e in events if e["type"] == "span_start"}
        (root,) = starts(member, "group_generate")
        assert len(end_of(member, root)["attrs"]) == THREADS * PER_THREAD
        assert len(starts(member, "group_step")) == THREADS * PER_THREAD
        assert sum(e["name"] == "group_tick" for e in events) == THREADS * PER_THREAD
        for start in starts(member, "group_step"):
            expected = root["span_id"] if inherit else None
            assert start.get("parent_span_id") == expected
            assert end_of(member, start)["attrs"]["step"] < PER_THREAD
        for start in starts(member, "member_step"):
            parent = by_id[start["parent_span_id"]]
            assert parent["name"] == "group_step"
            assert parent["attrs"]["worker"] == start["attrs"]["worker"]
        for tick in (e for e in events if e["name"] == "tick"):
            parent = by_id[tick["parent_span_id"]]
            assert parent["name"] == "member_step"
            assert parent["attrs"]["worker"] == tick["attrs"]["worker"]
    member_steps = sum(len(starts(member, "member_step")) for member in group)
    assert member_steps == THREADS * PER_THREAD
    frames = assert_loadable(group, tmp_path / "threads.pt")
    assert len(frames.span_core) == sum(
        sum(e["type"] == "span_start" for e in events_of(m)) for m in group)


def test_threads_bumping_attempts_and_binding_fresh_samples():
    fresh = [FakeSample(index=i) for i in range(GROUP_SIZE)]

    def work(worker: int) -> int:
        for _ in range(PER_THREAD):
            trace_next_attempt(fresh, {"worker": worker})
        return worker

    with ThreadPoolExecutor(THREADS) as pool:
        assert list(pool.map(work, range(THREADS))) == list(range(THREADS))
    inject("concurrent attempt-bumping threads", THREADS)
    for sample in fresh:
        assert sample.trace["attempt"] == THREADS * PER_THREAD
        attempts = sorted(e["attrs"]["attempt"] for e in events_of(sample))
        assert attempts == list(range(1, THREADS * PER_THREAD + 1))


def test_span_closed_in_another_thread_does_not_raise(tmp_path):
    """A span handed to a worker thread and ended there: recorded, nothing raised."""
    sample = FakeSample()

    def scenario() -> None:
        span = trace_span(sample, "handoff")
        span.__enter__()
        with ThreadPoolExecutor(1) as pool:
            assert pool.submit(span.__exit__, None, None, None).result() is False

    inject("span exited in another thread")
    contextvars.copy_context().run(scenario)
    (start,) = starts(sample, "handoff")
    assert end_of(sample, start) is not None
    assert_loadable([sample], tmp_path / "handoff.pt")


class SetsDuringPickling:
    """An attribute value whose pickling (done when the end record is cleaned) calls span.set.

    Deterministically reproduces another thread calling ``span.set`` while the span ends.
    """

    def __init__(self, span: Any) -> None:
        self.span = span

    def __reduce__(self) -> Any:
        self.span.set(f"late_{id(self)}", 1)
        return (Result, ())


def test_span_set_while_the_end_record_is_written():
    """Regression: the end attrs were iterated live, so a concurrent ``set`` lost the end."""
    sample = FakeSample()
    inject("end attrs changed while being recorded")
    with trace_span(sample, "racing") as span:
        span.set("value", SetsDuringPickling(span))
    (start,) = starts(sample, "racing")
    end = end_of(sample, start)
    assert end is not None
    assert "value" in end["attrs"]


# --------------------------------------------------------------------------- clocks


def _fault_clock(fault: Callable[[], Any], failing_call: int) -> Callable[[], Any]:
    """A clock that ticks normally except on call number ``failing_call``."""
    calls = iter(range(10**9))

    def now() -> Any:
        call = next(calls)
        return fault() if call == failing_call else 1_700_000_000.0 + call

    return now


def _raise_os_error() -> Any:
    raise OSError("clock gone")


CLOCK_FAULTS: dict[str, Callable[[], Any]] = {
    "raises": _raise_os_error,
    "NaN": lambda: float("nan"),
    "inf": lambda: float("inf"),
    "-inf": lambda: -float("inf"),
    "None": lambda: None,
    "text": lambda: "soon",
    "too big for a float": lambda: 10**400,
    "object": object,
}
#: Clock readings in :func:`_clocked_work`: outer start, inner start, event, attempt,
#: inner end, outer end.
CLOCK_CALLS = 6
SPAN_START_CALLS = (0, 1)


def _clocked_work(sample: FakeSample) -> Result:
    with trace_span(sample, "outer") as outer:
        with trace_span(sample, "inner"):
            trace_event(sample, "tick")
            trace_next_attempt(sample)
        outer.set("k", 1)
    return Result()


@pytest.mark.parametrize("fault", list(CLOCK_FAULTS))
def test_faulty_clock_at_every_reading(fault, tmp_path):
    samples = []
    for failing_call in range(CLOCK_CALLS):
        sample = FakeSample(index=failing_call)
        samples.append(sample)
        inject(f"clock: {fault}")
        with use_clock(_fault_clock(CLOCK_FAULTS[fault], failing_call)):
            assert isinstance(_clocked_work(sample), Result)
        events = events_of(sample)
        # The failed reading costs its record; a span whose start failed also loses its end.
        assert len(events) == CLOCK_CALLS - (2 if failing_call in SPAN_START_CALLS else 1)
        assert all(isinstance(e["ts"], float) and math.isfinite(e["ts"]) for e in events)
    assert_loadable(samples, tmp_path / "clock.pt")


def test_process_clock_that_always_fails(tmp_path):
    sample = FakeSample()
    previous = set_clock(_raise_os_error)
    try:
        inject("process-wide clock raising", CLOCK_CALLS)
        assert isinstance(_clocked_work(sample), Result)
    finally:
        set_clock(previous)
    assert sample.trace["attempt"] == 1
    assert events_of(sample) == []
    assert_loadable([sample], tmp_path / "no_clock.pt")


# --------------------------------------------------------------------------- attribute values


class ReprRaises:
    """Pickles fine; only ``repr`` fails."""

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class ReduceRaises:
    def __reduce__(self) -> Any:
        raise RuntimeError("no reduce")


class ReduceExRaises:
    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("no reduce_ex")


class NothingWorks:
    def __reduce__(self) -> Any:
        raise RuntimeError("no reduce")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class ReprNotText:
    def __reduce__(self) -> Any:
        raise RuntimeError("no reduce")

    def __repr__(self) -> Any:
        return 5


class HugeRepr:
    def __reduce__(self) -> Any:
        raise RuntimeError("no reduce")

    def __repr__(self) -> str:
        return "r" * 5_000_000


class NewProtocolsOnly:
    """Pickles with protocol 4 and later only; torch.save writes protocol 2."""

    def __reduce_ex__(self, protocol: Any) -> Any:
        if protocol < 4:
            raise TypeError("needs protocol 4")
        return (Result, ())


class BadKey:
    """A hashable key whose text cannot be made."""

    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __hash__(self) -> int:
        return 1


NoModule = type("NoModule", (), {"__module__": None, "__reduce__": ReduceRaises.__reduce__})


def _deep_list(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def _odd_values() -> dict[str, Any]:
    return {
        "repr raises": ReprRaises(),
        "reduce raises": ReduceRaises(),
        "reduce_ex raises": ReduceExRaises(),
        "nothing works": NothingWorks(),
        "repr is not text": ReprNotText(),
        "huge repr": HugeRepr(),
        "protocol 4+ only": NewProtocolsOnly(),
        "PickleBuffer": pickle.PickleBuffer(b"bytes"),
        "class without a module": NoModule(),
        "lock": threading.Lock(),
        "generator": (i for i in range(3)),
        "self-containing list": _loop(),
        "nested 100k deep": _deep_list(100_000),
        "nan": float("nan"),
        "text": "ok",
    }


def test_attr_values_that_refuse_repr_or_pickling(tmp_path):
    samples = [FakeSample(index=i) for i in range(3)]
    values = _odd_values()
    places = 0

    @trace_function("decorated", target="sample", attrs_getter=lambda sample: _odd_values())
    def decorated(sample: FakeSample) -> Result:
        return Result()

    with trace_span(samples, "group", attrs=values) as group:
        for sample in samples:
            with trace_span(sample, "generate", attrs=_odd_values()) as span:
                span.update(_odd_values())
                for key, value in _odd_values().items():
                    span.set(key, value)
                span.update({TRACE_CHILDREN_KEY: [
                    {"type": "span", "name": "child", "start_offset": 0.0, "end_offset": 0.5,
                     "attrs": _odd_values()},
                    {"type": "event", "name": "child_event", "attrs": _odd_values()},
                ]})
                trace_event(sample, "event", attrs=_odd_values())
                trace_next_attempt(sample, _odd_values())
                assert isinstance(decorated(sample), Result)
            places += 8
        group.update(values)
    places += 2
    inject("attr values refusing repr/pickle", places * len(values))

    for sample in samples:
        assert_well_formed(sample)
        (start,) = starts(sample, "generate")
        end = end_of(sample, start)
        assert set(end["attrs"]) == set(values)
        assert end["attrs"]["repr raises"] is not None
        assert end["attrs"]["nothing works"] == "<unrepresentable NothingWorks>"
        assert end["attrs"]["repr is not text"] == "<unrepresentable ReprNotText>"
        assert len(end["attrs"]["huge repr"]) < MAX_REPR_CHARS + 40
        assert isinstance(end["attrs"]["protocol 4+ only"], str)
        assert isinstance(end["attrs"]["PickleBuffer"], str)
        for record in events_of(sample):
            pickle.dumps(record.get("attrs"), protocol=2)
    frames = assert_loadable(samples, tmp_path / "odd_values.pt")
    assert len(frames.span_core) == sum(
        sum(e["type"] == "span_start" for e in events_of(s)) for s in samples)


def test_attr_mappings_that_cannot_be_read_keep_their_records(tmp_path):
    sample = FakeSample()
    inject("unreadable attr mappings", 4)
    with trace_span(sample, "broken_start", attrs=BrokenMapping(a=1)) as span:
        span.update({BadKey(): 1})
        trace_event(sample, "broken_event", attrs={BadKey(): 2})
        trace_next_attempt(sample, BrokenMapping(b=2))
    (start,) = starts(sample, "broken_start")
    assert "attrs" not in start
    assert end_of(sample, start) is not None
    assert [e["name"] for e in events_of(sample)] == [
        "broken_start", "broken_event", "attempt_start", "broken_start"]
    assert_loadable([sample], tmp_path / "mappings.pt")


# --------------------------------------------------------------------------- summary


def test_fault_count():
    """Report the faults injected (runs last); the total is checked when the module ran whole."""
    print(f"\nfaults injected: {sum(FAULTS.values())} of {len(FAULTS)} kinds")
    if len(FAULTS) < MIN_FAULT_KINDS:
        pytest.skip("only part of the module ran")
    assert sum(FAULTS.values()) >= MIN_FAULTS
