"""Sample fields read as slime's training reads them, through a real dump: written with
``torch.save``, loaded by the worker's restricted unpickler."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from slime_trace_widget import load_frames
from slime_trace_widget.answers.ledger import sample_fates


def traced(index: int, group_index: object, reward: float, **fields: object) -> dict:
    span = f"{index:032x}"
    events = [{"type": "span_start", "name": "generate", "ts": 100.0 + index,
               "span_id": span, "attempt": 0},
              {"type": "span_end", "name": "generate", "ts": 101.0 + index,
               "span_id": span, "attempt": 0}]
    return {"index": index, "group_index": group_index, "reward": reward,
            "status": "completed", "rollout_id": 0,
            "trace": {"version": 1, "trace_id": span, "attempt": 0, "events": events},
            **fields}


def frames_of(tmp_path: Path, samples: list[dict]) -> object:
    path = tmp_path / "rollout_0.pt"
    torch.save({"rollout_id": 0, "samples": samples}, path)
    return load_frames(path, workers=1, progress=False)


def test_remove_sample_is_what_slimes_if_finds_true(tmp_path: Path) -> None:
    # slime drops a sample's loss on ``if sample.remove_sample:``, Python's truth.
    flags = [True, np.bool_(True), 1, 2.5, torch.tensor(True), torch.tensor([1]),
             np.array([True]), False, 0, 0.0, torch.tensor(False), None, "yes",
             [True], torch.tensor([True, True])]
    frames = frames_of(tmp_path, [traced(i, i, 1.0, remove_sample=flag)
                                  for i, flag in enumerate(flags)])
    expected = [True] * 7 + [False] * 8
    assert frames.samples["remove_sample"].tolist() == expected
    fates = sample_fates(frames).tolist()
    assert [fate == "filtered" for fate in fates] == expected


def test_a_group_index_that_is_not_whole_names_no_group(tmp_path: Path) -> None:
    # Truncated, 1.5 joined group 1: its reward made group 1 vary, both read "signal".
    # Read as no group, it is a group of one beside two others: nothing trains.
    frames = frames_of(tmp_path, [traced(0, 1, 1.0), traced(1, 1.5, 0.0), traced(2, 2.0, 0.0)])
    groups = frames.samples["group_index"]
    assert groups.iloc[0] == 1 and pd.isna(groups.iloc[1]) and groups.iloc[2] == 2
    assert sample_fates(frames).tolist() == ["no_signal"] * 3
