"""slime-trace-viewer [view]: what a cached page is built from, and which files it names.

A dump that fails to load is named in one line and never hidden behind a cache; a
cache is reused only for the same options that change what is loaded; a file name with
glob characters opens as the file it is; ``--demo`` writes the sample count asked for.
"""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

import pytest

from slime_trace_widget.cli import main

FIXTURES = Path(__file__).parents[1] / "fixtures"


def truncated(target: Path) -> Path:
    """A copy of a dump cut in half, as a save interrupted midway leaves it."""
    data = (FIXTURES / "small.pt").read_bytes()
    target.write_bytes(data[: len(data) // 2])
    return target


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``main(argv)``'s code, stdout and stderr; no Python warning may escape it."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(argv)
    out, err = capsys.readouterr()
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], \
        [str(w.message) for w in caught]
    return code, out, err


def test_a_dump_that_fails_is_named_and_its_set_is_not_cached(tmp_path: Path, capsys) -> None:
    good = tmp_path / "rollout_0.pt"
    shutil.copy(FIXTURES / "small.pt", good)
    bad = truncated(tmp_path / "rollout_1.pt")
    for _ in range(2):  # the second run rebuilds, and names the failure again
        code, out, err = run_cli([str(good), str(bad), "--no-serve"], capsys)
        assert code == 0, err
        assert "reusing" not in out
        assert "from 1 of 2 dump(s)" in out
        (line,) = err.strip().splitlines()
        assert line.startswith(f"slime-trace-viewer: skipped {bad}: ")
        assert "Warning" not in line and line.count(str(bad)) == 1
        assert len(list(tmp_path.glob("rollout_0+1-*.trace_timeline_viewer.html"))) == 1


@pytest.mark.parametrize("trusted", [[], ["--trusted"]], ids=["safe", "trusted"])
@pytest.mark.parametrize("bad", ["edge_corrupt_garbage.pt", "edge_corrupt_empty_file.pt"])
def test_a_bad_dump_among_others_fails_alone_trusted_or_not(tmp_path: Path, capsys, bad: str,
                                                            trusted: list[str]) -> None:
    """The one-line error of the bad dump (its header, or its load, refused), and a page
    of the others: ``--trusted`` changes how a dump is read, not what a failure ends."""
    code, out, err = run_cli([str(FIXTURES / bad), str(FIXTURES / "small.pt"), "--no-serve",
                              "--out-dir", str(tmp_path), *trusted], capsys)
    assert code == 0, err
    assert "built the page from 1 of 2 dump(s): 8 samples" in out
    (line,) = err.strip().splitlines()
    assert line.startswith(f"slime-trace-viewer: skipped {FIXTURES / bad}: ")
    assert len(list(tmp_path.glob("*.trace_timeline_viewer.html"))) == 1


def test_a_file_name_with_glob_characters_opens_as_that_file(tmp_path: Path, capsys) -> None:
    dump = tmp_path / "rollout[1].pt"
    shutil.copy(FIXTURES / "small.pt", dump)
    code, out, err = run_cli([str(dump), "--no-serve"], capsys)
    assert code == 0, err
    assert "from 1 dump(s)" in out


def test_the_cache_of_an_untrusted_load_is_not_reused_trusted(tmp_path: Path, capsys) -> None:
    dump = tmp_path / "rollout_0.pt"
    shutil.copy(FIXTURES / "small.pt", dump)
    assert run_cli([str(dump), "--no-serve"], capsys)[1].startswith("built")
    assert run_cli([str(dump), "--no-serve", "--trusted"], capsys)[1].startswith("built")
    assert run_cli([str(dump), "--no-serve", "--trusted"], capsys)[1].startswith("reusing")
    assert run_cli([str(dump), "--no-serve"], capsys)[1].startswith("built")


def test_demo_writes_the_sample_count_asked_for(tmp_path: Path, capsys) -> None:
    folder = str(tmp_path / "demo")
    code, out, err = run_cli(["--demo", "--demo-samples", "3", "--out-dir", folder,
                              "--no-serve"], capsys)
    assert code == 0, err
    assert "(3 samples)" in out and ": 3 samples" in out
    code, out, err = run_cli(["--demo", "--demo-samples", "5", "--out-dir", folder,
                              "--no-serve"], capsys)
    assert code == 0, err
    assert "(5 samples)" in out and ": 5 samples" in out
    code, out, err = run_cli(["--demo", "--demo-samples", "5", "--out-dir", folder,
                              "--no-serve"], capsys)
    assert code == 0, err
    assert "wrote demo dump" not in out and out.startswith("reusing")


def test_the_cache_of_a_dump_named_in_no_encoding_is_reused(tmp_path: Path, capsys) -> None:
    odd = tmp_path / os.fsdecode(b"rollout_\xff.pt")
    shutil.copy(FIXTURES / "small.pt", odd)
    first = run_cli([str(odd), "--no-serve"], capsys)
    assert first[0] == 0 and "built" in first[1]
    second = run_cli([str(odd), "--no-serve"], capsys)
    assert second[0] == 0 and "reusing" in second[1], second


def test_a_link_to_nothing_among_the_dumps_is_skipped_not_fatal(tmp_path: Path, capsys) -> None:
    """A glob over a run folder with one link whose dump is gone refused the whole view
    ("no such file"); it is skipped and named, as a dump that fails to load."""
    shutil.copy(FIXTURES / "small.pt", tmp_path / "rollout_0.pt")
    link = tmp_path / "rollout_1.pt"
    link.symlink_to(tmp_path / "gone" / "rollout_1.pt")
    code, out, err = run_cli([str(tmp_path / "rollout_*.pt"), "--no-serve"], capsys)
    assert code == 0
    assert "built the page from 1 of 2 dump(s)" in out
    (line,) = err.splitlines()
    assert line.startswith(f"slime-trace-viewer: skipped {link}: ")
