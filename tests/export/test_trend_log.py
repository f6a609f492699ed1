"""Trends next to the training curves, read back with each backend's own reader:
TensorBoard's event reader, MLflow's client on a sqlite store, W&B's offline run file
through ``wandb leet inspect``. Also: reruns log only new rollouts, and the run's dumps
go to an OTLP receiver once each."""

from __future__ import annotations

import json
import posixpath
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from slime_trace_widget import analysis
from slime_trace_widget.answers.trends import rollout_trends
from slime_trace_widget.cli import main
from slime_trace_widget.export.run_exports import LEDGER
from slime_trace_widget.export.trend_backends import MissingBackend
from slime_trace_widget.export.trend_log import metric_name, row_key, scalars
from slime_trace_widget.sources.engine.store import load_engine_traces
from tests.sources.runs import FIXTURES, copy_run, settle

#: Generous: W&B's reader starts its core service.
READ_SECONDS = 300


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return copy_run(tmp_path)


def convert(run: Path, out: Path, *extra: str) -> int:
    return main(["convert", str(run / "*.pt"), "--out", str(out), "--workers", "1", *extra])


def expected_points(dataset: Path, prefix: str, kind: str) -> dict[str, dict[int, float]]:
    """Per metric name, step -> value, from the dataset's own trends table."""
    trends = rollout_trends(dataset)
    out: dict[str, dict[int, float]] = {}
    for _, row in trends[trends["dump_kind"] == kind].iterrows():
        for name, value in scalars(row, prefix).items():
            out.setdefault(name, {})[int(row["rollout_id"])] = value
    return out


def tensorboard_points(logdir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar point under ``logdir`` (all its event files), by tag."""
    from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer

    multiplexer = EventMultiplexer()
    multiplexer.AddRunsFromDirectory(str(logdir))
    multiplexer.Reload()
    points: dict[str, list[tuple[int, float]]] = {}
    for run_name in multiplexer.Runs():
        accumulator = multiplexer.GetAccumulator(run_name)
        for tag in accumulator.Tags()["scalars"]:
            points.setdefault(tag, []).extend((e.step, e.value)
                                              for e in accumulator.Scalars(tag))
    return points


def test_tensorboard_gets_one_point_per_rollout_and_a_rerun_adds_only_new_ones(
        run: Path, tmp_path: Path, capsys) -> None:
    dataset, logdir = tmp_path / "dataset", tmp_path / "tb"
    assert convert(run, dataset, "--log-trends", f"tensorboard:{logdir}") == 0
    assert "logged 3 rollouts" in capsys.readouterr().out
    assert convert(run, dataset, "--log-trends", f"tensorboard:{logdir}") == 0
    assert "logged 0 rollouts" in capsys.readouterr().out
    shutil.copy(FIXTURES / "edge_malformed_events.pt", run / "rollout_14.pt")
    settle(run / "rollout_14.pt")
    assert convert(run, dataset, "--log-trends", f"tensorboard:{logdir}") == 0
    assert "logged 1 rollouts" in capsys.readouterr().out
    points = tensorboard_points(logdir)
    for prefix, kind in (("rollout", "train"), ("eval", "eval")):
        for name, by_step in expected_points(dataset, prefix, kind).items():
            got = points[name]
            assert sorted(step for step, _ in got) == sorted(by_step), name  # once each
            for step, value in got:
                assert value == pytest.approx(by_step[step], rel=1e-6), (name, step)
    assert {step for step, _ in points["rollout/duration_p50"]} == {0, 3, 14}
    assert {step for step, _ in points["eval/duration_p50"]} == {3}
    assert len(json.loads((dataset / LEDGER).read_text())["targets"][f"tensorboard:{logdir}"]
               ) == 4


def test_mlflow_keeps_one_run_whose_curves_grow(run: Path, tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    dataset = tmp_path / "dataset"
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert convert(run, dataset, "--log-trends", f"mlflow:{uri}#rl-traces") == 0
    shutil.copy(FIXTURES / "edge_malformed_events.pt", run / "rollout_14.pt")
    settle(run / "rollout_14.pt")
    assert convert(run, dataset, "--log-trends", f"mlflow:{uri}#rl-traces") == 0
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("rl-traces")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 1 and runs[0].info.run_name == dataset.name
    run_id = runs[0].info.run_id
    for prefix, kind in (("rollout", "train"), ("eval", "eval")):
        for name, by_step in expected_points(dataset, prefix, kind).items():
            history = client.get_metric_history(run_id, name)
            assert sorted(m.step for m in history) == sorted(by_step), name
            for metric in history:
                assert metric.value == pytest.approx(by_step[metric.step]), (name, metric.step)


def wandb_records(folder: Path) -> list[dict]:
    """Every record of the offline run files under ``folder``, read by W&B's own reader."""
    records = []
    for path in sorted(folder.rglob("run-*.wandb")):
        lines = subprocess.run([sys.executable, "-m", "wandb", "leet", "inspect", "--json",
                                str(path)], check=True, capture_output=True, text=True,
                               timeout=READ_SECONDS).stdout
        records += [json.loads(line) for line in lines.splitlines() if line.strip()]
    return records


def history_points(records: list[dict], prefix: str) -> dict[str, dict[int, float]]:
    out: dict[str, dict[int, float]] = {}
    for record in records:
        if record["type"] != "history":
            continue
        item = record["history"]["item"]
        step = item.get(f"{prefix}/step")
        for name, value in item.items():
            if step is not None and name.startswith(f"{prefix}/") and name != f"{prefix}/step":
                assert int(step) not in out.get(name, {}), (name, step)  # logged once
                out.setdefault(name, {})[int(step)] = value
    return out


def test_wandb_offline_run_gets_trends_and_snapshots(run: Path, tmp_path: Path,
                                                     monkeypatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    dataset = tmp_path / "dataset"
    assert convert(run, dataset, "--log-trends", "wandb:slime-rl", "--log-snapshots") == 0
    records = wandb_records(tmp_path / "wandb")
    for prefix, kind in (("rollout", "train"), ("eval", "eval")):
        expected = expected_points(dataset, prefix, kind)
        got = history_points(records, prefix)
        assert set(expected) <= set(got)
        for name, by_step in expected.items():
            assert got[name] == pytest.approx(by_step), name
    metrics = {r["metric"].get("glob_name"): r["metric"].get("step_metric")
               for r in records if r["type"] == "metric"}
    assert metrics["rollout/*"] == "rollout/step" and metrics["eval/*"] == "eval/step"
    artifacts = [r for r in records if r["type"] == "artifact"]
    names = {r["artifact"]["name"] for r in artifacts}
    assert names == {"rollout-0-timeline", "rollout-3-timeline", "eval-3-timeline"}
    assert all(r["artifact"]["type"] == "trace-timeline" for r in artifacts)
    run_records = [r for r in records if r["type"] == "run"]
    assert {r["run"]["project"] for r in run_records} == {"slime-rl"}


def test_an_existing_wandb_run_takes_the_trends(run: Path, tmp_path: Path,
                                                monkeypatch) -> None:
    import wandb

    monkeypatch.setenv("WANDB_SILENT", "true")
    dataset = tmp_path / "dataset"
    assert convert(run, dataset) == 0
    trends = analysis.rollout_trends(dataset)
    wandb_run = wandb.init(project="mine", mode="offline", dir=str(tmp_path))
    report = analysis.log_trends(trends, wandb_run)
    wandb_run.finish()
    assert report.logged == [row_key(row) for _, row in
                             trends.sort_values(["dump_kind", "rollout_id", "dump_file"])
                             .iterrows()]
    got = history_points(wandb_records(tmp_path / "wandb"), "rollout")
    assert got["rollout/samples"] == {0: 8, 3: 8}


def test_names_are_kept_safe_and_missing_values_left_out() -> None:
    row = pd.Series({"rollout_id": 2, "dump_kind": "train", "dump_file": "rollout_2.pt",
                     "<svg onload=x>_p50": 1.5, "samples": 4, "aborted": float("nan"),
                     "note": "text"})
    logged = scalars(row, "rollout")
    assert logged.pop("rollout/samples") == 4.0
    [(name, value)] = logged.items()
    assert re.fullmatch(r"rollout/_svg onload_x__p50_[0-9a-f]{8}", name) and value == 1.5


def test_each_column_has_a_metric_of_its_own_that_names_no_other_path() -> None:
    columns = ["GET http://tool.local//search_p50", "GET http://tool.local/./search_p50",
               "检索_p50", "生成_p50", "??_p50", "!!_p50", ".", "..", "x" * 400, "x" * 401,
               "tool call_p95", "a.b-c_p50"]
    names = [metric_name("rollout", column) for column in columns]
    assert len(set(names)) == len(names)
    assert names[2:4] == ["rollout/检索_p50", "rollout/生成_p50"]  # letters of any script
    assert names[-2:] == ["rollout/tool call_p95", "rollout/a.b-c_p50"]  # safe: as they are
    for name in names:
        assert posixpath.normpath(name) == name and name.count("/") == 1, name
        assert len(name) <= 250 and name.split("/")[1] not in (".", ".."), name
    assert metric_name("rollout", columns[0]) == names[0]  # the same name in every row


def trends_row(rollout_id: int, dump_file: str, **figures: float) -> dict:
    return {"rollout_id": rollout_id, "dump_kind": "train", "dump_file": dump_file,
            **figures}


def test_mlflow_takes_span_names_that_look_like_paths(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    # Each row holds a name that sanitised as before would read as another path or as
    # the other name: MLflow refused the batch, and every rollout in it went unlogged.
    trends = pd.DataFrame([
        trends_row(1, "rollout_1.pt", samples=4, **{"检索_p50": 6.5, "生成_p50": 1.0}),
        trends_row(2, "rollout_2.pt", samples=5, **{"GET http://tool.local//search_p50": 2.0}),
    ])
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    report = analysis.log_trends(trends, f"mlflow:{uri}")
    assert len(report.logged) == 2 and report.scalars == 5
    client = MlflowClient(tracking_uri=uri)
    [run] = client.search_runs([client.get_experiment_by_name("slime-rollouts").experiment_id])
    for _, row in trends.iterrows():
        for name, value in scalars(row, "rollout").items():
            history = client.get_metric_history(run.info.run_id, name)
            assert [m.value for m in history if m.step == row["rollout_id"]] == [value], name


def test_two_dumps_of_one_rollout_id_do_not_share_a_step(tmp_path: Path) -> None:
    trends = pd.DataFrame([trends_row(5, "runA/rollout_5.pt", samples=4),
                           trends_row(5, "runB/rollout_5.pt", samples=10),
                           trends_row(6, "runA/rollout_6.pt", samples=4)])
    logdir = tmp_path / "tb"
    report = analysis.log_trends(trends, f"tensorboard:{logdir}")
    assert report.logged == [row_key(trends.iloc[0]), row_key(trends.iloc[2])]
    assert report.same_step == 1 and "1 left out for a rollout id" in report.summary()
    assert sorted(tensorboard_points(logdir)["rollout/samples"]) == [(5, 4.0), (6, 4.0)]
    again = analysis.log_trends(trends, f"tensorboard:{logdir}", skip=report.logged)
    assert (again.logged, again.skipped, again.same_step) == ([], 2, 1)
    assert sorted(tensorboard_points(logdir)["rollout/samples"]) == [(5, 4.0), (6, 4.0)]


def test_a_snapshot_shows_its_own_dump_when_two_share_a_rollout_id(
        tmp_path: Path, monkeypatch) -> None:
    from slime_trace_widget.export.run_exports import _snapshot_writer
    from slime_trace_widget.view.page import snapshot

    dump = torch.load(FIXTURES / "small.pt", weights_only=False)  # rollout 0, 8 samples
    for run_name, kept in (("runA", 8), ("runB", 3)):
        (tmp_path / run_name).mkdir()
        torch.save({**dump, "samples": dump["samples"][:kept]},
                   tmp_path / run_name / "rollout_0.pt")
        settle(tmp_path / run_name / "rollout_0.pt")
    dataset = tmp_path / "dataset"
    assert main(["convert", str(tmp_path / "run*" / "*.pt"), "--out", str(dataset),
                 "--workers", "1"]) == 0
    trends = rollout_trends(dataset)
    assert len(trends) == 2 and set(trends["rollout_id"]) == {0}
    shown: dict[str, int] = {}
    monkeypatch.setattr(snapshot, "write_snapshot",
                        lambda path, frames, title: shown.setdefault(title, len(frames.samples)))
    for _, row in trends.iterrows():
        _snapshot_writer(dataset)(row, tmp_path)
    assert shown == dict(zip(trends["dump_file"], trends["samples"], strict=True))


def test_bad_targets_and_missing_backends_are_one_line(run: Path, tmp_path: Path,
                                                       monkeypatch, capsys) -> None:
    dataset = tmp_path / "dataset"
    assert convert(run, dataset, "--log-trends", "prometheus:here") == 2
    assert "a trends target is one of" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "mlflow.tracking", None)
    with pytest.raises(MissingBackend, match=r"slime-trace-widget\[mlflow\]"):
        analysis.log_trends(rollout_trends(dataset), f"mlflow:sqlite:///{tmp_path}/x.db")
    assert convert(run, dataset, "--log-trends", f"mlflow:sqlite:///{tmp_path}/x.db") == 2
    error = capsys.readouterr().err.strip()
    assert "pip install 'slime-trace-widget[mlflow]'" in error and "\n" not in error


def test_convert_sends_each_dump_to_an_otlp_receiver_once(run: Path, tmp_path: Path,
                                                          collector, capsys) -> None:
    http_url, _, received = collector
    dataset = tmp_path / "dataset"
    assert convert(run, dataset, "--otlp", http_url) == 0
    assert "sent 3 dump(s)" in capsys.readouterr().out
    first = len(load_engine_traces(received))
    assert convert(run, dataset, "--otlp", http_url) == 0
    assert "every dump was sent before" in capsys.readouterr().out
    shutil.copy(FIXTURES / "edge_malformed_events.pt", run / "rollout_14.pt")
    settle(run / "rollout_14.pt")
    assert convert(run, dataset, "--otlp", http_url) == 0
    assert "sent 1 dump(s)" in capsys.readouterr().out
    spans = load_engine_traces(received)
    assert len(spans) > first
    assert not spans.duplicated(["trace_id", "span_id"]).any()
    assert set(spans["resource"].map(lambda resource: resource["slime.dump"])) == {
        "rollout_0.pt", "rollout_eval_3.pt", "rollout_7.pt", "rollout_14.pt"}


class _FlakyRun:
    """A W&B run, as ``wandb.init`` returns one, whose ``log`` fails on call
    ``fail_at``; every step that reached it goes to ``steps``."""

    id = "flaky"

    def __init__(self, steps: list[tuple[str, int]], fail_at: int | None) -> None:
        self.steps, self.fail_at, self.calls = steps, fail_at, 0

    def define_metric(self, *_: object, **__: object) -> None:
        return None

    def log(self, values: dict) -> None:
        self.calls += 1
        if self.calls == self.fail_at:
            raise ConnectionError("network blip")
        self.steps += [(name, int(step)) for name, step in values.items()
                       if name.endswith("/step")]

    def finish(self) -> None:
        return None


def test_a_rerun_after_a_failure_logs_only_what_did_not_reach_the_target(
        run: Path, tmp_path: Path, monkeypatch) -> None:
    import wandb

    from slime_trace_widget.export.run_exports import log_new_trends

    dataset = tmp_path / "dataset"
    assert convert(run, dataset) == 0
    steps: list[tuple[str, int]] = []
    monkeypatch.setattr(wandb, "init", lambda **_: _FlakyRun(steps, fail_at=3))
    with pytest.raises(ConnectionError):
        log_new_trends(dataset, "wandb:proj")
    assert len(steps) == 2
    ledger = json.loads((dataset / LEDGER).read_text())["targets"]["wandb:proj"]
    assert len(ledger) == 2  # what reached W&B before the failure
    monkeypatch.setattr(wandb, "init", lambda **_: _FlakyRun(steps, fail_at=None))
    report = log_new_trends(dataset, "wandb:proj")
    assert len(report.logged) == 1 and report.skipped == 2
    assert sorted(steps) == [("eval/step", 3), ("rollout/step", 0), ("rollout/step", 3)]
    assert len(json.loads((dataset / LEDGER).read_text())["targets"]["wandb:proj"]) == 3
