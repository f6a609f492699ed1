"""A run dataset out to other stacks, a little more on each ``convert``: the dumps not yet
sent to an OTLP endpoint, the rollouts whose trends a target has not logged yet.

What went where is kept in the dataset's ``exports.json`` (by target: the dumps' stems
and content hashes, the trends rows' keys), written durably as soon as each dump or
trends row (for MLflow, each batch of rows) has reached its target, so a failure halfway
leaves the rest for the next run, and nothing that arrived is sent again. A dump's OTLP
export counts there too, under ``partial``, the spans each request the endpoint took
confirmed: a dump whose export stopped halfway resumes after them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pandas as pd

from ..whole_files import write_whole

LEDGER = "exports.json"
#: The ``to_otlp`` options that decide which spans a dump's export sends in which order:
#: a dump's export resumes after its confirmed spans only with the same ones.
OTLP_LAYOUT = ("service_name", "batch_spans", "batch_bytes", "include_text")


class Ledger:
    """``exports.json``: per target, the keys of what reached it, and of what reached it
    in part, how far it got (``partial``: key -> ``{"spans": n, "options": {...}}``)."""

    def __init__(self, root: Path) -> None:
        self.path = root / LEDGER
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            self.done: dict[str, list[str]] = {
                str(target): [str(key) for key in keys]
                for target, keys in data.get("targets", {}).items()}
            self.partial: dict[str, dict[str, dict[str, Any]]] = {
                str(target): {str(key): {"spans": int(progress["spans"]),
                                         "options": dict(progress["options"])}
                              for key, progress in keys.items()}
                for target, keys in data.get("partial", {}).items()}
        except FileNotFoundError:
            self.done, self.partial = {}, {}
        except (OSError, ValueError, AttributeError, KeyError, TypeError) as exc:
            raise ValueError(f"{self.path}: unreadable ({exc}); delete it to send "
                             "everything again") from exc

    def keys(self, target: str) -> set[str]:
        return set(self.done.get(target, ()))

    def add(self, target: str, keys: list[str]) -> None:
        self.done.setdefault(target, []).extend(keys)
        for key in keys:
            self.partial.get(target, {}).pop(key, None)
        self._write()

    def sent_part(self, target: str, key: str) -> dict[str, Any] | None:
        """How far ``key`` got to ``target`` (``spans``, ``options``), None if not begun."""
        return self.partial.get(target, {}).get(key)

    def add_part(self, target: str, key: str, spans: int, options: dict[str, Any]) -> None:
        """``key``'s first ``spans`` spans (sent with ``options``) reached ``target``."""
        self.partial.setdefault(target, {})[key] = {"spans": spans, "options": options}
        self._write()

    def _write(self) -> None:
        data: dict[str, Any] = {"targets": self.done}
        if any(self.partial.values()):
            data["partial"] = {target: keys for target, keys in self.partial.items() if keys}
        write_whole(self.path, json.dumps(data, indent=1), durable=True)


def send_new_dumps(root: str | Path, endpoint: str, **options: Any) -> list[Any]:
    """Send each converted dump of the dataset at ``root`` that has not reached
    ``endpoint`` yet (``options`` as for ``to_otlp``); one report per dump sent. A dump
    whose export stopped halfway sends only the spans the endpoint had not confirmed;
    OtlpExportError when its options then differ from those it was begun with."""
    from ..sources.dataset.layout import read_dump
    from ..sources.dataset.manifest import Manifest
    from .otlp import to_otlp

    root = Path(root)
    ledger = Ledger(root)
    target = f"otlp:{endpoint}"
    layout = {name: options.get(name) for name in OTLP_LAYOUT}
    reports = []
    for entry in Manifest.load(root, must_exist=True).converted():
        key = f"{entry['stem']}:{entry['blake2b']}"
        if key in ledger.keys(target):
            continue
        frames = read_dump(root, entry)
        if frames is not None:
            reports.append(to_otlp(
                frames, endpoint, skip_spans=_resume_at(ledger, target, key, layout),
                on_confirmed=lambda spans, key=key: ledger.add_part(target, key, spans,
                                                                     layout),
                **options))
        ledger.add(target, [key])
    return reports


def _resume_at(ledger: Ledger, target: str, key: str, layout: dict[str, Any]) -> int:
    """The spans of ``key`` that reached ``target`` before; OtlpExportError when they
    were sent with other options (which would send other spans, or in another order)."""
    from .otlp_transport import OtlpExportError

    part = ledger.sent_part(target, key)
    if part is None:
        return 0
    if part["options"] != layout:
        raise OtlpExportError(
            f"{ledger.path}: {key.rsplit(':', 1)[0]} was partly sent to {target} "
            f"({part['spans']} spans) with other options ({part['options']}, now "
            f"{layout}): send it with those, or delete its 'partial' entry to send it whole")
    return part["spans"]


def log_new_trends(root: str | Path, target: str, *, snapshots: bool = False) -> Any:
    """Log the trends of the dataset's rollouts that ``target`` has not logged yet; with
    ``snapshots`` (W&B), each one's HTML snapshot as an artifact. Returns the report.
    Each row goes into the ledger as soon as it has reached ``target``, so a rerun after
    a failure logs only the rows that had not."""
    from ..answers.trends import rollout_trends
    from .trend_log import log_trends

    root = Path(root).resolve()
    ledger = Ledger(root)
    trends = rollout_trends(root)
    return log_trends(trends, target, skip=ledger.keys(target), run_name=root.name,
                      run_id=_run_id(root),
                      snapshot=_snapshot_writer(root) if snapshots else None,
                      on_logged=lambda keys: ledger.add(target, keys))


def _run_id(root: Path) -> str:
    """A W&B run id of the dataset's own, so that every ``convert`` adds to one run."""
    return "stw-" + hashlib.blake2b(str(root).encode(), digest_size=8).hexdigest()


def _snapshot_writer(root: Path) -> Any:
    def write(row: pd.Series, folder: Path) -> Path | None:
        from ..sources.dataset.reading import open_dataset
        from ..view.page.snapshot import write_snapshot

        frames = open_dataset(root, rollouts=[int(row["rollout_id"])],
                              kinds=[str(row["dump_kind"])])
        name = f"{row['dump_kind']}-{int(row['rollout_id'])}.html"
        return write_snapshot(folder / name, frames, title=f"{row['dump_file']}")

    return write
