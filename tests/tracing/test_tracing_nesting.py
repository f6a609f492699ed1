"""Which span a record hangs under: nesting is tracked per trace and per context.

Spans and events point at the innermost open span of their own trace: through
group spans (one pair per member), mixed targets, ``async with``, a thousand
concurrent asyncio tasks, concurrent branches of one sample, and threads writing
into one fresh carrier. A property test runs random programs of spans, events and
retries and checks that every one gives a well-nested tree.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from slime_trace_widget.tracing import (
    bind_trace,
    trace_event,
    trace_next_attempt,
    trace_span,
    use_clock,
)
from tests.support.traced_samples import FakeSample, events_of, named, span_pair, step_clock


def test_nested_spans_and_events_point_at_the_innermost_open_span():
    sample = FakeSample()
    with trace_span(sample, "outer"):
        trace_event(sample, "in_outer")
        with trace_span(sample, "inner"):
            trace_event(sample, "in_inner")
        with trace_span(sample, "sibling"):
            pass
    trace_event(sample, "after")

    outer, _ = span_pair(sample, "outer")
    inner, _ = span_pair(sample, "inner")
    sibling, _ = span_pair(sample, "sibling")
    assert "parent_span_id" not in outer
    assert inner["parent_span_id"] == outer["span_id"]
    assert sibling["parent_span_id"] == outer["span_id"]
    assert named(sample, "in_outer")[0]["parent_span_id"] == outer["span_id"]
    assert named(sample, "in_inner")[0]["parent_span_id"] == inner["span_id"]
    assert "parent_span_id" not in named(sample, "after")[0]


def test_nesting_is_tracked_per_trace():
    first, second = FakeSample(index=0), FakeSample(index=1)
    with trace_span(first, "a"), trace_span(second, "b"):
        trace_event(first, "first_event")
    a, _ = span_pair(first, "a")
    b, _ = span_pair(second, "b")
    assert "parent_span_id" not in b
    assert named(first, "first_event")[0]["parent_span_id"] == a["span_id"]


def test_group_span_writes_one_pair_per_member():
    group = [FakeSample(index=i, group_index=0) for i in range(4)]
    with (
        use_clock(step_clock()),
        trace_span(group, "group_reward_model", attrs={"group_size": 4}) as span,
    ):
        span.set("score_mean", 0.5)
        with trace_span(group[2], "member_work"):
            pass

    starts = [span_pair(s, "group_reward_model")[0] for s in group]
    ends = [span_pair(s, "group_reward_model")[1] for s in group]
    assert len({start["span_id"] for start in starts}) == 4
    assert list(span.span_ids) == [start["span_id"] for start in starts]
    assert len({start["ts"] for start in starts}) == 1
    assert len({end["ts"] for end in ends}) == 1
    assert all(start["attrs"] == {"group_size": 4} for start in starts)
    assert all(end["attrs"] == {"score_mean": 0.5} for end in ends)
    assert ends[0]["attrs"] is not ends[1]["attrs"]
    member, _ = span_pair(group[2], "member_work")
    assert member["parent_span_id"] == starts[2]["span_id"]


def test_tuples_handles_and_nested_lists_are_targets():
    samples = [FakeSample(index=i) for i in range(3)]
    handle = bind_trace(samples[0])
    with trace_span((handle, [samples[1], (samples[2],)]), "mixed"):
        pass
    assert all(len(events_of(s)) == 2 for s in samples)


def test_async_with_is_supported():
    sample = FakeSample()

    async def main() -> None:
        async with trace_span(sample, "outer"):
            await asyncio.sleep(0)
            async with trace_span(sample, "inner"):
                await asyncio.sleep(0)

    asyncio.run(main())
    outer, outer_end = span_pair(sample, "outer")
    inner, inner_end = span_pair(sample, "inner")
    assert inner["parent_span_id"] == outer["span_id"]
    assert outer_end is not None
    assert inner_end is not None


def test_thousand_concurrent_tasks_never_mix_parents():
    groups = [[FakeSample(index=g * 8 + i, group_index=g) for i in range(8)] for g in range(125)]
    rng = random.Random(7)

    async def rollout(sample: FakeSample) -> None:
        with trace_span(sample, "generate_and_rm"):
            await asyncio.sleep(rng.random() / 1000)
            async with trace_span(sample, "sglang_generate"):
                await asyncio.sleep(0)
                trace_event(sample, "tick")
                await asyncio.sleep(rng.random() / 1000)
            with trace_span(sample, "reward_model"):
                await asyncio.sleep(0)

    async def group_rollout(group: list[FakeSample]) -> None:
        async with trace_span(group, "generate_and_rm_group"):
            await asyncio.gather(*(rollout(sample) for sample in group))

    async def main() -> None:
        await asyncio.gather(*(group_rollout(group) for group in groups))

    asyncio.run(main())
    for sample in (s for group in groups for s in group):
        group_span, group_end = span_pair(sample, "generate_and_rm_group")
        outer, outer_end = span_pair(sample, "generate_and_rm")
        generate, generate_end = span_pair(sample, "sglang_generate")
        reward, reward_end = span_pair(sample, "reward_model")
        (tick,) = named(sample, "tick")
        assert outer["parent_span_id"] == group_span["span_id"]
        assert generate["parent_span_id"] == outer["span_id"]
        assert reward["parent_span_id"] == outer["span_id"]
        assert tick["parent_span_id"] == generate["span_id"]
        assert None not in (group_end, outer_end, generate_end, reward_end)
        assert {e["trace_id"] for e in events_of(sample)} == {sample.trace["trace_id"]}


def test_concurrent_branches_of_one_sample_keep_their_own_parents():
    sample = FakeSample()

    async def branch(tag: str) -> None:
        with trace_span(sample, f"branch_{tag}"):
            await asyncio.sleep(0)
            with trace_span(sample, f"leaf_{tag}"):
                await asyncio.sleep(0)

    async def main() -> None:
        with trace_span(sample, "turn"):
            await asyncio.gather(branch("a"), branch("b"))

    asyncio.run(main())
    turn, _ = span_pair(sample, "turn")
    for tag in "ab":
        branch_start, _ = span_pair(sample, f"branch_{tag}")
        leaf, _ = span_pair(sample, f"leaf_{tag}")
        assert branch_start["parent_span_id"] == turn["span_id"]
        assert leaf["parent_span_id"] == branch_start["span_id"]


# --------------------------------------------------------------------------- threads


def test_threads_writing_to_one_fresh_carrier_lose_nothing():
    sample = FakeSample()
    per_thread = 500

    def work(worker: int) -> None:
        for i in range(per_thread):
            with trace_span(sample, f"w{worker}", attrs={"i": i}):
                trace_event(sample, "tick")

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(work, range(8)))

    events = events_of(sample)
    assert len(events) == 8 * per_thread * 3
    counts = Counter(e["type"] for e in events)
    assert counts["span_start"] == counts["span_end"] == 8 * per_thread
    starts = {e["span_id"]: e for e in events if e["type"] == "span_start"}
    for tick in (e for e in events if e["type"] == "event"):
        assert tick["parent_span_id"] in starts
    assert all("parent_span_id" not in e for e in starts.values())


# --------------------------------------------------------------------------- properties


PROGRAM = st.recursive(
    st.sampled_from(["event", "attempt"]),
    lambda inner: st.lists(inner, max_size=4).map(tuple),
    max_leaves=20,
)


def _run(sample: FakeSample, program: Any, counter: Counter[str]) -> None:
    if program == "event":
        trace_event(sample, "e")
        counter["event"] += 1
    elif program == "attempt":
        trace_next_attempt(sample)
        counter["event"] += 1
    else:
        counter["span"] += 1
        with trace_span(sample, "s"):
            for step in program:
                _run(sample, step, counter)


@settings(max_examples=60, deadline=None, database=None)
@given(PROGRAM)
def test_any_program_gives_a_well_nested_tree(program):
    sample = FakeSample()
    counter: Counter[str] = Counter()
    _run(sample, (program,) if isinstance(program, str) else program, counter)

    open_spans: list[str] = []
    seen: set[str] = set()
    for record in events_of(sample):
        if record["type"] == "span_end":
            assert "parent_span_id" not in record
            assert open_spans.pop() == record["span_id"]
            continue
        assert record.get("parent_span_id") == (open_spans[-1] if open_spans else None)
        if record["type"] == "span_start":
            assert record["span_id"] not in seen
            seen.add(record["span_id"])
            open_spans.append(record["span_id"])
    assert not open_spans
    assert len(seen) == counter["span"]
    assert len(events_of(sample)) == 2 * counter["span"] + counter["event"]
    assert sample.trace["attempt"] == sum(
        1 for e in events_of(sample) if e["name"] == "attempt_start"
    )
