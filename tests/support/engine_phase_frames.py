"""Samples whose engine traces went through the join, for the details panel's engine
phases: the browser test (``tests/browser/test_engine_phases_browser.py``) and the JS
fixture's writer (``js/dev/engine_phase_cases.py``) build the same two."""

from __future__ import annotations

from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.engine.join import join_engine
from tests.answers.test_engine_partition import pd_engine
from tests.support.engine_builder import T0, frames_for


def pd_and_retract_frames(seed: int) -> TraceFrames:
    """SGLang 0.5.23's layout. Sample 0: a PD request (``pd_engine``'s, from ``seed``), its
    halves overlapping, KV senders on prefill ranks 1 and 0. Sample 1: a request on two TP
    ranks retracted at 5 s, its re-run nested in its first decode_forward."""
    frames = frames_for(["pd-rid", "r-retract"])
    engine = pd_engine("pd-rid", seed, senders=(1, 0))
    rerun = [("prefill_waiting", T0 + 5.2, T0 + 5.5, {}, [], []),
             ("prefill_forward", T0 + 5.5, T0 + 6.0, {}, [], []),
             ("decode_forward", T0 + 6.2, T0 + 9.0, {}, [], [])]
    engine.request("r-retract", T0 + 1, T0 + 9, tp=2, thread_events=[("retract", T0 + 5, {})],
                   slices=[("prefill_forward", T0 + 2.1, T0 + 3.1, {}, [], []),
                           ("decode_forward", T0 + 3.1, T0 + 9.0, {}, [], rerun)])
    return join_engine(frames, engine.table())
