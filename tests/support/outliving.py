"""A dump whose child span outlives its parents, recorded with the tracing API on a
clock the recording moves by hand, saved as slime saves it: the critical-path and the
windowed-flame tests read the same spans (``tests/answers/test_critical_outliving.py``,
``tests/answers/test_flame_window.py``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from slime_trace_widget.sources.dumps import save_dump
from slime_trace_widget.tracing import trace_span, use_clock

#: Generous guard: the steps wait for each other, never for a time.
HANG_GUARD_S = 120


class HandClock:
    """Simulated time the recording moves by hand, so the spans' lengths are exact."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def _rollout(sample: dict, clock: HandClock) -> None:
    """rollout 0-5 > generate 0-4 > (tool 1-2, reward 3-9): the reward is a task the
    generation starts; it ends at 9, after both its parents."""
    reward_started, parents_done = asyncio.Event(), asyncio.Event()

    async def reward() -> None:
        with trace_span(sample, "reward"):
            reward_started.set()
            await parents_done.wait()
            clock.now = 9.0

    with trace_span(sample, "rollout"):
        with trace_span(sample, "generate"):
            clock.now = 1.0
            with trace_span(sample, "tool"):
                clock.now = 2.0
            clock.now = 3.0
            task = asyncio.create_task(reward())
            await reward_started.wait()
            clock.now = 4.0
        clock.now = 5.0
    parents_done.set()
    await task


def outliving_child_dump(path: Path) -> Path:
    """The dump at ``path`` of one sample: rollout 0-5 > generate 0-4 > (tool 1-2,
    reward 3-9)."""
    clock = HandClock()
    sample = {"index": 0, "group_index": 0}
    with use_clock(clock):
        asyncio.run(asyncio.wait_for(_rollout(sample, clock), HANG_GUARD_S))
    save_dump(path, [sample], rollout_id=0)
    return path
