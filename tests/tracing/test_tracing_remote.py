"""Carrying a trace to another process and merging its records back.

``export_trace`` gives a JSON- and pickle-safe payload, ``import_trace`` continues
the trace under the exporting span (in a real subprocess too), and
``merge_trace`` brings the remote records home with one ``trace_import`` mark,
ignoring foreign traces and records already there; into deep copies that share a
trace id, each record goes to the member holding its parent span (else the one
with its sample id). A failing clock or a garbage payload still gives a usable handle.
"""

from __future__ import annotations

import copy
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from slime_trace_widget.tracing import (
    bind_trace,
    bind_trace_carrier,
    export_trace,
    import_trace,
    merge_trace,
    trace_event,
    trace_next_attempt,
    trace_span,
    use_clock,
)
from tests.support.traced_samples import FakeSample, events_of, named, span_pair
from tests.support.traced_samples import assert_logged as _assert_logged

REPO = Path(__file__).resolve().parents[2]


REMOTE_WORKER = """
import json, sys
from slime_trace_widget.tracing import import_trace, trace_event, trace_span

handle = import_trace(json.load(sys.stdin))
with trace_span(handle, "remote_reward", attrs={"pid": 1}) as span:
    with trace_span(handle, "remote_inner"):
        trace_event(handle, "remote_tick")
    span.set("score", 0.75)
trace_event(handle, "remote_done")
json.dump(handle.carrier, sys.stdout)
"""


def test_trace_continues_in_another_process_and_merges_back():
    sample = FakeSample(index=4, group_index=1)
    with trace_span(sample, "reward_model") as local:
        payload = export_trace(sample)
        assert pickle.loads(pickle.dumps(payload)) == payload
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        done = subprocess.run(
            [sys.executable, "-c", REMOTE_WORKER],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            env=env,
            check=True,
            timeout=120,
        )
        remote = json.loads(done.stdout)
        assert merge_trace(sample, remote) == 7  # 6 records and the trace_import mark

    local_id = local.span_ids[0]
    assert payload["parent_span_id"] == local_id
    remote_span, remote_end = span_pair(sample, "remote_reward")
    inner, _ = span_pair(sample, "remote_inner")
    assert remote_span["parent_span_id"] == local_id
    assert inner["parent_span_id"] == remote_span["span_id"]
    assert named(sample, "remote_tick")[0]["parent_span_id"] == inner["span_id"]
    assert named(sample, "remote_done")[0]["parent_span_id"] == local_id
    mark = named(sample, "trace_import")
    assert len(mark) == 1 and mark[0]["parent_span_id"] == local_id
    assert mark[0]["type"] == "event" and "attrs" not in mark[0]
    assert remote_end["attrs"] == {"score": 0.75}
    all_ids = {e["span_id"] for e in events_of(sample) if "span_id" in e}
    links = {e["parent_span_id"] for e in events_of(sample) if "parent_span_id" in e}
    assert links <= all_ids
    assert {(e["sample_id"], e["group_id"]) for e in events_of(sample)} == {(4, 1)}


def test_export_import_merge_in_process():
    group = [FakeSample(index=i) for i in range(2)]
    with trace_span(group, "group_rm"):
        payloads = [export_trace(member) for member in group]
    assert json.loads(json.dumps(payloads)) == payloads
    assert export_trace(group)["trace_id"] is None

    trace_next_attempt(group[1])
    remote = [import_trace(payload) for payload in payloads]
    with trace_span(remote, "remote_group"):
        trace_next_attempt(remote[0])
    stranger = bind_trace(FakeSample(index=9))
    trace_event(stranger, "foreign")

    merged = merge_trace(group, [r.carrier for r in remote] + [stranger])
    assert merged == 7  # 5 records and one trace_import mark per imported member
    assert group[0].trace["attempt"] == 1
    assert group[1].trace["attempt"] == 1
    for member, payload in zip(group, payloads, strict=True):
        start, end = span_pair(member, "remote_group")
        assert start["parent_span_id"] == payload["parent_span_id"]
        assert end is not None
    assert not named(group[0], "foreign")
    assert merge_trace(group[0], events_of(group[1])) == 0


def test_a_failing_clock_loses_the_import_mark_not_the_identity(debug_log):
    sample = FakeSample(index=3)
    with trace_span(sample, "local"):
        payload = export_trace(sample)

    def broken() -> float:
        raise OSError("clock gone")

    with use_clock(broken):
        handle = import_trace(payload)
    assert handle.trace_id == payload["trace_id"] and handle.carrier["events"] == []
    assert handle.parent_span_id == payload["parent_span_id"]
    _assert_logged(debug_log)


def test_import_of_garbage_gives_a_usable_handle(debug_log):
    handle = import_trace("not a payload")
    with trace_span(handle, "s"):
        pass
    assert len(handle.carrier["events"]) == 2
    assert import_trace(export_trace(None)).carrier["events"] == []  # no trace: no mark
    outside = export_trace(FakeSample())  # no open span: no parent to mark under
    assert outside["trace_id"] and import_trace(outside).carrier["events"] == []
    _assert_logged(debug_log)
    assert bind_trace_carrier(None).carrier["events"] == []
    assert bind_trace_carrier(5).carrier["events"] == []


def _fanned_out_group(size: int) -> list[dict]:
    """Deep copies of one bound sample, as slime fans a prompt out: one trace id for all."""
    prototype = {"index": 0, "group_index": 0}
    bind_trace(prototype)
    return [copy.deepcopy(prototype) for _ in range(size)]


def _remote_reward(member: dict, name: str) -> tuple[str, dict]:
    """Export ``member`` under a local span, record a nested remote span; (local id, carrier)."""
    with trace_span(member, "reward") as local:
        payload = export_trace(member)
    handle = import_trace(payload)
    with trace_span(handle, name), trace_span(handle, f"{name}_inner"):
        trace_event(handle, f"{name}_tick")
    return local.span_ids[0], handle.carrier


@pytest.mark.parametrize("own_sample_ids", [True, False], ids=["sample-ids", "shared-ids"])
def test_merge_routes_deep_copies_by_parent_span(own_sample_ids):
    group = _fanned_out_group(3)
    for index, member in enumerate(group):
        member["index"] = index
        if own_sample_ids:
            member["trace"]["sample_id"] = index
    sent = [_remote_reward(member, f"remote_{i}") for i, member in enumerate(group)]

    assert merge_trace(group, [carrier for _, carrier in sent]) == 3 * 6
    for index, (member, (local_id, _)) in enumerate(zip(group, sent, strict=True)):
        remote, end = span_pair(member, f"remote_{index}")
        inner, inner_end = span_pair(member, f"remote_{index}_inner")
        assert remote["parent_span_id"] == local_id and end is not None
        assert inner["parent_span_id"] == remote["span_id"] and inner_end is not None
        assert named(member, f"remote_{index}_tick")[0]["parent_span_id"] == inner["span_id"]
        assert named(member, "trace_import")[0]["parent_span_id"] == local_id
        others = {f"remote_{i}" for i in range(3)} - {f"remote_{index}"}
        assert not [e for e in events_of(member) if e["name"] in others]


def test_a_copy_re_indexed_into_a_group_records_under_its_own_ids():
    """As slime's ``bind_trace``: each bind stamps the sample's index and group index on
    its carrier. A deep copy kept the prompt's ids, so its records named the prompt's
    sample and a remote record exported outside any span merged into no member."""
    prompt = FakeSample(index=0, group_index=0)
    with trace_span(prompt, "prepare_prompt"):
        pass
    group = []
    for offset in range(2):
        member = copy.deepcopy(prompt)
        member.index, member.group_index = 10 + offset, 4
        group.append(member)
    with trace_span(group[1], "generate"):
        pass
    record = events_of(group[1])[-1]
    assert (group[1].trace["sample_id"], group[1].trace["group_id"]) == (11, 4)
    assert (record["sample_id"], record["group_id"]) == (11, 4)
    handle = import_trace(export_trace(group[1]))  # outside any span: no parent to route by
    with trace_span(handle, "remote_rm"):
        pass
    assert merge_trace(group, handle.carrier) == len(handle.carrier["events"])
    assert named(group[1], "remote_rm") and not named(group[0], "remote_rm")


def test_merge_into_deep_copies_falls_back_to_the_sample_id():
    group = _fanned_out_group(2)
    group[1]["index"] = 1  # its carrier's sample_id once bound, as slime's bind_trace stamps
    remote = bind_trace_carrier(None, trace_id=group[0]["trace"]["trace_id"], sample_id=1)
    trace_event(remote, "parentless")
    other = bind_trace_carrier(None, trace_id=group[0]["trace"]["trace_id"], sample_id=7)
    trace_event(other, "nowhere")  # neither parent nor sample id tells the member: skipped

    assert merge_trace(group, [remote.carrier, other.carrier]) == 1
    assert named(group[1], "parentless") and not named(group[0], "parentless")
    assert not named(group[0], "nowhere") and not named(group[1], "nowhere")


def test_a_remote_that_continued_a_copy_of_the_carrier_merges_only_its_own_records():
    local = FakeSample(index=1)
    with trace_span(local, "reward_model"):
        payload = export_trace(local)
        # The server got the whole sample (pickled, its carrier too) and went on in it.
        remote = pickle.loads(pickle.dumps(local))
        handle = import_trace(payload, carrier=remote.trace)
        with trace_span(handle, "remote_score"):
            trace_event(handle, "scored")
        held = len(events_of(local))
        assert merge_trace(local, handle) == 4  # trace_import, the span's two ends, scored
    records = [(event["type"], event["name"], event.get("span_id")) for event in events_of(local)]
    assert len(records) == held + 5 == len(set(records))  # and reward_model's end
    assert merge_trace(local, handle) == 0  # merged before: nothing twice
    assert merge_trace(local, local.trace) == 0  # its own records


def test_merge_takes_a_remote_sample_as_its_carrier():
    for shape in ("object", "dict"):
        local = FakeSample(index=1)
        with trace_span(local, "rm"):
            payload = export_trace(local)
        remote = FakeSample(index=1)
        remote.trace = import_trace(payload).carrier
        with trace_span(remote, "remote_score"):
            pass
        given = remote if shape == "object" else {"index": 1, "trace": remote.trace}
        assert merge_trace(local, given) == 3, shape
        assert span_pair(local, "remote_score")[1] is not None


def test_records_alike_made_remotely_are_all_merged():
    local = FakeSample(index=1)
    with trace_span(local, "rm"):
        payload = export_trace(local)
    handle = import_trace(payload)
    with use_clock(lambda: 5.0):  # two events of one time: both are records
        trace_event(handle, "tick")
        trace_event(handle, "tick")
    assert merge_trace(local, handle) == 3
    assert len(named(local, "tick")) == 2
