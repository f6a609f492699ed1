"""``slime-trace-viewer convert DUMPS --out DIR --otlp URL``: what it says when it sends
nothing is true of the dataset (the sending itself: tests/export/test_trend_log.py)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from slime_trace_widget.cli import main
from tests.support.browser import free_port

FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.mark.parametrize(("fixture", "age", "code", "said"), [
    # dated ahead: "still being written" however slowly the command starts
    ("small.pt", -3600, 0, "still being written"),
    ("edge_corrupt_garbage.pt", 3600, 1, "not a torch dump"),
])
def test_nothing_converted_is_not_said_to_be_sent_before(
        tmp_path: Path, fixture: str, age: int, code: int, said: str, capsys) -> None:
    """A dump still settling, or one that failed, is neither converted nor sent: no
    receiver is asked (none listens at the address), and none is said to have been."""
    dump = tmp_path / "rollout_0.pt"
    shutil.copy(FIXTURES / fixture, dump)
    dated = time.time() - age
    os.utime(dump, (dated, dated))
    url = f"http://127.0.0.1:{free_port()}/v1/traces"
    assert main(["convert", str(dump), "--out", str(tmp_path / "ds"), "--workers", "1",
                 "--otlp", url]) == code
    captured = capsys.readouterr()
    assert said in captured.out + captured.err
    assert f"sent 0 dump(s), 0 spans, to {url} (no converted dump to send)" in captured.out
    assert "sent before" not in captured.out
