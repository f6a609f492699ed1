"""Streaming what slime's own ``trace_utils`` records, without changing slime.

Every record slime writes is built and appended by one function,
``_append_event(handle, *, kind, name, timestamp, attrs=None, span_id=None,
parent_span_id=None) -> dict`` of ``slime.observability.trace_utils`` (and of the
older ``slime.utils.trace_utils``); the module's other functions call it through
the module's globals, and no other slime module imports it. Replacing that
module attribute with a wrapper that calls the original and then hands the
returned record on therefore sees every record, in order, after it is in its
carrier. A call that raises is passed through untouched.

slime keeps the rollout id of the step in progress in
``slime.rollout.sample_hooks`` (``RolloutManager.generate``/``eval`` call its
``set_current_rollout_id``); :func:`slime_rollout_id` reads it without importing
anything.
"""

from __future__ import annotations

import functools
import importlib
import logging
import sys
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

#: slime's recording modules, newest first.
SLIME_TRACE_MODULES = ("slime.observability.trace_utils", "slime.utils.trace_utils")
#: The one function of those modules that every record passes through.
RECORD_FUNCTION = "_append_event"
SLIME_ROLLOUT_MODULE = "slime.rollout.sample_hooks"
SLIME_ROLLOUT_GLOBAL = "_current_rollout_id"
#: Marks a wrapper of ours, so patching twice wraps once.
_MARK = "__slime_trace_widget_live__"


def patch_slime(offer: Callable[[Any], None]) -> list[str]:
    """Wrap ``_append_event`` in each of slime's recording modules that imports here;
    the names of the modules whose records now reach ``offer``."""
    patched = []
    for name in SLIME_TRACE_MODULES:
        module = _import(name)
        original = getattr(module, RECORD_FUNCTION, None) if module is not None else None
        if not callable(original):
            continue
        if not getattr(original, _MARK, False):
            setattr(module, RECORD_FUNCTION, _wrap(original, offer))
        patched.append(name)
    return patched


def slime_rollout_id() -> int | None:
    """The rollout id slime has set for the step in progress, when slime is loaded."""
    module = sys.modules.get(SLIME_ROLLOUT_MODULE)
    value = getattr(module, SLIME_ROLLOUT_GLOBAL, None) if module is not None else None
    return value if type(value) is int else None


def _wrap(original: Callable[..., Any], offer: Callable[[Any], None]) -> Callable[..., Any]:
    @functools.wraps(original)
    def append_and_stream(*args: Any, **kwargs: Any) -> Any:
        record = original(*args, **kwargs)
        offer(record)
        return record

    setattr(append_and_stream, _MARK, True)
    return append_and_stream


def _import(name: str) -> Any:
    """The module, or None when it (or slime) is not there; a module that is there but
    fails to import is logged, not raised: streaming must not stop the process."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            return None  # slime, or this older module of it, is not installed
        logger.warning("live stream: %s not patched: %s", name, exc)
    except Exception as exc:
        logger.warning("live stream: %s not patched: %s: %s", name, type(exc).__name__, exc)
    return None
