"""For the live view's browser tests: a second sending process that drops a record (its
records posted to the receiver in the wire's form, one number skipped), and the live
view's state in the page."""

from __future__ import annotations

import time

from tests.support.live_wire import Poster, Sender


def post_with_a_drop(port: int) -> str:
    """One sample's two records from another process (``rollout-0:4242``), the second
    of three numbers dropped at that sender; the sender's name as the view shows it."""
    sender = Sender()
    now = time.time()
    records = [{"type": "event", "name": name, "ts": now + k * 0.001,
                "trace_id": "7" * 32, "sample_id": 9, "group_id": 9, "attempt": 0}
               for k, name in enumerate(("queued", "lost", "started"))]
    poster = Poster(port)
    try:
        status, _ = poster.post(sender.request(records, rollout_id=None, skip=(1,)))
        assert status == 200
    finally:
        poster.close()
    return f"{sender.host}:{sender.pid}"


def live_state(root: str) -> str:
    """The expression for the live view's state (``stwDebug.live()``) under ``root``."""
    return f"document.querySelector({root!r}).stwDebug.live()"
