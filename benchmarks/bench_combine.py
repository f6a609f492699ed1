"""Benchmark: combining the attribute tables of many dumps (``AttrTable.concat``).

Prints, for dumps whose keys are the same (the common case) and for dumps whose
keys are all their own (keys carrying an id, say), the time to combine them, the
columns the result keeps and the Arrow memory it holds.

    python benchmarks/bench_combine.py
"""

from __future__ import annotations

import json
import time

import pyarrow as pa

from slime_trace_widget.tables.attr_columns import AttrTable

ROWS = 200
KEYS = 500


def part(prefix: str) -> AttrTable:
    return AttrTable(pa.table({f"{prefix}k{key}": pa.array([float(key)] * ROWS)
                               for key in range(KEYS)}))


def bench(parts: int, shared: bool) -> dict:
    tables = [part("" if shared else f"d{index}_") for index in range(parts)]
    held = pa.total_allocated_bytes()
    start = time.perf_counter()
    combined = AttrTable.concat(tables)
    seconds = time.perf_counter() - start
    return {"parts": parts, "keys": "shared" if shared else "own", "seconds": round(seconds, 2),
            "columns": combined.table.num_columns,
            "arrow_mb": round((pa.total_allocated_bytes() - held) / 2**20, 1)}


def main() -> None:
    for parts in (40, 200):
        for shared in (True, False):
            print(json.dumps(bench(parts, shared)))


if __name__ == "__main__":
    main()
