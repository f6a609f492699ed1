"""Requests the join's window left out: an engine host whose clock is further off the
dump's than the margin read around the frames (:data:`.window.MARGIN_SECONDS`).

The window is what keeps a join of one rollout from reading a whole run's traces, so it
stays; its cost is that a request whose engine time lies outside it is never read. That
is noticed, not guessed: a generation span that names a request (``sglang_request_id``)
and got none, or a PD request that got one half only, is *waiting*. Only then are the
spans of :data:`SEARCH_SECONDS` beyond each side of the window read, and the requests
there that the join's rules give to a waiting span (or whose rid names spans of the
frames) are listed in ``frames.engine_unmatched`` with :data:`BEYOND_WINDOW` as their
reason, counted in ``frames.warnings[BEYOND_WARNING]``, and attached nowhere. They are
not shifted into place: a host's skew is estimated from its requests inside the window,
which for a host that far off are some or none of its requests, all at one edge; the
engine load is read over the same window; and a window widened to any skew found would
read a run's traces for each rollout. Spans still waiting after that are counted in
``frames.warnings[MISSING_WARNING]``: their requests are in none of the traces read.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import replace

import pyarrow as pa
import pyarrow.compute as pc

from ...frames.model import TraceFrames
from ...schema import w3c_trace_id
from .match import Matches, follow_rooms, rid_owners
from .requests import KV_SENDER, Request, read_requests

#: How far beyond each side of the window requests are looked for, seconds.
SEARCH_SECONDS = 600.0
#: Seconds after its generation span ends that a request may still be on its way while
#: the rollout runs: SGLang's exporter sends every 0.5 s, the receiver commits in groups.
IN_FLIGHT_SECONDS = 10.0
#: ``engine_unmatched.reason`` of a request found beyond the window.
BEYOND_WINDOW = ("its engine time lies outside the traces read around the frames: its "
                 "host's clock is that far off the dump's")
#: ``frames.warnings`` keys: requests found beyond the window; generation spans whose
#: request is in no trace read.
BEYOND_WARNING = "engine_beyond_window"
MISSING_WARNING = "engine_request_missing"


def waiting_spans(frames: TraceFrames, matches: Matches, requests: list[Request],
                  held: set[int]) -> set[int]:
    """The spans that name a request and got none, and those that got one PD half only
    (a half of a room, without the other); not those that held engine spans already (a
    dataset converted with them), nor those of a reused rid that its requests listed with
    their reason stand for (:func:`_listed_for`: those requests were read, the rid told
    no attempt), nor one span per request read with only its short rid, whose rid ends
    with it (:attr:`.match.Matches.short`). While the rollout still runs (some span is open), a
    span that ended within :data:`IN_FLIGHT_SECONDS` of the frames' end is not waiting
    yet: its request may still be on its way to the store."""
    roles: dict[int, set[str]] = {}
    for request, owner in zip(requests, matches.owners, strict=True):
        if owner >= 0 and request.role != KV_SENDER:
            roles.setdefault(owner, set()).add(request.role)
    waiting = matches.named - set(roles)
    waiting.update(span for span, have in roles.items()
                   if len(have & {"prefill", "decode"}) == 1 and "" not in have)
    waiting -= held
    waiting -= _listed_for(matches, requests, waiting)
    # A request read but known only by its short rid stands for one span its rid ends
    # (the earliest waiting): that span's request was read, not missed.
    unattached = (number for number in matches.short if matches.owners[number] < 0)
    waiting -= _one_span_each(unattached, matches.short, requests, waiting)
    if waiting and pc.any(pc.equal(frames.tables.span_core.column("state"), "open")).as_py():
        ends = frames.span_core["display_end"]
        waiting = {span for span in waiting
                   if ends[span] <= frames.t1 - IN_FLIGHT_SECONDS}
    return waiting


def _listed_for(matches: Matches, requests: list[Request], waiting: set[int]) -> set[int]:
    """The waiting spans that the requests listed with a reason (read, left unattached:
    the rid told no attempt) stand for, :func:`_one_span_each`."""
    listed = (number for number in matches.reasons if matches.owners[number] < 0)
    return _one_span_each(listed, matches.reused, requests, waiting)


def _one_span_each(numbers: Iterable[int], reused: dict[int, list[int]],
                   requests: list[Request], waiting: set[int]) -> set[int]:
    """The waiting spans that unattached requests ``numbers`` of reused rids (``reused``:
    a request's number to its rid's spans) stand for: one span per request (a PD
    request's two halves, of two roles, one), the earliest first. The rid's other spans
    still wait: a rid sent three times with one request read has two attempts whose
    requests were not. Which of the rid's spans are excused changes neither the count
    nor what is searched (they share the rid)."""
    roles_of: dict[tuple[int, ...], Counter[str]] = defaultdict(Counter)
    for number in numbers:
        spans = reused.get(number)
        if spans:
            roles_of[tuple(spans)][requests[number].role] += 1
    excused: set[int] = set()
    for spans, roles in roles_of.items():
        excused.update(sorted(span for span in spans if span in waiting)[:max(roles.values())])
    return excused


def requests_beyond(frames: TraceFrames, requests: list[Request], matches: Matches,
                    waiting: set[int], beyond: Callable[[], pa.Table]
                    ) -> tuple[list[Request], int]:
    """The requests of ``beyond()`` (the stored spans beyond the window) that belong to a
    waiting span, or whose rid names several spans of the frames (a retry: which attempt
    is not told without the host's skew); and how many waiting spans found none.
    ``requests`` are the window's, ``matches`` their spans as the join placed them: a PD
    half beyond the window follows its room's half inside it, also one a reused rid's
    placement gave its span."""
    seen = {(request.trace_id, request.span_id) for request in requests}
    related = _related(beyond(), frames, requests, matches, waiting)
    found = _named_as_window([request for request in read_requests(related)
                              if request.role != KV_SENDER
                              and (request.trace_id, request.span_id) not in seen], requests)
    if not found:
        return [], len(waiting)
    everyone = requests + found
    by_rid = rid_owners(frames, everyone, matches.ids)
    owners = matches.owners + by_rid.owners[len(requests):]
    follow_rooms(everyone, owners)
    listed = []
    served: set[int] = set()
    unattached: list[int] = []
    for number, request in enumerate(found, start=len(requests)):
        owner = owners[number]
        if owner in waiting:
            served.add(owner)
        elif number not in by_rid.reused:
            continue
        elif owner < 0:
            unattached.append(number)
        listed.append(request)
    served |= _one_span_each(unattached, by_rid.reused, everyone, waiting - served)
    return listed, len(waiting - served)


def _named_as_window(found: list[Request], requests: list[Request]) -> list[Request]:
    """``found`` with their hosts named as the window's: a ``host_id`` that the window's
    requests split by machine (``<host_id>@<machine>``, :mod:`.machines`) is split on
    theirs too, though they alone may have come from one machine."""
    split = {piece.host.removesuffix(f"@{piece.machine}") for request in requests
             for piece in request.pieces
             if piece.machine and piece.host.endswith(f"@{piece.machine}")}
    if not split:
        return found

    def named(host: str, machine: str) -> str:
        return f"{host}@{machine}" if host in split and machine else host

    out = []
    for request in found:
        machine_of = {piece.host: piece.machine for piece in request.pieces}
        out.append(replace(request, host=named(request.host, machine_of.get(request.host, "")),
                           pieces=[replace(piece, host=named(piece.host, piece.machine))
                                   for piece in request.pieces]))
    return out


def _related(table: pa.Table, frames: TraceFrames, requests: list[Request],
             matches: Matches, waiting: set[int]) -> pa.Table:
    """The traces of ``table`` that may hold a waiting span's request, chosen on whole
    columns before any request is read: those whose rid (``gen_ai.request.id`` or
    ``rid``, whole or after its last ``_``) is a waiting span's rid or its tail, whose
    ``bootstrap_room`` is the room of a half a waiting span holds, or whose trace is a
    waiting span's sample's (W3C context). The join's rules then decide among them."""
    if not len(table):
        return table
    rids = {rid for index, rid in matches.ids.of_span.items() if index in waiting}
    wanted = pa.array(sorted(rids | {rid.rsplit("_", 1)[-1] for rid in rids}), pa.string())
    rooms = {request.room for request in requests if request.room is not None}
    room_texts = pa.array(sorted({text for room in rooms for text in (hex(room), str(room))}),
                          pa.string())
    attributes = table["attributes"]
    if pa.types.is_dictionary(attributes.type):
        attributes = attributes.cast(pa.string())
    keep = pc.is_in(table["trace_id"], value_set=pa.array(_sample_traces(frames, waiting),
                                                          pa.string()))
    for key in ("gen_ai\\.request\\.id", "rid"):
        value = _attribute_text(attributes, key)
        tail = pc.struct_field(pc.extract_regex(value, r"(?P<tail>[^_]*)$"), [0])
        keep = pc.or_(keep, pc.or_(pc.is_in(value, value_set=wanted),
                                   pc.is_in(tail, value_set=wanted)))
    if len(room_texts):
        keep = pc.or_(keep, pc.is_in(_attribute_text(attributes, "bootstrap_room"),
                                     value_set=room_texts))
    traces = pc.unique(table["trace_id"].filter(pc.fill_null(keep, False)))
    return table.filter(pc.is_in(table["trace_id"], value_set=traces.combine_chunks()
                                 if isinstance(traces, pa.ChunkedArray) else traces))


def _attribute_text(attributes: pa.ChunkedArray, key: str) -> pa.ChunkedArray:
    """The value of attribute ``key`` (a regex) in each JSON text, as text (null: none)."""
    found = pc.extract_regex(attributes, f'"{key}": "?(?P<value>(?:[^"\\\\,}}]|\\\\.)*)')
    return pc.struct_field(found, [0])


def _sample_traces(frames: TraceFrames, waiting: set[int]) -> list[str]:
    """The W3C trace ids of the samples the waiting spans are in."""
    rows = set(frames.span_core.loc[sorted(waiting), "sample_row"].tolist())
    traces = frames.samples["trace_id"]
    return sorted({w3c_trace_id(traces[row]) for row in rows if traces[row] is not None})
