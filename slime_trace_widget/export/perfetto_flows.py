"""Links as Perfetto flows bound to the very slices they join.

How Perfetto's JSON importer binds a flow (``src/trace_processor/importers/json/
json_trace_parser.cc``, ``importers/common/flow_tracker.cc`` and ``slice_tracker.cc``
in google/perfetto): it reads the events of a thread by time, at one time the complete
(``X``) events longest first (older versions: as written; the exporter writes them so)
and the others in the order written. A flow event (``s``, or ``f`` with ``bp: "e"``)
binds to the slice on top of its thread's stack as it is read: the deepest slice begun
so far, so a flow placed inside a span whose child starts at the same microsecond binds
to the child (and an ``f`` without ``bp`` to the next slice to begin). A complete
event's own ``bind_id`` with ``flow_out`` / ``flow_in`` binds to that event's slice,
pushed just before: no other slice can take it. Only ``X`` and ``B`` events carry one
(an ``i`` instant cannot), and one id each.

What one id draws follows from the order the slices are read in: ``flow_out`` opens
the id at a slice (a second opener is refused), ``flow_in`` draws an arrow from the
slice that holds the id as it is read, both draw and then hold it. Perfetto draws each
arrow from the earlier slice to the later, whichever way the link points. So the
slices are read in order and each joins the id of one earlier slice it is linked to
that still holds its id, drawing that link, and, if it is linked to slices not read
yet, holds that id from then on (or opens an id of its own when it joined none). Among
slices of one time and length, whose order is free, those that will not take an id
over are read first. That draws group copies around their hub, retry chains, remote
exports and their mixes. What it leaves (a slice's second link to earlier slices, or a
link to a slice whose id a later copy took over: two retried copies of one group span)
is written as ``s`` / ``f`` events at the slices' exact times, which bind to the
innermost slice that begins then on the thread: the intended one unless a child
starts with it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from .own_fields import beside_attributes

__all__ = ["bind_flows"]

#: The field a slice that ends links carries: their kinds, as flow names would have.
LINK_KINDS_FIELD = "slime.links"


def bind_flows(slices: Sequence[dict[str, Any]], ends: Sequence[tuple[int, int]],
               kinds: Sequence[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The complete events in the order to write them, the links bound to their slices;
    and the ``s`` / ``f`` events of the links that could not bind so.

    ``slices`` are the document's complete events in the order Perfetto reads them (by
    ``ts``, longest first, then as written: the exporter writes them before any other
    event); ``ends[k]`` holds the positions in ``slices`` of link ``k``'s two slices and
    ``kinds[k]`` its kind. Slices of one ``ts`` and ``dur``, which Perfetto reads in the
    order written, come back in the order they were bound in. Slices that bind get
    ``bind_id`` and ``flow_out`` / ``flow_in``, in place, and every slice that ends a
    link lists their kinds in ``slime.links`` (only s/f flows have names). The returned
    events go after the complete events and before the instants, so that at one time
    they are read after every slice that begins then and before any instant."""
    _list_kinds(slices, ends, kinds)
    tie = _tie_classes(slices)
    bound, place, unbound = _bind(ends, tie)
    fallback = _flow_events([ends[link] for link in unbound], [kinds[link] for link in unbound],
                            slices)
    # Perfetto numbers the s/f flows 0, 1, ... as it meets them and takes a bind id as
    # it is, into one table (flow_tracker.h): numbered past those, no bind id is ever
    # also an s/f flow's.
    first_id = len(fallback) // 2 + 1
    for slot, (bind_id, flow_in, flow_out) in bound.items():
        slices[slot]["bind_id"] = first_id + bind_id
        if flow_in:
            slices[slot]["flow_in"] = True
        if flow_out:
            slices[slot]["flow_out"] = True
    places = np.zeros(len(slices), dtype=np.int64)
    places[list(place)] = list(place.values())
    order = np.lexsort((np.arange(len(slices)), places, tie))  # the last key sorts first
    return [slices[slot] for slot in order.tolist()], fallback


def _tie_classes(slices: Sequence[dict[str, Any]]) -> np.ndarray:
    """Per slice, the number of its run of slices with one ``ts`` and ``dur``."""
    ts = np.array([event["ts"] for event in slices], dtype=np.int64)
    dur = np.array([event["dur"] for event in slices], dtype=np.int64)
    changes = (ts[1:] != ts[:-1]) | (dur[1:] != dur[:-1])
    return np.concatenate([[0], np.cumsum(changes)])[:len(slices)].astype(np.int64)


def _bind(ends: Sequence[tuple[int, int]], tie: np.ndarray
          ) -> tuple[dict[int, tuple[int, bool, bool]], dict[int, int], list[int]]:
    """Per slice that binds, (its id, numbered from 0; flow_in; flow_out); per linked
    slice, its place among its ties; and the links left to ``s`` / ``f`` events: the
    slices read in order as the module says."""
    links_of: dict[int, list[tuple[int, int]]] = defaultdict(list)  # slot -> (link, other)
    for link, (first, second) in enumerate(ends):
        if first != second:  # a link from a slice to itself draws no arrow
            links_of[first].append((link, second))
            links_of[second].append((link, first))
    unread = {slot: len(found) for slot, found in links_of.items()}  # links to slices ahead
    by_tie: dict[int, list[int]] = defaultdict(list)
    for slot in sorted(links_of):
        by_tie[int(tie[slot])].append(slot)
    bound: dict[int, tuple[int, bool, bool]] = {}
    holder: dict[int, int] = {}  # id -> the slice that holds it
    place: dict[int, int] = {}
    read: set[int] = set()
    unbound: list[int] = []
    for pending in by_tie.values():
        for number in range(len(pending)):
            # one linked to no slice ahead first: it will take no id over from its ties
            slot = next((candidate for candidate in pending if not unread[candidate]),
                        pending[0])
            pending.remove(slot)
            place[slot] = number
            joined = None
            for link, other in links_of[slot]:
                if other not in read:
                    unread[other] -= 1
                    continue
                held = bound.get(other, (None,))[0]
                if joined is None and held is not None and holder[held] == other:
                    joined = held
                else:
                    unbound.append(link)
            read.add(slot)
            holds = unread[slot] > 0
            if joined is not None:
                bound[slot] = (joined, True, holds)
            elif holds:
                joined = len(holder)  # opens an id of its own
                bound[slot] = (joined, False, True)
            if joined is not None and holds:
                holder[joined] = slot
    return bound, place, sorted(unbound)


def _list_kinds(slices: Sequence[dict[str, Any]], ends: Sequence[tuple[int, int]],
                kinds: Sequence[str]) -> None:
    """Each slice that ends a link gets the kinds of its links in its ``args``."""
    kinds_of: dict[int, set[str]] = defaultdict(set)
    for (first, second), kind in zip(ends, kinds, strict=True):
        kinds_of[first].add(kind)
        kinds_of[second].add(kind)
    for slot, found in kinds_of.items():
        slices[slot]["args"] = beside_attributes(slices[slot].get("args", {}),
                                                 {LINK_KINDS_FIELD: sorted(found)})


def _flow_events(ends: Sequence[tuple[int, int]], kinds: Sequence[str],
                 slices: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per link, an ``s`` at its earlier slice and an ``f`` binding to the enclosing
    slice at its later one, at their exact times (``s`` first: Perfetto drops an ``f``
    read before its ``s``)."""
    out = []
    for (first, second), kind in zip(ends, kinds, strict=True):
        early, late = sorted((first, second))
        common = {"name": kind, "cat": "link", "id": len(out) // 2 + 1}
        out.append({"ph": "s", **common, **_place(slices[early])})
        out.append({"ph": "f", "bp": "e", **common, **_place(slices[late])})
    return out


def _place(event: dict[str, Any]) -> dict[str, Any]:
    return {"pid": event["pid"], "tid": event["tid"], "ts": event["ts"]}
