"""Perfetto export of awkward inputs: many concurrent spans in one sample (complete events
must nest on every thread, or Perfetto drops them), and a dump whose file name is not
valid UTF-8."""

from __future__ import annotations

import contextvars
import json
import os
import re
import shutil
from collections import defaultdict
from pathlib import Path

from slime_trace_widget.answers.links import links
from slime_trace_widget.export.perfetto import export_perfetto, perfetto_trace
from slime_trace_widget.frames import TraceFrames, build_frames
from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.tracing import trace_span, use_clock
from slime_trace_widget.tracing.spans import TraceSpan
from tests.support.perfetto_import import bound_flows, link_slices

FIXTURES = Path(__file__).parents[1] / "fixtures"


def staggered_concurrent_spans(count: int) -> dict:
    """A sample whose root holds ``count`` tool calls opened one after another and closed
    in the same order, each in its own context (as asyncio tasks are), so every call
    overlaps the next ones partly."""
    now = [1000.0]
    sample = {"index": 0, "group_index": 0}
    with use_clock(lambda: now[0]), trace_span(sample, "root"):
        calls = []
        for number in range(count):
            now[0] += 1
            call = TraceSpan(sample, f"tool{number}", None, True)
            context = contextvars.copy_context()
            context.run(call.__enter__)
            calls.append((context, call))
        for context, call in calls:
            now[0] += 1
            context.run(call.__exit__, None, None, None)
    return sample


def partial_overlaps(document: dict) -> int:
    """How many complete events overlap an earlier one on their thread without nesting."""
    by_thread = defaultdict(list)
    for event in document["traceEvents"]:
        if event["ph"] == "X":
            by_thread[(event["pid"], event["tid"])].append(
                (event["ts"], event["ts"] + event["dur"]))
    bad = 0
    for intervals in by_thread.values():
        stack: list[float] = []
        for start, end in sorted(intervals, key=lambda interval: (interval[0], -interval[1])):
            while stack and stack[-1] <= start:
                stack.pop()
            bad += bool(stack and end > stack[-1])
            stack.append(end)
    return bad


def test_a_hundred_concurrent_spans_nest_on_their_threads() -> None:
    frames = build_frames({"rollout_id": 1, "samples": [staggered_concurrent_spans(100)]})
    document = perfetto_trace(frames)
    complete = [event for event in document["traceEvents"] if event["ph"] == "X"]
    assert len(complete) == len(frames.spans) == 101
    assert partial_overlaps(document) == 0
    names = {(event["pid"], event["tid"]): event["args"]["name"]
             for event in document["traceEvents"] if event["name"] == "thread_name"}
    used = {(event["pid"], event["tid"]) for event in complete}
    assert used <= set(names) and len(used) == 100  # the root and tool0 share the first
    assert len(set(names.values())) == len(names)
    assert all(name.startswith("#0") for name in names.values())


def test_concurrent_spans_of_several_samples_keep_their_own_threads() -> None:
    samples = [staggered_concurrent_spans(70) for _ in range(3)]
    for index, sample in enumerate(samples):
        sample["index"] = index
    document = perfetto_trace(build_frames({"rollout_id": 1, "samples": samples}))
    assert partial_overlaps(document) == 0
    threads_of: dict[str, set] = defaultdict(set)
    for event in document["traceEvents"]:
        if event["name"] == "thread_name":
            threads_of[event["args"]["name"].split()[0]].add(event["tid"])
    assert [len(tids) for tids in threads_of.values()] == [70, 70, 70]
    assert not set.intersection(*threads_of.values())


def test_a_child_that_ends_with_its_parent_ends_with_it_in_any_reader() -> None:
    """Perfetto's older JSON reader truncates ``ts * 1000`` and ``dur * 1000`` to
    nanoseconds, its newer one rounds them. With fractions of a microsecond the child
    below ended one nanosecond after its parent when truncated, and Perfetto dropped
    it; whole microseconds read the same both ways."""
    from tests.frames.test_frames import frames_of, rec, sample

    frames = frames_of(sample(
        rec("span_start", "root", 0.0, "r"),
        rec("span_start", "parent", 7.543587446, "p", pid="r"),
        rec("span_start", "child", 7.630068541, "c", pid="p"),
        rec("span_end", "child", 7.703713417, "c"), rec("span_end", "parent", 7.703713417, "p"),
        rec("span_end", "root", 9.0, "r")))
    complete = {e["name"]: e for e in perfetto_trace(frames)["traceEvents"] if e["ph"] == "X"}
    for read in (int, round):
        ends = {name: read(event["ts"] * 1000) + read(event["dur"] * 1000)
                for name, event in complete.items()}
        assert ends["child"] == ends["parent"], read
    assert all(isinstance(event[key], int) for event in complete.values()
               for key in ("ts", "dur"))


def test_a_dump_named_in_no_encoding_exports(tmp_path: Path) -> None:
    dump = Path(os.fsdecode(os.fsencode(tmp_path) + b"/rollout_\xff.pt"))
    shutil.copyfile(FIXTURES / "small.pt", dump)
    out = export_perfetto(load_frames([dump]), tmp_path / "trace.json")
    document = json.loads(out.read_text(encoding="utf-8"))
    assert [Path(path).name for path in document["otherData"]["dumps"]] == ["rollout_\ufffd.pt"]
    assert any(event["ph"] == "X" for event in document["traceEvents"])


def test_attributes_named_like_the_exporters_fields_are_kept() -> None:
    """A tool's ``state``, ``attempt`` or ``span_id`` attribute, or an event's ``kind``,
    was overwritten by the exporter's own fields of those names."""
    from tests.frames.test_frames import frames_of, rec, sample

    frames = frames_of(sample(
        rec("span_start", "tool", 0, "a", attrs={"state": "waiting_for_sandbox",
                                                "attempt": 3, "span_id": "tool-42"}),
        rec("event", "stop", 1, attrs={"kind": "length"}),
        rec("span_end", "tool", 2, "a")))
    events = perfetto_trace(frames)["traceEvents"]
    (span,) = [e for e in events if e["ph"] == "X"]
    assert {key: span["args"][key] for key in ("state", "attempt", "span_id")} == {
        "state": "waiting_for_sandbox", "attempt": 3, "span_id": "tool-42"}
    assert (span["args"]["slime.state"], span["args"]["slime.attempt"],
            span["args"]["slime.span_id"]) == ("closed", 0, "a")
    (instant,) = [e for e in events if e["ph"] == "i"]
    assert (instant["args"]["kind"], instant["args"]["slime.kind"]) == ("length", "instant")



def test_attributes_named_like_the_exporters_own_fields_move_aside() -> None:
    """An attribute named ``slime.state``, ``slime.span_id``, ``slime.attempt`` or
    ``slime.kind`` was overwritten by the exporter's field; it is kept as ``attr.<name>``."""
    from tests.frames.test_frames import frames_of, rec, sample

    frames = frames_of(sample(
        rec("span_start", "tool", 0, "a", attrs={"slime.state": "mine", "slime.attempt": 7,
                                                "attr.slime.state": "taken"}),
        rec("event", "stop", 1, attrs={"slime.kind": "theirs"}),
        rec("span_end", "tool", 2, "a", attrs={"slime.span_id": "theirs-42"})))
    events = perfetto_trace(frames)["traceEvents"]
    (span,) = [e for e in events if e["ph"] == "X"]
    assert {key: span["args"][key] for key in (
        "slime.state", "slime.attempt", "slime.span_id", "attr.slime.state",
        "attr.attr.slime.state", "attr.slime.attempt", "attr.slime.span_id")} == {
        "slime.state": "closed", "slime.attempt": 0, "slime.span_id": "a",
        "attr.slime.state": "taken", "attr.attr.slime.state": "mine",
        "attr.slime.attempt": 7, "attr.slime.span_id": "theirs-42"}
    (instant,) = [e for e in events if e["ph"] == "i"]
    assert (instant["args"]["slime.kind"], instant["args"]["attr.slime.kind"]) == (
        "instant", "theirs")

def test_a_parent_comes_before_a_child_that_starts_with_it() -> None:
    """The child's records came first, and so did its complete event: read in the order
    given at one ts, the parent did not enclose the child already open."""
    from tests.frames.test_frames import frames_of, rec, sample

    frames = frames_of(sample(
        rec("span_start", "inner", 0, "b", pid="a"), rec("span_start", "outer", 0, "a"),
        rec("span_end", "inner", 5, "b"), rec("span_end", "outer", 10, "a")))
    complete = [e for e in perfetto_trace(frames)["traceEvents"] if e["ph"] == "X"]
    assert [e["name"] for e in complete] == ["outer", "inner"]
    assert complete[0]["tid"] == complete[1]["tid"]


def _arrows(pairs: list[tuple[int, int]]) -> list[frozenset[int]]:
    return sorted((frozenset(pair) for pair in pairs), key=sorted)


def _starts_with_a_child() -> TraceFrames:
    """Links whose slices each hold a child that starts in the same microsecond: a group
    span copied over samples 0 and 1, a span exported from sample 2 (its
    ``trace_import`` inside the child), and sample 3's retry, whose ``attempt_start``
    links to the first attempt's ``generate``."""
    from tests.frames.test_frames import frames_of, rec, sample

    copies = [sample(rec("span_start", "group_rm", 0, "g"), rec("span_start", "score", 0, "s", "g"),
                     rec("span_end", "score", 1, "s"), rec("span_end", "group_rm", 2, "g"),
                     index=index) for index in (0, 1)]
    exported = sample(rec("span_start", "reward_model", 0, "rm"),
                      rec("span_start", "call", 0, "c", "rm"),
                      rec("event", "trace_import", 0.5, None, "rm"),
                      rec("span_end", "call", 1, "c"), rec("span_end", "reward_model", 3, "rm"),
                      index=2)
    retried = sample(rec("span_start", "generate", 0, "a"),
                     rec("span_start", "prefill", 0, "p", "a"),
                     rec("span_end", "prefill", 0.5, "p"), rec("span_end", "generate", 1, "a"),
                     rec("event", "attempt_start", 2, None, None, 1),
                     rec("span_start", "generate", 2.5, "b", None, 1),
                     rec("span_end", "generate", 3, "b", None, 1), index=3)
    return frames_of(*copies, exported, retried)


def test_flows_bind_to_their_own_slices_not_to_children_that_start_with_them() -> None:
    """A flow event binds to the deepest slice open on its thread when Perfetto reads it,
    so ``s``/``f`` events half a microsecond into a span bound to its child that starts
    with it; an ``f`` read before its ``s`` (the retry's, which points back in time) was
    dropped. Each link now binds by ``bind_id`` on its slices' own complete events."""
    frames = _starts_with_a_child()
    document = perfetto_trace(frames)
    wanted = link_slices(frames, document)
    events = document["traceEvents"]
    assert sorted(links(frames)["kind"].astype(str)) == ["attempt", "group", "group", "remote"]
    assert _arrows(bound_flows(document)) == _arrows(wanted)
    assert not [event for event in events if event["ph"] in ("s", "f")]
    linked = {slot for pair in wanted for slot in pair}
    for slot in linked:
        event = events[slot]
        assert event["ph"] == "X" and isinstance(event["bind_id"], int)
        assert event.get("flow_in") or event.get("flow_out")
        assert event["args"]["slime.links"] in (["attempt"], ["group"], ["remote"])
    assert all("bind_id" not in events[slot] for slot in range(len(events))
               if slot not in linked)
    (mark,) = [events[slot] for slot in linked if events[slot]["name"] == "trace_import"]
    assert mark["dur"] == 0 and mark["args"]["slime.kind"] == "instant"


def test_a_link_no_bind_id_can_draw_is_an_s_f_pair_at_its_slices_times() -> None:
    """Two group copies, each exported elsewhere: the second copy must hold the group's
    id for its own ``trace_import``, so when the first copy's mark is read the id is no
    longer the first copy's, and a slice has one id only. That link alone is an
    ``s``/``f`` pair at its slices' exact times, read after the slices that begin then
    (here no child starts with them, so it binds right); the rest bind by id, the
    retry in another sample too. Bind ids are numbered past the ``s``/``f`` flows,
    which Perfetto numbers 0, 1, ... in the same table: mixed, an id would join two
    flows."""
    from tests.frames.test_frames import frames_of, rec, sample

    copies = [sample(rec("span_start", "group_rm", 0, "g"),
                     rec("event", "trace_import", 1, None, "g"),
                     rec("span_end", "group_rm", 2, "g"), index=index) for index in (0, 1)]
    retried = sample(rec("span_start", "generate", 0, "a"), rec("span_end", "generate", 1, "a"),
                     rec("event", "attempt_start", 2, None, None, 1), index=2)
    frames = frames_of(*copies, retried)
    document = perfetto_trace(frames)
    events = document["traceEvents"]
    start, end = [event for event in events if event["ph"] in ("s", "f")]
    assert (start["ph"], end["ph"], start["name"], end["id"]) == ("s", "f", "remote", 1)
    assert (start["ts"], end["ts"]) == (0, 1_000_000) and start["tid"] == end["tid"]
    bind_ids = {event["bind_id"] for event in events if "bind_id" in event}
    assert bind_ids == {2, 3}
    assert _arrows(bound_flows(document)) == _arrows(link_slices(frames, document))
    phases = "".join(event["ph"] for event in events if event["ph"] != "M")
    assert re.fullmatch("X+sfi*", phases), phases


def test_two_retried_copies_of_a_group_span_leave_one_link_to_s_f() -> None:
    """Each copy is its sample's first span, so each retried copy must hold an id for its
    retry's arrow, but both are read before either retry: one copy takes the group's
    id over and the other's group link is left to an ``s``/``f`` pair. Only that link:
    the rest of the group and both retries bind by id."""
    from tests.frames.test_frames import frames_of, rec, sample

    def copy(index: int, retried: bool) -> dict:
        retry = [rec("event", "attempt_start", 3, None, None, 1)] if retried else []
        return sample(rec("span_start", "group_rm", 0, "g"), rec("span_start", "gen", 0, "c", "g"),
                      rec("span_end", "gen", 1, "c"), rec("span_end", "group_rm", 2, "g"),
                      *retry, index=index)

    frames = frames_of(copy(0, False), copy(1, True), copy(2, True), copy(3, False))
    document = perfetto_trace(frames)
    events = document["traceEvents"]
    assert sorted(event["name"] for event in events if event["ph"] in ("s", "f")) == [
        "group", "group"]
    wanted = link_slices(frames, document)
    drawn = _arrows(bound_flows(document))
    missed = [pair for pair in _arrows(wanted) if pair not in drawn]
    assert len(wanted) == 3 + 3 + 2 and len(missed) == 1  # group_rm, gen copies, retries
    assert {events[slot]["name"] for slot in missed[0]} == {"group_rm"}


def test_samples_without_spans_or_links_export() -> None:
    frames = build_frames({"rollout_id": 1, "samples": [{"index": 0, "group_index": 0}]})
    assert {event["ph"] for event in perfetto_trace(frames)["traceEvents"]} == {"M"}
