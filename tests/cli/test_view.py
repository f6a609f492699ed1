"""slime-trace-viewer [view] end to end: files, cache reuse, serving, bad input."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from slime_trace_widget.cli import main
from slime_trace_widget.cli.cache import CACHE_SUFFIX
from slime_trace_widget.cli.command import parser, with_subcommand
from slime_trace_widget.cli.files import HTML_SUFFIX
from slime_trace_widget.cli.names import folder_claim
from tests.support.browser import free_port
from tests.support.processes import ended_with, line_starting

FIXTURES = Path(__file__).parents[1] / "fixtures"


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


def test_the_page_is_named_after_the_dump_without_its_suffix(tmp_path: Path) -> None:
    """As slime's viewer names it (``Path.stem``), whatever the dump's suffix."""
    dump = tmp_path / "rollout_0.pth"
    shutil.copy(FIXTURES / "small.pt", dump)
    assert main([str(dump), "--no-serve"]) == 0
    assert (tmp_path / f"rollout_0{HTML_SUFFIX}").exists()
    assert (tmp_path / f"rollout_0{CACHE_SUFFIX}").exists()


def test_frames_too_large_for_memory_are_refused_in_one_line(dump: Path, capsys,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    from slime_trace_widget.cli.command import FAILED
    from slime_trace_widget.frames import view_memory

    monkeypatch.setattr(view_memory, "available_memory", lambda: 64 << 10)
    assert main([str(dump), "--no-serve"]) == FAILED
    error = capsys.readouterr().err
    assert error.startswith("slime-trace-viewer: frames.") and "would take up to" in error
    assert len(error.splitlines()) == 1
    assert not dump.with_name("rollout_0" + HTML_SUFFIX).exists()


def test_a_failed_allocation_is_reported_in_one_line(dump: Path, capsys,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from slime_trace_widget.cli import view
    from slime_trace_widget.cli.command import FAILED

    def out_of_memory(args: object) -> int:
        raise MemoryError  # as an allocation that fails raises it: no message

    monkeypatch.setattr(view, "run", out_of_memory)
    assert main([str(dump), "--no-serve"]) == FAILED
    assert capsys.readouterr().err == "slime-trace-viewer: out of memory\n"


def test_the_command_exits_with_its_output_and_code_through_a_pipe(dump: Path) -> None:
    """What the command printed (block-buffered into a pipe) arrives, and its exit
    code is main's."""
    buffered = {name: value for name, value in os.environ.items()
                if name != "PYTHONUNBUFFERED"}
    done = subprocess.run([sys.executable, "-m", "slime_trace_widget", str(dump), "--no-serve"],
                          capture_output=True, text=True, timeout=300, env=buffered)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("built rollout_0") and lines[-1].startswith("wrote ")
    assert dump.with_name("rollout_0" + HTML_SUFFIX).exists()
    missing = subprocess.run([sys.executable, "-m", "slime_trace_widget",
                              str(dump.with_name("absent.pt")), "--no-serve"],
                             capture_output=True, text=True, timeout=300)
    assert missing.returncode == 2
    assert missing.stderr.strip().endswith("absent.pt: no such file")


def test_changed_dump_invalidates_cache(dump: Path, capsys) -> None:
    main([str(dump), "--no-serve"])
    time.sleep(0.01)
    shutil.copy(FIXTURES / "legacy_v1_pd.pt", dump)
    capsys.readouterr()
    main([str(dump), "--no-serve"])
    assert "built" in capsys.readouterr().out


def test_cache_of_another_blocks_layout_is_rebuilt(dump: Path, capsys, monkeypatch) -> None:
    """A cache written by a copy whose blocks the page reads differently (same version
    number, e.g. an upgrade from main) is rebuilt, not served to a page that would
    show broken details."""
    from slime_trace_widget.cli import cache

    monkeypatch.setattr(cache, "BLOCKS_FORMAT", cache.BLOCKS_FORMAT - 1)
    assert main([str(dump), "--no-serve"]) == 0
    assert "built" in capsys.readouterr().out
    monkeypatch.undo()
    assert main([str(dump), "--no-serve"]) == 0
    assert "built" in capsys.readouterr().out
    assert main([str(dump), "--no-serve"]) == 0
    assert "reusing" in capsys.readouterr().out


def test_glob_makes_one_combined_view_in_out_dir(tmp_path: Path, capsys) -> None:
    for name in ("rollout_1.pt", "rollout_2.pt"):
        shutil.copy(FIXTURES / "small.pt", tmp_path / name)
    out = tmp_path / "out"
    assert main([str(tmp_path / "rollout_*.pt"), "--no-serve", "--out-dir", str(out),
                 "--perfetto", "--parquet"]) == 0
    assert "16 samples" in capsys.readouterr().out
    [page] = out.glob(f"rollout_1+1-*{HTML_SUFFIX}")
    name = page.name.removesuffix(HTML_SUFFIX)
    assert re.fullmatch(r"rollout_1\+1-[0-9a-f]{8}", name)
    assert (out / f"{name}.perfetto.json").exists()
    assert (out / f"{name}.parquet" / "spans").is_dir()


def test_views_of_other_dumps_keep_their_own_files(tmp_path: Path, capsys) -> None:
    for index in range(3):
        shutil.copy(FIXTURES / "small.pt", tmp_path / f"rollout_{index}.pt")
    out = tmp_path / "out"
    for others in ("rollout_1.pt", "rollout_2.pt"):  # both were "rollout_0+1"
        assert main([str(tmp_path / "rollout_0.pt"), str(tmp_path / others), "--no-serve",
                     "--out-dir", str(out), "--parquet"]) == 0
        assert "built" in capsys.readouterr().out
    assert len(list(out.glob(f"rollout_0+1-*{HTML_SUFFIX}"))) == 2
    for parquet in out.glob("*.parquet"):
        shown = {path.stem.rsplit("-", 1)[0] for path in parquet.glob("samples/*/*.parquet")}
        assert len(shown) == 2, shown


def test_an_export_again_keeps_none_of_the_earlier_files(dump: Path, capsys) -> None:
    stale = dump.parent / "rollout_0.parquet" / "spans" / "rollout_id=99" / "old.parquet"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"another run's rollout")
    assert main([str(dump), "--no-serve", "--parquet"]) == 0
    assert not stale.exists() and (dump.parent / "rollout_0.parquet" / "spans").is_dir()
    assert not list(dump.parent.glob(".rollout_0.parquet.*"))


def test_demo_samples_without_demo_is_refused(dump: Path, tmp_path: Path, capsys) -> None:
    """``--demo-samples`` sizes only the demo's rollout: given without ``--demo`` (with
    dumps, or with ``--follow``) it would be ignored, so it is refused in one line."""
    out = tmp_path / "out"
    out.mkdir()
    for argv in ([str(dump), "--no-serve", "--out-dir", str(out)],
                 ["--follow", str(out)]):
        code = main([*argv, "--demo-samples", "4"])
        err = capsys.readouterr().err
        assert code != 0 and "Traceback" not in err
        (line,) = err.strip().splitlines()
        assert "--demo-samples" in line, line
    assert not list(out.iterdir())


@pytest.mark.parametrize("option", [["--pattern", "step_*.pt"], ["--interval", "2"]])
def test_follow_options_without_follow_are_refused(dump: Path, tmp_path: Path, option,
                                                   capsys) -> None:
    """They say how to follow a folder: with dumps alone they did nothing, exit 0."""
    code = main([str(dump), "--no-serve", "--out-dir", str(tmp_path), *option])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line == ("slime-trace-viewer: --pattern and --interval say how to --follow a "
                    "folder: give --follow DIR too")
    assert not list(tmp_path.glob("*.html"))


def test_demo_refuses_dump_paths(dump: Path, tmp_path: Path, capsys) -> None:
    """Given dumps are not ignored for the demo's own: the two are refused together."""
    code = main(["--demo", str(dump), "--demo-samples", "4", "--no-serve",
                 "--out-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line == ("slime-trace-viewer: --demo shows a simulated rollout of its own: "
                    "no dump paths with it")
    assert not (tmp_path / "demo_rollout.pt").exists()


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
    result = subprocess.run([sys.executable, "-m", "slime_trace_widget", *argv, "--no-serve",
                             "--out-dir", str(tmp_path)], capture_output=True, text=True,
                            cwd=tmp_path, timeout=120)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def _serving_line(process: subprocess.Popen) -> str:
    """The CLI's start-up line; the loading before it may take long on a busy machine."""
    line = line_starting(process, "serving", 300)
    if line is None:
        pytest.fail(f"the CLI did not start serving: {ended_with(process)[-2000:]}")
    return line


def _fetch(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _stop(process: subprocess.Popen) -> None:
    """Ctrl-C, then a generous wait: prompt on an idle machine, never flaky on a busy one."""
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=120) == 0
    assert "stopped" in process.stdout.read()


def test_serves_the_page_on_loopback_and_stops_on_ctrl_c(dump: Path) -> None:
    port = free_port()
    page = f"rollout_0{HTML_SUFFIX}"
    process = subprocess.Popen(
        [sys.executable, "-m", "slime_trace_widget", str(dump), "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = _serving_line(process)
        root = f"http://127.0.0.1:{port}/"
        assert line == (f"serving {page} to this machine only (127.0.0.1) at {root}{page}"
                        "  (Ctrl-C to stop)")
        status, body = _fetch(root + page)
        assert status == 200 and b'id="stw-data"' in body
        assert _fetch(root) == (200, body)  # / redirects to the page
        for other in ("rollout_0.pt", f"rollout_0{CACHE_SUFFIX}", f"{page}/", "?C=M"):
            assert _fetch(root + other)[0] == (200 if other == "?C=M" else 404), other
        _stop(process)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_stops_the_server_as_ctrl_c_does(dump: Path, signum: signal.Signals) -> None:
    """A service manager's stop (SIGTERM) or the terminal closing (SIGHUP) is the normal
    end of a server, as Ctrl-C is: "stopped", exit code 0."""
    process = subprocess.Popen(
        [sys.executable, "-m", "slime_trace_widget", str(dump), "--port", str(free_port())],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _serving_line(process)
        process.send_signal(signum)
        assert process.wait(timeout=120) == 0, process.stderr.read()
        assert "stopped" in process.stdout.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_written_files_follow_the_umask(dump: Path, tmp_path: Path, umask: int) -> None:
    out = tmp_path / "out"
    previous = os.umask(umask)
    try:
        assert main([str(dump), "--no-serve", "--out-dir", str(out), "--perfetto",
                     "--parquet"]) == 0
    finally:
        os.umask(previous)
    written = [out / f"rollout_0{CACHE_SUFFIX}", out / f"rollout_0{HTML_SUFFIX}",
               out / "rollout_0.perfetto.json", *(out / "rollout_0.parquet").rglob("*")]
    assert len(written) > 8 and not list(out.glob(".*"))  # no temp file left behind
    for path in written:
        full = 0o777 if path.is_dir() else 0o666
        assert stat.S_IMODE(path.stat().st_mode) == full & ~umask, path


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_follow_serves_page_and_state_only(dump: Path, tmp_path: Path, umask: int) -> None:
    old = time.time() - 3600
    os.utime(dump, (old, old))
    out = tmp_path / "out"
    page = f"{dump.parent.name}{HTML_SUFFIX}"
    state = f"{dump.parent.name}.follow.json"
    process = subprocess.Popen(
        [sys.executable, "-m", "slime_trace_widget", "--follow", str(dump.parent), "--port",
         str(free_port()), "--out-dir", str(out), "--interval", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, umask=umask)
    try:
        line = _serving_line(process)
        assert line.startswith(f"serving {page} and {state} to this machine only ")
        url = line.split(" at ", 1)[1].split("  (Ctrl-C")[0]
        root = url.rsplit("/", 1)[0] + "/"
        status, body = _fetch(root + state)
        assert status == 200 and {**json.loads(body), "run": ""} == {
            "version": 1, "dumps": 1, "run": "", "of": folder_claim(dump.parent)}
        assert _fetch(root)[0] == 200
        assert _fetch(root + "../" + dump.name)[0] == 404
        shutil.copy(dump, out / "copied.pt")
        assert _fetch(root + "copied.pt")[0] == 404
        for name in (page, state):
            assert stat.S_IMODE((out / name).stat().st_mode) == 0o666 & ~umask
        _stop(process)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


_WITHOUT_PARQUET = """
import runpy, sys

class NoParquet:  # a pyarrow built without Parquet, like conda-forge's pyarrow-core
    def find_spec(self, name, path=None, target=None):
        if name in ("pyarrow.parquet", "pyarrow._parquet", "fastparquet"):
            raise ImportError(f"No module named {name!r}")

sys.meta_path.insert(0, NoParquet())
sys.argv[0] = "slime-trace-viewer"
runpy.run_module("slime_trace_widget", run_name="__main__")
"""


def test_parquet_without_parquet_support_says_what_to_install(dump: Path) -> None:
    result = subprocess.run([sys.executable, "-c", _WITHOUT_PARQUET, str(dump), "--no-serve",
                             "--parquet"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "slime-trace-viewer: --parquet needs pyarrow with Parquet support: pip install pyarrow "
        "(or conda's pyarrow, not pyarrow-core)"]


def test_slimes_serve_flag_is_taken_as_slimes_viewer_takes_it(dump: Path) -> None:
    # slime's viewer: --serve/--no-serve (argparse.BooleanOptionalAction, default serve).
    arguments = parser().parse_args(with_subcommand([str(dump), "--serve"]))
    assert arguments.serve is True
    assert parser().parse_args(with_subcommand([str(dump)])).serve is True
    assert main([str(dump), "--serve", "--no-serve"]) == 0  # the last one says


def test_out_dir_after_an_equals_sign_starts_at_home(dump: Path, tmp_path: Path,
                                                      monkeypatch) -> None:
    # bash leaves "--out-dir=~/views" unexpanded; dump paths are expanded, so is this.
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert main([str(dump), "--no-serve", "--out-dir=~/views"]) == 0
    assert (tmp_path / "home" / "views" / ("rollout_0" + HTML_SUFFIX)).exists()
    assert not (tmp_path / "~").exists()


def test_an_export_that_cannot_be_written_is_named_in_one_line(dump: Path, capsys) -> None:
    (dump.parent / "rollout_0.perfetto.json").mkdir()  # a folder where the file goes
    (dump.parent / "rollout_0.parquet").write_text("a file where the folder goes")
    for option, target in (("--perfetto", "rollout_0.perfetto.json"),
                           ("--parquet", "rollout_0.parquet")):
        assert main([str(dump), "--no-serve", option]) == 2
        error = capsys.readouterr().err.strip()
        assert f"{target}: cannot be written" in error and "\n" not in error, error


@pytest.mark.parametrize("refusal", [errno.EACCES, errno.EROFS])
def test_a_folder_that_refuses_the_page_names_out_dir(refusal: int, dump: Path, capsys,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A dump in a shared, read-only folder: the one line says where else to write."""
    from slime_trace_widget.cli import files

    def refused(path: Path, data: object) -> None:
        raise OSError(refusal, os.strerror(refusal), str(path))

    monkeypatch.setattr(files, "write_whole", refused)
    assert main([str(dump), "--no-serve"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.endswith(f"cannot be written ({os.strerror(refusal)}; --out-dir DIR writes "
                         "them elsewhere)")
