"""Frames across a process boundary: written as Arrow files, read back and checked."""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from slime_trace_widget.demo import make_demo_samples
from slime_trace_widget.frames import build_frames
from slime_trace_widget.load import LoadedDump
from slime_trace_widget.load.wire import WireError, read_frames, read_parts, write_frames


def assert_same_frames(one, other) -> None:
    for name in ("samples", "span_core", "event_core", "segments"):
        pd.testing.assert_frame_equal(getattr(one, name), getattr(other, name),
                                      check_categorical=False)
    for frame, column in (("spans", "start_attrs"), ("spans", "end_attrs"), ("events", "attrs")):
        # repr: NaN values compare unequal to themselves
        assert repr(getattr(one, frame)[column].tolist()) == \
            repr(getattr(other, frame)[column].tolist())
    assert (one.paths, one.rollout_ids, one.warnings) == (other.paths, other.rollout_ids,
                                                         other.warnings)


def test_frames_round_trip(tmp_path: Path) -> None:
    frames = build_frames(make_demo_samples(24, seed=3))
    write_frames(frames, str(tmp_path))
    assert_same_frames(read_frames(str(tmp_path)), frames)


def test_slices_flattened_apart_join_into_the_whole(tmp_path: Path) -> None:
    """What a worker's forked processes write as part0, part1... reads as one build."""
    samples = make_demo_samples(40, seed=5)
    loaded = LoadedDump(path="rollout_5.pt", rollout_id=5, samples=samples,
                        warnings=Counter({"unsafe_global_blocked": 1}))
    whole = build_frames(loaded)
    for number, (start, stop) in enumerate(((0, 13), (13, 29), (29, 40))):
        part = dataclasses.replace(loaded, samples=samples[start:stop],
                                   warnings=loaded.warnings if number == 0 else Counter())
        os.mkdir(tmp_path / f"part{number}")
        write_frames(build_frames(part), str(tmp_path / f"part{number}"))
    assert_same_frames(read_parts(str(tmp_path)), whole)


def test_missing_parts_are_refused(tmp_path: Path) -> None:
    os.mkdir(tmp_path / "part1")
    with pytest.raises(WireError, match="part0"):
        read_parts(str(tmp_path))


def test_a_column_of_the_wrong_type_is_refused(tmp_path: Path) -> None:
    frames = build_frames(make_demo_samples(4))
    frames.samples["reward"] = frames.samples["reward"].astype("float32")
    write_frames(frames, str(tmp_path))
    with pytest.raises(WireError, match=r"samples\.reward: expected double, got float"):
        read_frames(str(tmp_path))


def test_meta_that_is_not_meta_is_refused(tmp_path: Path) -> None:
    write_frames(build_frames(make_demo_samples(4)), str(tmp_path))
    (tmp_path / "meta.json").write_text('{"paths": 3}')
    with pytest.raises(WireError, match=r"meta\.json"):
        read_frames(str(tmp_path))


FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize("fixture", sorted(p.name for p in FIXTURES.glob("*.pt")
                                           if "corrupt" not in p.name))
def test_workers_read_every_fixture_as_torch_does(fixture: str) -> None:
    """Workers read zip dumps without torch (tensors as numpy arrays); the frames match
    those built from ``load_dump``, which goes through torch.load."""
    from slime_trace_widget.load import load_dump, load_frames

    path = FIXTURES / fixture
    assert_same_frames(load_frames(path), build_frames(load_dump(path)))
