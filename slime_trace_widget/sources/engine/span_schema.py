"""The columns of an engine span as the store keeps it, apart from the store itself.

What reads engine spans (the request reader, the OTLP decoder) needs their schema
but not the store's writing side, which brings Parquet in: a pyarrow built without
Parquet still draws a dump with engine traces joined from a table. What reads their
attributes takes a naming value (a rid, a ``host_id``, an address) as text here
(:func:`attribute_text`), so the request reader and the machine rule read them alike.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

__all__ = ["COLUMNS", "END", "JSON_COLUMNS", "PEER_ADDRESS", "SCHEMA", "START",
           "attribute_text"]

SCHEMA = pa.schema([
    ("trace_id", pa.string()), ("span_id", pa.string()), ("parent_id", pa.string()),
    ("name", pa.string()), ("start_ns", pa.int64()), ("end_ns", pa.int64()),
    ("service", pa.string()), ("status", pa.int8()), ("attributes", pa.string()),
    ("resource", pa.string()), ("events", pa.string()), ("links", pa.string()),
])
#: Columns of a stored span, in order.
COLUMNS = tuple(SCHEMA.names)
#: The int64 nanosecond columns a span runs from and to.
START, END = "start_ns", "end_ns"
#: The columns that hold JSON text, each with the value an absent one stands for.
JSON_COLUMNS: dict[str, dict | list] = {"attributes": {}, "resource": {}, "events": [],
                                        "links": []}
#: The key the receiver adds to each stored span's resource: the IP address the export came
#: from. SGLang's thread spans name their machine only by ``/etc/machine-id``, which cloned
#: VM images and containers share; the sender's address tells those machines apart.
PEER_ADDRESS = "receiver.peer_address"


def attribute_text(value: Any) -> str | None:
    """A stored attribute that names something (a rid, a ``host_id``, an address, a
    ``host.name``) as text: a non-empty string, or an integer written out; None for
    anything else (a bool, a float, a list, an empty string), which names nothing."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    return str(value) or None
