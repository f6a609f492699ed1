"""The heavy inputs shared by ``test_heavy_input.py`` and ``benchmarks/bench_heavy.py``.

Each builder writes dumps the way a user would get them (recorded with the
tracing API or the demo simulator, saved with ``save_dump``) and returns what
``load_frames`` takes: a path or a glob. Sizes come in two modes: the default is
bounded so CI stays fast; ``STW_HEAVY_LONG=1`` multiplies them for a soak run.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from slime_trace_widget.demo import make_demo_samples, write_demo_dump
from slime_trace_widget.sources.dumps import save_dump
from slime_trace_widget.tracing import (
    build_sglang_meta_trace_attrs,
    trace_event,
    trace_next_attempt,
    trace_span,
    use_clock,
)

LONG = os.environ.get("STW_HEAVY_LONG") == "1"

#: Trace records in the one long sample.
LONG_SAMPLE_RECORDS = 1_000_000 if LONG else 100_000
#: Samples in one dump (long mode: full demo traces instead of lean ones).
MANY_SAMPLES = 5_000
#: Characters of the huge attribute string.
HUGE_STRING_CHARS = 50_000_000 if LONG else 10_000_000
#: Dumps loaded by one glob.
MANY_DUMPS = 1_000 if LONG else 200

EPOCH = 1_767_225_600.0
GROUP_SIZE = 8
# SGLang meta with PD timings, so the heavy inputs exercise the virtual [P]/[D] lanes too.
PD_META = {
    "prompt_tokens": 812,
    "completion_tokens": 96,
    "finish_reason": {"type": "stop"},
    "pd_prefill_bootstrap_queue_duration": 0.002,
    "pd_prefill_forward_duration": 0.031,
    "pd_prefill_transfer_queue_duration": 0.004,
    "pd_decode_prealloc_duration": 0.003,
    "pd_decode_transfer_duration": 0.006,
    "pd_decode_forward_duration": 0.42,
    "pd_transfer_total_mb": 12.5,
}


def step_clock(step: float = 0.001) -> Callable[[], float]:
    """A simulated clock that advances ``step`` seconds per reading (fast and reproducible)."""
    ticks = iter(range(1 << 62))
    return lambda: EPOCH + next(ticks) * step


def _sample(index: int, **fields: Any) -> dict[str, Any]:
    return {"index": index, "group_index": index // GROUP_SIZE, "status": "completed",
            "reward": float(index % 2), "metadata": {"source": "heavy"}, **fields}


def _generate(sample: dict[str, Any], turn: int) -> None:
    with trace_span(sample, "sglang_generate", attrs={"turn": turn}) as span:
        span.update(build_sglang_meta_trace_attrs(PD_META))


class Abandoned(BaseException):
    """Leaves a span open the way a cancelled task does (a BaseException skips the end)."""


def build_long_sample(directory: Path, records: int = LONG_SAMPLE_RECORDS) -> str:
    """One agentic sample with ``records`` trace records: turns of generate, tool, event.

    Every 50th turn is retried, so attempts and open spans (the retried turn's
    abandoned tool call) appear too.
    """
    sample = _sample(0, label="long agent loop")
    with use_clock(step_clock()), trace_span(sample, "agent_loop", attrs={"max_turns": -1}):
        events = sample["trace"]["events"]
        turn = 0
        while len(events) < records - 1:
            with trace_span(sample, "turn", attrs={"turn": turn}):
                _generate(sample, turn)
                try:
                    with trace_span(sample, "tool_call", attrs={"tool": "search"}):
                        trace_event(sample, "tool_result", {"chars": turn % 997})
                        if turn % 50 == 49:
                            trace_next_attempt(sample, {"reason": "tool timeout"})
                            raise Abandoned
                except Abandoned:
                    pass
            turn += 1
    path = directory / "rollout_0.pt"
    save_dump(path, [sample], rollout_id=0)
    return str(path)


def lean_samples(count: int) -> list[dict[str, Any]]:
    """``count`` samples in groups of eight, a rollout-wide span over all of them."""
    samples = [_sample(i, label=f"prompt {i}") for i in range(count)]
    with use_clock(step_clock(0.0001)), trace_span(samples, "rollout", attrs={"n": count}):
        for start in range(0, count, GROUP_SIZE):
            group = samples[start:start + GROUP_SIZE]
            with trace_span(group, "generate_and_rm_group"):
                for sample in group:
                    with trace_span(sample, "generate_and_rm"):
                        _generate(sample, 0)
                        with trace_span(sample, "reward_model") as reward:
                            reward.set("score", sample["reward"])
                    trace_event(sample, "done")
    return samples


def build_many_samples(directory: Path, count: int = MANY_SAMPLES, full: bool = LONG) -> str:
    """One dump of ``count`` samples: lean traces, or full demo traces (~90 spans each)."""
    samples = make_demo_samples(count, seed=11) if full else lean_samples(count)
    path = directory / "rollout_0.pt"
    save_dump(path, samples, rollout_id=0)
    return str(path)


def huge_text(chars: int, seed: int = 0) -> str:
    """Incompressible text, so nothing downstream gets away with a small gzip of it."""
    return random.Random(seed).randbytes(chars // 2).hex()


def build_huge_string(directory: Path, chars: int = HUGE_STRING_CHARS) -> str:
    """A small rollout where one sample carries a ``chars``-long string in attributes."""
    text = huge_text(chars)
    samples = lean_samples(GROUP_SIZE)
    target = samples[3]
    with use_clock(step_clock()), trace_span(target, "tool_call", attrs={"page": text}) as span:
        trace_event(target, "tool_output", {"output": text})
        span.set("response", text)
    target["response"] = text
    path = directory / "rollout_0.pt"
    save_dump(path, samples, rollout_id=0)
    return str(path)


def dump_order(count: int, seed: int = 5) -> Iterator[int]:
    """Rollout ids in a shuffled order, so the files' creation order says nothing."""
    order = list(range(count))
    random.Random(seed).shuffle(order)
    return iter(order)


def build_many_dumps(directory: Path, count: int = MANY_DUMPS) -> str:
    """``count`` small demo dumps ``rollout_{i}.pt``; returns the glob that matches them all."""
    for rollout_id in dump_order(count):
        write_demo_dump(directory / f"rollout_{rollout_id}.pt", n_samples=2, seed=rollout_id,
                        rollout_id=rollout_id)
    return str(directory / "rollout_*.pt")


def huge_name_samples(chars: int = HUGE_STRING_CHARS) -> list[dict[str, Any]]:
    """One sample whose span name, event name, status and source are ``chars`` long.

    Names are meant to be short, but nothing stops ``trace_span(s, f"tool {output}")``.
    """
    text = huge_text(chars)
    sample = _sample(0, status="s" + text, metadata={"source": text})
    with use_clock(step_clock()), trace_span(sample, "n" + text), trace_span(sample, "child"):
        trace_event(sample, "e" + text)
    return [sample]


def build_huge_names(directory: Path, chars: int = HUGE_STRING_CHARS) -> str:
    path = directory / "rollout_0.pt"
    save_dump(path, huge_name_samples(chars), rollout_id=0)
    return str(path)
