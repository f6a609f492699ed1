"""A live delta read back as a renderer holds it, for the live view's tests: the same
arithmetic as ``js/src/live/splice.js`` applied to a whole delta."""

from __future__ import annotations

import numpy as np

from slime_trace_widget.view.live_blocks import LiveDelta
from slime_trace_widget.view.payload import COLUMN_DTYPES

_NUMPY = {"u1": "<u1", "u2": "<u2", "u4": "<u4", "i4": "<i4", "f4": "<f4", "f8": "<f8"}


def absolute_items(delta: LiveDelta) -> dict[str, np.ndarray]:
    """The item columns of a full delta with block-relative pointers made absolute:
    the payload a renderer that applied it holds."""
    meta = delta.meta
    columns = {name: np.frombuffer(data, dtype=_NUMPY[COLUMN_DTYPES[name]]).astype(np.float64
               if COLUMN_DTYPES[name][0] == "f" else np.int64)
               for name, data in delta.buffers.items()}
    span_starts = np.concatenate([[0], np.cumsum(meta["counts"]["span"])])[:-1]
    for name, owner in (("span_parent", "span"), ("ev_parent", "ev"), ("seg_span", "seg")):
        block_of_row = np.repeat(np.arange(len(meta["positions"])), meta["counts"][owner])
        values = columns[name]
        columns[name] = np.where(values >= 0, values + span_starts[block_of_row], -1)
    return columns


