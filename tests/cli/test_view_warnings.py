"""slime-trace-viewer DUMP.pt prints what the loader skipped or repaired, in one line."""

from __future__ import annotations

import shutil
from pathlib import Path

from slime_trace_widget.cli import main
from slime_trace_widget.sources.loading import load_frames
from tests.view.test_payload_meta import repaired_dump

FIXTURES = Path(__file__).parents[1] / "fixtures"


def _warning_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("load warnings")]


def test_the_load_warnings_are_printed_in_one_line(tmp_path: Path, capsys) -> None:
    dump = repaired_dump(tmp_path / "rollout_3.pt")
    counts = load_frames(dump).warnings
    assert main([str(dump), "--no-serve"]) == 0
    out = capsys.readouterr().out
    assert "built" in out
    (line,) = _warning_lines(out)
    assert line.startswith(f"load warnings ({sum(counts.values())}): ")
    for kind, count in counts.items():
        assert f"{kind}={count}" in line
    # a page made from the cache says the same
    assert main([str(dump), "--no-serve"]) == 0
    again = capsys.readouterr().out
    assert "reusing" in again and _warning_lines(again) == [line]


def test_a_clean_dump_prints_no_warnings(tmp_path: Path, capsys) -> None:
    dump = tmp_path / "rollout_0.pt"
    shutil.copy(FIXTURES / "small.pt", dump)
    assert main([str(dump), "--no-serve"]) == 0
    assert not _warning_lines(capsys.readouterr().out)
