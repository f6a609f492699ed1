"""Simulated slime rollouts, recorded with this package's own tracing API.

The demo, the tests and the benchmarks need dumps that look like a real
rollout step: hundreds of samples in flight at once, single-turn math groups
beside multi-turn agentic groups, retries, aborts, cancelled tasks, PD timings.
Rather than writing records by hand, this module *runs* such a rollout: real
asyncio tasks, real ``trace_span``/``trace_function`` calls, on an event loop
whose clock is simulated, so a 10-minute rollout step takes seconds and the
same seed always gives the same dump (ids aside, which are random as in slime).

Usage: ``python -m slime_trace_widget.demo out.pt --samples 512 --seed 0``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .tracing import (
    build_sglang_meta_trace_attrs,
    trace_event,
    trace_function,
    trace_next_attempt,
    trace_span,
    use_clock,
)

#: Simulated wall clock of the first record (2026-01-01 00:00:00 UTC).
EPOCH = 1767225600.0

MATH_SOURCES = ("math500", "gsm8k", "aime24")
AGENT_SOURCES = ("deepsearch_with_tool", "deepsearch_webwalker", "swe_agent")
TOOLS = ("search", "browse", "python")
AGENT_MAX_NEW_TOKENS = 8192
WORDS = ("population", "capital", "compare", "river", "document", "final", "year", "city",
         "compute", "therefore", "between", "largest", "oldest", "summary")


class SimulatedClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose time jumps to the next timer instead of waiting for it.

    ``asyncio.sleep`` schedules timers; when nothing is ready to run, the loop
    advances its clock to the earliest timer, so simulated minutes pass in
    microseconds while every task still observes a consistent, monotonic time.
    The loop's own time starts at 0: asyncio compares timers against
    ``time() + 1e-9``, which an epoch-sized float cannot represent.
    """

    def __init__(self) -> None:
        super().__init__()
        self._now = 0.0

    def time(self) -> float:
        return self._now

    def _run_once(self) -> None:
        ready = self._ready  # type: ignore[attr-defined]
        scheduled = self._scheduled  # type: ignore[attr-defined]
        if not ready and scheduled:
            self._now = max(self._now, scheduled[0].when())
        super()._run_once()  # type: ignore[misc]


@dataclass
class DemoConfig:
    """Knobs of the simulated rollout; defaults resemble an agentic RL step."""

    n_samples: int = 64
    seed: int = 0
    rollout_id: int = 0
    agentic_share: float = 0.6
    math_group_size: int = 8
    agent_group_size: int = 4
    max_concurrent_groups: int = 48
    pd_share: float = 0.3
    retry_share: float = 0.04
    cancel_share: float = 0.02
    fail_share: float = 0.02
    min_turns: int = 5
    max_turns: int = 60


class _Rollout:
    """One simulated rollout step: builds samples, runs groups, records traces."""

    def __init__(self, config: DemoConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.samples: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ samples

    def make_groups(self) -> list[tuple[str, list[dict[str, Any]]]]:
        config, rng = self.config, self.rng
        groups: list[tuple[str, list[dict[str, Any]]]] = []
        while len(self.samples) < config.n_samples:
            agentic = rng.random() < config.agentic_share
            size = config.agent_group_size if agentic else config.math_group_size
            size = min(size, config.n_samples - len(self.samples))
            source = rng.choice(AGENT_SOURCES if agentic else MATH_SOURCES)
            group_index = len(groups)
            prompt = self._text(rng.randint(8, 30))
            label = self._text(2) if agentic else str(rng.randint(1, 9999))
            members = [self._sample(len(self.samples) + k, group_index, source, prompt, label)
                       for k in range(size)]
            self.samples.extend(members)
            groups.append(("agent" if agentic else "math", members))
        return groups

    def _sample(self, index: int, group: int, source: str, prompt: str,
                label: str) -> dict[str, Any]:
        return {
            "group_index": group, "index": index, "prompt": prompt, "tokens": [],
            "multimodal_inputs": None, "response": "", "response_length": 0,
            "label": label, "reward": None, "loss_mask": None, "weight_versions": [],
            "rollout_log_probs": None, "rollout_routed_experts": None,
            "remove_sample": False, "status": "pending",
            "metadata": {"source": source, "dataset": source.split("_")[0]},
            "train_metadata": None, "non_generation_time": 0.0,
            "spec_info": {"spec_accept_token_num": 0, "spec_draft_token_num": 0},
            "prefix_cache_info": {"cached_tokens": 0, "total_prompt_tokens": 0},
            "rollout_id": self.config.rollout_id,
        }

    def _text(self, n_words: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(n_words))

    # ------------------------------------------------------------------ running

    async def run(self) -> None:
        groups = self.make_groups()
        gate = asyncio.Semaphore(self.config.max_concurrent_groups)
        await asyncio.gather(*(self._admit(gate, kind, group, k)
                               for k, (kind, group) in enumerate(groups)))

    async def _admit(self, gate: asyncio.Semaphore, kind: str, group: list[dict],
                     position: int) -> None:
        await asyncio.sleep(position * self.rng.uniform(0.0, 0.05))
        async with gate:
            await self.generate_and_rm_group(kind, group)

    @trace_function("generate_and_rm_group", target="group",
                    attrs_getter=lambda self, kind, group: {"group_size": len(group)})
    async def generate_and_rm_group(self, kind: str, group: list[dict]) -> None:
        await asyncio.gather(*(self._run_sample(kind, sample) for sample in group))
        if kind == "agent":
            with trace_span(group, "group_reward_model", {"group_size": len(group)}) as span:
                await asyncio.sleep(self.rng.uniform(0.2, 1.5))
                rewards = [s["reward"] for s in group if isinstance(s["reward"], float)]
                span.set("mean_reward", sum(rewards) / len(rewards) if rewards else None)

    async def _run_sample(self, kind: str, sample: dict) -> None:
        cancel = self.rng.random() < self.config.cancel_share
        work = self.generate_and_rm(kind, sample)
        if not cancel:
            await work
            return
        try:
            await asyncio.wait_for(work, timeout=self.rng.uniform(1.0, 20.0))
        except asyncio.TimeoutError:
            sample["status"] = "aborted"

    @trace_function("generate_and_rm", target="sample")
    async def generate_and_rm(self, kind: str, sample: dict) -> None:
        if kind == "math":
            await self._single_turn(sample)
        else:
            await self._multi_turn(sample)
        if sample["status"] in ("completed", "truncated"):
            with trace_span(sample, "reward_model", {"rm_type": "rule" if kind == "math"
                                                     else "llm_judge"}) as span:
                await asyncio.sleep(self.rng.uniform(0.05, 0.4) if kind == "math"
                                    else self.rng.uniform(0.3, 2.0))
                sample["reward"] = self._reward(sample)
                span.set("reward", sample["reward"])

    async def _single_turn(self, sample: dict) -> None:
        if self.rng.random() < self.config.retry_share:
            await self._failed_attempt(sample)
        finish = await self._generate(sample, turn=0, max_new_tokens=self.rng.choice(
            (2048, 8192, 32768)))
        sample["status"] = "truncated" if finish == "length" else "completed"

    async def _multi_turn(self, sample: dict) -> None:
        rng = self.rng
        turns = rng.randint(self.config.min_turns, self.config.max_turns)
        trace_event(sample, "rollout_admitted", {"planned_turns": turns})
        for turn in range(turns):
            if rng.random() < self.config.retry_share / 4:
                await self._failed_attempt(sample)
            finish = await self._generate(sample, turn=turn,
                                          max_new_tokens=AGENT_MAX_NEW_TOKENS)
            if finish == "length":
                sample["status"] = "truncated"
                return
            if turn == turns - 1:
                break
            await self._tool_call(sample, turn)
            if rng.random() < self.config.fail_share / 10:
                sample["status"] = "failed"
                trace_event(sample, "rollout_failed", {"turn": turn, "reason": "tool budget"})
                return
        sample["status"] = "completed"

    async def _failed_attempt(self, sample: dict) -> None:
        try:
            with trace_span(sample, "sglang_generate", {"max_new_tokens": 2048}):
                await asyncio.sleep(self.rng.uniform(0.5, 5.0))
                raise ConnectionError("sglang worker restarted; request dropped")
        except ConnectionError:
            await asyncio.sleep(self.rng.uniform(0.5, 2.0))
            trace_next_attempt(sample, {"reason": "ConnectionError"})

    async def _generate(self, sample: dict, turn: int, max_new_tokens: int) -> str:
        rng = self.rng
        prompt_tokens = rng.randint(150, 900) + 350 * turn
        multi_turn = turn > 0 or max_new_tokens == AGENT_MAX_NEW_TOKENS
        completion = int(min(max_new_tokens, rng.lognormvariate(5.3 if multi_turn else 6.5, 0.9)))
        early_stop = rng.random() < (0.003 if multi_turn else 0.05)
        finish = "length" if completion >= max_new_tokens or early_stop else "stop"
        throughput = rng.uniform(40.0, 220.0)
        queue_time = rng.expovariate(1 / 0.05)
        duration = min(30.0, max(0.5, queue_time + completion / throughput))
        with trace_span(sample, "sglang_generate", {"max_new_tokens": max_new_tokens,
                                                     "turn": turn}) as span:
            await asyncio.sleep(duration)
            meta = {
                "id": f"{rng.getrandbits(64):016x}", "prompt_tokens": prompt_tokens,
                "completion_tokens": completion,
                "cached_tokens": int(prompt_tokens * rng.uniform(0.0, 0.9)),
                "queue_time": round(queue_time, 6), "e2e_latency": round(duration, 6),
                "decode_throughput": round(throughput, 3),
                "finish_reason": {"type": finish, "matched": None},
            }
            if rng.random() < self.config.pd_share:
                meta.update(self._pd_meta(duration))
            span.update(build_sglang_meta_trace_attrs(meta))
        sample["response_length"] += completion
        sample["tokens"] = list(range(min(64, sample["response_length"])))
        return finish

    def _pd_meta(self, duration: float) -> dict[str, float]:
        rng = self.rng
        prefill = {
            "pd_prefill_bootstrap_queue_duration": rng.uniform(0.0, 0.05),
            "pd_prefill_bootstrap_duration": rng.uniform(0.0, 0.03),
            "pd_prefill_alloc_wait_duration": rng.choice((0.0, rng.uniform(0.0, 0.2))),
            "pd_prefill_forward_duration": rng.uniform(0.005, 0.3),
            "pd_prefill_transfer_queue_duration": rng.uniform(0.0, 0.08),
        }
        decode = {
            "pd_decode_prealloc_duration": rng.uniform(0.0, 0.04),
            "pd_decode_bootstrap_duration": rng.uniform(0.0, 0.02),
            "pd_decode_alloc_wait_duration": rng.choice((0.0, rng.uniform(0.0, 0.3))),
            "pd_decode_transfer_duration": rng.uniform(0.01, 0.2),
        }
        used = sum(prefill.values()) + sum(decode.values())
        decode["pd_decode_forward_duration"] = max(0.01, duration - used)
        stats = {"pd_transfer_speed_gb_s": round(rng.uniform(2.0, 40.0), 3),
                 "pd_transfer_total_mb": round(rng.uniform(5.0, 60.0), 3),
                 "pd_prefill_retry_count": rng.choice((0, 0, 0, 1, 2))}
        return {k: round(v, 6) for k, v in {**prefill, **decode}.items()} | stats

    async def _tool_call(self, sample: dict, turn: int) -> None:
        rng = self.rng
        tool = rng.choice(TOOLS)
        with trace_span(sample, "tool_call", {"turn": turn, "tool": tool}) as call:
            await asyncio.sleep(rng.uniform(0.002, 0.02))
            try:
                with trace_span(sample, "tool_execution",
                                {"tool": tool, "query": self._text(rng.randint(3, 14))}) as run:
                    await asyncio.sleep(min(5.0, max(0.05, rng.lognormvariate(-0.7, 0.9))))
                    if rng.random() < 0.05:
                        raise TimeoutError(f"{tool} did not answer within the tool budget")
                    chars = rng.randint(200, 8000)
                    run.update({"num_results": rng.randint(1, 10), "result_chars": chars,
                                "http_status": 200})
                trace_event(sample, "tool_result", {"turn": turn, "tool": tool, "chars": chars})
                call.update({"ok": True, "observation_tokens": chars // 4})
            except TimeoutError:
                call.update({"ok": False, "observation_tokens": 0})

    def _reward(self, sample: dict) -> float:
        if sample["status"] == "truncated":
            return 0.0
        return round(self.rng.choice((0.0, 1.0)) if self.rng.random() < 0.7
                     else self.rng.random(), 4)


def make_demo_samples(n_samples: int = 64, seed: int = 0, **options: Any) -> list[dict]:
    """Run a simulated rollout of ``n_samples`` samples and return them as dump records.

    Works inside Jupyter too: the kernel's own event loop is running there, so
    the simulation then runs its loop in a worker thread.
    """
    config = DemoConfig(n_samples=n_samples, seed=seed, **options)
    rollout = _Rollout(config)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        _simulate(rollout)
    else:
        with ThreadPoolExecutor(max_workers=1) as pool:
            pool.submit(_simulate, rollout).result()
    return rollout.samples


def _simulate(rollout: _Rollout) -> None:
    loop = SimulatedClockLoop()
    start = EPOCH + 3600.0 * rollout.config.rollout_id
    try:
        with use_clock(lambda: start + loop.time()):
            loop.run_until_complete(rollout.run())
    finally:
        loop.close()


def write_demo_dump(path: str | Path, *, n_samples: int = 64, seed: int = 0,
                    rollout_id: int = 0, **options: Any) -> Path:
    """Simulate a rollout and save it the way slime's ``--save-debug-rollout-data`` does."""
    from .dump import save_dump

    samples = make_demo_samples(n_samples, seed, rollout_id=rollout_id, **options)
    save_dump(path, samples, rollout_id=rollout_id)
    return Path(path)


def count_records(samples: list[dict]) -> int:
    """Number of raw trace records across ``samples`` (the size unit of the benchmarks)."""
    return sum(len((s.get("trace") or {}).get("events") or ()) for s in samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write a simulated slime rollout dump.")
    parser.add_argument("path", help="output .pt file")
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rollout-id", type=int, default=0)
    args = parser.parse_args(argv)
    path = write_demo_dump(args.path, n_samples=args.samples, seed=args.seed,
                           rollout_id=args.rollout_id)
    from .frames import load_frames

    frames = load_frames(path)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")
    print(frames.summary())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
