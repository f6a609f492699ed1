"""A sample deep-copied while one of its spans is open: the copy's records nest under it.

slime copies a sample with ``copy.deepcopy`` to fan it out (``n_samples_per_prompt``,
agentic branches). A copy taken inside an open span holds that span's start record,
and slime, which tracks nesting by trace id, gives the spans and events recorded on
the copy inside the block that span as their parent. The copy's records must not
lose that link, while copies that do not hold a span still never adopt it.
"""

from __future__ import annotations

import asyncio
import copy

import pytest
import torch

from slime_trace_widget.tracing import (
    bind_trace,
    export_trace,
    import_trace,
    merge_trace,
    trace_event,
    trace_headers,
    trace_span,
)
from tests.support.trace_faults import assert_loadable, assert_well_formed
from tests.support.traced_samples import FakeSample, events_of, named, span_pair, starts


def _branch(sample: FakeSample, index: int) -> FakeSample:
    """A deep copy of ``sample`` re-indexed as slime re-indexes a fanned-out copy."""
    branch = copy.deepcopy(sample)
    branch.index = index
    return branch


def test_a_copy_taken_inside_an_open_span_records_its_spans_under_it(tmp_path):
    prompt = FakeSample(index=0, response="ok")
    prompt.rollout_routed_experts = torch.zeros(4, 2, dtype=torch.int32)  # copied with it
    bind_trace(prompt)
    with trace_span(prompt, "agent_loop"):
        branch = _branch(prompt, 1)
        with trace_span(branch, "tool_call"):
            trace_event(branch, "tool_done")
        trace_event(branch, "branch_done")

    (outer,) = starts(branch, "agent_loop")
    tool, tool_end = span_pair(branch, "tool_call")
    assert tool["parent_span_id"] == outer["span_id"] and tool_end is not None
    assert named(branch, "tool_done")[0]["parent_span_id"] == tool["span_id"]
    assert named(branch, "branch_done")[0]["parent_span_id"] == outer["span_id"]
    assert not named(prompt, "tool_call")
    assert_loadable([prompt, branch], tmp_path / "branches.pt")


def test_the_copy_continues_its_own_member_of_a_group_span():
    """slime's lookup by trace id alone would give every copy the last member's span."""
    prompt = FakeSample()
    bind_trace(prompt)
    group = [_branch(prompt, index) for index in range(3)]
    with trace_span(group, "group_generate"):
        branch = _branch(group[1], 7)
        with trace_span(branch, "retry_branch"):
            pass

    (member_span,) = starts(group[1], "group_generate")
    retry, _ = span_pair(branch, "retry_branch")
    assert retry["parent_span_id"] == member_span["span_id"]


def test_export_and_headers_of_a_copy_name_the_span_it_was_copied_in():
    prompt = FakeSample()
    with trace_span(prompt, "reward") as span:
        branch = _branch(prompt, 1)
        payload = export_trace(branch)
        headers = trace_headers(branch)
    assert payload["parent_span_id"] == span.span_ids[0]
    assert headers["tracestate"] == f"slime={span.span_ids[0]}"


@pytest.mark.parametrize("copy_first", [False, True], ids=["original-first", "copy-first"])
@pytest.mark.parametrize("exporter", ["original", "copy"])
def test_remote_work_exported_under_a_span_both_hold_merges_by_sample_id(exporter, copy_first):
    """Both carriers hold the span the remote work names as parent: it tells neither."""
    prompt = FakeSample(index=0)
    with trace_span(prompt, "reward"):
        branch = _branch(prompt, 1)
        sender = branch if exporter == "copy" else prompt
        remote = import_trace(export_trace(sender))
        with trace_span(remote, "remote_rm"):
            pass
        local = [branch, prompt] if copy_first else [prompt, branch]
        assert merge_trace(local, remote.carrier) == 3
    other = prompt if sender is branch else branch
    remote_span, end = span_pair(sender, "remote_rm")
    assert remote_span["parent_span_id"] == starts(sender, "reward")[0]["span_id"]
    assert end is not None and named(sender, "trace_import")
    assert not named(other, "remote_rm") and not named(other, "trace_import")


def test_a_copy_in_another_task_nests_under_the_span_open_where_it_runs():
    prompt = FakeSample()

    async def rollout(branch: FakeSample) -> None:
        async with trace_span(branch, "generate"):
            await asyncio.sleep(0)

    async def main() -> list[FakeSample]:
        async with trace_span(prompt, "fan_out"):
            branches = [_branch(prompt, index) for index in range(1, 4)]
            await asyncio.gather(*(rollout(branch) for branch in branches))
        return branches

    branches = asyncio.run(main())
    (fan_out,) = starts(prompt, "fan_out")
    for branch in branches:
        generate, end = span_pair(branch, "generate")
        assert generate["parent_span_id"] == fan_out["span_id"] and end is not None


@pytest.mark.parametrize("copied", ["before", "after"], ids=["copied-before", "copied-after"])
def test_only_a_copy_holding_the_span_adopts_it(copied):
    """A copy taken before the span opened holds no start of it: a parent there would
    name a span its own carrier lacks."""
    prompt = FakeSample()
    bind_trace(prompt)
    early = _branch(prompt, 1)
    with trace_span(prompt, "outer"):
        branch = early if copied == "before" else _branch(prompt, 1)
        with trace_span(branch, "work"):
            pass
    work, _ = span_pair(branch, "work")
    if copied == "before":
        assert "parent_span_id" not in work
        assert_well_formed(branch)
    else:
        assert work["parent_span_id"] == starts(branch, "outer")[0]["span_id"]
    assert len(events_of(prompt)) == 2


def test_a_copy_is_read_once_per_span_not_once_per_record(monkeypatch):
    """Finding the span a copy was taken in reads the copy's records; doing so for every
    record written made a copy's recording quadratic in its records."""
    from slime_trace_widget.tracing import carriers

    reads = []
    real = carriers._first_held
    monkeypatch.setattr(carriers, "_first_held",
                        lambda carrier, span_ids: reads.append(1) or real(carrier, span_ids))
    prompt = FakeSample(index=0)
    bind_trace(prompt)
    with trace_span(prompt, "outer"):
        branch = _branch(prompt, 1)
        for tick in range(200):
            trace_event(branch, "tick", {"tick": tick})
    outer_id = starts(prompt, "outer")[0]["span_id"]
    assert {record["parent_span_id"] for record in named(branch, "tick")} == {outer_id}
    assert len(reads) == 1
