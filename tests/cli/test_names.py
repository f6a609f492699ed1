"""The names of views' files in one folder: two dumps (or followed folders) of one name
never share a page, a cache or an export, and each keeps its name from run to run."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

from slime_trace_widget.cli import follow as follow_module
from slime_trace_widget.cli import main
from slime_trace_widget.cli.cache import CACHE_SUFFIX
from slime_trace_widget.cli.files import HTML_SUFFIX
from tests.support.browser import free_port

FIXTURES = Path(__file__).parents[1] / "fixtures"


def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    """``runA/rollout_0.pt`` and ``runB/rollout_0.pt``: two different dumps of one name."""
    dumps = []
    for run, fixture in (("runA", "small.pt"), ("runB", "rollout_eval_3.pt")):
        (tmp_path / run).mkdir()
        dumps.append(tmp_path / run / "rollout_0.pt")
        shutil.copy(FIXTURES / fixture, dumps[-1])
    return dumps[0], dumps[1]


def written_page(out: str) -> Path:
    (line,) = [line for line in out.splitlines() if line.startswith("wrote ")]
    return Path(line.removeprefix("wrote "))


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as response:
        return response.read()


def test_a_served_page_stays_its_dumps_when_another_of_its_name_is_viewed(
        tmp_path: Path, capsys) -> None:
    """The reviewer's case: A served from ``--out-dir views``, then B (another run's
    ``rollout_0.pt``) viewed into the same folder. A's URL kept answering B's page, and
    each run rebuilt the cache the other had overwritten."""
    dump_a, dump_b = two_runs(tmp_path)
    views = tmp_path / "views"
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "slime_trace_widget", str(dump_a), "--out-dir", str(views),
         "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    guard = threading.Timer(300, server.kill)  # a CLI that never serves ends the read
    guard.start()
    try:
        line = server.stdout.readline()
        while line and not line.startswith("serving"):
            line = server.stdout.readline()
        assert line.startswith(f"serving rollout_0{HTML_SUFFIX} "), server.stderr.read()
        url = f"http://127.0.0.1:{port}/rollout_0{HTML_SUFFIX}"
        served_a = fetch(url)

        assert main([str(dump_b), "--out-dir", str(views), "--no-serve"]) == 0
        page_b = written_page(capsys.readouterr().out)
        assert fetch(url) == served_a
        assert re.fullmatch(rf"rollout_0-[0-9a-f]{{8}}{re.escape(HTML_SUFFIX)}", page_b.name)
        assert page_b.read_bytes() != served_a
    finally:
        guard.cancel()
        server.kill()
        server.wait(timeout=120)

    name_b = page_b.name.removesuffix(HTML_SUFFIX)
    for dump, name in ((dump_a, "rollout_0"), (dump_b, name_b), (dump_a, "rollout_0")):
        assert main([str(dump), "--out-dir", str(views), "--no-serve"]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"reusing {name}{CACHE_SUFFIX} "), out
        assert written_page(out) == views / f"{name}{HTML_SUFFIX}"
    assert main([str(dump_b), "--out-dir", str(views), "--no-serve", "--parquet"]) == 0
    assert (views / f"{name_b}.parquet").is_dir()
    assert not (views / "rollout_0.parquet").exists()


def test_a_dump_beside_its_page_keeps_the_plain_name(tmp_path: Path, capsys) -> None:
    """The common case: one dump, its view beside it, named as slime's viewer names it,
    again on the next run."""
    dump_a, _ = two_runs(tmp_path)
    for _run in range(2):
        assert main([str(dump_a), "--no-serve"]) == 0
        assert written_page(capsys.readouterr().out) == dump_a.with_name(
            f"rollout_0{HTML_SUFFIX}")


def test_followed_folders_of_one_name_keep_their_own_page_and_state(
        tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs' ``run/`` folders followed into one ``--out-dir``, and a dump named as
    they are: each view has its own page and state file."""
    folders = [tmp_path / side / "run" for side in ("a", "b")]
    for folder in folders:
        folder.mkdir(parents=True)
    served: list[list[str]] = []
    monkeypatch.setattr(follow_module, "serve",
                        lambda out_dir, names, host, port: served.append(list(names)))
    out = tmp_path / "views"
    for folder in (*folders, folders[0]):
        assert main(["--follow", str(folder), "--out-dir", str(out)]) == 0
    capsys.readouterr()
    plain = [f"run{HTML_SUFFIX}", f"run{follow_module.FOLLOW_SUFFIX}"]
    assert served[0] == served[2] == plain
    other = served[1][0].removesuffix(HTML_SUFFIX)
    assert re.fullmatch(r"run-[0-9a-f]{8}", other)
    assert served[1] == [f"{other}{HTML_SUFFIX}", f"{other}{follow_module.FOLLOW_SUFFIX}"]

    dump = tmp_path / "run.pt"
    shutil.copy(FIXTURES / "small.pt", dump)
    assert main([str(dump), "--out-dir", str(out), "--no-serve"]) == 0
    assert re.fullmatch(rf"run-[0-9a-f]{{8}}{re.escape(HTML_SUFFIX)}",
                        written_page(capsys.readouterr().out).name)
