"""Record execution traces onto slime rollout samples, in slime's own carrier format.

A drop-in for ``slime.observability.trace_utils``: the same names and signatures,
and records that the same loader and viewer read as a real run's (the format is
in :mod:`slime_trace_widget.schema` and docs/trace-format.md). Tracing never
raises into user code: internal failures are logged at debug level on this
package's logger and the traced code runs on. Nesting is per trace and per
context, so concurrent asyncio tasks never adopt each other's spans.

Modules: ``records`` (clock, ids, attribute cleaning, one record), ``carriers``
(handles, binding, open-span scopes), ``spans`` (spans, events, retries),
``functions`` (the decorator), ``generators`` (its spans over generator calls),
``sglang`` (SGLang metadata, PD child spans), ``remote`` (export, import and
merge across processes), ``propagation`` (W3C headers for requests to the engine).
"""

from __future__ import annotations

from ..schema import PD_PHASES as PD_PHASES
from ..schema import PD_SUMMARY_EVENT as PD_SUMMARY_EVENT
from ..schema import PD_SUMMARY_KEYS as PD_SUMMARY_KEYS
from ..schema import SGLANG_META_KEYS as SGLANG_META_KEYS
from ..schema import (
    SGLANG_PD_DECODE_SEGMENTS,
    SGLANG_PD_PREFILL_SEGMENTS,
    SGLANG_PD_SUMMARY_KEYS,
    SGLANG_TRACE_META_KEYS,
    TRACE_CHILDREN_KEY,
    TRACE_VERSION,
)
from ..values import MAX_REPR_CHARS as MAX_REPR_CHARS
from .carriers import _ACTIVE as _ACTIVE
from .carriers import TraceHandle, bind_trace, bind_trace_carrier
from .functions import trace_function
from .propagation import trace_headers
from .records import MAX_ERROR_MESSAGE_CHARS as MAX_ERROR_MESSAGE_CHARS
from .records import get_clock, set_clock, use_clock
from .records import logger as logger
from .remote import export_trace, import_trace, merge_trace
from .sglang import build_sglang_meta_trace_attrs
from .spans import TraceSpan, TraceSpanContext, trace_event, trace_next_attempt, trace_span

__all__ = [
    "SGLANG_PD_DECODE_SEGMENTS",
    "SGLANG_PD_PREFILL_SEGMENTS",
    "SGLANG_PD_SUMMARY_KEYS",
    "SGLANG_TRACE_META_KEYS",
    "TRACE_CHILDREN_KEY",
    "TRACE_VERSION",
    "TraceHandle",
    "TraceSpan",
    "TraceSpanContext",
    "bind_trace",
    "bind_trace_carrier",
    "build_sglang_meta_trace_attrs",
    "export_trace",
    "get_clock",
    "import_trace",
    "merge_trace",
    "set_clock",
    "trace_event",
    "trace_function",
    "trace_headers",
    "trace_next_attempt",
    "trace_span",
    "use_clock",
]
