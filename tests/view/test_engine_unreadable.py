"""TraceTimeline.from_dump(engine_traces=DIR) with damaged store files: counted in the
load warnings the widget shows and named on the frames, with no RuntimeWarning printed."""

from __future__ import annotations

import warnings

import pytest

from slime_trace_widget import TraceTimeline
from tests.cli.test_view_engine_unreadable import Damaged, damaged_collector


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> Damaged:
    return damaged_collector(tmp_path_factory)


def test_damaged_engine_files_are_counted_and_named_not_warned(damaged: Damaged) -> None:
    """Before: a RuntimeWarning per damaged file (the library's source line printed
    under it) and no count in the warnings the widget shows."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        timeline = TraceTimeline.from_dump(damaged.dump, engine_traces=damaged.collected)
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)]
    frames = timeline.frames
    assert frames.warnings["engine_file_unreadable"] == 2
    assert set(frames.engine_unreadable) == {str(path) for path in damaged.damaged}
    assert "engine_request_missing" not in frames.warnings  # the whole files joined
    assert timeline.payload["meta"]["warnings"]["engine_file_unreadable"] == 2
