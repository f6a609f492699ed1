"""The demo's size knobs (tests/support/demo_shapes.py): real-size token lists, many
attributes, open spans.

The benchmarks build users' dump shapes with these knobs, and the existing
tests and cached dumps rely on the default output staying what it was: the
knobs default off, and the payload ones draw from a generator of their own, so
even switched on they leave the simulated schedule alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from slime_trace_widget.demo import make_demo_samples
from tests.support.demo_output import digest
from tests.support.demo_shapes import (
    EXTRA_ATTR_KEYS,
    MAX_RESPONSE_WORDS,
    VOCAB_SIZE,
    count_records,
    sized_demo_samples,
    write_sized_demo_dump,
)

#: Two math groups of 8 and two agentic groups of 4 with this seed.
N, SEED = 16, 2
#: Spans the demo opens itself (the others are PD children written by the tracing API).
OWN_SPANS = {"generate_and_rm_group", "generate_and_rm", "group_reward_model", "reward_model",
             "sglang_generate", "tool_call", "tool_execution"}
#: Own spans recorded with ``trace_function``, whose end records cannot take attributes.
DECORATED = {"generate_and_rm_group", "generate_and_rm"}
IDS = ("trace_id", "span_id", "parent_span_id")


def records(samples: list[dict]) -> list[dict]:
    return [event for sample in samples for event in sample["trace"]["events"]]


def schedule(samples: list[dict]) -> list[tuple]:
    """What the simulated rollout did and when, without the random ids and attributes."""
    return [(e["type"], e["name"], e["ts"], e["attempt"], e["sample_id"]) for e in records(samples)]


def open_starts(samples: list[dict]) -> list[dict]:
    ended = {e["span_id"] for e in records(samples) if e["type"] == "span_end"}
    return [e for e in records(samples) if e["type"] == "span_start"
            and e["span_id"] not in ended]


def end_attrs(sample: dict, name: str) -> list[dict[str, Any]]:
    """End attributes of a sample's closed spans called ``name``, in recording order."""
    return [e.get("attrs") or {} for e in sample["trace"]["events"]
            if e["type"] == "span_end" and e["name"] == name]


def test_the_knobs_record_what_they_always_recorded() -> None:
    """Recorded before the knobs left the package: the benchmarks' shapes stay as measured."""
    samples = sized_demo_samples(N, seed=SEED, token_lists=True, extra_attrs=5, open_spans=2)
    assert digest(samples) == "fc99d42759023b0e4e58f2efc54b5f1a3ecc509f88b64d7075d72d91e6c434a2"


def test_default_output_follows_the_plain_code_path() -> None:
    samples = make_demo_samples(N, seed=SEED)
    assert schedule(samples) == schedule(sized_demo_samples(
        N, seed=SEED, token_lists=False, extra_attrs=0, open_spans=0))
    for sample in samples:
        generated = sum(a.get("completion_tokens", 0) for a in end_attrs(sample, "sglang_generate"))
        assert sample["response_length"] == generated
        assert sample["tokens"] == list(range(min(64, generated)))
        assert sample["loss_mask"] is None and sample["rollout_log_probs"] is None
        assert sample["response"] == ""
    starts = [e for e in records(samples) if e["type"] == "span_start"]
    assert all("attrs" not in e for e in starts if e["name"] == "generate_and_rm")
    assert all(set(e["attrs"]) <= {"max_new_tokens", "turn"} for e in starts
               if e["name"] == "sglang_generate")
    assert all(set(e["attrs"]) == {"group_size"} for e in starts
               if e["name"] == "generate_and_rm_group")


def test_payload_knobs_leave_the_schedule_and_the_trace_alone() -> None:
    plain = make_demo_samples(N, seed=SEED)
    loaded = sized_demo_samples(N, seed=SEED, token_lists=True)
    assert schedule(loaded) == schedule(plain)
    strip = [{k: v for k, v in e.items() if k not in IDS} for e in records(loaded)]
    assert strip == [{k: v for k, v in e.items() if k not in IDS} for e in records(plain)]
    assert [s["status"] for s in loaded] == [s["status"] for s in plain]


def test_token_lists_are_sized_from_the_simulated_token_counts() -> None:
    samples = sized_demo_samples(N, seed=SEED, token_lists=True, cancel_share=0.0)
    observed = 0
    for sample in samples:
        generations = [a for a in end_attrs(sample, "sglang_generate") if "prompt_tokens" in a]
        generated = sum(a["completion_tokens"] for a in generations)
        observation = sum(a["observation_tokens"] for a in end_attrs(sample, "tool_call"))
        mask, log_probs = sample["loss_mask"], sample["rollout_log_probs"]
        assert len(mask) == len(log_probs) == sample["response_length"] == generated + observation
        assert len(sample["tokens"]) == generations[0]["prompt_tokens"] + len(mask)
        assert all(type(t) is int and 0 <= t < VOCAB_SIZE for t in sample["tokens"])
        assert mask.count(1) == generated and mask.count(0) == observation
        assert all(p == 0.0 if m == 0 else p <= 0.0 for m, p in zip(mask, log_probs, strict=True))
        assert len(sample["response"].split()) == min(MAX_RESPONSE_WORDS, generated * 3 // 4)
        observed += observation
    assert observed > 0, "agentic samples put tool observations in the response, masked"


def test_extra_attrs_go_on_the_start_and_end_records_of_own_spans() -> None:
    count = len(EXTRA_ATTR_KEYS) + 6  # past the named keys: numbered ones follow
    plain = records(make_demo_samples(N, seed=SEED))
    extra = records(sized_demo_samples(N, seed=SEED, extra_attrs=count))
    touched = 0
    for before, after in zip(plain, extra, strict=True):
        added = set(after.get("attrs") or {}) - set(before.get("attrs") or {})
        own = before["name"] in OWN_SPANS and before["type"] != "event"
        wanted = own and not (before["type"] == "span_end" and before["name"] in DECORATED)
        assert len(added) == (count if wanted else 0), (before["type"], before["name"])
        assert all(after["attrs"][k] == v for k, v in (before.get("attrs") or {}).items())
        assert all(type(after["attrs"][k]) in (int, float, str, bool) for k in added)
        touched += wanted
    assert touched > len(extra) / 3


@pytest.mark.parametrize(("agentic_share", "wanted"), [(0.6, 0), (0.6, 1), (0.6, 5), (1.0, 8)])
def test_open_spans_leaves_that_many_generations_open(agentic_share: float, wanted: int) -> None:
    samples = sized_demo_samples(N, seed=SEED, agentic_share=agentic_share, open_spans=wanted,
                                cancel_share=0.0)
    opened = open_starts(samples)
    assert len(opened) == wanted
    assert {e["name"] for e in opened} <= {"sglang_generate"}
    cut = {e["sample_id"] for e in opened}
    assert len(cut) == wanted
    assert all(samples[i]["status"] == "aborted" for i in cut)
    assert all(len(end_attrs(samples[i], "generate_and_rm")) == 1 for i in cut)
    roots = {e["span_id"] for e in records(samples)
             if e["type"] == "span_start" and e["name"] == "generate_and_rm"}
    assert all(e["parent_span_id"] in roots for e in opened), "nested like a finished one"


def test_a_sized_dump_is_written_with_the_knobs(tmp_path: Path) -> None:
    path = write_sized_demo_dump(tmp_path / "rollout_0.pt", n_samples=4, seed=0,
                                 token_lists=True, extra_attrs=3, open_spans=1,
                                 cancel_share=0.0)
    samples = torch.load(path, weights_only=False)["samples"]
    assert count_records(samples) > 0
    assert all(isinstance(s["rollout_log_probs"], list) for s in samples)
    assert len(open_starts(samples)) == 1
