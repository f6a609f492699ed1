"""Benchmark: the compiled passes of flattening against their Python passes.

For each demo shape (default: the 146 MB dump of about 1M trace records and the
62 MB agentic one), the dump is read as a frames worker reads it, then each pass
runs both ways, alternating, best of ``--runs``, with the cyclic collector paused
as flattening pauses it:

* the carrier pass (``carrier.read_carrier``: ``_native_records.c`` or Python)
  over every sample's records;
* the attribute tables (``AttrTable.from_dicts``: ``_native_columns.lay_columns``
  or Python) of the span starts', span ends' and events' dicts;
* the attribute dicts again (``AttrTable.dicts``: ``_native_dicts.row_dicts`` or
  Python), what ``frames.spans`` and ``frames.events`` make.

Figures only; the README quotes them. A pass the install did not compile prints as
missing.

    python benchmarks/bench_native.py [--shapes 146mb_1m 62mb_agentic] [--runs 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from demo_dumps import demo_dump

from slime_trace_widget.sources.dumps.worker import read_for_frames
from slime_trace_widget.tables import attr_grouping, attr_python, build, carrier
from slime_trace_widget.tables.attr_columns import AttrTable
from slime_trace_widget.tables.samples import sample_fields

#: Each pass: the module attribute that holds its compiled module, and that module.
PASSES = {
    "carrier": (carrier, "_native_records"),
    "attribute tables": (attr_grouping, "_native_columns"),
    "attribute dicts": (attr_python, "_native_dicts"),
}


class _Lists(build.AttrTablesHere):
    """Keeps the three attribute lists flattening hands over."""

    def tables(self) -> list[AttrTable]:
        self.kept = self._lists
        return super().tables()


def timed(run: Callable[[], object], module: object, holder: object, name: str) -> float:
    """Seconds of one ``run`` with ``holder.name`` set to ``module``."""
    compiled = getattr(holder, name)
    setattr(holder, name, module)
    try:
        with build.cyclic_gc_paused():
            start = time.perf_counter()
            run()
            return time.perf_counter() - start
    finally:
        setattr(holder, name, compiled)


def bench(shape: str, runs: int) -> None:
    path = demo_dump(shape)
    loaded = read_for_frames(str(path))
    carriers = [info.events for info in (sample_fields(sample, None, 0)
                                         for sample in loaded.samples)
                if info.events is not None]
    keeper = _Lists()
    tables = build.build_tables(loaded, keeper)
    lists = keeper.kept
    built = [tables.span_start_attrs, tables.span_end_attrs, tables.event_attrs]
    values = sum(len(table.table.column(key)) - table.table.column(key).null_count
                 for table in built for key in table.keys)

    def read_all() -> None:
        out = carrier.RecordColumns()
        for row, records in enumerate(carriers):
            carrier.read_carrier(row, records, out)

    work = {
        "carrier": (read_all, f"{sum(map(len, carriers)):,} records"),
        "attribute tables": (lambda: [AttrTable.from_dicts(dicts) for dicts in lists],
                             f"{sum(map(len, lists)):,} rows"),
        "attribute dicts": (lambda: [table.dicts() for table in built],
                            f"{values:,} values"),
    }
    print(f"== {path.name}")
    for label, (holder, name) in PASSES.items():
        run, size = work[label]
        compiled = getattr(holder, name)
        native = python = float("inf")
        for _ in range(runs):  # alternating, best of each
            if compiled is not None:
                native = min(native, timed(run, compiled, holder, name))
            python = min(python, timed(run, None, holder, name))
        native = None if compiled is None else native
        native_text = "not compiled" if native is None else f"{native:7.3f} s"
        ratio = "" if native is None else f"   {python / native:4.1f}x"
        print(f"{label:<17} {size:>20}   C {native_text}   Python {python:7.3f} s{ratio}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="+", default=["146mb_1m", "62mb_agentic"])
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    for shape in options.shapes:
        bench(shape, options.runs)


if __name__ == "__main__":
    main()
