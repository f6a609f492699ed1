"""``js/test/fixtures/live_deltas.json``: deltas the kernel sends while a demo rollout
streams in, and the whole state at its end, for ``js/test/live/splice.test.js``.

The renderer applies the deltas one after another (a sample's block replaced
whole each time it moves) and must hold the same columns as the whole state
sent at once; both were written here by ``LiveBlocks``. Regenerate after a
deliberate change with ``PYTHONPATH=. python tests/view/test_live_fixture.py``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from slime_trace_widget.demo import make_demo_samples
from slime_trace_widget.view.live_blocks import LiveBlocks
from tests.support.live_feeds import RecordTraces

FIXTURE = Path(__file__).parents[2] / "js" / "test" / "fixtures" / "live_deltas.json"


def live_fixture() -> dict[str, Any]:
    """Three samples' records in time order, in batches of 120, each batch's delta
    against the previous one, then a late event in the second sample alone, and the
    whole state after the last. Trace ids are fixed (the demo's are random)."""
    samples = make_demo_samples(3, seed=11)
    rows = [(r["ts"], n, i, {**r, "trace_id": f"trace-{n}"}) for n, s in enumerate(samples)
            for i, r in enumerate(s["trace"]["events"])]
    ordered: list[dict[str, Any]] = []
    for n in range(len(samples)):  # each sample's own records keep their order
        mine = [row for row in rows if row[1] == n]
        running = float("-inf")
        for ts, _, i, record in mine:
            running = max(running, ts)
            ordered.append({"key": (running, n, i), "record": record})
    ordered.sort(key=lambda row: row["key"])
    records = [row["record"] for row in ordered]
    live = LiveBlocks()
    traces = RecordTraces()
    deltas = []
    late = {"type": "event", "name": "late_mark", "ts": records[-1]["ts"] + 1.0,
            "trace_id": "trace-1", "sample_id": 1, "group_id": 0, "attempt": 0}
    batches = [records[lo:lo + 120] for lo in range(0, len(records), 120)] + [[late]]
    for batch in batches:
        seq = live.seq
        keys = traces.add(batch)
        live.replace(keys, traces.frames(keys))
        deltas.append(live.delta_since(seq, now=live.t0 + 100.0).as_json())
    for delta in deltas:
        delta["epoch"] = "fixture"  # the blocks' epoch is random
    whole = live.delta_since(0, now=live.t0 + 100.0).as_json()
    return {"deltas": deltas, "whole": {**whole, "epoch": "fixture"}}


def test_live_fixture_is_current() -> None:
    assert json.loads(FIXTURE.read_text(encoding="utf-8")) == live_fixture(), (
        "stale: run PYTHONPATH=. python tests/view/test_live_fixture.py")


if __name__ == "__main__":
    FIXTURE.write_text(json.dumps(live_fixture(), separators=(",", ":")), encoding="utf-8")
    sys.exit(0)
