"""The demo rollout simulator: realistic, deterministic, written in slime's format."""

from __future__ import annotations

import pytest

from slime_trace_widget.demo import make_demo_samples
from slime_trace_widget.frames import build_frames
from tests.support.demo_output import digest

#: The output of these seeds, recorded when the simulated clock read asyncio's private
#: timer queue: any other clock must record the very same rollouts.
RECORDED = [
    ({"n_samples": 256, "seed": 0},
     "de3a6bbf004fc2ab0ec63e4c3eeb595e136b4386d4efaaa85297b3863df4baa3"),
    ({"n_samples": 64, "seed": 0},
     "5f68f8a4ebdac85dbad37cb064357a039be1d44310d2742155d5278649a1924b"),
    ({"n_samples": 48, "seed": 5, "rollout_id": 3},
     "fba97676a539c27e51eca6ec2206bf97d22267c3fe00ebe9fd0856fb8de8a136"),
]


def test_demo_is_deterministic_by_seed() -> None:
    def shape(samples: list[dict]) -> list[tuple]:
        return [(e["type"], e["name"], e["ts"]) for s in samples for e in s["trace"]["events"]]

    assert shape(make_demo_samples(16, seed=3)) == shape(make_demo_samples(16, seed=3))
    assert shape(make_demo_samples(16, seed=3)) != shape(make_demo_samples(16, seed=4))


@pytest.mark.parametrize(("options", "expected"), RECORDED)
def test_a_seed_records_what_it_always_recorded(options: dict, expected: str) -> None:
    assert digest(make_demo_samples(**options)) == expected


def test_demo_rollout_looks_like_a_real_step() -> None:
    samples = make_demo_samples(400, seed=1)
    frames = build_frames(samples)
    spans, events, table = frames.spans, frames.events, frames.samples
    names = set(spans["name"])
    assert {"generate_and_rm_group", "generate_and_rm", "sglang_generate", "tool_call",
            "tool_execution", "reward_model", "group_reward_model"} <= names
    assert spans["virtual"].any(), "PD timings on a fraction of generations"
    assert (events["name"] == "attempt_start").any(), "retries"
    assert (spans["state"] == "open").any(), "cancelled tasks leave open spans"
    assert spans["error"].any(), "tool errors recorded"
    assert {"completed", "truncated"} <= set(table["status"])
    generation = spans[(spans["name"] == "sglang_generate") & (spans["state"] == "closed")]
    assert generation["duration"].between(0.5 - 1e-4, 30.0 + 1e-4).all()
    tools = spans[spans["name"] == "tool_execution"]["duration"].dropna()
    assert tools.between(0.05 - 1e-4, 5.0 + 1e-4).all()  # epoch subtraction rounds
    # hundreds of samples overlap in time
    mid = (frames.t0 + frames.t1) / 2
    running = ((table["start"] <= mid) & (table["end"] >= mid)).sum()
    assert running >= 100
    turns = spans[spans["name"] == "sglang_generate"].groupby("sample_row").size()
    assert turns.max() >= 20 and turns.min() == 1
