"""What one record is made of: the clock, ids, and attribute cleaning.

Everything here is shared by spans, events, attempts and merges. A failure is
logged at debug level on the ``slime_trace_widget.tracing`` logger and costs only
the record being written, never the traced code.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from ..values import (
    MAX_INT_BITS,
    PRINTABLE_TYPES,
    describe,
    distinct_key,
    plain_value,
    short_text,
)

#: One logger for the whole recording API, whichever submodule logs.
logger = logging.getLogger(__package__ or __name__)

# Long enough for a useful traceback summary, short enough not to bloat every dump.
MAX_ERROR_MESSAGE_CHARS = 2000

Clock = Callable[[], float]

_CONTEXT_CLOCK: ContextVar[Clock | None] = ContextVar("slime_trace_widget_clock", default=None)
_global_clock: Clock = time.time


# --------------------------------------------------------------------------- clock


def set_clock(fn: Clock | None) -> Clock:
    """Replace the process-wide time source (``None`` restores ``time.time``).

    Returns the previous clock so a caller can put it back. A clock installed with
    :func:`use_clock` in the current context takes precedence over this one.
    """
    global _global_clock
    previous = _global_clock
    _global_clock = time.time if fn is None else fn
    return previous


@contextmanager
def use_clock(fn: Clock) -> Iterator[Clock]:
    """Use ``fn`` as the time source in the current context (and tasks created in it).

    Context-local rather than global so that concurrent simulations, each on its
    own simulated clock, never stamp records with each other's time.
    """
    token = _CONTEXT_CLOCK.set(fn)
    try:
        yield fn
    finally:
        _CONTEXT_CLOCK.reset(token)


def get_clock() -> Clock:
    """The time source records are stamped with in the current context."""
    clock = _CONTEXT_CLOCK.get()
    return _global_clock if clock is None else clock


def _now() -> float:
    """The current time; raises (and so loses the records) when the clock gives no usable time.

    NaN or inf would be written into every record and then dropped by every reader
    as a bad timestamp, so they count as a failing clock.
    """
    clock = _CONTEXT_CLOCK.get()
    ts = float(_global_clock() if clock is None else clock())
    if not math.isfinite(ts):
        raise ValueError(f"the clock returned {ts!r}")
    return ts


# --------------------------------------------------------------------------- records


def _new_id() -> str:
    """A random 32-hex-digit id that is a valid uuid4 hex, 3x cheaper than ``uuid4().hex``."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40
    raw[8] = raw[8] & 0x3F | 0x80
    return raw.hex()


def _log_failure(what: str, *args: Any) -> None:
    logger.debug("tracing: " + what + " failed; the traced code continues", *args, exc_info=True)


def _clean_attrs(attrs: Any) -> dict[str, Any] | None:
    """A frozen copy of ``attrs`` that can be pickled into a dump, or None when empty/invalid.

    Keys become strings; each value that is not a str, int, float, bool or None,
    and an int too long to print, is frozen into the plain data a reader makes of
    it (:func:`_frozen`), so mutating
    it after this call changes nothing recorded, and a large tensor is not held
    until the dump is saved. The copy starts with ``dict(attrs)``, which is atomic
    for a plain dict, so another thread calling ``span.set`` meanwhile cannot break
    the iteration. A mapping that cannot even be read gives None: the record is
    kept without attributes.
    """
    if attrs is None:
        return None
    if type(attrs) is not dict and not isinstance(attrs, Mapping):
        logger.debug("tracing: attrs must be a mapping, got %s; ignored", type(attrs).__name__)
        return None
    try:
        cleaned: dict[str, Any] = {}
        repeats: dict[tuple[str, str], int] = {}
        for key, value in dict(attrs).items():
            text = key if type(key) is str else short_text(key)
            if text in cleaned:  # two keys of one text (1 and "1"): keep both
                text = distinct_key(cleaned, text, key, repeats)
            cleaned[text] = _frozen_item(value)
        return cleaned
    except Exception:
        _log_failure("reading attrs of type %s", type(attrs).__name__)
        return None


def _copy(attrs: dict[str, Any] | None) -> dict[str, Any] | None:
    """A record's own copy of cleaned attrs, so group members never share one mutable dict."""
    return None if attrs is None else dict(attrs)


def _frozen_item(value: Any) -> Any:
    """``value`` as it is when it needs no freezing, else :func:`_frozen`."""
    if type(value) in PRINTABLE_TYPES or (type(value) is int and
                                            value.bit_length() <= MAX_INT_BITS):
        return value
    return _frozen(value)


def _frozen(value: Any) -> Any:
    """``value`` as the bounded plain data a reader of the dump makes of it
    (:func:`slime_trace_widget.values.plain_value`): containers as new lists and
    dicts, numpy and torch scalars as numbers, arrays and tensors of up to
    ``MAX_ARRAY_ELEMENTS`` elements as lists and larger ones as a short summary,
    other objects as a short ``repr``. Plain data always pickles, so saving the
    samples cannot fail because of an attribute; the work is bounded by
    ``MAX_STEPS`` elements per value. An int too long to print (over 4,300
    digits), alone or anywhere inside a value, becomes the text readers show for
    it, ``"<int of N bits>"``. A value whose walk fails becomes its short ``repr``
    (:func:`slime_trace_widget.values.describe`, as a reader shows an object).
    """
    try:
        return plain_value(value)
    except Exception:
        return describe(value)


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more chars]"


def _error_message(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:
        text = f"<unprintable {type(exc).__qualname__}>"
    return _truncate(text, MAX_ERROR_MESSAGE_CHARS)
