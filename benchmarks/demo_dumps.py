"""Demo dumps of benchmark sizes, generated once and kept in benchmarks/out/."""

from __future__ import annotations

from pathlib import Path

from slime_trace_widget.demo import write_demo_dump

OUT = Path(__file__).parent / "out"

#: name -> number of demo samples; ~190 trace records and ~87 spans per demo sample.
SIZES = {
    "250k_spans": 2_900,   # about 250,000 spans
    "1m_events": 5_400,    # about 1,000,000 trace records
}


def demo_dump(size: str, seed: int = 7) -> Path:
    """Path of the demo dump ``size`` (a key of SIZES), written on first use."""
    path = OUT / f"demo_{size}_seed{seed}.pt"
    if not path.exists():
        OUT.mkdir(parents=True, exist_ok=True)
        write_demo_dump(path, n_samples=SIZES[size], seed=seed)
    return path
