"""Benchmark: what the skim leaves a frames job to unpickle, per demo shape.

The skim (``sources/dumps/skim.py``) walks a dump's pickle and cuts the bodies of the
number lists under ``tokens``, ``rollout_log_probs`` and the like before the rest is
unpickled. For each shape this prints the pickle's size, whether the skim takes the
dump on (``worth_skimming``), the bytes it keeps, the lists it cut and the walk's time
(best of ``--runs``, in this process). The README's "a 612 MB dump with token lists
unpickles 125 MB" is the 612 MB shape's ``kept_mb``.

    python benchmarks/bench_skim.py [--shapes 612mb_tokens 62mb_agentic] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from demo_dumps import demo_dump  # noqa: E402

from slime_trace_widget.sources.dumps.skim import (  # noqa: E402
    skim_stored_file,
    worth_skimming,
)


def skim_figures(path: Path, runs: int) -> dict[str, object]:
    """The skim of the dump at ``path``: sizes in MB, the lists cut, the walk's seconds."""
    with zipfile.ZipFile(path) as archive:
        info = next(item for item in archive.infolist() if item.filename.endswith("/data.pkl"))
    figures: dict[str, object] = {"dump": path.name, "pickle_mb": round(info.file_size / 1e6, 1),
                                  "worth_skimming": worth_skimming(str(path), info)}
    best = float("inf")
    for _ in range(runs):
        kept = 0

        def count(piece: object) -> None:
            nonlocal kept
            kept += len(piece)  # type: ignore[arg-type]

        started = time.perf_counter()
        checked = skim_stored_file(str(path), info, emit=count)
        best = min(best, time.perf_counter() - started)
        if checked is None:
            figures.update(kept_mb=figures["pickle_mb"], cuts=0, note="the walk gave up")
            break
        skimmed, crc_ok = checked
        figures.update(kept_mb=round(kept / 1e6, 1), cuts=skimmed.cuts, crc_ok=crc_ok)
    figures["walk_s"] = round(best, 3)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="+", default=["612mb_tokens", "62mb_agentic"])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for shape in args.shapes:
        print(json.dumps(skim_figures(demo_dump(shape), args.runs)), flush=True)


if __name__ == "__main__":
    main()
