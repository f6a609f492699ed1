"""Digests of the frames users read (``samples``, ``spans``, ``events``, ...): per column its
name, dtype and a hash of its values, so a golden of them pins every column exactly.

The inputs are the test fixtures, small dumps of the benchmark shapes
(``tests/fixtures/shapes``, written once by ``benchmarks/demo_dumps.SHAPES`` with fewer
samples) loaded through the workers and in this process, two dumps combined, a run
dataset read back, and a shape joined with stored engine spans
(``shapes/engine_spans.arrow``, replayed once through the OpenTelemetry SDK).

    PYTHONPATH=$PWD python -m tests.support.frame_digest --write   # rewrite the golden

Rewrite the golden only when a change of the frames is meant, and say so in the commit.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.feather as feather

from slime_trace_widget import load_frames
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.dataset import convert, open_dataset
from slime_trace_widget.sources.dumps import DumpError
from slime_trace_widget.sources.engine.join import join_engine

FIXTURES = Path(__file__).parent.parent / "fixtures"
SHAPES = FIXTURES / "shapes"
GOLDEN = FIXTURES / "golden_frames.json"
#: The frames a user reads, and the per-dump reports beside them.
#: Dumps never unpickled in this process (``trusted=True``).
UNTRUSTED = {"hostile_pickle.pt"}
VIEWS = ("samples", "spans", "events", "segments", "engine_skew", "engine_unmatched")


def digest_frame(frame: pd.DataFrame) -> dict[str, Any]:
    """Column order, the index, and each column's dtype and value hash."""
    return {"columns": [str(name) for name in frame.columns],
            "index": _column_digest(frame.index.to_series().reset_index(drop=True))
            | {"name": frame.index.name, "kind": type(frame.index).__name__},
            "by_column": {str(name): _column_digest(frame[name]) for name in frame.columns}}


def _column_digest(series: pd.Series) -> dict[str, Any]:
    dtype = series.dtype
    hasher = hashlib.sha256()
    if isinstance(dtype, pd.CategoricalDtype):
        hasher.update(_values_text(pd.Series(dtype.categories)).encode())
        hasher.update(b"|categories dtype " + str(dtype.categories.dtype).encode())
        hasher.update(np.asarray(series.cat.codes, dtype=np.int64).tobytes())
    elif isinstance(dtype, np.dtype) and dtype.kind in "biuf":
        hasher.update(np.ascontiguousarray(series.to_numpy()).tobytes())
    else:
        hasher.update(_values_text(series).encode())
    return {"dtype": str(dtype), "rows": len(series), "hash": hasher.hexdigest()[:20]}


def _values_text(series: pd.Series) -> str:
    """Each value with its type: ``1``, ``1.0`` and ``True`` differ, so do dicts whose
    keys come in another order."""
    return "\x1e".join(f"{type(value).__name__}:{value!r}" for value in series.tolist())


def digest_frames(frames: TraceFrames) -> dict[str, Any]:
    return {view: digest_frame(getattr(frames, view)) for view in VIEWS}


def _fixture_inputs() -> dict[str, Callable[[], TraceFrames]]:
    inputs: dict[str, Callable[[], TraceFrames]] = {}
    for path in sorted([*FIXTURES.glob("*.pt"), *SHAPES.glob("*.pt")]):
        name = str(path.relative_to(FIXTURES))
        inputs[name] = lambda path=path: load_frames(path, progress=False)
        if path.name not in UNTRUSTED:
            inputs[f"{name} (in process)"] = lambda path=path: load_frames(
                path, trusted=True, progress=False)
    return inputs


def _combined() -> TraceFrames:
    return load_frames([FIXTURES / "small.pt", SHAPES / "146mb_1m.pt",
                        FIXTURES / "legacy_v1_pd.pt"], progress=False)


def _dataset() -> TraceFrames:
    with tempfile.TemporaryDirectory() as folder:
        convert([FIXTURES / "small.pt", SHAPES / "62mb_agentic.pt"], folder, progress=False)
        return open_dataset(folder)


def _engine_joined() -> TraceFrames:
    frames = load_frames(SHAPES / "146mb_1m.pt", progress=False)
    return join_engine(frames, feather.read_table(SHAPES / "engine_spans.arrow"))


def inputs() -> dict[str, Callable[[], TraceFrames]]:
    """Every input by name; a dump that cannot be read is left out when the golden is
    written (the parity test then finds it absent from both)."""
    return {**_fixture_inputs(), "combined": _combined, "dataset": _dataset,
            "engine joined": _engine_joined}


def write_golden() -> None:
    golden = {}
    for name, make in inputs().items():
        try:
            frames = make()
        except DumpError:
            continue
        golden[name] = digest_frames(frames)
    GOLDEN.write_text(json.dumps(golden, indent=0, sort_keys=True) + "\n")
    print(f"wrote {len(golden)} inputs to {GOLDEN}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="rewrite the golden")
    if parser.parse_args().write:
        write_golden()
