"""The places trends go: TensorBoard event files, an MLflow tracking store, a W&B run.

Each backend takes one row's scalars as ``log(prefix, step, {name: value}, key)`` and is
imported only when used; a missing package is one line naming the extra that brings
it. The names already carry their ``rollout/`` or ``eval/`` prefix (see
:mod:`.trend_log`). ``log`` and ``flush`` return the keys of the rows that have now
reached the target, whole: a caller records those, and only those, as logged (a
backend that batches, MLflow, answers when a batch went out). ``close`` ends the run
and sends nothing more: rows a failure left waiting are not recorded, so a rerun
sends them.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: MLflow takes at most this many metrics in one ``log_batch``.
MLFLOW_BATCH = 1000
#: W&B's x axes: each prefix's metrics are plotted against its own step metric.
WANDB_STEP = "step"


class MissingBackend(ImportError):
    """The backend's package is not installed: the message names the extra to install."""


def _require(module: str, extra: str) -> Any:
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as exc:
        raise MissingBackend(f"logging trends to {extra} needs the {extra} extra: "
                             f"pip install 'slime-trace-widget[{extra}]' ({exc})") from None


class TensorBoardBackend:
    """Scalars into event files under ``logdir`` (a rerun adds a file; TensorBoard
    merges a folder's files)."""

    def __init__(self, logdir: str) -> None:
        _require("tensorboard", "tensorboard")
        writer_module = _require("torch.utils.tensorboard", "tensorboard")
        Path(logdir).mkdir(parents=True, exist_ok=True)
        self.writer = writer_module.SummaryWriter(log_dir=logdir)

    def log(self, prefix: str, step: int, values: dict[str, float], key: str) -> list[str]:
        """Write the row's scalars to the event file, flushed: ``[key]``."""
        del prefix  # the names carry it
        for name, value in values.items():
            self.writer.add_scalar(name, value, global_step=step)
        self.writer.flush()
        return [key]

    def flush(self) -> list[str]:
        return []

    def close(self) -> None:
        self.writer.close()


class MlflowBackend:
    """Metrics of one MLflow run, found again by name on the next call (so a rerun adds
    to the same curves), in ``experiment`` (default ``slime-rollouts``)."""

    def __init__(self, tracking_uri: str, experiment: str | None, run_name: str) -> None:
        mlflow_client = _require("mlflow.tracking", "mlflow")
        self.client = mlflow_client.MlflowClient(tracking_uri=tracking_uri)
        name = experiment or "slime-rollouts"
        found = self.client.get_experiment_by_name(name)
        experiment_id = found.experiment_id if found else self.client.create_experiment(name)
        runs = self.client.search_runs(
            [experiment_id], filter_string=f"tags.`mlflow.runName` = '{_quoted(run_name)}'",
            order_by=["attributes.start_time DESC"], max_results=1)
        self.run_id = (runs[0].info.run_id if runs
                       else self.client.create_run(experiment_id, run_name=run_name)
                       .info.run_id)
        #: Rows logged and not sent yet: (key, their metrics), in order.
        self.waiting: list[tuple[str, list[Any]]] = []
        self._metric = _require("mlflow.entities", "mlflow").Metric

    def log(self, prefix: str, step: int, values: dict[str, float], key: str) -> list[str]:
        """Keep the row's metrics to send with the next rows; when they would take the
        waiting rows over :data:`MLFLOW_BATCH` metrics, send those first (their keys,
        else ``[]``)."""
        del prefix  # the names carry it
        now = int(time.time() * 1000)
        metrics = [self._metric(name, value, now, step) for name, value in values.items()]
        waiting = sum(len(row) for _, row in self.waiting)
        sent = self.flush() if waiting and waiting + len(metrics) > MLFLOW_BATCH else []
        self.waiting.append((key, metrics))
        return sent

    def flush(self) -> list[str]:
        """Send the waiting rows: one ``log_batch`` (they fit in one), or several for a
        row of more metrics than a batch takes, waiting alone; the keys of the rows
        sent. When a call fails the rows stay waiting, none reported as sent."""
        metrics = [metric for _, row in self.waiting for metric in row]
        for start in range(0, len(metrics), MLFLOW_BATCH):
            self.client.log_batch(self.run_id, metrics=metrics[start:start + MLFLOW_BATCH])
        sent = [key for key, _ in self.waiting]
        self.waiting = []
        return sent

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


class WandbBackend:
    """History rows of a W&B run: one started here for ``project`` (resumed by its id on
    a rerun, ``WANDB_MODE`` decides online or offline), or the caller's own run."""

    def __init__(self, project: str | None, run: Any = None, run_id: str | None = None,
                 run_name: str | None = None, prefixes: Iterable[str] = ()) -> None:
        self.owned = run is None
        if run is None:
            wandb = _require("wandb", "wandb")
            run = wandb.init(project=project, id=run_id, name=run_name, resume="allow",
                             job_type="rollout-trends")
        self.run = run
        for prefix in prefixes:
            run.define_metric(f"{prefix}/{WANDB_STEP}")
            run.define_metric(f"{prefix}/*", step_metric=f"{prefix}/{WANDB_STEP}")

    def log(self, prefix: str, step: int, values: dict[str, float], key: str) -> list[str]:
        """One history row of the run (W&B keeps it from here on): ``[key]``."""
        self.run.log({f"{prefix}/{WANDB_STEP}": step, **values})
        return [key]

    def flush(self) -> list[str]:
        return []

    def add_snapshot(self, name: str, path: Path) -> None:
        """The rollout's HTML snapshot as an artifact of the run."""
        wandb = _require("wandb", "wandb")
        artifact = wandb.Artifact(name, type="trace-timeline")
        artifact.add_file(str(path))
        self.run.log_artifact(artifact)

    def close(self) -> None:
        if self.owned:
            self.run.finish()


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")
