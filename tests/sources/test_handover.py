"""The hand-over rule the live widget and the live page share: the step's dump is the
first new complete dump holding a sample seen live (real dumps through torch.load)."""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path

import pytest
import torch

from slime_trace_widget.demo import make_demo_samples
from slime_trace_widget.sources.handover import LEFT_OUT_WARNING, new_dumps_watcher, step_dump


def _save(path: Path, samples: list[dict], age: float = 60.0) -> None:
    torch.save({"rollout_id": 0, "samples": samples}, path)
    old = time.time() - age
    os.utime(path, (old, old))


def test_only_a_new_complete_dump_with_a_live_sample_is_the_steps(tmp_path: Path) -> None:
    samples = make_demo_samples(3, seed=11)
    seen = {s["trace"]["trace_id"] for s in samples[:1]}
    _save(tmp_path / "rollout_0.pt", samples)  # there before: an earlier step's
    watcher = new_dumps_watcher(tmp_path)
    assert step_dump(watcher, seen) is None

    _save(tmp_path / "rollout_1.pt", make_demo_samples(2, seed=12))  # none seen live
    _save(tmp_path / "rollout_2.pt", samples, age=0.0)  # still being written
    assert step_dump(watcher, seen) is None
    assert str(tmp_path / "rollout_1.pt") in watcher.seen  # looked at once, not again

    old = time.time() - 60
    os.utime(tmp_path / "rollout_2.pt", (old, old))
    found = step_dump(watcher, seen)
    assert found is not None
    path, frames = found
    assert path == str(tmp_path / "rollout_2.pt")
    assert set(frames.samples["trace_id"]) == {s["trace"]["trace_id"] for s in samples}
    assert step_dump(watcher, seen) is None  # returned once


def test_an_earlier_steps_dump_written_again_is_the_steps(tmp_path: Path) -> None:
    """A run resumed from a checkpoint repeats step 1 and writes rollout_1.pt again: the
    dump of that name there before the live view is the step's once rewritten, where
    the view, ignoring the name for good, never handed over."""
    _save(tmp_path / "rollout_1.pt", make_demo_samples(2, seed=12), age=3600)
    watcher = new_dumps_watcher(tmp_path)
    samples = make_demo_samples(3, seed=11)
    seen = {s["trace"]["trace_id"] for s in samples}
    assert step_dump(watcher, seen) is None
    _save(tmp_path / "rollout_1.pt", samples)
    found = step_dump(watcher, seen)
    assert found is not None and found[0] == str(tmp_path / "rollout_1.pt")
    assert step_dump(watcher, seen) is None


def test_samples_seen_live_that_the_dump_leaves_out_are_counted(tmp_path: Path) -> None:
    """slime's dump may hold fewer samples than ran (filtered, or a hung one never
    written): the hand-over said nothing of the others, which vanished from the view."""
    samples = make_demo_samples(8, seed=15)
    seen = {s["trace"]["trace_id"] for s in samples}
    watcher = new_dumps_watcher(tmp_path)
    _save(tmp_path / "rollout_6.pt", samples[:3])
    found = step_dump(watcher, seen)
    assert found is not None
    held = len({s["trace"]["trace_id"] for s in samples[:3]})
    assert found[1].warnings[LEFT_OUT_WARNING] == len(seen) - held > 0
    (tmp_path / "whole").mkdir()
    whole = new_dumps_watcher(tmp_path / "whole")
    _save(tmp_path / "whole" / "rollout_6.pt", samples)
    assert LEFT_OUT_WARNING not in step_dump(whole, seen)[1].warnings

def test_a_new_dump_that_cannot_be_read_is_reported_and_the_look_goes_on(
        tmp_path: Path) -> None:
    samples = make_demo_samples(3, seed=13)
    seen = {s["trace"]["trace_id"] for s in samples}
    watcher = new_dumps_watcher(tmp_path)
    broken = tmp_path / "a_partial.pt"  # before the step's dump in name order
    broken.write_bytes(b"not a torch file")
    old = time.time() - 60
    os.utime(broken, (old, old))
    _save(tmp_path / "rollout_5.pt", samples)
    with pytest.warns(RuntimeWarning, match="a_partial.pt") as caught:
        found = step_dump(watcher, seen)
    assert len(caught) == 1
    assert found is not None and found[0] == str(tmp_path / "rollout_5.pt")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # reported once: not looked at again
        assert step_dump(watcher, seen) is None


def test_the_steps_dump_gets_the_load_of_engines_that_export_no_span(tmp_path: Path) -> None:
    """SGLang run with metrics and without tracing: the collector's span store stays
    empty while its scrapes fill the load store. The step's dump gets that load, as
    ``load_frames`` with the same folder gives it, and no request counted missing."""
    import numpy as np

    from slime_trace_widget import load_frames
    from slime_trace_widget.sources.engine.beyond import MISSING_WARNING
    from slime_trace_widget.sources.engine.store import SpanStore, holds_spans
    from tests.sources.test_engine_load import store_scrapes

    samples = make_demo_samples(3, seed=14)
    seen = {s["trace"]["trace_id"] for s in samples}
    dumps, collector = tmp_path / "dumps", tmp_path / "collector"
    dumps.mkdir()
    watcher = new_dumps_watcher(dumps)
    _save(dumps / "rollout_0.pt", samples)
    plain = load_frames([str(dumps / "rollout_0.pt")], progress=False)
    SpanStore(collector).close()
    store_scrapes(collector, "engine-0", np.arange(plain.t0 - 5.0, plain.t1 + 5.0),
                  {"sglang:num_running_reqs": lambda t: t % 7})
    assert not holds_spans(collector)

    found = step_dump(watcher, seen, engine_traces=collector)
    assert found is not None
    frames = found[1]
    assert len(frames.engine_load) >= int(plain.t1 - plain.t0) + 10
    assert set(frames.engine_load["engine"]) == {"engine-0"}
    direct = load_frames([str(dumps / "rollout_0.pt")], progress=False,
                         engine_traces=str(collector))
    assert frames.engine_load.equals(direct.engine_load)
    assert MISSING_WARNING not in frames.warnings
    assert (frames.span_core["origin"] == "engine").sum() == 0
