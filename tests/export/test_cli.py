"""slime-trace-viewer end to end: files, cache reuse, serving, bad input."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from slime_trace_widget.cli import CACHE_SUFFIX, HTML_SUFFIX, main
from slime_trace_widget.devtools.browser import free_port

FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.fixture
def dump(tmp_path: Path) -> Path:
    target = tmp_path / "rollout_0.pt"
    shutil.copy(FIXTURES / "small.pt", target)
    return target


def test_no_serve_writes_page_and_cache_then_reuses_cache(dump: Path, capsys) -> None:
    assert main([str(dump), "--no-serve"]) == 0
    cache = dump.with_name("rollout_0" + CACHE_SUFFIX)
    page = dump.with_name("rollout_0" + HTML_SUFFIX)
    assert cache.exists() and page.exists()
    assert "built" in capsys.readouterr().out
    first_page = page.read_text()
    assert main([str(dump), "--no-serve"]) == 0
    assert "reusing" in capsys.readouterr().out
    assert page.read_text() == first_page
    assert main([str(dump), "--no-serve", "--rebuild"]) == 0
    assert "built" in capsys.readouterr().out


def test_changed_dump_invalidates_cache(dump: Path, capsys) -> None:
    main([str(dump), "--no-serve"])
    time.sleep(0.01)
    shutil.copy(FIXTURES / "legacy_v1_pd.pt", dump)
    capsys.readouterr()
    main([str(dump), "--no-serve"])
    assert "built" in capsys.readouterr().out


def test_glob_makes_one_combined_view_in_out_dir(tmp_path: Path, capsys) -> None:
    for name in ("rollout_1.pt", "rollout_2.pt"):
        shutil.copy(FIXTURES / "small.pt", tmp_path / name)
    out = tmp_path / "out"
    assert main([str(tmp_path / "rollout_*.pt"), "--no-serve", "--out-dir", str(out),
                 "--perfetto", "--parquet"]) == 0
    assert "16 samples" in capsys.readouterr().out
    assert (out / f"rollout_1+1{HTML_SUFFIX}").exists()
    assert (out / "rollout_1+1.perfetto.json").exists()
    assert (out / "rollout_1+1.parquet" / "spans").is_dir()


def test_demo_option(tmp_path: Path) -> None:
    assert main(["--demo", "--demo-samples", "12", "--no-serve", "--out-dir", str(tmp_path)]) == 0
    assert (tmp_path / "demo_rollout.pt").exists()
    assert (tmp_path / f"demo_rollout{HTML_SUFFIX}").exists()


@pytest.mark.parametrize(("argv", "message"), [
    (["missing.pt"], "missing.pt: no such file"),
    ([str(FIXTURES / "edge_corrupt_garbage.pt")], "edge_corrupt_garbage.pt: "),
    ([str(FIXTURES / "edge_corrupt_empty_file.pt")], "edge_corrupt_empty_file.pt: "),
    ([str(FIXTURES / "edge_corrupt_truncated.pt")], "edge_corrupt_truncated.pt: "),
    (["nothing_*.pt"], "nothing_*.pt: no files match"),
    ([], "give a dump"),
])
def test_bad_input_gives_one_line_and_exit_code(argv: list[str], message: str,
                                                tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "slime_trace_widget.cli", *argv, "--no-serve",
                             "--out-dir", str(tmp_path)], capture_output=True, text=True,
                            cwd=tmp_path, timeout=120)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_serves_the_page_on_loopback_and_stops_on_ctrl_c(dump: Path) -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "slime_trace_widget.cli", str(dump), "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and url is None:
            line = process.stdout.readline()
            if line.startswith("serving"):
                url = line.split(" at ")[1].split()[0]
        assert url == f"http://127.0.0.1:{port}/rollout_0{HTML_SUFFIX}"
        with urllib.request.urlopen(url, timeout=10) as response:
            body = response.read().decode()
        assert response.status == 200 and 'id="stw-data"' in body
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
