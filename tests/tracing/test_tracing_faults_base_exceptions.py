"""Fault injection: ``BaseException`` escaping spans.

``KeyboardInterrupt``, ``SystemExit``, ``GeneratorExit``, ``CancelledError`` and a
custom ``BaseException`` raised through ``with``, decorated, ``async with``, async
decorated and generator spans: the very exception object reaches the caller, the
spans stay open, and the next span starts with no stale parent.

Every case checks that the user's code gets its own result or its own exception
(the very object), and that the samples still save, load and flatten
(``assert_loadable``). Injected faults are counted for ``test_tracing_faults_total.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from slime_trace_widget.tracing import trace_function, trace_span
from tests.support.trace_faults import assert_loadable, assert_well_formed, inject
from tests.support.traced_samples import FakeSample, end_of, starts

pytestmark = pytest.mark.usefixtures("isolated_context")


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
