"""The span ends' attribute table built in a forked process (sources/dumps/forked_attrs.py):
the frames equal those built in one process, whether the fork succeeds or fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from slime_trace_widget.demo import make_demo_samples
from slime_trace_widget.frames import build_frames
from slime_trace_widget.frames.attr_columns import MAX_ATTR_COLUMNS
from slime_trace_widget.sources.dumps import forked_attrs
from slime_trace_widget.sources.dumps.forked_attrs import attr_tables_forked
from tests.sources.test_wire import assert_same_frames


def _assert_same_attrs(one, other) -> None:
    for name in ("span_start_attrs", "span_end_attrs", "event_attrs"):
        assert getattr(one, name).table.equals(getattr(other, name).table), name


def _samples() -> list[dict]:
    samples = make_demo_samples(40, seed=9, pd_share=1.0, extra_attrs=6)
    end = next(event for event in samples[3]["trace"]["events"] if event["type"] == "span_end")
    end["attrs"] = {f"key_{k}": k for k in range(MAX_ATTR_COLUMNS + 7)}  # past the cap
    return samples


def test_the_forked_table_equals_the_one_built_here(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forked_attrs, "MIN_FORKED_ROWS", 0)
    samples = _samples()
    here = build_frames(samples)
    forked = build_frames(samples, attr_tables_forked(str(tmp_path)))
    assert_same_frames(forked, here)
    _assert_same_attrs(forked, here)
    assert forked.warnings["attr_columns_capped"] == here.warnings["attr_columns_capped"] > 0
    assert list(tmp_path.iterdir()) == []  # the fork's files are gone


def test_the_forked_table_is_mapped_not_copied_and_outlives_its_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading the fork's 198 MB table (146 MB dump) back as a copy took 0.10 s on the
    critical path, mapped 0.03 s; its file is deleted at once, the columns stay valid."""
    monkeypatch.setattr(forked_attrs, "MIN_FORKED_ROWS", 0)
    reads: list[bool] = []
    real = forked_attrs.read_table

    def watched(path: str, mapped: bool = False) -> object:
        reads.append(mapped)
        return real(path, mapped=mapped)

    monkeypatch.setattr(forked_attrs, "read_table", watched)
    samples = _samples()
    forked = build_frames(samples, attr_tables_forked(str(tmp_path)))
    assert reads == [True]
    assert list(tmp_path.iterdir()) == []
    _assert_same_attrs(forked, build_frames(samples))


def test_a_fork_that_fails_leaves_the_table_to_the_job(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forked_attrs, "MIN_FORKED_ROWS", 0)
    samples = _samples()
    missing = tmp_path / "gone"  # the fork cannot write there and exits 1
    forked = build_frames(samples, attr_tables_forked(str(missing)))
    here = build_frames(samples)
    assert_same_frames(forked, here)
    _assert_same_attrs(forked, here)


def test_small_and_huge_lists_are_not_forked(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    forks = []
    monkeypatch.setattr(forked_attrs, "_fork", lambda *args: forks.append(args))
    build_frames(make_demo_samples(4), attr_tables_forked(str(tmp_path)))
    monkeypatch.setattr(forked_attrs, "MIN_FORKED_ROWS", 0)
    monkeypatch.setattr(forked_attrs, "MAX_FORKED_ROWS", 10)
    build_frames(make_demo_samples(4), attr_tables_forked(str(tmp_path)))
    assert forks == []
