"""Demo dumps of benchmark sizes, generated once and kept in benchmarks/out/."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the shapes' knobs live with the tests' support
    sys.path.insert(0, str(ROOT))

from tests.support.demo_shapes import write_sized_demo_dump  # noqa: E402

OUT = Path(__file__).parent / "out"

#: name -> number of demo samples; ~190 trace records and ~87 spans per demo sample.
SIZES = {
    "250k_spans": 2_900,   # about 250,000 spans
    "1m_events": 5_400,    # about 1,000,000 trace records
}

#: name -> (samples, DemoConfig options and size knobs): the dumps users brought, by
#: file size, spans (span_start records) and trace records.
SHAPES: dict[str, tuple[int, dict[str, Any]]] = {
    # 256 agentic samples, ~50k spans, ~111k records, ~62 MB: ~560 bytes a record.
    "62mb_agentic": (256, {"agentic_share": 1.0, "min_turns": 15, "max_turns": 55,
                           "extra_attrs": 50}),
    # 2,048 samples with token lists, ~338k spans, ~768k records, ~612 MB; every
    # generation through a PD cluster.
    "612mb_tokens": (2_048, {"token_lists": True, "pd_share": 1.0, "extra_attrs": 8}),
    # 3,264 samples, ~440k spans, ~992k records, ~146 MB, ~180 open spans, PD on a
    # third of generations, 20-60 turns for agentic samples.
    "146mb_1m": (3_264, {"agentic_share": 0.7, "min_turns": 20, "max_turns": 60,
                         "pd_share": 1 / 3, "extra_attrs": 9, "open_spans": 70}),
    # 20,000 default demo samples: ~1.9M spans, the "big rows, big dumps" case.
    "20k_samples": (20_000, {}),
}


def demo_dump(size: str, seed: int = 7, rollout_id: int = 0) -> Path:
    """Path of the demo dump ``size`` (a key of SIZES or SHAPES), written on first use."""
    suffix = f"_rollout{rollout_id}" if rollout_id else ""
    path = OUT / f"demo_{size}_seed{seed}{suffix}.pt"
    if not path.exists():
        samples, options = (SIZES[size], {}) if size in SIZES else SHAPES[size]
        OUT.mkdir(parents=True, exist_ok=True)
        write_sized_demo_dump(path, n_samples=samples, seed=seed, rollout_id=rollout_id,
                              **options)
    return path
