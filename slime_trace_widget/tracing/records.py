"""What one record is made of: the clock, ids, and attribute cleaning.

Everything here is shared by spans, events, attempts and merges. A failure is
logged at debug level on the ``slime_trace_widget.tracing`` logger and costs only
the record being written, never the traced code.
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

#: One logger for the whole recording API, whichever submodule logs.
logger = logging.getLogger(__package__ or __name__)

# Long enough for a useful traceback summary, short enough not to bloat every dump.
MAX_ERROR_MESSAGE_CHARS = 2000
# Stand-in text for attribute values that could not be pickled into a dump.
MAX_REPR_CHARS = 1000
# torch.save's default protocol (what save_dump and slime write); a value that only
# pickles under a newer protocol would make the whole dump unsaveable.
_DUMP_PICKLE_PROTOCOL = 2
_PLAIN_TYPES = frozenset({str, int, float, bool, type(None)})

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
    """A copy of ``attrs`` that can be pickled into a dump, or None when empty/invalid.

    Copying freezes the values at record time; keys become strings; a value that
    cannot be pickled (a lambda, a lock) becomes its truncated ``repr`` so that
    saving the samples later cannot fail because of a trace attribute. The copy
    starts with ``dict(attrs)``, which is atomic for a plain dict, so another
    thread calling ``span.set`` meanwhile cannot break the iteration. A mapping
    that cannot even be read gives None: the record is kept without attributes.
    """
    if attrs is None:
        return None
    if type(attrs) is not dict and not isinstance(attrs, Mapping):
        logger.debug("tracing: attrs must be a mapping, got %s; ignored", type(attrs).__name__)
        return None
    try:
        return {
            key if type(key) is str else str(key): value
            if type(value) in _PLAIN_TYPES
            else _picklable(value)
            for key, value in dict(attrs).items()
        }
    except Exception:
        _log_failure("reading attrs of type %s", type(attrs).__name__)
        return None


def _copy(attrs: dict[str, Any] | None) -> dict[str, Any] | None:
    """A record's own copy of cleaned attrs, so group members never share one mutable dict."""
    return None if attrs is None else dict(attrs)


def _picklable(value: Any) -> Any:
    """``value`` if torch.save can pickle it, else its truncated ``repr``.

    Plain numpy arrays and scalars and torch tensors (:func:`_is_plain_array`) are
    stored as they are without the check, which would copy a big tensor; every
    other value, a numpy object array or a class of a module named ``torch_*``
    included, is pickled once to check.
    """
    if _is_plain_array(value):
        return value
    try:
        pickle.dumps(value, protocol=_DUMP_PICKLE_PROTOCOL)
    except Exception:
        return _truncate(_safe_repr(value), MAX_REPR_CHARS)
    return value


def _is_plain_array(value: Any) -> bool:
    """Whether ``value`` is one of numpy's or torch's own array, scalar or tensor types
    holding no Python objects, which always pickle.

    Exact types only: a subclass can carry attributes of its own (a lock on a
    ``torch.Tensor`` subclass fails to pickle), and an object dtype holds any
    object. numpy and torch are looked up in ``sys.modules``, never imported: a
    value of theirs exists only once they are. Never raises.
    """
    try:
        kind = type(value)
        numpy = sys.modules.get("numpy")
        if numpy is not None and (
            kind is numpy.ndarray
            or (isinstance(value, numpy.generic) and kind.__module__ == "numpy")
        ):
            return not value.dtype.hasobject
        torch = sys.modules.get("torch")
        return torch is not None and kind in _torch_tensor_types(torch)
    except Exception:
        return False


def _torch_tensor_types(torch: Any) -> tuple[type, ...]:
    """torch's own tensor classes: ``Tensor`` and ``nn.Parameter`` (when loaded)."""
    tensor = getattr(torch, "Tensor", None)
    parameter = getattr(getattr(torch, "nn", None), "Parameter", None)
    return tuple(kind for kind in (tensor, parameter) if isinstance(kind, type))


def _safe_repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception:
        return f"<unrepresentable {type(value).__qualname__}>"


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
