"""Run trends next to the training curves: TensorBoard, MLflow or W&B.

``log_trends`` takes the table of ``analysis.rollout_trends`` (one row per dump) and
logs one scalar per trend column per rollout, with the rollout id as the step:
training dumps as ``rollout/<column>``, evaluation dumps as ``eval/<column>`` (the
prefixes slime's own W&B logging uses). Columns that are not numbers, and values
that are missing, are left out. A column is one part of its metric's name: letters
and digits of any script, ``_``, ``-``, ``.`` and spaces stay; any other character
(``/`` too) becomes ``_``, and a column so changed, or cut to
:data:`MAX_COLUMN_CHARS`, ends in a hash of its whole name (:func:`metric_name`), so two
columns never share a metric and every backend takes the name (MLflow refuses one
that reads as another path, ``a//b``, and names past 250 characters). Rows named in
``skip`` (their
:func:`row_key`, or the ``key`` given) are not logged again, nor a second row of one
key: that is how ``convert --log-trends`` logs only new rollouts on a rerun (keyed by
the dump's content, :func:`content_row_key`: a renamed dump is not logged again, a
rewritten one is). ``on_logged`` hears each row's key as soon as the row has reached
the target, so a failure partway leaves a record of exactly what went.
"""

from __future__ import annotations

import hashlib
import math
import re
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..answers.trends import TREND_KEYS
from .trend_backends import MlflowBackend, TensorBoardBackend, WandbBackend

TARGETS = ("tensorboard:LOGDIR", "mlflow:TRACKING_URI[#EXPERIMENT]", "wandb:PROJECT")
KEYS = TREND_KEYS
PREFIXES = {"train": "rollout", "eval": "eval"}
DEFAULT_RUN_NAME = "rollout-trends"
#: Characters a column keeps in its metric's name (``str.isalnum``'s letters and digits
#: with ``_``, as Python's ``\w`` has them; MLflow's own check is that ``\w``).
_UNSAFE = re.compile(r"[^\w\-. ]")
#: The most characters of a column kept in its metric's name (MLflow takes 250 in all).
MAX_COLUMN_CHARS = 200


@dataclass
class TrendLogReport:
    """What one call logged: rows (dumps) and scalars, and the rows' keys."""

    target: str
    logged: list[str] = field(default_factory=list)
    skipped: int = 0
    without_rollout_id: int = 0
    #: Rows left out because a row of the same kind and rollout id (their step) was
    #: logged or skipped first: two runs' dumps of one id would share one curve's step.
    same_step: int = 0
    scalars: int = 0
    snapshots: int = 0

    def summary(self) -> str:
        extra = f", {self.snapshots} snapshots" if self.snapshots else ""
        missing = (f", {self.without_rollout_id} without a rollout id left out"
                   if self.without_rollout_id else "")
        twice = (f", {self.same_step} left out for a rollout id another dump of its kind "
                 "has (dumps of two runs?)" if self.same_step else "")
        return (f"logged {len(self.logged)} rollouts ({self.scalars} scalars{extra}) to "
                f"{self.target}; {self.skipped} logged before{missing}{twice}")


def row_key(row: pd.Series | dict) -> str:
    """A trends row's identity in a log: kind, rollout id and dump file."""
    return f"{row['dump_kind']}/{int(row['rollout_id'])}/{row['dump_file']}"


def content_row_key(row: pd.Series | dict, content: str) -> str:
    """A trends row's identity by what its dump holds: kind, rollout id and the dump's
    content hash ``content`` (not its file name, which a rename changes)."""
    return f"{row['dump_kind']}/{int(row['rollout_id'])}/blake2b:{content}"


def target_name(target: Any) -> str:
    """How a target is named in reports and ledgers (a W&B run by its id)."""
    return target if isinstance(target, str) else f"wandb-run:{getattr(target, 'id', '?')}"


def log_trends(trends: pd.DataFrame, target: Any, *, skip: Iterable[str] = (),
               run_name: str | None = None, run_id: str | None = None,
               snapshot: Callable[[pd.Series, Path], Path | None] | None = None,
               on_logged: Callable[[list[str]], None] | None = None,
               key: Callable[[pd.Series], str] = row_key) -> TrendLogReport:
    """Log ``trends`` to ``target``: ``"tensorboard:LOGDIR"``,
    ``"mlflow:TRACKING_URI"`` (``#EXPERIMENT`` at the end picks the experiment, default
    ``slime-rollouts``), ``"wandb:PROJECT"``, or a W&B run object.

    MLflow and W&B runs are named ``run_name`` (default ``rollout-trends``); MLflow finds
    its run again by that name, W&B by ``run_id`` when given. ``snapshot(row, folder)``,
    for W&B, may write the rollout's HTML snapshot into ``folder`` and return its path:
    it is logged as an artifact of the run.

    ``key(row)`` names a row in ``skip``, ``on_logged`` and the report (default
    :func:`row_key`); of rows with one key, the first is logged. The rollout id is the
    step, so of rows of one kind and rollout id (dumps of two runs in one dataset) only
    the first, by file, is logged, or none when that one was logged before (counted in
    ``same_step``).

    ``on_logged(keys)`` is called with the ``key`` of rows as soon as they have
    reached the target (after each row; MLflow, which sends metrics in batches, after
    each batch), before anything else is logged; if logging fails partway, the rows it
    was told of are exactly those that went.
    """
    missing = [key for key in KEYS if key not in trends.columns]
    if missing:
        raise ValueError(f"not a trends table (analysis.rollout_trends): no {missing}")
    report = TrendLogReport(target_name(target))
    done = set(skip)
    steps: set[tuple[str, int]] = set()
    rows = []
    for _, row in trends.sort_values(["dump_kind", "rollout_id", "dump_file"]).iterrows():
        if not _known(row["rollout_id"]) or int(row["rollout_id"]) < 0:
            report.without_rollout_id += 1
            continue
        step = (str(row["dump_kind"]), int(row["rollout_id"]))
        if key(row) in done:
            report.skipped += 1
        elif step in steps:
            report.same_step += 1
        else:
            rows.append(row)
            done.add(key(row))
        steps.add(step)
    if not rows:
        return report
    backend = _backend(target, run_name or DEFAULT_RUN_NAME, run_id)
    try:
        with tempfile.TemporaryDirectory(prefix="stw-snapshot-") as folder:
            for row in rows:
                prefix = PREFIXES.get(str(row["dump_kind"]), "rollout")
                values = scalars(row, prefix)
                _tell(on_logged, backend.log(prefix, int(row["rollout_id"]), values,
                                             key(row)))
                report.scalars += len(values)
                report.logged.append(key(row))
                if snapshot is not None and isinstance(backend, WandbBackend):
                    path = snapshot(row, Path(folder))
                    if path is not None:
                        backend.add_snapshot(f"{prefix}-{int(row['rollout_id'])}-timeline",
                                             path)
                        report.snapshots += 1
            _tell(on_logged, backend.flush())
    finally:
        backend.close()
    return report


def _tell(on_logged: Callable[[list[str]], None] | None, keys: list[str]) -> None:
    """Tell ``on_logged`` (when given) the keys of the rows that reached the target."""
    if on_logged is not None and keys:
        on_logged(keys)


def scalars(row: pd.Series, prefix: str) -> dict[str, float]:
    """The row's numbers as ``{prefix/column: value}``, missing values left out."""
    out = {}
    for column, value in row.items():
        if column in KEYS or isinstance(value, bool | str) or not _known(value):
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(number):
            out[metric_name(prefix, str(column))] = number
    return out


def metric_name(prefix: str, column: str) -> str:
    """``prefix/<column>``, the column kept safe (see the module): as it is when every
    character is kept and it is short enough, else with the unsafe characters as ``_``,
    cut, and ``_<8 hex digits>`` of its whole name, the same name in every row and run."""
    safe = _UNSAFE.sub("_", column)
    if safe.strip(".") == "":  # "", "." or "..": no name, or a folder
        safe = safe.replace(".", "_") or "_"
    if safe != column or len(safe) > MAX_COLUMN_CHARS:
        digest = hashlib.blake2b(column.encode("utf-8", "surrogatepass"), digest_size=4)
        safe = f"{safe[:MAX_COLUMN_CHARS]}_{digest.hexdigest()}"
    return f"{prefix}/{safe}"


def _known(value: Any) -> bool:
    return value is not None and value is not pd.NA and not (
        isinstance(value, float) and math.isnan(value))


def _backend(target: Any, run_name: str, run_id: str | None) -> Any:
    if not isinstance(target, str):
        if not (hasattr(target, "log") and hasattr(target, "define_metric")):
            raise ValueError(f"a target is one of {', '.join(TARGETS)} or a W&B run, "
                             f"not {type(target).__name__}")
        return WandbBackend(None, run=target, prefixes=PREFIXES.values())
    kind, _, where = target.partition(":")
    if kind == "tensorboard" and where:
        return TensorBoardBackend(where)
    if kind == "mlflow" and where:
        uri, _, experiment = where.partition("#")
        return MlflowBackend(uri, experiment or None, run_name)
    if kind == "wandb" and where:
        return WandbBackend(where, run_id=run_id, run_name=run_name,
                            prefixes=PREFIXES.values())
    raise ValueError(f"{target!r}: a trends target is one of {', '.join(TARGETS)}")
