"""The OTLP ids of an export: the W3C ids this package sends everywhere else.

``trace_headers`` (the ``traceparent`` a request to SGLang carries) and the live stream
name slime's trace by ``schema.w3c_trace_id`` and slime's span by
``schema.w3c_span_id``; the export sends the same ids, so in a backend that also holds
SGLang's spans, those hang under the exported span that made the request, in its
trace. Samples that share slime's trace id (a group's members, deep copies of one
prompt) share the OTLP trace, each under a root span of its own; a sample without a
trace id gets one hashed from its dump's file name and its index.

Only a repeat gets derived ids: a sample that an earlier sample of the frames already
is (the same trace id and sample index: a dump given twice) goes to a trace derived
from its trace, dump and index, with span ids derived from that trace. Any other span
keeps its W3C id unless a span of the export has it already: a span a group's members
share (recorded on the prompt before slime deep-copied it), or one used twice in one
sample, keeps it on its first use and gets a derived one after, that span alone, so
each member's own spans, which its requests to SGLang named, keep theirs.
Ids are stable from one export of the same frames to the next, and no two spans of an
export share a span id.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ..frames.model import TraceFrames
from ..schema import w3c_span_id, w3c_trace_id


@dataclass
class OtlpIds:
    """16-byte trace ids and 8-byte root span ids per sample row, 8-byte span ids per
    exported span (in the order given)."""

    traces: list[bytes]
    roots: list[bytes]
    spans: list[bytes]


def otlp_ids(frames: TraceFrames, span_rows: list[int], slime_span_ids: list[Any]) -> OtlpIds:
    """The ids of ``frames``' samples and of the spans whose sample rows are ``span_rows``
    and whose slime span ids are ``slime_span_ids`` (None when a span has none), walking
    samples in row order and each sample's spans in the order given."""
    samples = frames.samples
    files = [Path(path).name for path in frames.paths] or ["frames"]
    positions_of: dict[int, list[int]] = {}
    for position, row in enumerate(span_rows):
        positions_of.setdefault(row, []).append(position)
    namer = _Namer()
    ids = OtlpIds([], [], [b""] * len(span_rows))
    for row, (text, dump, index) in enumerate(zip(
            samples["trace_id"].tolist(), samples["dump"].tolist(),
            samples["sample_index"].tolist(), strict=True)):
        where = files[min(int(dump), len(files) - 1)]
        label = f"row{row}" if _missing(index) else str(index)
        positions = positions_of.get(row, [])
        w3c = [None if slime_span_ids[position] is None
               else bytes.fromhex(w3c_span_id(slime_span_ids[position]))
               for position in positions]
        trace, repeat = namer.trace(_own_trace(text, where, label), where, label)
        ids.traces.append(trace)
        ids.roots.append(namer.unique(_digest(trace + f"/sample/{label}".encode(
            "utf-8", "replace"), 8)))
        keys = [str(slime_span_ids[position]) for position in positions]
        for position, span_id in zip(positions, _span_ids(namer, trace, keys, w3c, repeat),
                                     strict=True):
            ids.spans[position] = span_id
    return ids


def _span_ids(namer: _Namer, trace: bytes, keys: list[str], w3c: list[bytes | None],
              repeat: bool) -> list[bytes]:
    """One sample's span ids, unique in the export: each span's W3C id (``w3c``), but
    in a repeated sample, for a span without a slime id, or for a slime id's later uses
    in the sample, an id derived from the trace, the slime id (``keys``) and its use."""
    seen: Counter[str] = Counter()
    out = []
    for key, own_id in zip(keys, w3c, strict=True):
        seen[key] += 1
        wanted = own_id
        if repeat or own_id is None or seen[key] > 1:
            wanted = _digest(trace + f"/span/{key}/{seen[key]}".encode("utf-8", "replace"), 8)
        out.append(namer.unique(wanted))
    return out


class _Namer:
    """What the export has used so far: samples by trace id and label, trace ids and
    span ids."""

    def __init__(self) -> None:
        self.samples: set[tuple[bytes, str]] = set()
        self.traces: set[bytes] = set()
        self.span_ids: set[bytes] = set()

    def trace(self, own: bytes, where: str, label: str) -> tuple[bytes, bool]:
        """The sample's trace id: ``own``, unless the sample repeats one taken before
        (the same trace id and label), then one derived from it; and whether it
        repeats."""
        repeat = (own, label) in self.samples
        self.samples.add((own, label))
        self.traces.add(own)
        if not repeat:
            return own, False
        again = 1
        derived = own
        while derived in self.traces:
            again += 1
            derived = _digest(own + f"/again/{where}/{label}/{again}".encode(
                "utf-8", "replace"), 16)
        self.traces.add(derived)
        return derived, True

    def unique(self, wanted: bytes) -> bytes:
        """``wanted``, or an id derived from it when a span of the export has it already."""
        while wanted in self.span_ids:
            wanted = _digest(wanted + b"/again", 8)
        self.span_ids.add(wanted)
        return wanted


def _own_trace(text: Any, where: str, label: str) -> bytes:
    """The sample's trace id before repeats are told apart: ``w3c_trace_id`` of slime's
    trace id, or a hash of the dump's file name and the sample's label without one."""
    if _missing(text) or text == "":
        return _digest(f"sample/{where}/{label}".encode("utf-8", "replace"), 16)
    return bytes.fromhex(w3c_trace_id(text))


def _missing(value: Any) -> bool:
    """A frames cell that holds nothing (None, pandas' NA, NaN)."""
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _digest(data: bytes, size: int) -> bytes:
    """A stable non-zero id of ``size`` bytes (all-zero ids are invalid in OTLP)."""
    digest = hashlib.blake2b(data, digest_size=size).digest()
    return digest if any(digest) else b"\x00" * (size - 1) + b"\x01"
