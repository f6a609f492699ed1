"""The live follower's deltas, as a view applies them: after the collector's reader moves
on to another rollout (a new epoch of blocks), every delta still applies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slime_trace_widget.sources.live.store import LiveStore
from slime_trace_widget.view.live import LiveFollower, LiveSession
from slime_trace_widget.view.live_feed import ReaderFeed
from tests.sources.test_live_reader import T0, live_rows, span


def applicable(view: dict[str, Any], delta: dict[str, Any]) -> bool:
    """``js/src/live/splice.js``'s ``applicable``: a delta of the view's epoch that starts
    no later and ends no earlier than the view's blocks, or a whole state of another."""
    if delta["epoch"] != view["epoch"]:
        return delta["since"] == 0
    return delta["since"] <= view["seq"] <= delta["seq"]


def test_deltas_apply_after_the_reader_moves_to_another_rollout(tmp_path: Path) -> None:
    store = LiveStore(tmp_path, roll_rows=10**9, roll_seconds=10**9)
    session = LiveSession(ReaderFeed(tmp_path), clock=lambda: T0 + 100)
    sent: list[dict[str, Any]] = []
    errors: list[BaseException] = []
    follower = LiveFollower(session, lambda delta: sent.append(delta.meta), errors.append,
                            interval=3600)
    view = {"epoch": "", "seq": 0}
    try:
        for rollout, seq in ((5, 1), (5, 2), (5, 3), (6, 1), (6, 2), (6, 3)):
            store.append(live_rows([span(f"r{rollout}-{seq}", "s", T0 + seq)],
                                   sender=f"h:{rollout}:0", rollout=rollout, first_seq=seq))
            follower.look()
            delta = sent[-1]
            assert delta["positions"], (rollout, seq)  # the look found the new sample
            assert applicable(view, delta), (view, delta)
            view = {"epoch": delta["epoch"], "seq": delta["seq"]}
        assert len({d["epoch"] for d in sent}) == 2 and session.blocks.n_samples == 3
    finally:
        follower.stop()
        store.close()
    assert applicable(view, sent[-1]) and not errors
