"""An end sent again after ``set_rollout`` moved on belongs to the rollout its end was
sent in: through the real receiver, the late attribute reaches the span of rollout 3,
and rollout 4 holds no orphan end. (End attributes set after the end was sent:
``test_live_late_end_attrs.py``.)"""

from __future__ import annotations

import time
from pathlib import Path

from slime_trace_widget.sources.live import load_live
from slime_trace_widget.tracing import live as streaming
from slime_trace_widget.tracing import trace_span
from tests.support.receiver import start_receiver

#: Hang guard for the sender's batch, generous for a busy machine.
WAIT_SECONDS = 60.0


def _wait_sent(stream: streaming.LiveStream, count: int) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while stream.stats().sent < count:
        assert time.monotonic() < deadline, f"records not sent: {stream.stats()}"
        time.sleep(0.01)


def test_an_end_sent_again_after_the_rollout_moved_on_keeps_its_rollout(
        tmp_path: Path) -> None:
    folder = tmp_path / "collector"
    first = {"index": 0, "group_index": 0, "rollout_id": 3}
    second = {"index": 0, "group_index": 0, "rollout_id": 4}
    with start_receiver(folder) as receiver:
        stream = streaming.install(receiver.endpoint_url)
        try:
            streaming.set_rollout(3)
            with trace_span(first, "reward") as span:
                span.set("early", 1)
            _wait_sent(stream, 2)  # the end went out tagged with rollout 3
            streaming.set_rollout(4)
            span.set("late", 2)  # the reward's end, sent again
            with trace_span(second, "generate"):
                pass
        finally:
            streaming.set_rollout(None)
            stats = stream.close()
    assert stats.dropped == 0 and stats.sent == 5

    earlier = load_live(folder, rollout=3, engine_traces=False)
    (reward,) = earlier.spans[earlier.spans["name"] == "reward"]["end_attrs"]
    assert reward == {"early": 1, "late": 2}
    later = load_live(folder, rollout=4, engine_traces=False)
    assert later.spans["name"].astype(str).tolist() == ["generate"]
    assert not {key: n for key, n in later.warnings.items() if "resent" in key}
