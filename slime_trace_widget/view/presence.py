"""Which views of a widget are drawn now, as its renderer reports them (``docs/payload.md``,
"Views").

Each view the renderer draws says ``view_opened`` when drawn, ``view_alive`` every
``view_alive_seconds`` while drawn and ``view_closed`` when removed (a re-run cell, a
closed output). A page that is reloaded or closed removes its views without a word, so
a view not heard from for ``VIEW_GONE_AFTER_MISSED + 1`` intervals counts as gone too.
With the default interval (20 s) that is 100 s: longer than the one minute a browser
may stretch a hidden tab's timers to, so a view in a background tab is not taken for
gone, and short enough that a widget whose page is gone stops reading its folder.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from .contract import VIEW_GONE_AFTER_MISSED

__all__ = ["VIEW_MESSAGES", "ViewPresence"]

#: The messages a view sends about itself.
VIEW_MESSAGES = ("view_opened", "view_alive", "view_closed")


class ViewPresence:
    """The views a widget's renderer drew, each with when it was last heard from.

    Safe to use from the kernel's message handler and a follower's thread at once.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
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
