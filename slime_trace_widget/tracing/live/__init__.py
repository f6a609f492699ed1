"""Stream every trace record this process records to a live receiver, while it runs.

``install()`` (endpoint default: the ``SLIME_TRACE_LIVE`` environment variable)
sends each record written through this package's recording API, and through
slime's own ``trace_utils`` when slime is importable, to
``{endpoint}/v1/logs`` as OTLP logs, and each ended span also to
``{endpoint}/v1/traces`` (docs/live.md gives the wire and why). It never hurts
the code that records: a record costs the recording thread a lock and a deque
append; encoding and the network are another thread's; a full queue drops
records (counted) instead of growing; nothing here raises into a recording call.

The same function is Ray's worker setup hook::

    runtime_env={"worker_process_setup_hook": "slime_trace_widget.tracing.live.install",
                 "env_vars": {"SLIME_TRACE_LIVE": "http://collector-host:4318"}}

With no endpoint at all, ``install`` returns a handle that is off (and says why),
so the hook can stay in a runtime environment whether or not a receiver runs.
"""

from __future__ import annotations

import atexit
import logging
import operator
import os
import threading
from collections.abc import Callable
from typing import Any

from .. import carriers
from .otlp import Encoder, resource_attributes, sender_identity
from .outbox import LiveStats, Outbox, ResentEnd
from .sender import SenderThread
from .slime_patch import patch_slime, slime_rollout_id
from .transport import DEFAULT_TIMEOUT_SECONDS, EndpointError, Poster, parse_endpoint

__all__ = ["ENV_VAR", "EndpointError", "LiveStats", "LiveStream", "current_rollout",
           "current_stream", "install", "set_rollout"]

logger = logging.getLogger(__name__)

#: Environment variable holding the receiver's OTLP/HTTP address (http://host:4318).
ENV_VAR = "SLIME_TRACE_LIVE"
#: Seconds between batches; the wire promises at least one every 0.5 s.
DEFAULT_INTERVAL = 0.25
MAX_INTERVAL = 0.5
#: Records the queue holds before it drops new ones (a few tens of MB at most).
DEFAULT_CAPACITY = 100_000
#: Records per request.
DEFAULT_MAX_BATCH = 5_000
#: Seconds ``close()`` waits by default, and the flush at interpreter exit.
DEFAULT_CLOSE_SECONDS = 5.0
EXIT_CLOSE_SECONDS = 3.0
#: Longest ``timeout`` per request ``install`` takes.
MAX_TIMEOUT = 3600.0

_LOCK = threading.Lock()
_stream: LiveStream | None = None
_rollout: int | None = None
_exit_hook_registered = False


class LiveStream:
    """The handle ``install`` returns: on (sending to ``endpoint``) or off (``reason``)."""

    def __init__(self, endpoint: str | None, *, reason: str = "",
                 outbox: Outbox | None = None, thread: SenderThread | None = None,
                 sender: str = "", slime_modules: tuple[str, ...] = ()) -> None:
        self.endpoint = endpoint
        self.reason = reason
        #: ``<host>:<pid>:<start ns>``: what the receiver tells this process by.
        self.sender = sender
        #: slime's recording modules whose records this stream also sends.
        self.slime_modules = slime_modules
        self._outbox = outbox
        self._thread = thread
        self._closed = thread is None
        self._in_child = False  # a forked copy of the handle: the thread is the parent's

    @property
    def enabled(self) -> bool:
        """True while records are being streamed (not closed, its sender thread running)."""
        return not self._closed and self._thread is not None and self._thread.is_alive()

    def stats(self) -> LiveStats:
        """Records sent, dropped and queued so far (and retries, batches, the last seq)."""
        return LiveStats() if self._thread is None else self._thread.stats()

    def close(self, timeout: float = DEFAULT_CLOSE_SECONDS) -> LiveStats:
        """Stop taking records, send what is queued and the close record, within
        ``timeout`` seconds; records still unsent then are counted dropped. Idempotent."""
        global _stream
        with _LOCK:
            if _stream is self:
                carriers.set_record_listener(None)
                _stream = None
        self._closed = True
        if self._thread is not None and not self._in_child:
            self._thread.close(timeout)
        return self.stats()

    def _detach_in_child(self) -> None:
        """In a forked child: closed, nothing queued from here on, no thread to stop."""
        self._closed = True
        self._in_child = True
        if self._outbox is not None:
            self._outbox.forget_lock()

    def offer(self, record: Any) -> None:
        """Queue one record to send (what the recording hooks call); never raises."""
        try:
            if not self._closed and self._outbox is not None:
                self._outbox.offer(record, current_rollout())
        except Exception:
            logger.debug("live stream: a record was not queued", exc_info=True)

    def __repr__(self) -> str:
        if self._thread is None:
            return f"LiveStream(off: {self.reason})"
        state = "on" if self.enabled else "closed"
        return f"LiveStream({state}, endpoint={self.endpoint!r}, {self.stats()})"

    def __enter__(self) -> LiveStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def install(endpoint: str | None = None, *, interval: float = DEFAULT_INTERVAL,
            capacity: int = DEFAULT_CAPACITY, max_batch: int = DEFAULT_MAX_BATCH,
            timeout: float = DEFAULT_TIMEOUT_SECONDS, slime: bool = True) -> LiveStream:
    """Stream this process's trace records to ``endpoint`` (default ``$SLIME_TRACE_LIVE``).

    Returns the running stream; a second call returns the same one. With neither
    an endpoint nor the variable, returns a handle that is off (``enabled`` False,
    ``reason`` says why) and changes nothing. Raises :class:`EndpointError` for an
    endpoint that is not an http(s) URL and ``ValueError`` for settings out of range:
    misconfiguration shows at start-up, never in the middle of a rollout. Needs no
    package beyond the standard library (the wire is written by :mod:`.wire`).
    ``slime=False`` leaves slime's ``trace_utils`` alone.
    """
    global _stream
    chosen = (endpoint if endpoint is not None else os.environ.get(ENV_VAR, "")).strip()
    if not chosen:
        return LiveStream(None, reason=f"no endpoint given and ${ENV_VAR} is not set")
    source = "endpoint" if endpoint is not None else f"${ENV_VAR}"
    try:
        parse_endpoint(chosen)
    except EndpointError as exc:
        raise EndpointError(f"{source}: {exc}") from None
    _check_settings(interval, capacity, max_batch, timeout)
    with _LOCK:
        if _stream is not None:
            if _stream.endpoint != chosen:
                logger.warning("live stream: already sending to %s; %s ignored",
                               _stream.endpoint, chosen)
            return _stream
        _stream = _start(chosen, interval, capacity, max_batch, timeout, slime)
        _register_exit_hook()
        return _stream


def set_rollout(rollout_id: int | None) -> None:
    """Tag the records recorded from now on with ``rollout_id`` (None: unknown again, or
    slime's own rollout id when slime is running one)."""
    global _rollout
    if rollout_id is None:
        _rollout = None
        return
    number = operator.index(rollout_id)
    if not -(2**63) <= number < 2**63:  # the receiver takes a 64-bit rollout id only
        raise ValueError(f"rollout id {number} is out of the 64-bit range")
    _rollout = number


def current_rollout() -> int | None:
    """The rollout id records are tagged with now: :func:`set_rollout`'s, else slime's."""
    return _rollout if _rollout is not None else slime_rollout_id()


def current_stream() -> LiveStream | None:
    """The stream this process is sending, if any."""
    return _stream


# --------------------------------------------------------------------------- internals


def _start(endpoint: str, interval: float, capacity: int, max_batch: int, timeout: float,
           slime: bool) -> LiveStream:
    host, pid, sender = sender_identity()
    outbox = Outbox(capacity)
    thread = SenderThread(outbox, Encoder(resource_attributes(host, pid, sender)),
                          Poster(endpoint, timeout), interval=interval, max_batch=max_batch,
                          rollout=current_rollout)
    stream = LiveStream(endpoint, outbox=outbox, thread=thread, sender=sender)
    thread.start()
    carriers.set_record_listener(_listener(outbox), _resend_listener(outbox))
    if slime:
        stream.slime_modules = tuple(patch_slime(_offer_to_current))
    logger.info("live stream: sending to %s as %s%s", endpoint, sender,
                f" (and slime's {', '.join(stream.slime_modules)})"
                if stream.slime_modules else "")
    return stream


def _listener(outbox: Outbox) -> Callable[[Any], int | None]:
    """What the recording API calls with each record: the cheapest path to the queue.
    Returns the rollout id the record is tagged with (the record's tag for
    :func:`_resend_listener`)."""
    offer = outbox.offer

    def stream_record(record: Any) -> int | None:
        rollout = _rollout if _rollout is not None else slime_rollout_id()
        try:
            offer(record, rollout)
        except Exception:
            logger.debug("live stream: a record was not queued", exc_info=True)
        return rollout

    return stream_record


def _resend_listener(outbox: Outbox) -> Callable[[Any, Any], None]:
    """What the recording API calls with an end record given attributes after it was
    written, and the tag it got then: the record queued again, as an end sent again (a
    new sequence number), with the rollout id the end was first sent with, so it
    reaches that rollout's end even after :func:`set_rollout` moved on. An end written
    before the stream started (tagged ``NO_TAG``) takes the rollout id of now."""
    offer = outbox.offer

    def stream_again(record: Any, tag: Any) -> None:
        rollout = current_rollout() if tag is carriers.NO_TAG else tag
        try:
            offer(ResentEnd(record), rollout)
        except Exception:
            logger.debug("live stream: a record was not queued", exc_info=True)

    return stream_again


def _offer_to_current(record: Any) -> None:
    """What slime's patched recording function calls: the stream running now, if any."""
    stream = _stream
    if stream is not None:
        stream.offer(record)


def _check_settings(interval: float, capacity: int, max_batch: int, timeout: float) -> None:
    if not 0 < interval <= MAX_INTERVAL:
        raise ValueError(f"interval must be in (0, {MAX_INTERVAL}] seconds, not {interval!r}")
    if capacity < 1 or max_batch < 1:
        raise ValueError(f"capacity and max_batch must be positive, not {capacity}, "
                         f"{max_batch}")
    if not 0 < timeout <= MAX_TIMEOUT:
        raise ValueError(f"timeout must be in (0, {MAX_TIMEOUT:g}] seconds, not {timeout!r}")


def _close_at_exit() -> None:
    stream = _stream
    if stream is not None:
        stream.close(EXIT_CLOSE_SECONDS)


def _register_exit_hook() -> None:
    global _exit_hook_registered
    if not _exit_hook_registered:
        atexit.register(_close_at_exit)
        _exit_hook_registered = True


def _forget_after_fork() -> None:
    """A forked child has no sender thread: it records without streaming until it calls
    ``install`` itself (as a new sender, with its own pid). The parent's handle, which
    the child may still hold, says it is closed and reads its counts without a lock
    the parent's threads may have held at the fork."""
    global _stream, _LOCK
    _LOCK = threading.Lock()
    stream, _stream = _stream, None
    if stream is not None:
        carriers.set_record_listener(None)
        stream._detach_in_child()


os.register_at_fork(after_in_child=_forget_after_fork)
