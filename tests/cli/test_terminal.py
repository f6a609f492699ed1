"""The command's lines reach the terminal as plain text: a control character in a file's
name or a quoted reason is written as ``\\xNN``, never sent to the terminal, and a
newline in one cannot start a line that reads as the command's own."""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest

from slime_trace_widget import cli
from slime_trace_widget.cli import main
from slime_trace_widget.frames import build_frames
from slime_trace_widget.values import plain_line
from tests.cli.test_view_inputs import truncated

FIXTURES = Path(__file__).parents[1] / "fixtures"
#: An escape that would retitle the terminal, one that would turn its text red, and
#: a carriage return that would write over the line.
HOSTILE = "\x1b]0;owned\x07\x1b[31m\r"
#: Any control character but newline (which ends each line) and tab.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: A name that, printed as it is, would add a line that reads as the command's own.
FORGING = "rollout_0.pt\nwrote everything.html"


def test_plain_line_escapes_each_control_character_but_tab() -> None:
    assert plain_line(f"a{HOSTILE}b") == "a\\x1b]0;owned\\x07\\x1b[31m\\x0db"
    assert plain_line("\x00\x7f\x9b\x85") == "\\x00\\x7f\\x9b\\x85"
    assert plain_line("one\ttwo\nthree é 中 \\x1b") == "one\ttwo\\x0athree é 中 \\x1b"


def test_a_newline_in_a_name_cannot_forge_a_line(tmp_path: Path, capsys,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(FIXTURES / "small.pt", tmp_path / FORGING)
    truncated(tmp_path / "rollout_1.pt\nbuilt the page from 2 of 2 dump(s)")
    monkeypatch.chdir(tmp_path)
    assert main([*sorted(path.name for path in tmp_path.iterdir()), "--no-serve"]) == 0
    captured = capsys.readouterr()
    assert [line.split()[0] for line in captured.out.splitlines()] == ["built", "wrote"]
    assert captured.out.splitlines()[0].startswith("built the page from 1 of 2 dump(s)")
    assert f"wrote {plain_line(Path(FORGING).stem)}+1-" in captured.out
    assert captured.err.splitlines() == [
        "slime-trace-viewer: skipped rollout_1.pt\\x0abuilt the page from 2 of 2 dump(s): "
        "corrupt or truncated torch zip archive (File is not a zip file)"]


def test_a_newline_in_a_span_name_cannot_forge_a_summary_line() -> None:
    frames = build_frames([{"index": 0, "trace": {
        "version": 1, "trace_id": "t", "sample_id": 0, "group_id": 0, "attempt": 0,
        "events": [{"type": "span_start", "name": "tool\nwarnings: none", "span_id": "a",
                    "ts": 1.0, "attrs": {}},
                   {"type": "span_end", "name": "tool\nwarnings: none", "span_id": "a",
                    "ts": 2.0, "attrs": {}}]}}])
    lines = frames.summary().splitlines()
    assert [line for line in lines if line.startswith("warnings")] == []
    assert "  tool\\x0awarnings: none" in lines[-1]


def test_the_view_lines_name_hostile_files_as_plain_text(tmp_path: Path, capsys,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / f"run{HOSTILE}"
    folder.mkdir()
    good = folder / f"rollout_0{HOSTILE}.pt"
    shutil.copy(FIXTURES / "small.pt", good)
    bad = truncated(folder / f"rollout_1{HOSTILE}.pt")
    monkeypatch.chdir(folder)
    assert main([good.name, bad.name, "--no-serve"]) == 0
    captured = capsys.readouterr()
    for stream in (captured.out, captured.err):
        assert not CONTROL.search(stream), stream
    assert f"skipped {plain_line(bad.name)}: " in captured.err
    assert "built the page from 1 of 2 dump(s)" in captured.out
    assert f"wrote {plain_line(good.stem)}" in captured.out


def test_a_failure_quoting_a_hostile_name_is_plain_text(tmp_path: Path, capsys) -> None:
    folder = tmp_path / f"folder{HOSTILE}"
    folder.mkdir()
    assert main([str(folder), "--no-serve"]) == 2
    err = capsys.readouterr().err
    assert not CONTROL.search(err), err
    assert err.startswith(f"slime-trace-viewer: {plain_line(str(folder))}: a folder")


def test_a_usage_error_quoting_what_was_typed_is_plain_text(capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["convert", "x.pt", "--out", "ds", f"--no-such{HOSTILE}"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert not CONTROL.search(err), err
    assert f"unrecognized arguments: {plain_line(f'--no-such{HOSTILE}')}" in err


def test_no_module_of_the_command_prints_but_through_the_terminal_module() -> None:
    package = Path(cli.__file__).parent
    printing = []
    for source in sorted(package.glob("*.py")):
        if source.name == "terminal.py":
            continue
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id == "print":
                printing.append(f"{source.name}:{node.lineno}")
            if isinstance(node, ast.Attribute) and node.attr == "write" \
                    and isinstance(node.value, ast.Attribute) \
                    and node.value.attr in ("stdout", "stderr"):
                printing.append(f"{source.name}:{node.lineno}")
    assert printing == []
