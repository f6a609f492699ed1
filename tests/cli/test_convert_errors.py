"""``convert``'s failures after the conversion are one line naming what failed and why,
with the exit code of the CLI's other errors (2), never a traceback: a trends target
that cannot be written, a manifest one of whose entries is not an object, or holds a
field of another kind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slime_trace_widget.cli import main
from tests.sources.runs import settle


def failure(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one stderr line of ``main(argv)``, which must exit 2 without a traceback."""
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith("slime-trace-viewer: ")
    return line


@pytest.mark.parametrize("target", ["tensorboard:{taken}/tb",
                                    "mlflow:sqlite:///{taken}/sub/mlflow.db"],
                         ids=["tensorboard", "mlflow-sqlite"])
def test_a_trends_target_in_a_folder_that_cannot_be_made_is_one_line(
        dump: Path, tmp_path: Path, target: str, capsys) -> None:
    settle(dump)  # older than the settle window: converted at once
    taken = tmp_path / "taken"  # a file where the target's folder would go
    taken.write_text("")
    target = target.format(taken=taken)
    line = failure(["convert", str(dump), "--out", str(tmp_path / "ds"), "--workers", "1",
                    "--log-trends", target], capsys)
    assert f"--log-trends {target}: Not a directory" in line
    assert str(taken) in line


def test_a_manifest_entry_that_is_not_an_object_is_an_unreadable_manifest(
        dump: Path, tmp_path: Path, capsys) -> None:
    settle(dump)
    out = tmp_path / "ds"
    assert main(["convert", str(dump), "--out", str(out), "--workers", "1"]) == 0
    capsys.readouterr()
    (out / "manifest.json").write_text(json.dumps({"version": 1, "dumps": {"x": 5}}))
    line = failure(["convert", str(dump), "--out", str(out), "--workers", "1"], capsys)
    assert line == (f"slime-trace-viewer: {out / 'manifest.json'}: unreadable manifest "
                    "(the entry of 'x' is not an object)")


def test_a_manifest_field_of_another_kind_is_one_line(dump: Path, tmp_path: Path,
                                                      capsys) -> None:
    """``"files": 5`` in an entry: the rerun ended in ``TypeError: 'int' object is not
    iterable``, a traceback with exit code 1."""
    settle(dump)
    out = tmp_path / "ds"
    assert main(["convert", str(dump), "--out", str(out), "--workers", "1"]) == 0
    capsys.readouterr()
    data = json.loads((out / "manifest.json").read_text())
    data["dumps"][str(dump)]["files"] = 5
    (out / "manifest.json").write_text(json.dumps(data))
    line = failure(["convert", str(dump), "--out", str(out), "--workers", "1"], capsys)
    assert line == (f"slime-trace-viewer: {out / 'manifest.json'}: unreadable manifest "
                    f"(the entry of {str(dump)!r}: 'files' is 5, not a list of strings)")
