"""W3C trace context for a request a sample makes: ``trace_headers(sample)``.

Passed as HTTP headers to SGLang (``--enable-trace``), they make the engine's trace
of that request a child of the sample's current span, so its request nests under
the span that waited for it by context, with no request-id matching. An
extension: slime sends none today, and its own names are untouched.
"""

from __future__ import annotations

import re
from typing import Any

from ..schema import W3C_SAMPLED, w3c_span_id, w3c_trace_id
from .carriers import _active_parent, _resolve_handles
from .records import _log_failure

#: Characters a tracestate value may hold (printable ASCII but ``,`` and ``=``), bounded.
_STATE_VALUE = re.compile(r"[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]")


def trace_headers(target: Any) -> dict[str, str]:
    """``traceparent`` (and ``tracestate`` carrying slime's own span id) for the span of
    ``target``'s trace open in this context, or the handle's parent span; ``{}`` when
    there is none. Never raises, like every recording call."""
    try:
        handles = _resolve_handles(target)
        if not handles:
            return {}
        handle = handles[0]
        span_id = _active_parent(handle) or handle.parent_span_id
        if span_id is None or handle.trace_id is None:
            return {}
        headers = {"traceparent": f"00-{w3c_trace_id(handle.trace_id)}-"
                                  f"{w3c_span_id(span_id)}-{W3C_SAMPLED}"}
        if _STATE_VALUE.fullmatch(str(span_id)):
            headers["tracestate"] = f"slime={span_id}"
        return headers
    except Exception:
        _log_failure("making trace headers")
        return {}
