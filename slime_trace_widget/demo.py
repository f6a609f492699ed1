"""Simulated slime rollouts, recorded with this package's own tracing API.

The demo, the tests and the benchmarks need dumps that look like a real
rollout step: hundreds of samples in flight at once, single-turn math groups
beside multi-turn agentic groups, retries, aborts, cancelled tasks, PD timings.
Rather than writing records by hand, this module *runs* such a rollout: real
asyncio tasks, real ``trace_span``/``trace_function`` calls, on an event loop
whose clock is simulated, so a 10-minute rollout step takes seconds and the
same seed always gives the same dump (ids aside, which are random as in slime).
What the samples carry besides their traces is a :class:`RolloutContent`; the
benchmarks give a heavier one to build dumps the size and shape of users'
(``tests/support/demo_shapes.py``).

From the command line: ``slime-trace-viewer demo out.pt --samples 512 --seed 0``
(``--live URL`` streams it to a collector while it plays on the real clock).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import heapq
import itertools
import random
import selectors
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .schema import PD_SEGMENTS, PD_SUMMARY_KEYS
from .tracing import (
    TraceSpan,
    build_sglang_meta_trace_attrs,
    export_trace,
    import_trace,
    merge_trace,
    trace_event,
    trace_function,
    trace_next_attempt,
    trace_span,
    use_clock,
)

#: SGLang meta keys of the PD segment durations, per phase in timeline order.
PREFILL_KEYS = tuple(key for key, _ in PD_SEGMENTS["prefill"])
DECODE_KEYS = tuple(key for key, _ in PD_SEGMENTS["decode"])
#: Simulated wall clock of the first record (2026-01-01 00:00:00 UTC).
EPOCH = 1767225600.0

MATH_SOURCES = ("math500", "gsm8k", "aime24")
AGENT_SOURCES = ("deepsearch_with_tool", "deepsearch_webwalker", "swe_agent")
TOOLS = ("search", "browse", "python")
AGENT_MAX_NEW_TOKENS = 8192
WORDS = ("population", "capital", "compare", "river", "document", "final", "year", "city",
         "compute", "therefore", "between", "largest", "oldest", "summary")


class _SimulatedTime(selectors.BaseSelector):
    """A selector that, where the loop would wait for its next timer, moves the clock there.

    The event loop asks its selector to wait ``timeout`` seconds only when no callback is
    ready, ``timeout`` being the time to its earliest live timer: that is the moment every
    task waits. Instead of sleeping, the clock jumps to that timer's own ``when()`` (not
    ``now + timeout``, which float rounding could land just short of), and the real
    selector is only polled. The timers come from :meth:`SimulatedClockLoop.call_at`.
    """

    def __init__(self) -> None:
        self.now = 0.0
        self._timers: list[tuple[float, int, asyncio.TimerHandle]] = []
        self._count = itertools.count()
        self._real = selectors.DefaultSelector()

    def add_timer(self, handle: asyncio.TimerHandle) -> None:
        heapq.heappush(self._timers, (handle.when(), next(self._count), handle))

    def _next_timer(self) -> float | None:
        while self._timers and (self._timers[0][2].cancelled()
                                or self._timers[0][0] <= self.now):
            heapq.heappop(self._timers)
        return self._timers[0][0] if self._timers else None

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is not None and timeout > 0:
            when = self._next_timer()
            if when is not None:
                self.now = when
            timeout = 0
        return self._real.select(timeout)

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._real.get_map()

    def close(self) -> None:
        self._real.close()


class SimulatedClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose time jumps to the next timer instead of waiting for it.

    ``asyncio.sleep`` schedules timers; when every task waits, the loop's selector
    (:class:`_SimulatedTime`) advances the clock to the earliest timer, so simulated
    minutes pass in microseconds while every task still observes a consistent, monotonic
    time. Only public means: the selector the loop is built with, and the loop's ``time``
    and ``call_at``. The loop's own time starts at 0: asyncio compares timers against
    ``time() + 1e-9``, which an epoch-sized float cannot represent.
    """

    def __init__(self) -> None:
        self.simulated_time = _SimulatedTime()
        super().__init__(self.simulated_time)

    def time(self) -> float:
        return self.simulated_time.now

    def call_at(self, when: float, callback: Callable[..., object], *args: Any,
                context: contextvars.Context | None = None) -> asyncio.TimerHandle:
        handle = super().call_at(when, callback, *args, context=context)
        self.simulated_time.add_timer(handle)
        return handle


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
    #: Run on the real clock (``time.time``, an ordinary event loop) with every simulated
    #: wait multiplied by this factor: 0.02 plays a 5-minute step in 6 s, records
    #: stamped as they happen. None (the default): the simulated clock, reproducible.
    real_time_scale: float | None = None


class RolloutContent:
    """What a simulated sample carries besides its trace, and which requests are lost.

    The demo's samples are light: a placeholder ``tokens`` list of up to 64 ids, only the
    rollout's own span attributes, no request lost but those the rollout cancels. The
    rollout calls each hook at a fixed point of its schedule, so a subclass that draws
    from a random generator of its own (not the rollout's) leaves the seed's schedule as
    it was, unless it loses requests, which cuts samples short.
    """

    def choose_lost(self, samples: list[dict[str, Any]]) -> None:
        """Once every sample exists: pick the samples whose requests get lost."""

    def lost_single_turn(self, sample: dict[str, Any]) -> bool:
        """Whether a single-turn sample's one request hangs until the rollout cancels it."""
        return False

    def lost_turn(self, sample: dict[str, Any], turns: int) -> int | None:
        """The turn whose request a multi-turn sample loses, else None. A sample with a
        lost turn runs to it: it does not stop early, and a request that would end it by
        length is the one lost."""
        return None

    def start_attrs(self, attrs: dict[str, Any] | None) -> dict[str, Any] | None:
        """The start attributes of a span the rollout opens."""
        return attrs

    def end_attrs(self, span: TraceSpan) -> None:
        """Add to the end record of a span the rollout opens with ``trace_span``."""

    def new_sample(self, sample: dict[str, Any]) -> None:
        """Fill a sample's fields when it is made."""

    def prompt(self, sample: dict[str, Any], tokens: int) -> None:
        """Before each request: the request's prompt is ``tokens`` long."""

    def generated(self, sample: dict[str, Any], tokens: int) -> None:
        """After a request: it generated ``tokens`` response tokens."""
        sample["response_length"] += tokens
        sample["tokens"] = list(range(min(64, sample["response_length"])))

    def observed(self, sample: dict[str, Any], tokens: int) -> None:
        """After a tool call: its observation is ``tokens`` long."""


class _Rollout:
    """One simulated rollout step: builds samples, runs groups, records traces."""

    def __init__(self, config: DemoConfig, content: RolloutContent) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.content = content
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
        self.content.choose_lost(self.samples)
        return groups

    def _sample(self, index: int, group: int, source: str, prompt: str,
                label: str) -> dict[str, Any]:
        sample = {
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
        self.content.new_sample(sample)
        return sample

    def _text(self, n_words: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(n_words))

    # ------------------------------------------------------------------ running

    def _scaled(self, seconds: float) -> float:
        """A simulated duration as this run waits it (see ``real_time_scale``)."""
        scale = self.config.real_time_scale
        return seconds if scale is None else seconds * scale

    async def _sleep(self, seconds: float) -> None:
        await asyncio.sleep(self._scaled(seconds))

    async def run(self) -> None:
        groups = self.make_groups()
        gate = asyncio.Semaphore(self.config.max_concurrent_groups)
        await asyncio.gather(*(self._admit(gate, kind, group, k)
                               for k, (kind, group) in enumerate(groups)))

    async def _admit(self, gate: asyncio.Semaphore, kind: str, group: list[dict],
                     position: int) -> None:
        await self._sleep(position * self.rng.uniform(0.0, 0.05))
        async with gate:
            await self.generate_and_rm_group(kind, group)

    @trace_function("generate_and_rm_group", target="group",
                    attrs_getter=lambda self, kind, group: self.content.start_attrs(
                        {"group_size": len(group)}))
    async def generate_and_rm_group(self, kind: str, group: list[dict]) -> None:
        await asyncio.gather(*(self._run_sample(kind, sample) for sample in group))
        if kind == "agent":
            with trace_span(group, "group_reward_model",
                            self.content.start_attrs({"group_size": len(group)})) as span:
                self.content.end_attrs(span)
                await self._sleep(self.rng.uniform(0.2, 1.5))
                rewards = [s["reward"] for s in group if isinstance(s["reward"], float)]
                span.set("mean_reward", sum(rewards) / len(rewards) if rewards else None)

    async def _run_sample(self, kind: str, sample: dict) -> None:
        cancel = self.rng.random() < self.config.cancel_share
        work = self.generate_and_rm(kind, sample)
        if not cancel:
            await work
            return
        try:
            await asyncio.wait_for(work, timeout=self._scaled(self.rng.uniform(1.0, 20.0)))
        except asyncio.TimeoutError:
            sample["status"] = "aborted"

    @trace_function("generate_and_rm", target="sample",
                    attrs_getter=lambda self, kind, sample: self.content.start_attrs(None))
    async def generate_and_rm(self, kind: str, sample: dict) -> None:
        if kind == "math":
            await self._single_turn(sample)
        else:
            await self._multi_turn(sample)
        if sample["status"] in ("completed", "truncated"):
            with trace_span(sample, "reward_model", self.content.start_attrs(
                    {"rm_type": "rule" if kind == "math" else "llm_judge"})) as span:
                self.content.end_attrs(span)
                if kind == "math":
                    await self._sleep(self.rng.uniform(0.05, 0.4))
                else:
                    await self._remote_judge(sample, self.rng.uniform(0.3, 2.0))
                sample["reward"] = self._reward(sample)
                span.set("reward", sample["reward"])

    async def _remote_judge(self, sample: dict, seconds: float) -> None:
        """The LLM judge as a remote service: the trace travels with the request
        (``export_trace``), the service records into its own carrier (``import_trace``)
        and its records come back with the answer (``merge_trace``)."""
        request = export_trace(sample)
        await self._sleep(seconds * 0.1)  # the request on the wire
        remote = import_trace(request)
        with trace_span(remote, "judge_queue"):
            await self._sleep(seconds * 0.3)
        with trace_span(remote, "judge_forward"):
            await self._sleep(seconds * 0.5)
        await self._sleep(seconds * 0.1)  # the answer on the wire
        merge_trace(sample, remote)

    async def _single_turn(self, sample: dict) -> None:
        if self.rng.random() < self.config.retry_share:
            await self._failed_attempt(sample)
        finish = await self._generate(sample, turn=0, max_new_tokens=self.rng.choice(
            (2048, 8192, 32768)), cut=self.content.lost_single_turn(sample))
        sample["status"] = {"length": "truncated", "abort": "aborted"}.get(finish, "completed")

    async def _multi_turn(self, sample: dict) -> None:
        rng = self.rng
        turns = rng.randint(self.config.min_turns, self.config.max_turns)
        cut_turn = self.content.lost_turn(sample, turns)
        trace_event(sample, "rollout_admitted", {"planned_turns": turns})
        for turn in range(turns):
            if rng.random() < self.config.retry_share / 4:
                await self._failed_attempt(sample)
            finish = await self._generate(sample, turn=turn,
                                          max_new_tokens=AGENT_MAX_NEW_TOKENS,
                                          cut=turn == cut_turn,
                                          keep_going=cut_turn is not None)
            if finish in ("length", "abort"):
                sample["status"] = "truncated" if finish == "length" else "aborted"
                return
            if turn == turns - 1:
                break
            await self._tool_call(sample, turn)
            if rng.random() < self.config.fail_share / 10 and cut_turn is None:
                sample["status"] = "failed"
                trace_event(sample, "rollout_failed", {"turn": turn, "reason": "tool budget"})
                return
        sample["status"] = "completed"

    async def _failed_attempt(self, sample: dict) -> None:
        try:
            with trace_span(sample, "sglang_generate",
                            self.content.start_attrs({"max_new_tokens": 2048})) as span:
                self.content.end_attrs(span)
                await self._sleep(self.rng.uniform(0.5, 5.0))
                raise ConnectionError("sglang worker restarted; request dropped")
        except ConnectionError:
            await self._sleep(self.rng.uniform(0.5, 2.0))
            trace_next_attempt(sample, {"reason": "ConnectionError"})

    async def _generate(self, sample: dict, turn: int, max_new_tokens: int, cut: bool = False,
                        keep_going: bool = False) -> str:
        """One SGLang request; with ``cut`` it hangs until the rollout cancels it.

        ``keep_going`` marks a sample with a lost turn (:meth:`RolloutContent.lost_turn`):
        it must reach that turn, so it does not stop early, and a request that would end
        it by length is the one cut.
        """
        rng = self.rng
        prompt_tokens = rng.randint(150, 900) + 350 * turn
        multi_turn = turn > 0 or max_new_tokens == AGENT_MAX_NEW_TOKENS
        completion = int(min(max_new_tokens, rng.lognormvariate(5.3 if multi_turn else 6.5, 0.9)))
        early_stop = rng.random() < (0.003 if multi_turn else 0.05) and not keep_going
        finish = "length" if completion >= max_new_tokens or early_stop else "stop"
        throughput = rng.uniform(40.0, 220.0)
        queue_time = rng.expovariate(1 / 0.05)
        duration = min(30.0, max(0.5, queue_time + completion / throughput))
        self.content.prompt(sample, prompt_tokens)
        attrs = self.content.start_attrs({"max_new_tokens": max_new_tokens, "turn": turn})
        if cut or (keep_going and finish == "length"):
            await self._lost_request(sample, attrs, duration)
            return "abort"
        with trace_span(sample, "sglang_generate", attrs) as span:
            self.content.end_attrs(span)
            await self._sleep(duration)
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
                for key in (*PREFILL_KEYS, *DECODE_KEYS):  # child spans within the real span
                    meta[key] = self._scaled(meta[key])
            span.update(build_sglang_meta_trace_attrs(meta))
        self.content.generated(sample, completion)
        return finish

    async def _lost_request(self, sample: dict, attrs: dict[str, Any] | None,
                            duration: float) -> None:
        """A request whose engine never answers: the rollout's timeout cancels it.

        The cancellation escapes ``trace_span`` as ``CancelledError``, so the span
        stays open (a start record without an end), as in slime's dumps.
        """
        async def hang() -> None:
            with trace_span(sample, "sglang_generate", attrs):
                await asyncio.Event().wait()

        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(hang(), timeout=self._scaled(duration))

    def _pd_meta(self, duration: float) -> dict[str, float]:
        rng = self.rng
        prefill = {
            PREFILL_KEYS[0]: rng.uniform(0.0, 0.05),  # bootstrap queue
            PREFILL_KEYS[1]: rng.uniform(0.0, 0.03),  # bootstrap
            PREFILL_KEYS[2]: rng.choice((0.0, rng.uniform(0.0, 0.2))),  # alloc wait
            PREFILL_KEYS[3]: rng.uniform(0.005, 0.3),  # forward
            PREFILL_KEYS[4]: rng.uniform(0.0, 0.08),  # transfer queue
        }
        decode = {
            DECODE_KEYS[0]: rng.uniform(0.0, 0.04),  # prealloc
            DECODE_KEYS[1]: rng.uniform(0.0, 0.02),  # bootstrap
            DECODE_KEYS[2]: rng.choice((0.0, rng.uniform(0.0, 0.3))),  # alloc wait
            DECODE_KEYS[3]: rng.uniform(0.01, 0.2),  # transfer
        }
        used = sum(prefill.values()) + sum(decode.values())
        decode[DECODE_KEYS[4]] = max(0.01, duration - used)  # forward
        speed, total, retries = PD_SUMMARY_KEYS
        stats = {speed: round(rng.uniform(2.0, 40.0), 3),
                 total: round(rng.uniform(5.0, 60.0), 3),
                 retries: rng.choice((0, 0, 0, 1, 2))}
        return {k: round(v, 6) for k, v in {**prefill, **decode}.items()} | stats

    async def _tool_call(self, sample: dict, turn: int) -> None:
        rng = self.rng
        tool = rng.choice(TOOLS)
        with trace_span(sample, "tool_call",
                        self.content.start_attrs({"turn": turn, "tool": tool})) as call:
            self.content.end_attrs(call)
            await self._sleep(rng.uniform(0.002, 0.02))
            try:
                with trace_span(sample, "tool_execution", self.content.start_attrs(
                        {"tool": tool, "query": self._text(rng.randint(3, 14))})) as run:
                    self.content.end_attrs(run)
                    await self._sleep(min(5.0, max(0.05, rng.lognormvariate(-0.7, 0.9))))
                    if rng.random() < 0.05:
                        raise TimeoutError(f"{tool} did not answer within the tool budget")
                    chars = rng.randint(200, 8000)
                    run.update({"num_results": rng.randint(1, 10), "result_chars": chars,
                                "http_status": 200})
                trace_event(sample, "tool_result", {"turn": turn, "tool": tool, "chars": chars})
                call.update({"ok": True, "observation_tokens": chars // 4})
                self.content.observed(sample, chars // 4)
            except TimeoutError:
                call.update({"ok": False, "observation_tokens": 0})

    def _reward(self, sample: dict) -> float:
        if sample["status"] == "truncated":
            return 0.0
        return round(self.rng.choice((0.0, 1.0)) if self.rng.random() < 0.7
                     else self.rng.random(), 4)


def make_demo_samples(n_samples: int = 64, seed: int = 0, *,
                      content: RolloutContent | None = None, **options: Any) -> list[dict]:
    """Run a simulated rollout of ``n_samples`` samples and return them as dump records;
    ``options`` are :class:`DemoConfig` fields.

    Works inside Jupyter too: the kernel's own event loop is running there, so
    the simulation then runs its loop in a worker thread.
    """
    config = DemoConfig(n_samples=n_samples, seed=seed, **options)
    rollout = _Rollout(config, content or RolloutContent())
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        _simulate(rollout)
    else:
        with ThreadPoolExecutor(max_workers=1) as pool:
            pool.submit(_simulate, rollout).result()
    return rollout.samples


def _simulate(rollout: _Rollout) -> None:
    if rollout.config.real_time_scale is not None:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(rollout.run())
        finally:
            loop.close()
        return
    loop = SimulatedClockLoop()
    start = EPOCH + 3600.0 * rollout.config.rollout_id
    try:
        with use_clock(lambda: start + loop.time()):
            loop.run_until_complete(rollout.run())
    finally:
        loop.close()


def write_demo_dump(path: str | Path, *, n_samples: int = 64, seed: int = 0,
                    rollout_id: int = 0, content: RolloutContent | None = None,
                    **options: Any) -> Path:
    """Simulate a rollout and save it the way slime's ``--save-debug-rollout-data`` does."""
    from .sources.dumps import save_dump

    samples = make_demo_samples(n_samples, seed, content=content, rollout_id=rollout_id,
                                **options)
    save_dump(path, samples, rollout_id=rollout_id)
    return Path(path)

