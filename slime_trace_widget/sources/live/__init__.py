"""The live stream: what a rollout records while it runs, received, kept and read back.

Receiving (the collector imports only these, no pandas): the sender (``tracing.live``)
turns every trace record into an OTLP log record (``docs/live.md``); ``otlp_logs``
turns an ``ExportLogsServiceRequest`` into rows (through ``lean_logs``),
``collector`` keeps them with one durable write per group of requests in ``store``
(``DIR/live/``, a :mod:`..engine.durable` store).

Reading: ``read`` takes a rollout or a window through the row groups that can hold it,
or only what arrived since the last read; ``carriers`` turns records back into trace
carriers and ``frames_of`` builds frames from them with the dump's builder; ``spans``
tells which spans new records opened and closed; ``load`` (:func:`load_live`) reads a
rollout once, ``reader`` (:class:`LiveReader`) follows one. The loss accounting per
sending process is ``frames.live_health`` (``TraceFrames.live`` holds it).
``docs/live-store.md`` describes it all.

The names below are imported on first use, so the collector does not import pandas.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["LiveDelta", "LiveHealth", "LiveReader", "RestartGap", "SenderHealth", "load_live"]

_HOMES = {"LiveDelta": ".reader", "LiveReader": ".reader", "load_live": ".load",
          "LiveHealth": "...frames.live_health", "RestartGap": "...frames.live_health",
          "SenderHealth": "...frames.live_health"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name], __name__), name)
