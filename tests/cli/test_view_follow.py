"""``view --follow DIR``: the options it takes reach every load, the ones it cannot apply
are refused, and a dump that failed is loaded once it is complete."""

from __future__ import annotations

import contextlib
import json
import os
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slime_trace_widget.cli import follow as follow_module
from slime_trace_widget.cli import main

FIXTURES = Path(__file__).parents[1] / "fixtures"


def place(target: Path, data: bytes, age: float) -> None:
    """``data`` written to ``target`` in one rename, dated ``age`` seconds ago."""
    partial = target.with_name(f".{target.name}.partial")
    partial.write_bytes(data)
    os.replace(partial, target)
    then = time.time() - age
    os.utime(target, (then, then))


def wait_for(condition: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def shown_dumps(out_dir: Path) -> int:
    [state] = list(out_dir.glob(f"*{follow_module.FOLLOW_SUFFIX}")) or [None]
    return json.loads(state.read_text())["dumps"] if state is not None else 0


@pytest.mark.parametrize("option", [["--perfetto"], ["--parquet"], ["--rebuild"],
                                    ["--otlp", "http://127.0.0.1:9/v1/traces"]])
def test_follow_refuses_what_it_cannot_apply(option: list[str], tmp_path: Path, capsys,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    def not_served(*args: object) -> None:
        raise AssertionError("served although an option was not applied")

    monkeypatch.setattr(follow_module, "serve", not_served)
    code = main(["--follow", str(tmp_path), *option])
    err = capsys.readouterr().err
    assert code != 0
    (line,) = err.strip().splitlines()
    assert option[0] in line and "--follow" in line


def test_follow_refuses_missing_engine_traces(tmp_path: Path, capsys,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(follow_module, "serve", lambda *args: None)
    missing = tmp_path / "nonexist"
    assert main(["--follow", str(tmp_path), "--engine-traces", str(missing)]) != 0
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert str(missing) in line


def test_follow_loads_each_dump_with_the_engine_traces(tmp_path: Path, capsys,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    folder, traces = tmp_path / "run", tmp_path / "engine"
    folder.mkdir()
    traces.mkdir()
    place(folder / "rollout_0.pt", (FIXTURES / "small.pt").read_bytes(), 3600)
    calls: list[str | None] = []
    real_load = follow_module.load

    def recording_load(inputs: list[Path], trusted: bool,
                       engine_traces: str | None = None) -> Any:
        calls.append(engine_traces)
        return real_load(inputs, trusted)

    monkeypatch.setattr(follow_module, "load", recording_load)
    monkeypatch.setattr(follow_module, "serve", lambda *args: None)
    assert main(["--follow", str(folder), "--engine-traces", str(traces)]) == 0
    assert calls == [str(traces)]


def test_a_dump_that_failed_is_loaded_once_complete(tmp_path: Path, capsys,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    data = (FIXTURES / "small.pt").read_bytes()
    place(folder / "rollout_0.pt", data, 3600)
    bad = folder / "rollout_1.pt"
    place(bad, data[: len(data) // 2], 7200)  # complete-looking, but cut short

    def serve_until_both_shown(out_dir: Path, *args: object) -> None:
        place(bad, data, 3600)  # the dump is whole now
        wait_for(lambda: shown_dumps(out_dir) == 2)

    monkeypatch.setattr(follow_module, "serve", serve_until_both_shown)
    with no_runtime_warning():
        assert main(["--follow", str(folder), "--interval", "0.1"]) == 0
    out, err = capsys.readouterr()
    added = [line for line in out.splitlines() if line.startswith("added")]
    assert added == ["added 1 dump(s), 1 in all", "added 1 dump(s), 2 in all"]
    (line,) = err.strip().splitlines()
    assert line.startswith(f"slime-trace-viewer: skipped {bad}: ")


def test_a_dump_written_again_replaces_what_it_showed(tmp_path: Path, capsys,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A run resumed from a checkpoint writes rollout_0.pt again: the page loads it
    again and says so, where it kept showing the first version."""
    folder = tmp_path / "run"
    folder.mkdir()
    for step in (0, 1):
        place(folder / f"rollout_{step}.pt", (FIXTURES / "small.pt").read_bytes(), 3600)
    loads: list[list[str]] = []
    real_load = follow_module.load

    def recording_load(inputs: list[Path], trusted: bool, engine_traces: str | None = None
                       ) -> Any:
        loads.append([path.name for path in inputs])
        return real_load(inputs, trusted, engine_traces)

    def serve_until_shown_again(out_dir: Path, *args: object) -> None:
        place(folder / "rollout_0.pt", (FIXTURES / "rollout_eval_3.pt").read_bytes(), 1800)
        wait_for(lambda: len(loads) == 3 and shown_version(out_dir) == 2)

    monkeypatch.setattr(follow_module, "load", recording_load)
    monkeypatch.setattr(follow_module, "serve", serve_until_shown_again)
    assert main(["--follow", str(folder), "--interval", "0.1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["added 2 dump(s), 2 in all",
                   f"loaded {folder / 'rollout_0.pt'} again: it was written again"]
    assert loads == [["rollout_0.pt", "rollout_1.pt"], ["rollout_0.pt"], ["rollout_1.pt"]]


def test_a_pattern_that_matches_nothing_yet_is_said(tmp_path: Path, capsys,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A typo in --pattern (or the wrong folder) would otherwise serve an empty page in
    silence; an empty folder is said to be waiting too."""
    monkeypatch.setattr(follow_module, "serve", lambda *args: None)
    waiting = f"no dump matching {{}} in {tmp_path} yet: the page adds each one slime writes"
    assert main(["--follow", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [waiting.format("*.pt")]
    place(tmp_path / "rollout_0.pt", (FIXTURES / "small.pt").read_bytes(), 3600)
    assert main(["--follow", str(tmp_path), "--pattern", "step_*.pt"]) == 0
    assert capsys.readouterr().out.splitlines() == [waiting.format("step_*.pt")]
    assert main(["--follow", str(tmp_path)]) == 0
    assert "no dump matching" not in capsys.readouterr().out


def shown_version(out_dir: Path) -> int:
    [state] = list(out_dir.glob(f"*{follow_module.FOLLOW_SUFFIX}")) or [None]
    return json.loads(state.read_text())["version"] if state is not None else 0


@contextlib.contextmanager
def no_runtime_warning() -> Iterator[None]:
    """No RuntimeWarning escapes the block: failures are printed lines instead."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)]
