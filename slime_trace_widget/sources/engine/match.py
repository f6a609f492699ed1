"""Which span of the frames made each engine request: the rules of the join, in order.

1. **Trace context.** A request whose trace hangs under a dump span by W3C context
   (the client sent ``traceparent``) belongs to that span.
2. **The whole rid.** slime records SGLang's rid as ``sglang_request_id`` on the
   generation span; SGLang writes it whole as ``gen_ai.request.id`` (0.5.x; older
   releases as ``rid``). An exact match wins, for the one request of a role that names
   its span; where several requests of one role name one span by their whole rid (a rid
   used again: a client that names rids by session and turn sends it again in a later
   rollout), they are a reused rid of that one span, below.
3. **A worker prefix.** Some SGLang versions put ``<worker>_`` before the rid on one
   side only; the part after the last ``_`` is tried next, on generation spans that no
   request of the same role claimed (by an exact match, by trace context, or held from
   an earlier join), and only where one request of a role claims a span. The root's
   ``rid`` attribute of 0.5.x (only the part after the last ``_``) is never matched
   against a generation span whose whole id differs: two rids that end alike
   (``sess-17_turn-2``, ``sess-23_turn-2``) must not share a request.
4. **The other PD half.** Under PD without a client rid the prefill server makes its
   own rid; its request root shares only ``bootstrap_room`` with the decode half's (or,
   in older SGLang, a "Bootstrap Room" trace root). It follows the matched half of its
   room, when that room's matched halves all have one owner.

A key that names two generation spans names none: a request is never attached to a
sample it might not belong to. The one exception is a **reused rid**: slime sends a
generation again with the same rid after an abort, so each attempt has its generation
span, and a client may send a rid again later (another rollout's request inside the
window read), so several requests of one role name one span. A request whose whole rid
names several spans, or one span that another request of its role names too, goes to
the span of them that its time overlaps, in the dump's clock after its host's skew
(:func:`place_reused`, once the other requests have estimated the skews:
:func:`placed_matches`); one that overlaps none or several of them, or loses its span to
another request of the rid and role that overlaps it more (or that hangs under it by
trace context), is left unmatched with :data:`REUSED_RID` (several spans) or
:data:`RID_USED_AGAIN` (one span) as its reason, and bounds no skew. A host that no other
request gives a skew has no clock to place by: its requests of the rid (and role) are
placed only when they fit those spans, one span each (each starts inside its span and
ends inside it, or an aborted attempt's before the retry began), under one common offset
in one way alone, whatever the order (spans one after another admit only the order of
their starts; spans that overlap, several samples given one rid, may admit others), and
when no request of another host contests the span; else they are left unmatched with
:data:`UNKNOWN_OFFSET`. A generation span still open in the dump has no known end (it is
only drawn to one): it bounds its request's time from below only, by its start, and so
does its reach (:func:`attempt_reaches`), as it bounds its host's skew (:mod:`.skew`).
Frames that hold engine requests already (joined before: a run dataset converted with
engine traces, opened with them again) have those requests hold their spans as rule 1's
do (:class:`Held`): another request of the role that names such a span, by whole rid
(:data:`RID_USED_AGAIN`) or worker prefix, loses it, so joining again gives what the
first join gave. A KV sender's
trace (role ``KV_SENDER``, see :mod:`.requests`) names no generation span: its ``rid``
is its bootstrap room, so it takes rule 4 only (the join then draws it under its room's
prefill half).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...frames.model import TraceFrames
from ...schema import w3c_span_id, w3c_trace_id
from .requests import KV_SENDER, Request
from .skew import SpanColumns, host_skews

REQUEST_ID_ATTR = "sglang_request_id"
#: ``engine_unmatched.reason`` of a request whose reused rid could not place it.
REUSED_RID = ("its rid names several generation spans (a retry) and its time overlaps "
              "none or several of them, or another request of that rid overlaps its span more")
#: ``engine_unmatched.reason`` of a request whose whole rid names one generation span that
#: another request of its role names too (a rid used again), and that lost that span.
RID_USED_AGAIN = ("its rid names one generation span and another request of its role "
                  "carries that rid too (a rid used again, by a later rollout or another "
                  "client): its time does not overlap that span, or the other request "
                  "overlaps it more or hangs under it by trace context")
#: ``engine_unmatched.reason`` of a reused rid's request on a host no other request gives
#: a skew, whose requests of the rid fit its spans in no single way.
UNKNOWN_OFFSET = ("its rid names several generation spans (a retry), or one that several "
                  "requests carry, and its host's clock offset is unknown (no other "
                  "request of that host was matched): its requests of that rid fit those "
                  "spans, one each, in no single way, or a request of another host wants "
                  "the same span")
#: ``engine_unmatched.reason`` of a request SGLang ended unfinished (an abort), whose
#: trace keeps only the part of its rid after the last ``_``, as spans' rids end.
SHORT_RID_ONLY = ("it ended unfinished (an abort), so its trace keeps only the part of its "
                  "rid after the last '_'; generation spans' rids end with that part, and it "
                  "alone tells no span (another rollout's rid may end so too)")
#: The most steps (a request tried on a span) taken to find how a host's requests of a
#: reused rid fit its spans; past it, they are taken to fit in no single way.
_MOST_FITS = 10_000
_AMBIGUOUS = -2


@dataclass(frozen=True)
class Held:
    """The engine requests the frames hold already (a join before this one attached
    them): ``owners``, each such request of the join's by number to the span it hangs
    under; ``roles``, every (span, role) the frames hold a request of, read or not."""

    owners: dict[int, int] = field(default_factory=dict)
    roles: set[tuple[int, str]] = field(default_factory=set)


@dataclass(frozen=True)
class RequestIds:
    """The generation spans' ``sglang_request_id``s, read from the frames once
    (:func:`request_ids`) and kept for every rule that needs them: each span's id as text,
    the spans by whole id and by its part after the last ``_`` (:data:`_AMBIGUOUS` where
    two spans share one), and the spans of each whole id that several spans share."""

    of_span: dict[int, str]
    whole: dict[str, int]
    tail: dict[str, int]
    several: dict[str, list[int]]


@dataclass
class Matches:
    """The span index each request belongs to, in order (-1: none, or ambiguous), and
    the requests whose whole rid names several spans, with those spans (for
    :func:`place_reused`)."""

    owners: list[int]
    #: The spans' request ids the rules read (the search beyond the window reads them too).
    ids: RequestIds
    reused: dict[int, list[int]] = field(default_factory=dict)
    #: The spans that name a request by its whole rid (``sglang_request_id``).
    named: set[int] = field(default_factory=set)
    #: Why a request is left unmatched, where it is not simply that no span made it.
    reasons: dict[int, str] = field(default_factory=dict)
    #: How late a reused rid's span's request may end, in the dump's clock
    #: (:func:`attempt_reaches`); a span not here bounds its request by its own end.
    reaches: dict[int, float] = field(default_factory=dict)
    #: The (span, role) pairs a request holds by trace context (rule 1) or in the frames
    #: already (:class:`Held`): no other request of that role is placed there.
    claimed: set[tuple[int, str]] = field(default_factory=set)
    #: Requests known only by a short rid (:data:`SHORT_RID_ONLY`) with the spans whose
    #: rids end with it: attached to none, they still stand for one of those spans,
    #: which waits for no request beyond the window (``beyond.waiting_spans``).
    short: dict[int, list[int]] = field(default_factory=dict)


def placed_matches(frames: TraceFrames, requests: list[Request],
                   spans: SpanColumns | None = None, held: Held | None = None) -> Matches:
    """The span each request belongs to, as the join attaches it: rules 1 to 4
    (:func:`find_owners`), then each request of a reused rid placed by its time
    (:func:`place_reused`) after the skews that the requests matched so far give their
    hosts (:func:`.skew.host_skews`). The join and the live view's engine marks both
    decide here. ``spans``: the frames' span columns, when the caller has them; ``held``:
    the requests the frames hold already (:class:`Held`), which keep their spans."""
    matches = find_owners(frames, requests, held)
    if matches.reused:
        spans = spans if spans is not None else SpanColumns(frames)
        span_time = spans.time_of
        matches.reaches = attempt_reaches(matches.ids, span_time)
        first = host_skews(spans, [(request, owner) for request, owner
                                   in zip(requests, matches.owners, strict=True)
                                   if owner >= 0 and request.role != KV_SENDER],
                           matches.reaches)
        place_reused(matches, requests, span_time,
                     dict(zip(first["host"], first["skew"], strict=True)))
    return matches


def find_owners(frames: TraceFrames, requests: list[Request],
                held: Held | None = None) -> Matches:
    """Rules 1 to 4 (a request with a reused rid stays unmatched until placed)."""
    matches = rid_owners(frames, requests, held=held)
    follow_rooms(requests, matches.owners)
    return matches


def rid_owners(frames: TraceFrames, requests: list[Request],
               ids: RequestIds | None = None, held: Held | None = None) -> Matches:
    """Rules 1 to 3: each request's span by trace context or rid alone. ``ids``: the
    frames' request ids where the caller read them already (:func:`request_ids`);
    ``held``: the requests the frames hold already, which keep their spans as rule 1's do.

    The requests of one role that name one span by whole rid are its request when there
    is one; when there are several (a rid used again), each is a reused rid's request of
    that span alone (:attr:`Matches.reused`), left for :func:`place_reused`; when a
    request of that role hangs under the span by trace context, or the frames hold one
    there already, the others lose it (:data:`RID_USED_AGAIN`)."""
    owners = [-1] * len(requests)
    by_context = _context_owners(frames, requests)
    if held is not None:
        by_context.update(held.owners)
    for number, owner in by_context.items():
        owners[number] = owner
    in_context = {(owner, requests[number].role) for number, owner in by_context.items()}
    if held is not None:
        in_context |= held.roles
    ids = ids if ids is not None else request_ids(frames)
    whole, tail, several = ids.whole, ids.tail, ids.several
    hits: dict[tuple[int, str], list[int]] = defaultdict(list)
    reused: dict[int, list[int]] = {}
    reasons: dict[int, str] = {}
    for number, request in enumerate(requests):
        if owners[number] >= 0 or request.whole_rid is None or request.role == KV_SENDER:
            continue
        hit = whole.get(request.whole_rid, -1)
        if hit >= 0:
            hits[(hit, request.role)].append(number)
        elif request.whole_rid in several:
            reused[number] = several[request.whole_rid]
    for (hit, role), numbers in hits.items():
        if len(numbers) == 1 and (hit, role) not in in_context:
            owners[numbers[0]] = hit
            continue
        for number in numbers:
            reused[number] = [hit]
            if (hit, role) in in_context:
                reasons[number] = RID_USED_AGAIN
    _match_by_tail(requests, owners, whole, tail, set(hits) | in_context)
    short = _short_rid_spans(requests, owners, ids.of_span)
    reasons.update((number, SHORT_RID_ONLY) for number in short)
    named = {span for span in whole.values() if span >= 0}
    named.update(span for spans in several.values() for span in spans)
    return Matches(owners, ids, reused, named=named, reasons=reasons, claimed=in_context,
                   short=short)


def _short_rid_spans(requests: list[Request], owners: list[int], of_span: dict[int, str]
                     ) -> dict[int, list[int]]:
    """Each unmatched request known only by its short rid (``Request.short_rid``), with
    the spans whose rid, past a ``_``, ends with it: none is its span for sure, and
    each may be."""
    unmatched = [number for number, request in enumerate(requests)
                 if owners[number] < 0 and request.short_rid and request.role != KV_SENDER]
    if not unmatched:  # most joins have none: the spans' tails are read only for one
        return {}
    by_tail: dict[str, list[int]] = defaultdict(list)
    for span, rid in of_span.items():
        if "_" in rid:
            by_tail[rid.rsplit("_", 1)[-1]].append(span)
    return {number: by_tail[requests[number].whole_rid] for number in unmatched
            if requests[number].whole_rid in by_tail}


def place_reused(matches: Matches, requests: list[Request],
                 span_time: Callable[[int], tuple[float, float]], skew: dict[str, float]
                 ) -> None:
    """Each request of :attr:`Matches.reused` onto the one span of its rid that its time
    overlaps (engine time + its host's ``skew``; ``span_time`` gives a span's start and end,
    inf for a span still open: :meth:`.skew.SpanColumns.time_of`), the one overlapping it
    most where two requests of a role want one span; the others get :data:`REUSED_RID`, or
    :data:`RID_USED_AGAIN` where the rid names one span. A span that a request of the role
    holds by trace context or in the frames already (:attr:`Matches.claimed`) goes to none
    of them. A host without a skew places its requests of a rid and role together
    (:func:`_fitted_one_way`), or none of them (:data:`UNKNOWN_OFFSET`); one so placed keeps
    its span only when no other request wants it (their overlaps, its length and another's,
    cannot be compared). Then rule 4 again, for the PD halves of the requests placed."""
    wanted: dict[int, tuple[float, int]] = {}
    fitted_alone: set[int] = set()
    unknown: dict[tuple[str | None, str, str], list[int]] = defaultdict(list)
    for number, spans in matches.reused.items():
        request = requests[number]
        if number in matches.reasons:  # lost its span already (rule 1 holds it)
            continue
        if request.host not in skew:
            unknown[(request.whole_rid, request.host, request.role)].append(number)
            continue
        shift = skew[request.host]
        start, end = request.start_ns / 1e9 + shift, request.end_ns / 1e9 + shift
        overlaps = [(min(end, span_end) - max(start, span_start), span)
                    for span, (span_start, span_end) in ((s, span_time(s)) for s in spans)]
        held = [(overlap, span) for overlap, span in overlaps if overlap > 0]
        if len(held) == 1:
            wanted[number] = held[0]
        else:
            matches.reasons[number] = _rid_reason(spans)
    for numbers in unknown.values():
        fitted = _fitted_one_way(numbers, requests, matches.reused[numbers[0]], span_time,
                                 matches.reaches)
        if fitted is None:
            matches.reasons.update((number, UNKNOWN_OFFSET) for number in numbers)
        else:
            wanted.update(fitted)
            fitted_alone.update(fitted)
    contenders: dict[tuple[int, str], list[int]] = defaultdict(list)
    for number, (_overlap, span) in wanted.items():
        contenders[(span, requests[number].role)].append(number)
    for (span, role), numbers in contenders.items():
        if (span, role) in matches.claimed or (len(numbers) > 1
                                                and fitted_alone.intersection(numbers)):
            for number in numbers:
                matches.reasons[number] = (UNKNOWN_OFFSET if number in fitted_alone
                                           else _rid_reason(matches.reused[number]))
            continue
        winner = max(numbers, key=lambda number: (wanted[number][0], -number))
        for number in numbers:
            if number != winner:
                matches.reasons[number] = _rid_reason(matches.reused[number])
        matches.owners[winner] = span
    follow_rooms(requests, matches.owners)


def _rid_reason(spans: list[int]) -> str:
    """Why a reused rid's request with spans ``spans`` was placed on none of them."""
    return REUSED_RID if len(spans) > 1 else RID_USED_AGAIN


class _TooMany(Exception):
    """More steps than :data:`_MOST_FITS` were needed."""


def _fitted_one_way(numbers: list[int], requests: list[Request], spans: list[int],
                    span_time: Callable[[int], tuple[float, float]],
                    reaches: dict[int, float]) -> dict[int, tuple[float, int]] | None:
    """Requests ``numbers`` (one host's, of one rid and role) each onto its own span of
    ``spans`` when exactly one such choice, in any order, fits every request to its span
    under one common offset (the host's unknown skew): each request with its span (and
    its length, as its overlap). None when no choice or several do, or when finding out
    takes more than :data:`_MOST_FITS` steps.

    A request fits its span when it starts inside it (the engine gets it once the client
    sent it) and ends by the span's reach (``reaches``, :func:`attempt_reaches`; a span
    not there by its own end): inside it, or for an aborted attempt before the retry
    began. A span still open (``span_time`` gives it no end:
    :meth:`.skew.SpanColumns.time_of`) bounds its request from below only. Under one
    offset the requests keep their order, so spans one after another admit only the
    order of their starts; spans that overlap (several samples given one rid, or a span
    still open) may admit another, which makes the choice not single."""
    order = sorted(numbers, key=lambda number: (requests[number].start_ns, number))
    if len(order) > len(spans):
        return None
    bounds = []
    for span in sorted(spans, key=lambda span: (span_time(span), span)):
        span_start, span_end = span_time(span)
        bounds.append((span, span_start, span_end, reaches.get(span, span_end)))
    times = [(requests[number].start_ns / 1e9, requests[number].end_ns / 1e9)
             for number in order]
    fits: list[tuple[int, ...]] = []
    chosen: list[int] = []
    steps = [0]

    def walk(low: float, high: float) -> bool:
        """Extend ``chosen`` in every way that fits; True once two ways fit."""
        if len(chosen) == len(order):
            fits.append(tuple(chosen))
            return len(fits) > 1
        start, end = times[len(chosen)]
        for span, span_start, span_end, reach in bounds:
            if span in chosen:
                continue
            steps[0] += 1
            if steps[0] > _MOST_FITS:
                raise _TooMany
            lower, upper = max(low, span_start - start), min(high, span_end - start, reach - end)
            if lower <= upper:
                chosen.append(span)
                if walk(lower, upper):
                    return True
                chosen.pop()
        return False

    try:
        if walk(-math.inf, math.inf) or not fits:
            return None
    except _TooMany:
        return None
    return {number: ((requests[number].end_ns - requests[number].start_ns) / 1e9, span)
            for number, span in zip(order, fits[0], strict=True)}


def attempt_reaches(ids: RequestIds, span_time: Callable[[int], tuple[float, float]]
                    ) -> dict[int, float]:
    """How late, in the dump's clock, the request of each span of a rid sent more than
    once may end: by the span's end, but for an attempt the rid was sent again after (a
    span of it starts at or after this one's end), by the next such start. That attempt
    was aborted: the client stopped waiting at its end, and the engine runs its request
    on until it notices. A request running into the retry would overlap two attempts,
    which :func:`place_reused` places on neither when the skew is known. A span still
    open has no known end (``span_time`` gives inf, :meth:`.skew.SpanColumns.time_of`):
    no span starts after it, and its reach is inf, no bound. The skews' bounds
    (:func:`.skew.host_skews`) take the same reach, an open span's none."""
    out: dict[int, float] = {}
    for spans in ids.several.values():
        times = [span_time(span) for span in spans]
        out.update((span, min((start for start, _ in times if start >= end), default=end))
                   for span, (_, end) in zip(spans, times, strict=True))
    return out


def _match_by_tail(requests: list[Request], owners: list[int], whole: dict[str, int],
                   tail: dict[str, int], claimed: set[tuple[int, str]]) -> None:
    """Rule 3: a worker prefix on one side only."""
    proposals: dict[tuple[int, str], list[int]] = defaultdict(list)
    for number, request in enumerate(requests):
        if owners[number] >= 0 or request.whole_rid is None or request.role == KV_SENDER:
            continue
        rid = request.whole_rid
        keys = [(whole, rid.rsplit("_", 1)[-1])] if "_" in rid else []
        if not request.short_rid:  # a short rid is a tail already: it names no whole id
            keys.append((tail, rid))
        for table, key in keys:
            hit = table.get(key, -1)
            if hit >= 0 and (hit, request.role) not in claimed:
                proposals[(hit, request.role)].append(number)
                break
    for (span, _role), numbers in proposals.items():
        if len(numbers) == 1:
            owners[numbers[0]] = span


def follow_rooms(requests: list[Request], owners: list[int]) -> None:
    """Rule 4: an unmatched half follows the matched halves of its bootstrap room."""
    by_room: dict[tuple[str, int], set[int]] = defaultdict(set)
    for number, request in enumerate(requests):
        if owners[number] >= 0:
            for key in _room_keys(request):
                by_room[key].add(owners[number])
    for number, request in enumerate(requests):
        if owners[number] >= 0:
            continue
        found = set().union(*(by_room.get(key, set()) for key in _room_keys(request)))
        if len(found) == 1:
            owners[number] = found.pop()


def _room_keys(request: Request) -> list[tuple[str, Any]]:
    keys: list[tuple[str, Any]] = []
    if request.room is not None:
        keys.append(("room", request.room))
    if request.top != request.root and request.top_room is not None:
        keys.append(("top", (request.trace_id, request.top)))
    return keys


def request_ids(frames: TraceFrames) -> RequestIds:
    """The frames' generation spans by ``sglang_request_id`` (:class:`RequestIds`); a
    value that is not a non-empty string or an integer names no request."""
    of_span: dict[int, str] = {}
    whole: dict[str, int] = {}
    tail: dict[str, int] = {}
    spans_of: dict[str, list[int]] = defaultdict(list)
    for index, value in attr_values(frames, REQUEST_ID_ATTR).items():
        if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
            continue
        text = of_span[index] = str(value)
        spans_of[text].append(index)
        for table, key in ((whole, text), (tail, text.rsplit("_", 1)[-1] if "_" in text
                                           else None)):
            if key is not None:
                table[key] = index if table.get(key, index) == index else _AMBIGUOUS
    several = {text: spans for text, spans in spans_of.items() if len(spans) > 1}
    return RequestIds(of_span, whole, tail, several)


def attr_values(frames: TraceFrames, key: str) -> dict[int, Any]:
    """Span index -> the value of attribute ``key`` (end value, else start value)."""
    out: dict[int, Any] = {}
    index = frames.span_core.index.to_numpy()
    for table in (frames.span_start_attrs, frames.span_end_attrs):
        if key not in table.keys:
            continue
        column = table.column(key).to_pylist()
        for position, value in enumerate(column):
            if value is not None:
                out[int(index[position])] = value
    return out


def _context_owners(frames: TraceFrames, requests: list[Request]) -> dict[int, int]:
    """Rule 1: requests whose trace hangs under a dump span by W3C context (the parent of
    their trace's outermost span). Only the spans of samples whose trace a request names
    have their W3C span id computed."""
    wanted: dict[tuple[str, str], list[int]] = defaultdict(list)
    for number, request in enumerate(requests):
        for parent in request.context_parents:
            wanted[(request.trace_id, parent)].append(number)
    if not wanted:
        return {}
    traces = {trace for trace, _ in wanted}
    sample_traces = frames.samples["trace_id"]
    rows = [row for row, trace_id in sample_traces.items()
            if trace_id is not None and w3c_trace_id(trace_id) in traces]
    core = frames.span_core
    candidates = core[(core["sample_row"].isin(rows) & ~core["virtual"]).to_numpy()]
    trace_of_row = {row: w3c_trace_id(sample_traces[row]) for row in rows}
    owners: dict[int, int] = {}
    for index, row, span_id in zip(candidates.index, candidates["sample_row"],
                                   candidates["span_id"], strict=True):
        if span_id is None:
            continue
        for number in wanted.get((trace_of_row[row], w3c_span_id(span_id)), ()):
            owners[number] = int(index)
    return owners
