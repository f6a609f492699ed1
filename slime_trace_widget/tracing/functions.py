"""``trace_function``: a decorator that makes each call of a sync or async function,
generator or async generator one span."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from ..schema import SAMPLE_TRACE_KEY
from .carriers import _ACTIVE, TraceHandle, _is_sample_box
from .generators import trace_async_generator, trace_generator
from .records import _log_failure, logger
from .spans import TraceSpan


def trace_function(
    name: str,
    target: str | None = None,
    target_getter: Callable[..., Any] | None = None,
    attrs_getter: Callable[..., Mapping[str, Any] | None] | None = None,
    record_error: bool = True,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a sync or async function (or method) so each call is one span.

    A call of a generator or async generator function is one span too, from its
    first ``next()`` until it finishes, raises or is closed (:mod:`.generators`);
    a plain function that returns a generator is timed until it returns.

    The trace target is, in order: the parameter named ``target``;
    ``target_getter(*args, **kwargs)``; else inferred from the arguments (the first
    sample, dict sample, handle, or list of them — a warning is logged once per
    function, as inference can pick the wrong argument); else the targets of the
    innermost open span. With no target the function is just called.
    ``attrs_getter(*args, **kwargs)`` supplies start attributes. The wrapper keeps
    the function's name, docstring and signature. Placed above ``@staticmethod`` or
    ``@classmethod`` it wraps the underlying function and re-applies the
    descriptor: a plain wrapper function would be bound like a method, so a static
    method would get ``self`` and a class method would not be callable at all.
    """

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        if isinstance(fn, (staticmethod, classmethod)):
            return type(fn)(decorate(fn.__func__))
        find_target = _target_finder(fn, name, target, target_getter)

        def open_span(args: tuple, kwargs: dict) -> TraceSpan | None:
            try:
                resolved = find_target(args, kwargs)
                if resolved is None:
                    return None
                return TraceSpan(
                    resolved, name, _start_attrs(attrs_getter, args, kwargs), record_error
                )
            except Exception:
                _log_failure("resolving the trace target of %r", name)
                return None

        if inspect.isgeneratorfunction(fn):
            return trace_generator(fn, open_span)
        if inspect.isasyncgenfunction(fn):
            return trace_async_generator(fn, open_span)
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def traced_async(*args: Any, **kwargs: Any) -> Any:
                span = open_span(args, kwargs)
                if span is None:
                    return await fn(*args, **kwargs)
                with span:
                    return await fn(*args, **kwargs)

            return traced_async

        @functools.wraps(fn)
        def traced(*args: Any, **kwargs: Any) -> Any:
            span = open_span(args, kwargs)
            if span is None:
                return fn(*args, **kwargs)
            with span:
                return fn(*args, **kwargs)

        return traced

    return decorate


def _start_attrs(getter: Callable[..., Any] | None, args: tuple, kwargs: dict) -> Any:
    if getter is None:
        return None
    try:
        return getter(*args, **kwargs)
    except Exception:
        _log_failure("attrs_getter of %r", getattr(getter, "__qualname__", getter))
        return None


def _target_finder(
    fn: Callable[..., Any], name: str, param: str | None, getter: Callable[..., Any] | None
) -> Callable[[tuple, dict], Any]:
    if param is not None:
        return _parameter_reader(fn, name, param)
    if getter is not None:
        return lambda args, kwargs: getter(*args, **kwargs)
    return _target_inferrer(fn, name)


def _parameter_reader(
    fn: Callable[..., Any], name: str, param: str
) -> Callable[[tuple, dict], Any]:
    """Read one argument by parameter name: its position is found once, here, so a
    traced call never runs ``Signature.bind``."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    position: int | None = None
    default: Any = None
    for index, parameter in enumerate(parameters):
        if parameter.name == param:
            if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
                position = index
            if parameter.default is not parameter.empty:
                default = parameter.default
            break
    else:
        logger.warning(
            "trace_function(%r): %s has no parameter %r; "
            "calls are traced only when it is passed by keyword",
            name,
            getattr(fn, "__qualname__", fn),
            param,
        )

    def read(args: tuple, kwargs: dict) -> Any:
        if param in kwargs:
            return kwargs[param]
        if position is not None and position < len(args):
            return args[position]
        return default

    return read


def _target_inferrer(fn: Callable[..., Any], name: str) -> Callable[[tuple, dict], Any]:
    warned = False

    def infer(args: tuple, kwargs: dict) -> Any:
        nonlocal warned
        for value in (*args, *kwargs.values()):
            if _is_trace_target(value):
                if not warned:
                    warned = True
                    logger.warning(
                        "trace_function(%r): inferred the trace target of %s from its arguments; "
                        "pass target=... or target_getter=... to make it explicit",
                        name,
                        getattr(fn, "__qualname__", fn),
                    )
                return value
        scope = _ACTIVE.get()
        return None if scope is None else scope.handles

    return infer


def _is_trace_target(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return bool(value) and all(_is_single_target(item) for item in value)
    return _is_single_target(value)


def _is_single_target(value: Any) -> bool:
    """What slime infers (a sample, a handle, a sample box), told apart without importing
    slime, and a dict only once it holds a carrier: a plain dict with an ``index`` key is
    as likely a model's ``choices`` entry, which must not get a carrier written into it."""
    if isinstance(value, TraceHandle):
        return True
    if isinstance(value, dict):
        return isinstance(value.get(SAMPLE_TRACE_KEY), dict)
    if isinstance(getattr(value, SAMPLE_TRACE_KEY, None), dict):
        return True
    if _is_sample_box(value):
        return True
    return hasattr(value, "index") and hasattr(value, "group_index")
