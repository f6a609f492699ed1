"""Which slices Perfetto's JSON importer binds a document's flows to, modelled after its
code (google/perfetto, ``src/trace_processor``): the sorter's order, the thread slice
stacks, and the flow tracker. No trace processor runs here (its Python package fetches a
binary from the internet), so the tests hold the exporter to this model instead.

* Order (``sorter/trace_sorter.h``, ``SlowOperatorLess``): by ``ts``; at one ``ts`` the
  complete (``X``) events longest first, then every other event (instants, flow events)
  as written; equal keys as written.
* Stacks (``importers/common/slice_tracker.cc``): a slice that begins (``X``, or an ``i``
  instant as a zero-length one) first pops the slices that ended before it (or at its
  time, unless both have no duration), then is pushed; nothing else pops.
* Flows (``importers/common/flow_tracker.cc``, ``importers/json/json_trace_parser.cc``):
  ``s`` opens flow ``id`` at the top of its thread's stack, ``f`` with ``bp: "e"`` draws
  an arrow from the slice holding it to the top of its stack (an ``f`` read before its
  ``s`` is dropped), an ``f`` without ``bp`` to the next slice that begins on its
  thread. An ``X`` with ``bind_id`` does the same for that very slice, right after it
  is pushed: ``flow_out`` opens (a second opener of an id is refused), ``flow_in``
  draws, both draw and then hold. ``s`` / ``f`` ids are numbered 0, 1, ... as first
  met, ``bind_id`` is taken as it is, and both share one table: a bind id that is also
  an ``s`` / ``f`` flow's number mixes the two.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any


def _reading_key(position: int, event: dict[str, Any]) -> tuple[float, float, int]:
    duration = event["dur"] if event["ph"] == "X" else 0
    longest_first = -duration if event["ph"] == "X" and duration > 0 else 0
    return (event["ts"], longest_first, position)


def bound_flows(document: dict[str, Any]) -> list[tuple[int, int]]:
    """The arrows Perfetto draws for ``document``'s flows: (earlier slice, later slice)
    as positions in ``document["traceEvents"]``, in the order it draws them."""
    events = document["traceEvents"]
    order = sorted((position for position, event in enumerate(events)
                    if event["ph"] in "Xisf"),
                   key=lambda position: _reading_key(position, events[position]))
    stacks: dict[tuple[int, int], list[int]] = defaultdict(list)
    waiting: dict[tuple[int, int], list[int]] = defaultdict(list)  # f without bp
    holder: dict[int, int] = {}  # flow id -> the slice that holds it
    v1_ids: dict[tuple[Any, str, str], int] = {}
    arrows: list[tuple[int, int]] = []

    def draw(flow: int, slot: int, keep: bool) -> None:
        if flow not in holder:
            return  # an end read before its start
        held = holder[flow]
        # the earlier slice is the arrow's start; at one time, the one that held the flow
        later_held = events[held]["ts"] > events[slot]["ts"]
        arrows.append((slot, held) if later_held else (held, slot))
        if keep:
            holder[flow] = slot

    def v1_flow(event: dict[str, Any]) -> int:
        return v1_ids.setdefault((event["id"], event["cat"], event["name"]), len(v1_ids))

    for position in order:
        event = events[position]
        thread = (event["pid"], event["tid"])
        stack = stacks[thread]
        if event["ph"] in "Xi":
            start = event["ts"]
            duration = event.get("dur", 0) if event["ph"] == "X" else 0
            while stack:
                top = events[stack[-1]]
                end = top["ts"] + (top.get("dur", 0) if top["ph"] == "X" else 0)
                top_duration = end - top["ts"]
                if end < start or (end == start and not (top_duration == 0 and duration == 0)):
                    stack.pop()
                else:
                    break
            stack.append(position)
            for flow in waiting.pop(thread, []):
                draw(flow, position, keep=False)
            if event["ph"] == "X" and "bind_id" in event:
                flow = event["bind_id"]
                if event.get("flow_in"):
                    draw(flow, position, keep=bool(event.get("flow_out")))
                elif event.get("flow_out") and flow not in holder:
                    holder[flow] = position
        else:  # s or f: numbered as met, bound or not
            flow = v1_flow(event)
            if event["ph"] == "s" and stack:
                holder.setdefault(flow, stack[-1])
            elif event["ph"] == "f" and event.get("bp") != "e":
                waiting[thread].append(flow)
            elif event["ph"] == "f" and stack:
                draw(flow, stack[-1], keep=False)
    return arrows


def link_slices(frames: Any, document: dict[str, Any]) -> list[tuple[int, int]]:
    """Per link of ``frames`` (``links.links``) whose two ends are in ``document``, the
    positions of the slices it should join, found by what they are, not by how the
    exporter placed them: the process and the sample (a thread's name starts with
    ``#<index>``), the name and the start. Each must be one slice of the document."""
    from slime_trace_widget.answers.links import links

    events = document["traceEvents"]
    sample_of_thread = {(e["pid"], e["tid"]): e["args"]["name"].split()[0]
                        for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    found: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    for position, event in enumerate(events):
        if event["ph"] in "Xi":
            name = event["name"].removesuffix(" (open)")
            found[(event["pid"], sample_of_thread[(event["pid"], event["tid"])], name,
                   event["ts"])].append(position)
    samples = frames.samples

    def slice_of(kind: str, label: int) -> int | None:
        core = frames.span_core if kind == "span" else frames.event_core
        row = core.loc[label]
        sample = samples.iloc[int(row["sample_row"])]
        when = row["start"] if kind == "span" else row["ts"]
        key = (int(sample["dump"]) + 1, f"#{int(sample['sample_index'])}", str(row["name"]),
               round((when - frames.t0) * 1e6))
        hits = found.get(key, [])
        assert len(hits) <= 1, f"{key} names {len(hits)} slices"
        return hits[0] if hits else None

    out = []
    table = links(frames)
    for from_kind, from_index, to_kind, to_index in zip(
            table["from_kind"].astype(str), table["from_index"], table["to_kind"].astype(str),
            table["to_index"], strict=True):
        first, second = slice_of(from_kind, int(from_index)), slice_of(to_kind, int(to_index))
        if first is not None and second is not None:
            out.append((first, second))
    return out
