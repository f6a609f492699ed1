"""The trace record format: one definition for the writer, the reader, the PD lanes and the demo.

A traced sample holds a *carrier* dict at ``sample["trace"]`` (or ``sample.trace``):
identity keys plus an append-only ``events`` list of *records*. A record is a
``span_start``, a ``span_end`` or an instant ``event``. SGLang's prefill/decode (PD)
timings are recorded as ``sglang_pd_*`` child spans and a summary event. The
format is slime's (``slime.observability.trace_utils``); docs/trace-format.md
describes it. Standard library only, so any module can import it.
"""

from __future__ import annotations

import hashlib

from . import vocabularies

#: Carrier format version written into every carrier.
TRACE_VERSION = 1

#: Attribute of a sample object (or key of a dict sample) that holds its carrier.
SAMPLE_TRACE_KEY = "trace"

# Carrier keys, in the order slime writes them.
CARRIER_VERSION = "version"
CARRIER_TRACE_ID = "trace_id"
CARRIER_EVENTS = "events"
CARRIER_SAMPLE_ID = "sample_id"
CARRIER_GROUP_ID = "group_id"
CARRIER_ATTEMPT = "attempt"
CARRIER_KEYS = (
    CARRIER_VERSION,
    CARRIER_TRACE_ID,
    CARRIER_EVENTS,
    CARRIER_SAMPLE_ID,
    CARRIER_GROUP_ID,
    CARRIER_ATTEMPT,
)

# Record types.
SPAN_START = "span_start"
SPAN_END = "span_end"
EVENT = "event"
RECORD_TYPES = (SPAN_START, SPAN_END, EVENT)

# The live stream's record types (``slime.record``, docs/live-store.md) besides those
# above: a sender's heartbeat and close, an end sent again, and the collector's own
# start and stop rows, which no sender may send. The collector keeps a type of 1 to
# LIVE_MAX_RECORD_TYPE characters only.
LIVE_HEARTBEAT = "heartbeat"
LIVE_CLOSE = "close"
#: A ``span_end`` sent again because end attributes were added to it after it was sent
#: (``span.set`` once the block has ended): its body is the end record as its carrier
#: holds it now, and a reader keeps its attributes in place of the end's, never as a
#: second end.
LIVE_END_RESENT = "span_end_resent"
LIVE_RECEIVER_START = "receiver_start"
LIVE_RECEIVER_STOP = "receiver_stop"
LIVE_MAX_RECORD_TYPE = 64
#: The collector's own rows are sent by a sender named with this prefix, which no
#: sender may take (the collector refuses such a sender's records).
RECEIVER_PREFIX = "receiver:"

# Record keys, in the order slime writes them. ``span_id`` is on span records only;
# ``parent_span_id`` on starts and events that have a parent; ``attrs`` when not empty.
RECORD_TYPE = "type"
RECORD_NAME = "name"
RECORD_TS = "ts"
RECORD_TRACE_ID = "trace_id"
RECORD_SAMPLE_ID = "sample_id"
RECORD_GROUP_ID = "group_id"
RECORD_ATTEMPT = "attempt"
RECORD_SPAN_ID = "span_id"
RECORD_PARENT_SPAN_ID = "parent_span_id"
RECORD_ATTRS = "attrs"
RECORD_KEYS = (
    RECORD_TYPE,
    RECORD_NAME,
    RECORD_TS,
    RECORD_TRACE_ID,
    RECORD_SAMPLE_ID,
    RECORD_GROUP_ID,
    RECORD_ATTEMPT,
    RECORD_SPAN_ID,
    RECORD_PARENT_SPAN_ID,
    RECORD_ATTRS,
)

#: Highest attempt a carrier or record holds. Attempts are whole numbers from 0 (the
#: frames store them as int32); a reader counts any other value as a bad attempt, read
#: as 0, and the recorder writes the number a reader makes of it.
MAX_ATTEMPT = 2**31 - 2

#: Instant event that ``trace_next_attempt`` records, and its attribute holding the new attempt.
ATTEMPT_START_EVENT = "attempt_start"
ATTEMPT_ATTR = "attempt"
#: Instant event that ``import_trace`` records under the exported span (this package's
#: recording API only; slime's own writes none), marking where a trace was continued.
TRACE_IMPORT_EVENT = "trace_import"
#: End attributes of a span whose block raised.
ERROR_TYPE_ATTR = "error_type"
ERROR_MESSAGE_ATTR = "error_message"

#: Reserved key in span attrs: child spans to synthesise, not an attribute.
TRACE_CHILDREN_KEY = "_trace_children"

#: SGLang ``meta_info`` keys kept as generation span attributes.
SGLANG_META_KEYS = (
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "queue_time",
    "e2e_latency",
    "decode_throughput",
)

#: Common prefix of every PD span name (``vocabularies.json``, which the renderer reads).
PD_SPAN_PREFIX = vocabularies.PD_SPAN_PREFIX
_PD_STEPS = {
    "prefill": ("bootstrap_queue", "bootstrap", "alloc_wait", "forward", "transfer_queue"),
    "decode": ("prealloc", "bootstrap", "alloc_wait", "transfer", "forward"),
}
#: PD phase span name -> phase label.
PD_PHASE_LABELS = {f"{PD_SPAN_PREFIX}{label}": label for label in _PD_STEPS}
#: Per phase label: ((meta duration key, child span name), ...), in timeline order.
PD_SEGMENTS = {
    label: tuple((f"pd_{label}_{step}_duration", f"{PD_SPAN_PREFIX}{label}_{step}")
          for step in steps)
    for label, steps in _PD_STEPS.items()
}
#: (phase span name, phase label, segments), in timeline order.
PD_PHASES = tuple((name, label, PD_SEGMENTS[label]) for name, label in PD_PHASE_LABELS.items())
#: Attributes of a PD phase span.
PD_PHASE_ATTR = "phase"
PD_DURATION_ATTR = "duration_s"
#: Instant event after the phases, carrying the summary keys present in the meta.
PD_SUMMARY_EVENT = f"{PD_SPAN_PREFIX}summary"
PD_SUMMARY_KEYS = ("pd_transfer_speed_gb_s", "pd_transfer_total_mb", "pd_prefill_retry_count")

# The same tables under the names slime's trace_utils gives them.
SGLANG_TRACE_META_KEYS = SGLANG_META_KEYS
SGLANG_PD_PREFILL_SEGMENTS = PD_SEGMENTS["prefill"]
SGLANG_PD_DECODE_SEGMENTS = PD_SEGMENTS["decode"]
SGLANG_PD_SUMMARY_KEYS = PD_SUMMARY_KEYS

# W3C trace context for a slime span (``traceparent: 00-<trace>-<parent>-01``): the ids a
# request to the engine carries, so the engine's trace nests under the sample's span, and
# the ids the join looks for. slime's trace ids are 32 hex digits and kept as they are;
# any other text, and every span id (slime's have 32 digits, W3C's 16), is hashed.
W3C_SAMPLED = "01"


def w3c_trace_id(trace_id: object) -> str:
    """The 32-hex-digit W3C trace id of a slime trace id."""
    text = str(trace_id)
    if len(text) == 32 and text.strip("0123456789abcdef") == "" and text.strip("0"):
        return text
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def w3c_span_id(span_id: object) -> str:
    """The 16-hex-digit W3C span id of a slime span id."""
    return hashlib.blake2b(str(span_id).encode("utf-8", "surrogatepass"),
                           digest_size=8).hexdigest()
