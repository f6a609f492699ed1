"""Fault injection: ``trace_function`` getters that raise or return garbage.

Each faulty ``target_getter``/``attrs_getter`` pair is tried on every kind of
callable (function, coroutine, method, static and class methods, sync and async):
a broken attrs getter costs only the start attributes, a broken target getter
only the trace. A ``KeyboardInterrupt`` from the user's own getter reaches the
caller untouched.

Every case checks that the user's code gets its own result or its own exception
(the very object), and that the samples still save, load and flatten
(``assert_loadable``). Injected faults are counted for ``test_tracing_faults_total.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from slime_trace_widget.tracing import trace_function
from tests.support.trace_faults import (
    BrokenMapping,
    Result,
    UserError,
    assert_loadable,
    assert_well_formed,
    inject,
    self_containing_list,
)
from tests.support.traced_samples import FakeSample, carrier_of, end_of, starts

pytestmark = pytest.mark.usefixtures("isolated_context")


def _raise_runtime(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("getter failed")


#: name -> (target_getter, attrs_getter, whether the call is still traced)
GETTERS: dict[str, tuple[Callable[..., Any] | None, Callable[..., Any] | None, bool]] = {
    "attrs_getter raises": (None, _raise_runtime, True),
    "attrs_getter gives an unreadable mapping": (None, lambda *a, **k: BrokenMapping(x=1), True),
    "attrs_getter gives a non-mapping": (None, lambda *a, **k: ["not", "a", "mapping"], True),
    "target_getter raises": (_raise_runtime, None, False),
    "target_getter gives an int": (lambda *a, **k: 5, None, False),
    "target_getter gives a string": (lambda *a, **k: "sample", None, False),
    "target_getter gives a self-containing list": (
        lambda *a, **k: self_containing_list(), None, False),
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
