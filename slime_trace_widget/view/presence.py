"""Which views of a widget are drawn now, as its renderer reports them (``docs/payload.md``,
"Views").

Each view the renderer draws says ``view_opened`` when drawn, ``view_alive`` every
``view_alive_seconds`` while drawn and ``view_closed`` when removed (a re-run cell, a
closed output). A page that is reloaded or closed removes its views without a word, so
a view not heard from for ``VIEW_GONE_AFTER_MISSED + 1`` intervals counts as gone too.
With the default interval (20 s) that is 100 s: longer than the one minute a browser
may stretch a hidden tab's timers to, so a view in a background tab is not taken for
gone, and short enough that a widget whose page is gone stops reading its folder.

A kernel takes the renderer's messages only between cells, so silence is timed on the
kernel's idle clock (:func:`kernel_idle_clock`), which stands still while a cell runs:
a cell running for minutes does not make the views it keeps from speaking count as gone.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any

from .contract import VIEW_GONE_AFTER_MISSED

__all__ = ["VIEW_MESSAGES", "IdleClock", "ViewPresence", "idle_clock_of", "kernel_idle_clock"]

#: The messages a view sends about itself.
VIEW_MESSAGES = ("view_opened", "view_alive", "view_closed")


class IdleClock:
    """Seconds of ``clock`` that passed while no cell ran: ``busy`` when a cell starts,
    ``idle`` when it ends (each takes and ignores what IPython passes its events)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._busy_since: float | None = None
        self._busy_seconds = 0.0

    def busy(self, *_: Any) -> None:
        with self._lock:
            if self._busy_since is None:
                self._busy_since = self._clock()

    def idle(self, *_: Any) -> None:
        with self._lock:
            if self._busy_since is not None:
                self._busy_seconds += self._clock() - self._busy_since
                self._busy_since = None

    def __call__(self) -> float:
        with self._lock:
            now = self._clock()
            running = 0.0 if self._busy_since is None else now - self._busy_since
            return now - self._busy_seconds - running


def idle_clock_of(shell: Any, clock: Callable[[], float] = time.monotonic) -> IdleClock:
    """An idle clock of ``clock`` following ``shell``'s cells (an IPython shell's
    ``pre_run_cell`` and ``post_run_cell`` events); all of ``clock`` without a shell."""
    idle = IdleClock(clock)
    if shell is not None:
        shell.events.register("pre_run_cell", idle.busy)
        shell.events.register("post_run_cell", idle.idle)
    return idle


@functools.cache
def kernel_idle_clock() -> IdleClock:
    """The idle clock of the IPython shell this process runs, made once (its events are
    registered once, however many widgets time their views on it)."""
    try:
        from IPython import get_ipython
    except ImportError:  # not in IPython: nothing runs cells
        return idle_clock_of(None)
    return idle_clock_of(get_ipython())


class ViewPresence:
    """The views a widget's renderer drew, each with when it was last heard from, on
    ``clock`` (the kernel's idle clock by default).

    Safe to use from the kernel's message handler and a follower's thread at once.
    """

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        self._clock = clock or kernel_idle_clock()
        self._heard: dict[str, float] = {}
        self._ever_opened = False
        self._lock = threading.Lock()

    def heard(self, kind: str, view: object) -> bool:
        """Take one of :data:`VIEW_MESSAGES` from ``view`` (a text id); whether it was
        one. ``view_alive`` from a view not known (taken for gone while its page's
        timers were held back) counts it as drawn again; closing one not known changes
        nothing."""
        if kind not in VIEW_MESSAGES or not isinstance(view, str):
            return False
        with self._lock:
            if kind == "view_closed":
                self._heard.pop(view, None)
            else:
                self._heard[view] = self._clock()
                self._ever_opened = True
        return True

    def shown(self, alive_every: float) -> bool:
        """Whether a view shows the widget now, views not heard from for
        ``VIEW_GONE_AFTER_MISSED + 1`` times ``alive_every`` seconds dropped. True while
        no view ever opened: a widget used from code only is not drawn at all."""
        with self._lock:
            if not self._ever_opened:
                return True
            oldest = self._clock() - alive_every * (VIEW_GONE_AFTER_MISSED + 1)
            self._heard = {view: at for view, at in self._heard.items() if at >= oldest}
            return bool(self._heard)
