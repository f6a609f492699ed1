"""The frames users read keep their columns: names, order, dtypes and values of
``samples``, ``spans`` (with ``attr.*``), ``events``, ``segments`` and the engine
reports, on every fixture, a small dump of each benchmark shape (through the workers
and in this process), combined dumps, a run dataset and an engine join, against the
golden ``tests/fixtures/golden_frames.json`` (``tests/support/frame_digest.py``)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from slime_trace_widget.sources.dumps import DumpError
from tests.support.frame_digest import GOLDEN, digest_frame, digest_frames, inputs

GOLDEN_DIGESTS = json.loads(GOLDEN.read_text())
INPUTS = inputs()


def differences(name: str, view: str, got: dict, want: dict) -> list[str]:
    """What differs between two digests of one frame, one line per column."""
    where = f"{name}: {view}"
    out = []
    if got["columns"] != want["columns"]:
        out.append(f"{where} columns {got['columns']} != {want['columns']}")
    if got["index"] != want["index"]:
        out.append(f"{where} index {got['index']} != {want['index']}")
    for column, expected in want["by_column"].items():
        actual = got["by_column"].get(column)
        if actual != expected:
            out.append(f"{where}.{column}: {actual} != {expected}")
    return out


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_frames_match_the_golden_column_by_column(name: str) -> None:
    if name not in GOLDEN_DIGESTS:  # a dump the loader refuses, as it did
        with pytest.raises(DumpError):
            INPUTS[name]()
        return
    got = digest_frames(INPUTS[name]())
    want = GOLDEN_DIGESTS[name]
    problems = [line for view in want for line in differences(name, view, got[view],
                                                              want[view])]
    assert not problems, "\n".join(problems)


def test_every_golden_input_is_still_made() -> None:
    assert set(GOLDEN_DIGESTS) <= set(INPUTS)


@pytest.mark.parametrize("change", ["value", "dtype", "name", "order"])
def test_the_digest_sees_any_change_of_a_column(change: str) -> None:
    frame = pd.DataFrame({"a": [1.0, 2.0], "b": pd.Categorical(["x", "y"]),
                          "c": [{"k": 1}, None]})
    changed = {
        "value": frame.assign(a=[1.0, 2.5]),
        "dtype": frame.assign(a=frame["a"].astype("float32")),
        "name": frame.rename(columns={"c": "d"}),
        "order": frame[["b", "a", "c"]],
    }[change]
    assert differences("t", "v", digest_frame(changed), digest_frame(frame))
    assert not differences("t", "v", digest_frame(frame.copy()), digest_frame(frame))


#: Where the two paths still differ: an empty table's dump names (``parent_name`` of no
#: events) do not survive the worker's Arrow file, which holds no dictionary without rows.
PATHS_DIFFER = {("edge_untraced_mixed.pt", "events", "parent_name")}


def test_the_workers_and_this_process_make_the_same_frames() -> None:
    pairs = [(name, f"{name} (in process)") for name in GOLDEN_DIGESTS
             if f"{name} (in process)" in GOLDEN_DIGESTS]
    assert len(pairs) >= 15
    differing = {(name, view, column) for name, local in pairs
                 for view, digest in GOLDEN_DIGESTS[name].items()
                 for column, value in digest["by_column"].items()
                 if GOLDEN_DIGESTS[local][view]["by_column"].get(column) != value}
    assert differing == PATHS_DIFFER
