"""Each engine host's clock against the dump's, estimated from the requests attached.

Engine hosts keep their own clocks. The engine's work on a request lies inside
the generation span that waited for it, so each request bounds its host's skew
``d`` (engine time + d = dump time): ``start(gen) - first(engine) <= d <= end(gen)
- last(engine)`` (an aborted attempt's request, whose rid was sent again, may run on
until the retry: its ``end(gen)`` is then the retry's start); all of a host's requests
narrow it to ``[low, high]``. A generation span still open in the dump has no known end
(it is only drawn to one): its request bounds ``d`` from below alone (``high`` is inf
for a host all of whose requests hang under open spans), as
:mod:`slime_trace_widget.answers.engine` and the engine band clip nothing after an open
span's start. Every engine host receives its requests as they are sent, so ``low`` is
tight; only the host that answers (the decode server under PD) has a tight ``high``
too. The narrowest host's window (of those bounded above) is twice the network's
one-way time, so each host's skew is its ``low`` plus that time (within its window;
its ``low`` when no host's is bounded above); a host whose requests disagree
(a request cut short on the client's side, for instance) takes the median of their
``low`` instead. ``frames.engine_skew`` reports each host's, with the machine its spans
came from where they name one (``machine``: the sender's address, or a ``host.name``
sent without an address; "" unknown: :mod:`.machines`), which a scrape target may be named after
(:func:`slime_trace_widget.frames.engine_load.aligned`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ...frames.model import TraceFrames
from .requests import Request

SKEW_COLUMNS = ["host", "skew", "requests", "low", "high", "consistent", "machine"]


class SpanColumns:
    """The frames' span columns the join reads span by span, as plain arrays."""

    def __init__(self, frames: TraceFrames) -> None:
        core = frames.span_core
        self.count = len(core)
        self.position = dict(zip(core.index.tolist(), range(len(core)), strict=True))
        self.sample_row = core["sample_row"].to_numpy()
        self.attempt = core["attempt"].to_numpy()
        self.depth = core["depth"].to_numpy()
        self.span_id = core["span_id"].to_numpy(dtype=object)
        self.start = core["start"].to_numpy()
        #: Each span's end as the join takes it: inf for a span still open, whose end is
        #: unknown (the end it is drawn to is a guess), so it bounds its request's time,
        #: and its host's skew, from below only.
        self.end = np.where((core["state"] == "open").to_numpy(), np.inf,
                            core["display_end"].to_numpy())

    def time_of(self, index: int) -> tuple[float, float]:
        """Span ``index``'s start and end (inf while it is open)."""
        at = self.position[index]
        return float(self.start[at]), float(self.end[at])


def host_skews(spans: SpanColumns, attached: list[tuple[Request, int]],
               reaches: Mapping[int, float] | None = None) -> pd.DataFrame:
    """Per engine host, the shift into the dump's clock, what bounded it, its machine.
    ``reaches``: how late a span's request may end where that is past the span's end (an
    aborted attempt's, until its retry: :func:`.match.attempt_reaches`). A span still
    open bounds its request's host from below only: its end and its reach are inf
    (:meth:`SpanColumns.time_of`)."""
    bounds: dict[str, list[tuple[float, float]]] = {}
    machines: dict[str, str] = {}
    for request, owner in attached:
        gen_start, gen_end = spans.time_of(owner)
        if reaches:
            gen_end = reaches.get(owner, gen_end)
        by_host: dict[str, list[tuple[int, int]]] = {}
        for piece in request.pieces:
            by_host.setdefault(piece.host, []).append((piece.start_ns, piece.end_ns))
            if piece.machine:
                machines[piece.host] = piece.machine
        for host, times in by_host.items():
            first = min(start for start, _ in times) / 1e9
            last = max(end for _, end in times) / 1e9
            bounds.setdefault(host, []).append((gen_start - first, gen_end - last))
    windows = {host: (max(lo for lo, _ in pairs), min(hi for _, hi in pairs))
               for host, pairs in bounds.items()}
    # a host whose requests all hang under open spans has no upper bound: no width
    widths = [high - low for low, high in windows.values() if low <= high < np.inf]
    latency = min(widths) / 2 if widths else 0.0
    rows = []
    for host, pairs in sorted(bounds.items()):
        low, high = windows[host]
        consistent = low <= high
        if consistent:
            skew = low + min(latency, (high - low) / 2)
        else:
            skew = float(np.median([lo for lo, _ in pairs])) + latency
        rows.append((host, skew, len(pairs), low, high, consistent, machines.get(host, "")))
    return pd.DataFrame(rows, columns=SKEW_COLUMNS).astype(
        {"host": object, "skew": float, "requests": int, "low": float, "high": float,
         "consistent": bool, "machine": object})
