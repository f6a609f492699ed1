"""Simulated slime rollouts, recorded with this package's own tracing API.

The demo, the tests and the benchmarks need dumps that look like a real
rollout step: hundreds of samples in flight at once, single-turn math groups
beside multi-turn agentic groups, retries, aborts, cancelled tasks, PD timings.
Rather than writing records by hand, this module *runs* such a rollout: real
asyncio tasks, real ``trace_span``/``trace_function`` calls, on an event loop
whose clock is simulated, so a 10-minute rollout step takes seconds and the
same seed always gives the same dump (ids aside, which are random as in slime).
Size knobs (``token_lists``, ``extra_attrs``, ``open_spans``) build dumps the
size and shape of users' (benchmarks/demo_dumps.py); off by default, they leave
the output of a seed as it was.

Usage: ``python -m slime_trace_widget.demo out.pt --samples 512 --seed 0``.
"""

from __future__ import annotations

import argparse
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

from .schema import CARRIER_EVENTS, PD_SEGMENTS, PD_SUMMARY_KEYS, SAMPLE_TRACE_KEY
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
#: Token ids are drawn below this (Qwen's vocabulary size): most need 5 pickle bytes, as in slime.
VOCAB_SIZE = 151_936
#: Length of the pools that token ids, log-probs and response words are sliced from.
POOL_SIZE = 1 << 16
#: Cap on a response's words: text follows the completion tokens up to about 30 kB.
MAX_RESPONSE_WORDS = 4096
#: What real spans carry besides their own attributes (engine, batch, host details), as
#: (key, kind) for ``extra_attrs``; kinds are drawn in ``_Payload._value``.
EXTRA_ATTR_KEYS = (
    ("engine_rank", "rank"), ("engine_url", "url"), ("num_running_reqs", "count"),
    ("kv_cache_usage", "ratio"), ("model", "model"), ("stream", "bool"),
    ("gen_throughput", "rate"), ("session_id", "hex"), ("num_queue_reqs", "count"),
    ("note", "text"), ("weight_version", "count"), ("gpu_mem_used_gb", "rate"),
    ("node", "node"), ("top_p", "ratio"), ("router_policy", "policy"),
    ("prefix_hit", "bool"), ("result_preview", "preview"), ("batch_id", "count"),
    ("sampling_seed", "seed"),
)
MODELS = ("qwen3-30b-a3b", "qwen3-4b-instruct", "glm-4.5-air")
POLICIES = ("cache_aware", "round_robin", "least_load")


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
    #: Give each sample slime's real-size payload: ``tokens`` (prompt + response ids),
    #: ``rollout_log_probs`` and ``loss_mask`` (one per response token; tool
    #: observations are in the response with mask 0, as in slime's multi-turn
    #: rollouts) and a ``response`` text; ``response_length`` then counts them.
    token_lists: bool = False
    #: Filler attributes added to the start and end records of the spans the demo opens
    #: (end records of ``trace_function`` spans excepted: that API has no end attrs).
    extra_attrs: int = 0
    #: Samples whose generation request hangs and is cancelled by a timeout, leaving
    #: its ``sglang_generate`` span open: exactly this many open spans, plus those of
    #: ``cancel_share``. A picked sample runs to its cut without failing or stopping early.
    open_spans: int = 0
    #: Run on the real clock (``time.time``, an ordinary event loop) with every simulated
    #: wait multiplied by this factor: 0.02 plays a 5-minute step in 6 s, records
    #: stamped as they happen. None (the default): the simulated clock, reproducible.
    real_time_scale: float | None = None


class _Payload:
    """Bulk content for the size knobs, drawn from a generator of its own.

    The rollout's generator never sees these draws, so switching ``token_lists`` or
    ``extra_attrs`` on leaves the seed's schedule as it was (``open_spans`` cuts
    samples short and so changes it). Token ids, log-probs and words are slices of
    fixed pools: a 600 MB dump holds tens of millions of them, and a slice shares
    the pool's objects instead of drawing and boxing each one.
    """

    def __init__(self, config: DemoConfig) -> None:
        self.rng = random.Random(f"payload-{config.seed}")
        named = len(EXTRA_ATTR_KEYS)
        self.attr_keys: list[tuple[str, str]] = []
        for k in range(config.extra_attrs):  # past the named keys, numbered copies
            key, kind = EXTRA_ATTR_KEYS[k % named]
            self.attr_keys.append((key if k < named else f"{key}_{k}", kind))
        if config.token_lists:
            rng = self.rng
            self.token_pool = [rng.randrange(VOCAB_SIZE) for _ in range(POOL_SIZE)]
            self.logprob_pool = [-rng.expovariate(3.0) for _ in range(POOL_SIZE)]
            self.word_pool = [rng.choice(WORDS) for _ in range(POOL_SIZE)]

    def take(self, pool: list, n: int) -> list:
        """``n`` items of ``pool`` from a random offset, wrapping around."""
        start = self.rng.randrange(len(pool))
        items = pool[start:start + n]
        while len(items) < n:
            items += pool[:n - len(items)]
        return items

    def attrs(self) -> dict[str, Any]:
        """One record's filler attributes: numbers, short strings, the odd bool."""
        return {key: self._value(kind) for key, kind in self.attr_keys}

    def _value(self, kind: str) -> Any:
        rng = self.rng
        if kind == "count":
            return rng.randrange(100_000)
        if kind == "rank":
            return rng.randrange(64)
        if kind == "ratio":
            return rng.random()
        if kind == "rate":
            return rng.uniform(10.0, 5000.0)
        if kind == "bool":
            return rng.random() < 0.5
        if kind == "seed":
            return rng.getrandbits(31)
        if kind == "hex":
            return f"{rng.getrandbits(64):016x}"
        if kind == "url":
            return f"http://10.0.{rng.randrange(16)}.{rng.randrange(256)}:3000{rng.randrange(8)}"
        if kind == "node":
            return f"node-{rng.randrange(32):02d}"
        if kind in ("text", "preview"):
            words = rng.randint(3, 12) if kind == "text" else rng.randint(10, 40)
            return " ".join(rng.choice(WORDS) for _ in range(words))
        return rng.choice(MODELS if kind == "model" else POLICIES)


class _Rollout:
    """One simulated rollout step: builds samples, runs groups, records traces."""

    def __init__(self, config: DemoConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.payload = _Payload(config)
        self.samples: list[dict[str, Any]] = []
        #: Indices of the samples picked for ``open_spans``.
        self.cut: set[int] = set()
        #: Generated tokens so far per sample index (``token_lists``: sizes the response text).
        self.generated: dict[int, int] = {}

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
        picks = min(config.open_spans, len(self.samples))
        self.cut = set(self.payload.rng.sample(range(len(self.samples)), picks))
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
        if self.config.token_lists:  # filled as requests run; a sample never sent keeps them empty
            sample["loss_mask"], sample["rollout_log_probs"] = [], []
        return sample

    def _text(self, n_words: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(n_words))

    def _start_attrs(self, attrs: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """A span's start attributes plus the filler ones ``extra_attrs`` asks for."""
        if not self.config.extra_attrs:
            return attrs
        return {**(attrs or {}), **self.payload.attrs()}

    def _end_attrs(self, span: TraceSpan) -> None:
        """Give a span's end record the filler attributes ``extra_attrs`` asks for."""
        if self.config.extra_attrs:
            span.update(self.payload.attrs())

    def _cut_turn(self, sample: dict, turns: int) -> int | None:
        """The turn whose request a sample picked for ``open_spans`` loses, else None."""
        return self.payload.rng.randrange(turns) if sample["index"] in self.cut else None

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
                    attrs_getter=lambda self, kind, group: self._start_attrs(
                        {"group_size": len(group)}))
    async def generate_and_rm_group(self, kind: str, group: list[dict]) -> None:
        await asyncio.gather(*(self._run_sample(kind, sample) for sample in group))
        if kind == "agent":
            with trace_span(group, "group_reward_model",
                            self._start_attrs({"group_size": len(group)})) as span:
                self._end_attrs(span)
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
                    attrs_getter=lambda self, kind, sample: self._start_attrs())
    async def generate_and_rm(self, kind: str, sample: dict) -> None:
        if kind == "math":
            await self._single_turn(sample)
        else:
            await self._multi_turn(sample)
        if sample["status"] in ("completed", "truncated"):
            with trace_span(sample, "reward_model", self._start_attrs(
                    {"rm_type": "rule" if kind == "math" else "llm_judge"})) as span:
                self._end_attrs(span)
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
            (2048, 8192, 32768)), cut=sample["index"] in self.cut)
        sample["status"] = {"length": "truncated", "abort": "aborted"}.get(finish, "completed")

    async def _multi_turn(self, sample: dict) -> None:
        rng = self.rng
        turns = rng.randint(self.config.min_turns, self.config.max_turns)
        cut_turn = self._cut_turn(sample, turns)
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
                            self._start_attrs({"max_new_tokens": 2048})) as span:
                self._end_attrs(span)
                await self._sleep(self.rng.uniform(0.5, 5.0))
                raise ConnectionError("sglang worker restarted; request dropped")
        except ConnectionError:
            await self._sleep(self.rng.uniform(0.5, 2.0))
            trace_next_attempt(sample, {"reason": "ConnectionError"})

    async def _generate(self, sample: dict, turn: int, max_new_tokens: int, cut: bool = False,
                        keep_going: bool = False) -> str:
        """One SGLang request; with ``cut`` it hangs until the rollout cancels it.

        ``keep_going`` marks a sample picked for ``open_spans``: it must reach its
        cut, so it does not stop early, and a request that would end it by length
        is the one cut.
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
        if self.config.token_lists and not sample["tokens"]:  # the first request's prompt
            sample["tokens"] = self.payload.take(self.payload.token_pool, prompt_tokens)
        attrs = self._start_attrs({"max_new_tokens": max_new_tokens, "turn": turn})
        if cut or (keep_going and finish == "length"):
            await self._lost_request(sample, attrs, duration)
            return "abort"
        with trace_span(sample, "sglang_generate", attrs) as span:
            self._end_attrs(span)
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
        if self.config.token_lists:
            self._add_tokens(sample, completion, mask=1)
        else:
            sample["response_length"] += completion
            sample["tokens"] = list(range(min(64, sample["response_length"])))
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

    def _add_tokens(self, sample: dict, n: int, mask: int) -> None:
        """Append ``n`` response tokens (generated: mask 1, tool observation: mask 0).

        ``response`` follows the generated tokens at about three words per four
        tokens, capped.
        """
        payload = self.payload
        sample["tokens"] += payload.take(payload.token_pool, n)
        sample["loss_mask"] += [mask] * n
        sample["rollout_log_probs"] += (payload.take(payload.logprob_pool, n) if mask
                                        else [0.0] * n)
        sample["response_length"] = len(sample["loss_mask"])
        if mask:
            generated = self.generated.get(sample["index"], 0) + n
            self.generated[sample["index"]] = generated
            words = min(MAX_RESPONSE_WORDS, generated * 3 // 4)
            sample["response"] = " ".join(payload.take(payload.word_pool, words))

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
                        self._start_attrs({"turn": turn, "tool": tool})) as call:
            self._end_attrs(call)
            await self._sleep(rng.uniform(0.002, 0.02))
            try:
                with trace_span(sample, "tool_execution", self._start_attrs(
                        {"tool": tool, "query": self._text(rng.randint(3, 14))})) as run:
                    self._end_attrs(run)
                    await self._sleep(min(5.0, max(0.05, rng.lognormvariate(-0.7, 0.9))))
                    if rng.random() < 0.05:
                        raise TimeoutError(f"{tool} did not answer within the tool budget")
                    chars = rng.randint(200, 8000)
                    run.update({"num_results": rng.randint(1, 10), "result_chars": chars,
                                "http_status": 200})
                trace_event(sample, "tool_result", {"turn": turn, "tool": tool, "chars": chars})
                call.update({"ok": True, "observation_tokens": chars // 4})
                if self.config.token_lists:
                    self._add_tokens(sample, chars // 4, mask=0)
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
                    rollout_id: int = 0, **options: Any) -> Path:
    """Simulate a rollout and save it the way slime's ``--save-debug-rollout-data`` does."""
    from .sources.dumps import save_dump

    samples = make_demo_samples(n_samples, seed, rollout_id=rollout_id, **options)
    save_dump(path, samples, rollout_id=rollout_id)
    return Path(path)


def count_records(samples: list[dict]) -> int:
    """Number of raw trace records across ``samples`` (the size unit of the benchmarks)."""
    return sum(len((s.get(SAMPLE_TRACE_KEY) or {}).get(CARRIER_EVENTS) or ()) for s in samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write a simulated slime rollout dump.")
    parser.add_argument("path", help="output .pt file")
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rollout-id", type=int, default=0)
    args = parser.parse_args(argv)
    path = write_demo_dump(args.path, n_samples=args.samples, seed=args.seed,
                           rollout_id=args.rollout_id)
    from .sources.loading import load_frames

    frames = load_frames(path)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")
    print(frames.summary())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
