"""A dump whose generations' requests SGLang 0.5.23's own code served: the requests
``sglang_driver.plan`` makes for the dump, driven on three hosts whose clocks are off
(``engine_oracle.SKEWS``), exported by SGLang's exporter into the receiver, and the dump
loaded with the traces the receiver stored (``load_frames(engine_traces=)``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.loading import load_frames
from tests.support.engine_oracle import LEVELS, SKEWS
from tests.support.receiver import start_receiver
from tests.support.sglang_driver import Driven, default_rids, drive, plan, write_dump

#: Hang guard for driving every host, generous for a busy 2-core machine.
DRIVE_SECONDS = 900


@dataclass
class Joined:
    """The dump, the store and the frames loaded with it, and what was driven."""

    dump: Path
    store: Path
    frames: TraceFrames
    driven: Driven


def drive_and_join(work: Path, samples: int, seed: int, scenarios: Sequence[str],
                   **plan_options: Any) -> Joined:
    """Write a dump of ``samples`` generations into ``work`` (rids and dump from ``seed``),
    plan its requests (``scenarios``, ``seed``, ``plan_options``), drive them into a
    receiver over gRPC (none dropped) and load the dump with what it stored."""
    dump = write_dump(work / "rollout_0.pt", default_rids(samples, seed=seed), seed=seed)
    requests = plan(load_frames(str(dump), progress=False), scenarios, seed=seed,
                    **plan_options)
    store = work / "engine"
    with start_receiver(store) as receiver:
        driven = drive(requests, receiver.endpoint("grpc"), "grpc", SKEWS, LEVELS,
                       work / "hosts", timeout=DRIVE_SECONDS)
    assert driven.dropped == 0
    frames = load_frames(str(dump), progress=False, engine_traces=str(store))
    return Joined(dump, store, frames, driven)
