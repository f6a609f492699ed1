"""The one thread that sends: batches, heartbeats, back-off, the close record.

Every ``interval`` seconds it takes what the :class:`~.outbox.Outbox` holds,
encodes it and posts it; a receiver that is down or busy is retried with
exponential back-off (or after its ``Retry-After``) while the outbox keeps its
bound, so the records held are at most the outbox's capacity plus one batch.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable

from ...schema import LIVE_CLOSE, LIVE_HEARTBEAT
from .otlp import Encoder, Queued
from .outbox import LiveStats, Outbox
from .transport import LOGS_PATH, TRACES_PATH, Outcome, Poster

logger = logging.getLogger(__name__)

#: Longest quiet stretch without a heartbeat (docs/live.md: the view calls a sender
#: silent after 10 s without one).
HEARTBEAT_SECONDS = 2.0
FIRST_BACKOFF_SECONDS = 0.25
MAX_BACKOFF_SECONDS = 8.0
#: Shortest wait before sending again, whatever ``Retry-After`` says (even 0).
MIN_PAUSE_SECONDS = 0.05
#: Tries a batch of ended spans gets, and the longest it waits between them in all
#: (whatever ``Retry-After`` asks); spans are a courtesy to tracing backends, the logs
#: are the stream, so spans never hold the stream up for long.
SPAN_TRIES = 3
SPAN_PATIENCE_SECONDS = 1.0
#: Largest request body: a batch is sent in as many requests as its records need. The
#: receiver refuses bodies over 32 MB and collectors often take less (20 MiB is the
#: OpenTelemetry Collector's default); a record that alone is larger is counted dropped.
MAX_REQUEST_BYTES = 8 << 20
#: How long a close waits for the thread once the connection it waited on is cut: a
#: connect that hangs cannot be cut, and the thread (a daemon) then ends on its own.
ABORT_JOIN_SECONDS = 0.5
#: How long the sender lets go of the interpreter between two slices of a batch it
#: encodes. Python hands the interpreter to a waiting thread only every 5 ms
#: (``sys.getswitchinterval``) unless the holder lets go: without these pauses a
#: rollout's event loop, woken by a timer while a big batch is encoded, would wait up to
#: that long each time. A sleep, because a thread that releases the interpreter for no
#: time at all usually takes it straight back.
YIELD_SECONDS = 0.0001


class SenderThread(threading.Thread):
    """Sends the outbox's records every ``interval`` s, heartbeats when idle, a close
    record at the end (see the module docstring)."""

    def __init__(self, outbox: Outbox, encoder: Encoder, poster: Poster, *,
                 interval: float, max_batch: int, rollout: Callable[[], int | None]) -> None:
        super().__init__(name="slime-trace-live", daemon=True)
        self._outbox, self._encoder, self._poster = outbox, encoder, poster
        self._interval, self._max_batch, self._rollout = interval, max_batch, rollout
        self._closing = threading.Event()
        self._deadline: float | None = None
        self._in_flight = 0
        self._spans_on = True
        self._refusals_logged: set[str] = set()
        self.sent = self.retries = self.batches = 0
        self.spans_sent = self.spans_dropped = 0

    # ------------------------------------------------------------------ the caller's side

    def stats(self) -> LiveStats:
        seq, dropped, queued = self._outbox.counts()
        return LiveStats(sent=self.sent, dropped=dropped, queued=queued + self._in_flight,
                         retries=self.retries, batches=self.batches, seq=seq,
                         spans_sent=self.spans_sent, spans_dropped=self.spans_dropped)

    def close(self, timeout: float) -> None:
        """Send what is queued and the close record, for at most ``timeout`` seconds."""
        if self._deadline is None:
            self._deadline = time.monotonic() + max(timeout, 0.0)
        self._closing.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(max(timeout, 0.0) + 1.0)
            if self.is_alive():  # a post still waits on a receiver that never answers
                self._poster.abort()
                self.join(ABORT_JOIN_SECONDS)

    # ------------------------------------------------------------------ the thread

    def run(self) -> None:
        try:
            self._run()
        except Exception:  # a bug here must not take the process down; the counts say it
            logger.exception("live stream: the sender thread stopped; records are counted "
                             "dropped from now on")
            self._outbox.stop()
        finally:
            self._poster.close()

    def _run(self) -> None:
        next_tick = time.monotonic() + self._interval
        quiet_since = time.monotonic()
        while not self._closing.wait(max(next_tick - time.monotonic(), 0.0)):
            next_tick = max(next_tick + self._interval, time.monotonic())
            if self._send_queued():
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= HEARTBEAT_SECONDS:
                self._send_status(LIVE_HEARTBEAT)
                quiet_since = time.monotonic()
        self._poster.set_timeout(max(self._left(), 0.1))
        self._send_queued()
        if not self._out_of_time():
            self._send_status(LIVE_CLOSE)
        self._outbox.discard()

    def _send_queued(self) -> bool:
        """Send every record queued now, a batch at a time; whether there were any."""
        any_sent = False
        while not self._out_of_time():
            batch = self._outbox.take(self._max_batch)
            if not batch:
                break
            any_sent = True
            self._in_flight = len(batch)
            try:
                self._send_batch(batch)
            except BaseException:  # what the batch still held is counted, then it ends
                self._outbox.drop(self._in_flight)
                self._in_flight = 0
                raise
            self._in_flight = 0
        return any_sent

    def _send_batch(self, batch: list[Queued]) -> None:
        dropped = self._outbox.dropped_through(batch[-1][0])  # the word rides on the last
        logs, spans, unencodable = self._encoder.encode(batch, dropped, pause=_let_others_run)
        pieces, too_large = _pieces(logs, MAX_REQUEST_BYTES)
        self._in_flight = len(logs) - too_large
        if unencodable or too_large:
            self._outbox.drop(unencodable + too_large)
        for piece in pieces:
            outcome = self._deliver(LOGS_PATH, self._encoder.request(piece), tries=None)
            if outcome.taken:
                self.sent += len(piece)
                self.batches += 1
            else:
                self._outbox.drop(len(piece))
                self._log_refusal(LOGS_PATH, outcome)
            self._in_flight -= len(piece)
        if spans and self._spans_on:
            self._send_spans(spans)
        elif spans:
            self.spans_dropped += len(spans)

    def _send_spans(self, spans: list[bytes]) -> None:
        outcome = self._deliver(TRACES_PATH, self._encoder.request(spans), tries=SPAN_TRIES,
                                patience=SPAN_PATIENCE_SECONDS)
        if outcome.taken:
            self.spans_sent += len(spans)
            return
        self.spans_dropped += len(spans)
        if not outcome.retry:  # refused for good: this receiver takes no spans
            self._spans_on = False
            self._log_refusal(TRACES_PATH, outcome)

    def _send_status(self, kind: str) -> None:
        seq, dropped, queued = self._outbox.counts()
        request = self._encoder.status_request(kind, seq, dropped, queued + self._in_flight,
                                               self._rollout())
        self._deliver(LOGS_PATH, request, tries=1)

    def _deliver(self, path: str, body: bytes, tries: int | None,
                 patience: float = float("inf")) -> Outcome:
        """Post until taken, refused, out of ``tries`` (None: no limit), out of time (never
        posting once the close's deadline has passed), or until the next wait would take
        the waits past ``patience`` seconds in all."""
        backoff = FIRST_BACKOFF_SECONDS
        attempt = 0
        while True:
            if self._out_of_time():  # the close's time is up: nothing more goes out
                return Outcome(False, retry=True, reason="the stream closed before it went")
            outcome = self._poster.post(path, body)
            attempt += 1
            if outcome.taken or not outcome.retry:
                return outcome
            if (tries is not None and attempt >= tries) or self._out_of_time():
                return outcome
            pause = max(outcome.after if outcome.after is not None
                        else backoff * random.uniform(0.5, 1.0), MIN_PAUSE_SECONDS)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
            patience -= pause
            if patience < 0 or not self._pause(pause):
                return outcome
            self.retries += 1

    def _pause(self, seconds: float) -> bool:
        """Wait ``seconds``, at most until the close deadline; False once it has passed."""
        end = time.monotonic() + seconds
        if self._deadline is None:
            self._closing.wait(seconds)  # a close cuts the wait short: its deadline rules
        left = min(end - time.monotonic(), self._left())
        if left > 0:
            time.sleep(left)
        return not self._out_of_time()

    def _left(self) -> float:
        """Seconds until the close deadline (infinite before a close)."""
        return float("inf") if self._deadline is None else self._deadline - time.monotonic()

    def _out_of_time(self) -> bool:
        return self._deadline is not None and time.monotonic() >= self._deadline

    def _log_refusal(self, path: str, outcome: Outcome) -> None:
        if outcome.reason not in self._refusals_logged:
            self._refusals_logged.add(outcome.reason)
            logger.warning("live stream: %s%s not delivered (%s); counted as dropped",
                           "records to " if path == LOGS_PATH else "spans to ", path,
                           outcome.reason)


def _let_others_run() -> None:
    time.sleep(YIELD_SECONDS)


def _pieces(records: list[bytes], limit: int) -> tuple[list[list[bytes]], int]:
    """``records`` cut, in order, into runs of at most ``limit`` bytes each, and how
    many records were left out because alone they are larger."""
    pieces: list[list[bytes]] = []
    piece: list[bytes] = []
    size = too_large = 0
    for record in records:
        if len(record) > limit:
            too_large += 1
            continue
        if piece and size + len(record) > limit:
            pieces.append(piece)
            piece, size = [], 0
        piece.append(record)
        size += len(record)
    if piece:
        pieces.append(piece)
    return pieces, too_large
