"""The demo rollout at the size and shape of users' dumps, for tests and benchmarks.

:class:`SizedContent` is a :class:`~slime_trace_widget.demo.RolloutContent` with three
knobs: ``token_lists`` (slime's real-size per-sample payload), ``extra_attrs`` (filler
attributes on every span the rollout opens) and ``open_spans`` (requests lost and left
open). All its draws come from a generator of its own, so ``token_lists`` and
``extra_attrs`` leave the seed's schedule as it was; ``open_spans`` cuts samples short
and so changes it. ``benchmarks/demo_dumps.py`` names the shapes users brought.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from slime_trace_widget.demo import WORDS, RolloutContent, make_demo_samples, write_demo_dump
from slime_trace_widget.schema import CARRIER_EVENTS, SAMPLE_TRACE_KEY
from slime_trace_widget.tracing import TraceSpan

#: Token ids are drawn below this (Qwen's vocabulary size): most need 5 pickle bytes, as in slime.
VOCAB_SIZE = 151_936
#: Length of the pools that token ids, log-probs and response words are sliced from.
POOL_SIZE = 1 << 16
#: Cap on a response's words: text follows the completion tokens up to about 30 kB.
MAX_RESPONSE_WORDS = 4096
#: What real spans carry besides their own attributes (engine, batch, host details), as
#: (key, kind) for ``extra_attrs``; kinds are drawn in ``SizedContent._value``.
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
#: The knobs' names, for splitting a shape's options from the demo's own.
KNOBS = ("token_lists", "extra_attrs", "open_spans")


class SizedContent(RolloutContent):
    """Samples with slime's real-size payload, filler attributes and lost requests.

    ``token_lists``: each sample gets ``tokens`` (prompt + response ids),
    ``rollout_log_probs`` and ``loss_mask`` (one per response token; tool observations
    are in the response with mask 0, as in slime's multi-turn rollouts) and a
    ``response`` text; ``response_length`` then counts them. ``extra_attrs``: that many
    filler attributes on the start and end records of the spans the rollout opens (end
    records of ``trace_function`` spans excepted: that API has no end attrs).
    ``open_spans``: exactly this many samples have a generation request that hangs and
    is cancelled by a timeout, leaving its ``sglang_generate`` span open; a picked
    sample runs to its cut without failing or stopping early.

    Token ids, log-probs and words are slices of fixed pools: a 600 MB dump holds tens
    of millions of them, and a slice shares the pool's objects instead of drawing and
    boxing each one.
    """

    def __init__(self, seed: int, *, token_lists: bool = False, extra_attrs: int = 0,
                 open_spans: int = 0) -> None:
        self.rng = random.Random(f"payload-{seed}")
        self.token_lists = token_lists
        self.open_spans = open_spans
        named = len(EXTRA_ATTR_KEYS)
        self.attr_keys: list[tuple[str, str]] = []
        for k in range(extra_attrs):  # past the named keys, numbered copies
            key, kind = EXTRA_ATTR_KEYS[k % named]
            self.attr_keys.append((key if k < named else f"{key}_{k}", kind))
        if token_lists:
            rng = self.rng
            self.token_pool = [rng.randrange(VOCAB_SIZE) for _ in range(POOL_SIZE)]
            self.logprob_pool = [-rng.expovariate(3.0) for _ in range(POOL_SIZE)]
            self.word_pool = [rng.choice(WORDS) for _ in range(POOL_SIZE)]
        #: Indices of the samples picked for ``open_spans``.
        self.lost: set[int] = set()
        #: Generated tokens so far per sample index (sizes the response text).
        self.generated_tokens: dict[int, int] = {}

    # ------------------------------------------------------------- lost requests

    def choose_lost(self, samples: list[dict[str, Any]]) -> None:
        picks = min(self.open_spans, len(samples))
        self.lost = set(self.rng.sample(range(len(samples)), picks))

    def lost_single_turn(self, sample: dict[str, Any]) -> bool:
        return sample["index"] in self.lost

    def lost_turn(self, sample: dict[str, Any], turns: int) -> int | None:
        return self.rng.randrange(turns) if sample["index"] in self.lost else None

    # ------------------------------------------------------------- attributes

    def start_attrs(self, attrs: dict[str, Any] | None) -> dict[str, Any] | None:
        if not self.attr_keys:
            return attrs
        return {**(attrs or {}), **self.filler()}

    def end_attrs(self, span: TraceSpan) -> None:
        if self.attr_keys:
            span.update(self.filler())

    def filler(self) -> dict[str, Any]:
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

    # ------------------------------------------------------------- token lists

    def new_sample(self, sample: dict[str, Any]) -> None:
        if self.token_lists:  # filled as requests run; a sample never sent keeps them empty
            sample["loss_mask"], sample["rollout_log_probs"] = [], []

    def prompt(self, sample: dict[str, Any], tokens: int) -> None:
        if self.token_lists and not sample["tokens"]:  # the first request's prompt
            sample["tokens"] = self.take(self.token_pool, tokens)

    def generated(self, sample: dict[str, Any], tokens: int) -> None:
        if self.token_lists:
            self._add_tokens(sample, tokens, mask=1)
        else:
            super().generated(sample, tokens)

    def observed(self, sample: dict[str, Any], tokens: int) -> None:
        if self.token_lists:
            self._add_tokens(sample, tokens, mask=0)

    def take(self, pool: list, n: int) -> list:
        """``n`` items of ``pool`` from a random offset, wrapping around."""
        start = self.rng.randrange(len(pool))
        items = pool[start:start + n]
        while len(items) < n:
            items += pool[:n - len(items)]
        return items

    def _add_tokens(self, sample: dict[str, Any], n: int, mask: int) -> None:
        """Append ``n`` response tokens (generated: mask 1, tool observation: mask 0).

        ``response`` follows the generated tokens at about three words per four
        tokens, capped.
        """
        sample["tokens"] += self.take(self.token_pool, n)
        sample["loss_mask"] += [mask] * n
        sample["rollout_log_probs"] += (self.take(self.logprob_pool, n) if mask
                                        else [0.0] * n)
        sample["response_length"] = len(sample["loss_mask"])
        if mask:
            generated = self.generated_tokens.get(sample["index"], 0) + n
            self.generated_tokens[sample["index"]] = generated
            words = min(MAX_RESPONSE_WORDS, generated * 3 // 4)
            sample["response"] = " ".join(self.take(self.word_pool, words))


def shaped(seed: int, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` for ``make_demo_samples``/``write_demo_dump`` with the knobs among them
    turned into a :class:`SizedContent` of ``seed``."""
    knobs = {key: options[key] for key in KNOBS if key in options}
    rest = {key: value for key, value in options.items() if key not in KNOBS}
    return {**rest, "content": SizedContent(seed, **knobs)} if knobs else rest


def sized_demo_samples(n_samples: int, seed: int = 0, **options: Any) -> list[dict]:
    """``make_demo_samples`` taking the knobs beside the demo's own options."""
    return make_demo_samples(n_samples, seed, **shaped(seed, options))


def write_sized_demo_dump(path: str | Path, *, n_samples: int, seed: int = 0,
                          rollout_id: int = 0, **options: Any) -> Path:
    """``write_demo_dump`` taking the knobs beside the demo's own options."""
    return write_demo_dump(path, n_samples=n_samples, seed=seed, rollout_id=rollout_id,
                           **shaped(seed, options))


def count_records(samples: list[dict]) -> int:
    """Number of raw trace records across ``samples`` (the size unit of the benchmarks)."""
    return sum(len((s.get(SAMPLE_TRACE_KEY) or {}).get(CARRIER_EVENTS) or ()) for s in samples)
