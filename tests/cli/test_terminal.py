"""The command's lines reach the terminal as plain text: a control character in a file's
name or a quoted reason is written as ``\\xNN``, never sent to the terminal."""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest

from slime_trace_widget import cli
from slime_trace_widget.cli import main
from slime_trace_widget.cli.terminal import terminal_text
from tests.cli.test_view_inputs import truncated

FIXTURES = Path(__file__).parents[1] / "fixtures"
#: An escape that would retitle the terminal, one that would turn its text red, and
#: a carriage return that would write over the line.
HOSTILE = "\x1b]0;owned\x07\x1b[31m\r"
#: Any control character but newline and tab.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def test_terminal_text_escapes_each_control_character_but_newline_and_tab() -> None:
    assert terminal_text(f"a{HOSTILE}b") == "a\\x1b]0;owned\\x07\\x1b[31m\\x0db"
    assert terminal_text("\x00\x7f\x9b\x85") == "\\x00\\x7f\\x9b\\x85"
    assert terminal_text("one\ttwo\nthree é 中 \\x1b") == "one\ttwo\nthree é 中 \\x1b"


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
    assert f"skipped {terminal_text(bad.name)}: " in captured.err
    assert "built the page from 1 of 2 dump(s)" in captured.out
    assert f"wrote {terminal_text(good.stem)}" in captured.out


def test_a_failure_quoting_a_hostile_name_is_plain_text(tmp_path: Path, capsys) -> None:
    folder = tmp_path / f"folder{HOSTILE}"
    folder.mkdir()
    assert main([str(folder), "--no-serve"]) == 2
    err = capsys.readouterr().err
    assert not CONTROL.search(err), err
    assert err.startswith(f"slime-trace-viewer: {terminal_text(str(folder))}: a folder")


def test_a_usage_error_quoting_what_was_typed_is_plain_text(capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["convert", "x.pt", "--out", "ds", f"--no-such{HOSTILE}"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert not CONTROL.search(err), err
    assert f"unrecognized arguments: {terminal_text(f'--no-such{HOSTILE}')}" in err


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
