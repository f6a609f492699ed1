"""Spans over calls of generator and async generator functions, for ``trace_function``.

A traced generator's span starts at its first ``next()`` (``asend``/``__anext__``)
and ends when the generator finishes, raises (the end gets the error attributes,
as any span's) or is closed (``close``/``aclose``: a plain end). A
``BaseException`` other than ``GeneratorExit`` leaves it open, as
:func:`~.spans.trace_span` does. Between two items the consumer runs, so the
generator's open spans are in the context only while its body runs: records the
body makes nest under its span, the consumer's own records do not. Values sent
and thrown in, and the return value, pass through; the function is called at the
first ``next()``, so a call with bad arguments raises there.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator
from contextvars import Token
from typing import Any

from .carriers import _ACTIVE, _Scope
from .records import _log_failure
from .spans import TraceSpan

#: Opens (does not enter) the span of one call from its arguments; None: not traced.
SpanOpener = Callable[[tuple, dict], "TraceSpan | None"]


class _Steps:
    """Runs a traced generator's steps with its own open spans, and starts and ends its span.

    The generator's scope of open spans (its span, and any the body keeps open
    across a ``yield``) starts as the consumer's at the first step and is put into
    the context for each step, then taken out again, so the consumer's context is
    as it was. Never raises for tracing's sake; a step raises what the body raises.
    """

    __slots__ = ("_active", "_span")

    def __init__(self, span: TraceSpan | None) -> None:
        self._span = span
        self._active: _Scope | None = _ACTIVE.get()

    def start(self) -> None:
        """Record the span's start, as the innermost span of the generator's scope."""
        if self._span is not None:
            self.run(self._span.__enter__)

    def end(self, error: BaseException | None = None) -> None:
        """Record the span's end: plain when ``error`` is None, else as ``with`` would."""
        if self._span is None:
            return
        if error is None:
            self.run(self._span.__exit__, None, None, None)
        else:
            self.run(self._span.__exit__, type(error), error, error.__traceback__)

    def run(self, step: Callable[..., Any], *args: Any) -> Any:
        """``step(*args)`` with the generator's open spans in the context."""
        token = _ACTIVE.set(self._active)
        try:
            return step(*args)
        finally:
            self._restore(token)

    async def arun(self, step: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """``await step(*args)`` with the generator's open spans in the context."""
        token = _ACTIVE.set(self._active)
        try:
            return await step(*args)
        finally:
            self._restore(token)

    def _restore(self, token: Token) -> None:
        self._active = _ACTIVE.get()
        try:
            _ACTIVE.reset(token)
        except Exception:
            _log_failure("restoring the consumer's spans around a traced generator")


def trace_generator(
    fn: Callable[..., Generator[Any, Any, Any]], open_span: SpanOpener
) -> Callable[..., Generator[Any, Any, Any]]:
    """A generator function like ``fn`` whose every call is one span (see the module)."""

    @functools.wraps(fn)
    def traced_generator(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        items = fn(*args, **kwargs)
        return (yield from _spanned(items, _Steps(open_span(args, kwargs))))

    return traced_generator


def trace_async_generator(
    fn: Callable[..., AsyncGenerator[Any, Any]], open_span: SpanOpener
) -> Callable[..., AsyncGenerator[Any, Any]]:
    """An async generator function like ``fn`` whose every call is one span (see the module)."""

    @functools.wraps(fn)
    async def traced_async_generator(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        items = fn(*args, **kwargs)
        steps = _Steps(open_span(args, kwargs))
        steps.start()
        send: Callable[..., Awaitable[Any]] = items.asend
        argument: Any = None
        while True:
            try:
                value = await steps.arun(send, argument)
            except StopAsyncIteration:
                steps.end()
                return
            except BaseException as error:
                steps.end(error)
                raise
            try:
                argument = yield value
                send = items.asend
            except GeneratorExit:
                await _aclose(items, steps)
                raise
            except BaseException as thrown:
                send, argument = items.athrow, thrown

    return traced_async_generator


def _spanned(items: Generator[Any, Any, Any], steps: _Steps) -> Generator[Any, Any, Any]:
    """``yield from items``, each step run by ``steps``, between the span's start and end."""
    steps.start()
    send: Callable[[Any], Any] = items.send
    argument: Any = None
    while True:
        try:
            value = steps.run(send, argument)
        except StopIteration as stop:
            steps.end()
            return stop.value
        except BaseException as error:
            steps.end(error)
            raise
        try:
            argument = yield value
            send = items.send
        except GeneratorExit:
            _close(items, steps)
            raise
        except BaseException as thrown:
            send, argument = items.throw, thrown


def _close(items: Generator[Any, Any, Any], steps: _Steps) -> None:
    """Close the traced generator and end its span; what closing raises propagates."""
    try:
        steps.run(items.close)
    except BaseException as error:
        steps.end(error)
        raise
    steps.end()


async def _aclose(items: AsyncGenerator[Any, Any], steps: _Steps) -> None:
    """Close the traced async generator and end its span; what closing raises propagates."""
    try:
        await steps.arun(items.aclose)
    except BaseException as error:
        steps.end(error)
        raise
    steps.end()
