"""``slime-trace-viewer demo``: a simulated rollout step written as a dump, and with
``--live`` streamed to a real receiver while it plays on the real clock."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from slime_trace_widget.cli import main
from slime_trace_widget.demo import make_demo_samples
from slime_trace_widget.sources.live import load_live
from slime_trace_widget.sources.loading import load_frames
from tests.support.browser import free_port
from tests.support.demo_shapes import count_records
from tests.support.receiver import start_receiver

#: Hang guard for the receiver to have written what it was sent: generous, for a busy machine.
WRITTEN_SECONDS = 120


def schedule(samples: list[dict]) -> list[tuple]:
    """Each sample's records as (type, name, time): what a seed decides (ids are random)."""
    return [(record["type"], record["name"], record["ts"])
            for sample in samples for record in sample["trace"]["events"]]


def test_the_dump_is_the_seed_s_rollout(tmp_path: Path, capsys) -> None:
    out = tmp_path / "rollout_3.pt"
    assert main(["demo", str(out), "--samples", "6", "--seed", "2", "--rollout-id", "3"]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out}" in printed and "6 samples" in printed
    dump = torch.load(out, weights_only=False)
    assert dump["rollout_id"] == 3
    assert schedule(dump["samples"]) == schedule(make_demo_samples(6, seed=2, rollout_id=3))


def test_the_dump_loads_with_its_rollout_id(tmp_path: Path, capsys) -> None:
    path = tmp_path / "rollout_5.pt"
    assert main(["demo", str(path), "--samples", "12", "--rollout-id", "5"]) == 0
    raw = torch.load(path, weights_only=False)
    assert raw["rollout_id"] == 5 and len(raw["samples"]) == 12
    assert count_records(raw["samples"]) > 0
    assert load_frames(path).rollout_ids == [5]
    assert "12 samples" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["--samples", "0"], ["--speed", "0"], ["--speed", "nan"],
                                  ["--rollout-id", "-1"], ["--rollout-id", "1000001"]])
def test_bad_options_are_refused(tmp_path: Path, argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["demo", str(tmp_path / "rollout_0.pt"), *argv])
    assert exited.value.code == 2 and "demo: error" in capsys.readouterr().err
    assert not (tmp_path / "rollout_0.pt").exists()


@pytest.mark.parametrize(("argv", "said"), [
    (["--live", "ftp://nowhere"], "--live:"),
    (["--live", " "], "--live needs the collector's address"),
    (["--speed", "0.5"], "give --live too"),
])
def test_a_wrong_combination_is_one_line(tmp_path: Path, argv: list[str], said: str,
                                         capsys) -> None:
    assert main(["demo", str(tmp_path / "rollout_0.pt"), *argv]) == 2
    assert said in capsys.readouterr().err
    assert not (tmp_path / "rollout_0.pt").exists()


def test_a_missing_folder_is_refused_before_the_step_plays(tmp_path: Path, capsys) -> None:
    assert main(["demo", str(tmp_path / "nowhere" / "rollout_0.pt")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_folder_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    assert main(["demo", str(tmp_path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (f"slime-trace-viewer: {tmp_path}: a folder, not a dump file "
                    f"(give a file: {tmp_path / 'rollout_0.pt'})")


@pytest.mark.parametrize("refused", [
    pytest.param("x" * 300 + ".pt", id="name-too-long"),  # an OSError from the system
    pytest.param("/proc/rollout_0.pt", id="proc", marks=pytest.mark.skipif(
        not Path("/proc/self").is_dir(), reason="Linux's /proc")),  # no file made there
])
def test_a_path_the_system_refuses_is_one_line_naming_it(tmp_path: Path, refused: str,
                                                          capsys) -> None:
    out = tmp_path / refused
    assert main(["demo", str(out), "--samples", "2"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith(f"slime-trace-viewer: {out}: could not write the dump (")


def test_a_failure_to_simulate_is_not_called_a_failure_to_write(tmp_path: Path,
                                                                 monkeypatch) -> None:
    """Only writing the dump is reported as "could not write the dump"; a fault in the
    simulation keeps its own traceback, as a bug should."""
    import slime_trace_widget.demo as demo

    def broken(*args: object, **kwargs: object) -> list:
        raise RuntimeError("the schedule broke")

    monkeypatch.setattr(demo, "make_demo_samples", broken)
    with pytest.raises(RuntimeError, match="the schedule broke"):
        main(["demo", str(tmp_path / "rollout_0.pt"), "--samples", "2"])
    assert not list(tmp_path.iterdir())


def test_a_collector_that_is_not_there_fails_the_command(tmp_path: Path, capsys) -> None:
    """Nothing reached the address: the command says so and fails; the dump is written."""
    out = tmp_path / "rollout_0.pt"
    assert main(["demo", str(out), "--samples", "4", "--live",
                 f"http://127.0.0.1:{free_port()}", "--speed", "0.001"]) == 2
    captured = capsys.readouterr()
    assert "no record reached" in captured.err and "streamed 0 records" in captured.out
    assert len(load_frames(out).samples) == 4


def test_live_streams_the_step_to_a_receiver_while_it_plays(tmp_path: Path, capsys) -> None:
    """Every span of the dump reaches the receiver, tagged with the step's rollout id,
    and the records were stamped on the real clock while the step played."""
    out = tmp_path / "rollout_7.pt"
    with start_receiver(tmp_path / "collector") as receiver:
        started = time.time()
        assert main(["demo", str(out), "--samples", "8", "--seed", "4", "--rollout-id", "7",
                     "--live", receiver.endpoint_url, "--speed", "0.002"]) == 0
        ended = time.time()
        printed = capsys.readouterr().out
        assert "(0 dropped)" in printed
        spans = load_frames(out).spans
        real = spans[~spans["virtual"]]
        deadline = time.monotonic() + WRITTEN_SECONDS
        while True:
            live = load_live(receiver.folder, rollout=7, engine_traces=False)
            live_real = live.spans[~live.spans["virtual"]]
            if len(live_real) >= len(real) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert sorted(live_real["name"]) == sorted(real["name"])
    assert started <= real["start"].min() and real["end"].max() <= ended
    assert live.live.senders and not any(s.missing or s.dropped for s in live.live.senders)
