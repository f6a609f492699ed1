"""Write js/test/fixtures/engine_phases.json: samples whose engine traces went through the
join as the product joins them, each sample's engine spans, the spans its requests hang
under and its ``retract`` events, with Python's own figures for it
(``analysis.engine_breakdown``'s phase seconds) and the rule's names
(``answers/engine.py``: ``PHASES``, ``PRIORITY``, the KV sender span, the retract
event). ``js/test/data/engine.test.js`` checks that the details panel's engine phases
(``js/src/data/engine.js``) give the same seconds and that its names are these, and
``js/test/render/band.test.js`` that the engine band draws those seconds.

    PYTHONPATH=. python js/dev/engine_phase_cases.py          # write the fixture
    PYTHONPATH=. python js/dev/engine_phase_cases.py --check  # exit 1 when it is stale

The samples: a PD request whose halves overlap with Mooncake KV senders on two prefill
ranks (``tests/answers/test_engine_partition.py``'s ``pd_engine``), a retracted request
on two TP ranks whose re-run nests in its first ``decode_forward``, and PD requests of
the demo sent through OpenTelemetry's SDK from two skewed hosts.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from slime_trace_widget.analysis import engine_breakdown
from slime_trace_widget.answers.engine import PHASES, PRIORITY, RETRACT_EVENT
from slime_trace_widget.demo import make_demo_samples
from slime_trace_widget.frames import build_frames
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.engine.join import KV_SENDER_SPAN, join_engine
from slime_trace_widget.sources.engine.store import load_engine_traces
from tests.sources.test_engine_join import SKEWS, store_requests
from tests.support.engine_phase_frames import pd_and_retract_frames
from tests.support.engine_traces import requests_for

OUT = Path(__file__).parents[1] / "test" / "fixtures" / "engine_phases.json"
#: Demo samples sent through the SDK (PD halves on two skewed hosts), and the most spans
#: a sample of them may have to be kept (the fixture stays small; several turns remain).
SDK_SAMPLES = 2
SDK_MAX_SPANS = 120


def sdk_frames(folder: Path) -> TraceFrames:
    frames = build_frames(make_demo_samples(SDK_SAMPLES, seed=4))
    requests = requests_for(frames, pd=True, seed=3)
    return join_engine(frames, load_engine_traces(store_requests(requests, folder, SKEWS)))


def sample_cases(frames: TraceFrames, label: str) -> list[dict[str, Any]]:
    """Per sample with engine spans: its engine spans and the spans their requests hang
    under (times in seconds from the earliest of them, parents as positions in the list),
    its retract events, and engine_breakdown's phase seconds."""
    core = frames.span_core
    engine = (core["origin"] == "engine").to_numpy()
    breakdown = engine_breakdown(frames)
    events = frames.event_core
    retracts = events[((events["origin"] == "engine") & (events["name"] == RETRACT_EVENT)
                       ).to_numpy()]
    out = []
    for row, mine in core[engine].groupby("sample_row", sort=True):
        owners = core.reindex(pd.Index(mine["parent_index"].unique()).intersection(core.index))
        owners = owners[(owners["origin"] != "engine").to_numpy()]
        picked = pd.concat([owners, mine])
        at = {int(index): position for position, index in enumerate(picked.index)}
        base = float(picked["start"].min())
        spans = []
        for _, span in picked.iterrows():
            parent = at.get(int(span["parent_index"]), -1)
            spans.append({"name": str(span["name"]), "parent": parent,
                          "engine": span["origin"] == "engine",
                          "start": float(span["start"]) - base,
                          "end": float(span["start"] + span["duration"]) - base,
                          "depth": 0 if parent < 0 else spans[parent]["depth"] + 1})
        held = retracts[retracts["parent_index"].isin(picked.index).to_numpy()]
        out.append({
            "name": f"{label}, sample row {int(row)}",
            "spans": spans,
            "events": [{"name": RETRACT_EVENT, "parent": at[int(event["parent_index"])],
                        "ts": float(event["ts"]) - base} for _, event in held.iterrows()],
            "seconds": {phase: float(breakdown.at[row, f"{phase}_s"])
                        for phase in (*PHASES, "other")},
        })
    return out


def fixture() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        sdk = [case for case in sample_cases(sdk_frames(Path(folder)), "SDK-shaped PD")
               if len(case["spans"]) <= SDK_MAX_SPANS]
    assert sdk, "no SDK-shaped sample is small enough"
    return {
        "about": ("Written by js/dev/engine_phase_cases.py from answers/engine.py: its names "
                  "and engine_breakdown's phase seconds per sample, which the details "
                  "panel (js/src/data/engine.js) must give and the engine band "
                  "(js/src/render/band.js) must draw."),
        "phases": {phase: list(names) for phase, names in PHASES.items()},
        "priority": list(PRIORITY),
        "kv_sender_span": KV_SENDER_SPAN,
        "retract_event": RETRACT_EVENT,
        "cases": sample_cases(pd_and_retract_frames(0x51), "SGLang 0.5.23 layout") + sdk,
    }


def main(argv: list[str]) -> int:
    text = json.dumps(fixture(), indent=1) + "\n"
    if "--check" in argv:
        current = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
        if current != text:
            print(f"{OUT} is stale: run PYTHONPATH=. python js/dev/engine_phase_cases.py")
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
