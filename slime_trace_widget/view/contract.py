"""The payload contract, read from ``payload_contract.json`` as Python constants.

The renderer (its decoder, the live view's splice, the details panel, a page's local
model) reads the same file, so the columns, their types, the flags, the meta's tables,
the sample fields, a live delta's item kinds, what each reply repeats of its request and
how often a drawn view says it is still drawn are stated once for the kernel and the
renderer; the names that codes index are ``vocabularies.json``'s, shared the same way.
This module only reads the file, and packs and reads a column by its stated type.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "CLIP_SHIFT",
    "CODE_TABLES",
    "COLUMN_DTYPES",
    "CONTRACT",
    "FATE_NONE",
    "FLAG_ENGINE",
    "FLAG_ERROR",
    "FLAG_OPEN",
    "FLAG_PD_SEGMENT_SPANS",
    "FLAG_VIRTUAL",
    "ITEM_KINDS",
    "PAYLOAD_VERSION",
    "REQUEST_ECHOES",
    "SAMPLE_STRINGS",
    "SAMPLE_TEXT_FIELDS",
    "VIEW_ALIVE_SECONDS",
    "VIEW_GONE_AFTER_MISSED",
    "column_bytes",
    "column_values",
]

CONTRACT: dict[str, Any] = json.loads(
    (Path(__file__).parent / "payload_contract.json").read_text(encoding="utf-8"))

PAYLOAD_VERSION: int = CONTRACT["version"]
FLAG_OPEN: int = CONTRACT["span_flags"]["open"]
FLAG_VIRTUAL: int = CONTRACT["span_flags"]["virtual"]
FLAG_ERROR: int = CONTRACT["span_flags"]["error"]
#: On a child-form virtual span: its segments mirror real spans, which count as its children.
FLAG_PD_SEGMENT_SPANS: int = CONTRACT["span_flags"]["pd_segment_spans"]
FLAG_ENGINE: int = CONTRACT["span_flags"]["engine"]
CLIP_SHIFT: int = CONTRACT["clip_shift"]
#: Each column's type code (``u1``, ``i4``, ``f8``...): little-endian, as typed arrays read it.
COLUMN_DTYPES: dict[str, str] = dict(CONTRACT["columns"])
FATE_NONE: int = CONTRACT["fate_none"]
#: How often a drawn view says ``view_alive`` (by default), and how many of those a view
#: may miss before the kernel counts it as gone (``docs/payload.md``, "Views").
VIEW_ALIVE_SECONDS: float = float(CONTRACT["views"]["alive_every_seconds"])
VIEW_GONE_AFTER_MISSED: int = CONTRACT["views"]["gone_after_missed"]
#: The meta's string tables, each with the columns whose codes index it.
CODE_TABLES: dict[str, tuple[str, ...]] = {
    table: tuple(columns) for table, columns in CONTRACT["code_tables"].items()}
#: The kinds of item a live delta's blocks carry, each with its columns' prefix and
#: the columns that point at spans (block-relative in a delta).
ITEM_KINDS: dict[str, dict[str, Any]] = dict(CONTRACT["item_kinds"])
#: The per-sample strings of the meta (``meta.samples``), ``row`` first.
SAMPLE_STRINGS: tuple[str, ...] = tuple(CONTRACT["sample_strings"])
#: Sample fields the details panel shows as text, in its order, each with "show all".
SAMPLE_TEXT_FIELDS: tuple[str, ...] = tuple(CONTRACT["sample_text_fields"])
#: The renderer's requests the kernel (or a page) answers, each with the keys its reply
#: repeats after ``type`` and ``req``.
REQUEST_ECHOES: dict[str, tuple[str, ...]] = {
    request: tuple(keys) for request, keys in CONTRACT["request_echoes"].items()}


def _dtype(name: str) -> np.dtype:
    return np.dtype("<" + COLUMN_DTYPES[name])


def column_bytes(name: str, values: Any) -> bytes:
    """``values`` as the bytes of the payload column ``name``."""
    return np.ascontiguousarray(values, dtype=_dtype(name)).tobytes()


def column_values(name: str, data: bytes) -> np.ndarray:
    """The values of the payload column ``name`` from its bytes (a read-only view)."""
    return np.frombuffer(data, dtype=_dtype(name))
