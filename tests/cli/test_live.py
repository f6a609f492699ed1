"""``slime-trace-viewer live DIR`` (the page and its server: tests/view/test_live_server.py;
in Chromium against a real receiver: tests/browser/test_live_browser.py)."""

from __future__ import annotations

import pytest

from slime_trace_widget.cli import main


def test_the_command_refuses_a_missing_folder(tmp_path, capsys) -> None:
    assert main(["live", str(tmp_path / "nowhere")]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_the_command_refuses_a_missing_dump_folder(tmp_path, capsys) -> None:
    assert main(["live", str(tmp_path), "--dumps", str(tmp_path / "nowhere")]) == 2
    assert "--dumps" in capsys.readouterr().err


def test_the_help_names_the_hand_over(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["live", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--dumps FOLDER" in text and "switches to it" in text
