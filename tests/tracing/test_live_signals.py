"""Recording from a signal handler while the live stream runs (a hook noting an abort
on SIGTERM): the handler runs in the thread it interrupts, perhaps in the middle of
queueing that thread's record; it must neither wait for that thread nor share a number
with it. A child process records, so that a hang fails the test instead of the session."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.live_sink import WAIT_SECONDS

ROOT = Path(__file__).resolve().parents[2]

#: Records the main thread makes while a timer's handler records in between.
MAIN_RECORDS = 30_000

RECORDER = """
import json, signal, sys
from slime_trace_widget.tracing import live, trace_event

stream = live.install(sys.argv[1], capacity=1_000_000)  # room for every record
worker, interrupter = {"index": 0}, {"index": 1}
handled = 0

def on_alarm(signum, frame):
    global handled
    handled += 1
    trace_event(interrupter, "alarm", {"n": handled})

signal.signal(signal.SIGALRM, on_alarm)
signal.setitimer(signal.ITIMER_REAL, 0.0002, 0.0002)
for n in range(int(sys.argv[2])):
    trace_event(worker, "step", {"n": n})
signal.setitimer(signal.ITIMER_REAL, 0, 0)
stats = stream.close(timeout=60)
print(json.dumps({"handled": handled, "sent": stats.sent, "seq": stats.seq,
                  "dropped": stats.dropped, "queued": stats.queued,
                  "alarms": len(interrupter["trace"]["events"]) if handled else 0}))
"""


def test_a_signal_handler_records_while_its_thread_is_queueing(sink) -> None:
    done = subprocess.run([sys.executable, "-c", RECORDER, sink.endpoint, str(MAIN_RECORDS)],
                          capture_output=True, text=True, cwd=ROOT, timeout=WAIT_SECONDS)
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout)
    total = MAIN_RECORDS + counts["handled"]
    assert counts["handled"] > 0 and counts["alarms"] == counts["handled"]
    assert counts["sent"] == counts["seq"] == total
    assert counts["dropped"] == counts["queued"] == 0
    numbers = sorted(attrs["slime.seq"] for attrs, _ in sink.records())
    assert numbers == list(range(1, total + 1))  # each number once: none given twice
