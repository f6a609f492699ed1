"""slime-trace-viewer DUMP.pt prints what the loader skipped or repaired, in one line,
also while another thread of the process loads."""

from __future__ import annotations

import shutil
import threading
import warnings
from pathlib import Path

import pytest

from slime_trace_widget.cli import main
from slime_trace_widget.sources import loading
from slime_trace_widget.sources.loading import load_frames
from tests.cli.test_view_inputs import truncated
from tests.sources.runs import settle
from tests.view.test_payload_meta import repaired_dump

#: Hang guard of each wait between the two threads: generous for a busy machine.
WAIT_SECONDS = 300

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


def test_two_threads_loading_at_once_each_report_their_failure_once(
        tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """Thread A's command begins loading first and ends while thread B's still loads,
    the order in which per-load warning filters (swapped in and out of the process)
    lose B's: then B's failure showed twice, as a line and as a warning, and a filter
    was left behind that hid everyone's "skipped" warnings."""
    runs = {}
    for name in ("a", "b"):
        folder = tmp_path / name
        folder.mkdir()
        shutil.copy(FIXTURES / "small.pt", folder / "rollout_0.pt")
        runs[name] = (folder, truncated(folder / "rollout_1.pt"))
    a_loading, b_loading, a_done = threading.Event(), threading.Event(), threading.Event()
    real_read_header = loading.read_header

    def ordered_read_header(path):  # what the loader reads of each dump first
        if threading.current_thread().name == "a":
            a_loading.set()
            assert b_loading.wait(WAIT_SECONDS)
        else:
            b_loading.set()
            assert a_done.wait(WAIT_SECONDS)
        return real_read_header(path)

    monkeypatch.setattr(loading, "read_header", ordered_read_header)
    codes = {}

    def command(name: str) -> None:
        folder, bad = runs[name]
        codes[name] = main([str(folder / "rollout_0.pt"), str(bad), "--no-serve"])
        if name == "a":
            a_done.set()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        a = threading.Thread(target=command, args=("a",), name="a")
        a.start()
        assert a_loading.wait(WAIT_SECONDS)
        b = threading.Thread(target=command, args=("b",), name="b")
        b.start()
        for thread in (a, b):
            thread.join(WAIT_SECONDS)
        warnings.warn("skipped x.pt: another caller's failure", RuntimeWarning, stacklevel=1)
    assert codes == {"a": 0, "b": 0}
    shown = [str(w.message) for w in caught]
    err = capsys.readouterr().err
    for _, bad in runs.values():
        reported = [line for line in err.splitlines() + shown if str(bad) in line]
        assert len(reported) == 1, reported
        assert reported[0].startswith(f"slime-trace-viewer: skipped {bad}: ")
    assert "skipped x.pt: another caller's failure" in shown  # no filter left behind


def test_convert_names_a_dump_it_could_not_convert_in_one_line(tmp_path: Path, capsys) -> None:
    run = tmp_path / "debug"
    run.mkdir()
    shutil.copy(FIXTURES / "small.pt", run / "rollout_0.pt")
    bad = truncated(run / "rollout_1.pt")
    settle(*run.iterdir())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(["convert", str(run / "*.pt"), "--out", str(tmp_path / "ds"),
                     "--workers", "1"])
    assert code == 1
    assert not [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"slime-trace-viewer: failed {bad}: ") and line.count(str(bad)) == 1
