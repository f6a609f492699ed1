"""A run dataset out to other stacks, a little more on each ``convert``: the dumps not yet
sent to an OTLP endpoint, the rollouts whose trends a target has not logged yet.

What went where is kept in the dataset's ``exports.json`` (by target: the dumps' content
hashes, the trends rows' keys by content too, see :func:`trend_key`), written durably
as soon as each dump or
trends row (for MLflow, each batch of rows) has reached its target, so a failure halfway
leaves the rest for the next run, and nothing that arrived is sent again: also not when
its dump was renamed or copied since (the same bytes, the same spans), while a dump
rewritten with other content is new. Ledgers of earlier copies, whose keys named the
dump's stem (``stem:hash``, ``kind/rollout/file``), are read as well. A dump whose
OTLP export is under way has a journal of its requests by span id
(:mod:`.otlp_journal`, in ``otlp_journals/``, one file per endpoint and dump, appended
to, never rewritten): a dump whose export stopped halfway resumes with the spans that
did not arrive, and a request that may have arrived (no reply, or the process killed
while it was out) is not sent again. The journal goes once the dump is in
``exports.json``, and so does that of a dump changed on disk since (a new dump to the
ledger, sent whole). One export of a dataset to an endpoint at a time: it holds a lock
(``otlp_journals/<endpoint hash>.lock``) from before it reads the ledger to the end.
Exports to other targets run alongside: each write of ``exports.json`` holds the
dataset's ``exports.json.lock`` and adds its change to the file as it is then.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from ..file_locks import locked_file
from ..whole_files import write_whole

LEDGER = "exports.json"
#: The lock every write of the ledger holds, beside it.
LEDGER_LOCK = "exports.json.lock"
#: The folder of the journals of OTLP exports under way, in the dataset's folder.
JOURNALS = "otlp_journals"
#: The options of ``otlp_batches`` a ``partial`` ledger entry stored: its span order.
_OLD_LAYOUT = ("service_name", "batch_spans", "batch_bytes", "include_text")


class Ledger:
    """``exports.json``: per target, the keys of what reached it; and, as an earlier
    copy wrote it, ``partial``: per target, per key, how many spans (in the order of
    ``otlp_batches`` with the stored ``options``) reached it, kept until converted
    (:func:`_adopt_partial`).

    Exports to other targets (another endpoint, ``log_new_trends``) may write the file
    meanwhile: each write holds the dataset's :data:`LEDGER_LOCK` (blocking: writes are
    short), reads the file again under it and makes its one change to what is there,
    so no export's entries are written over by another's."""

    def __init__(self, root: Path) -> None:
        self.path = root / LEDGER
        self._lock = root / LEDGER_LOCK
        self.done, self.partial = _read_ledger(self.path)

    def keys(self, target: str) -> set[str]:
        return set(self.done.get(target, ()))

    def add(self, target: str, keys: list[str]) -> None:
        with self._fresh():
            done = self.done.setdefault(target, [])
            known = set(done)
            done.extend(key for key in dict.fromkeys(keys) if key not in known)

    def rename(self, target: str, names: dict[str, str]) -> None:
        """Write ``target``'s keys in ``names`` as the keys they map to (one entry for
        keys that meet)."""
        if names:
            with self._fresh():
                done = self.done.get(target, [])
                self.done[target] = list(dict.fromkeys(names.get(key, key) for key in done))

    def drop_partial(self, target: str) -> None:
        """Forget ``target``'s partial entries (their spans now in journals)."""
        if target in self.partial:
            with self._fresh():
                self.partial.pop(target, None)

    @contextmanager
    def _fresh(self) -> Iterator[None]:
        """Hold the ledger lock, read the file again, let the block change it, and
        write it whole, durably, before the lock goes."""
        with locked_file(self._lock, wait=True):
            self.done, self.partial = _read_ledger(self.path)
            yield
            data: dict[str, Any] = {"targets": self.done}
            if self.partial:
                data["partial"] = self.partial
            write_whole(self.path, json.dumps(data, indent=1), durable=True)


def _read_ledger(path: Path) -> tuple[dict[str, list[str]], dict[str, dict[str, Any]]]:
    """The ``targets`` and ``partial`` of the ledger at ``path`` (empty when there is
    none yet); ValueError naming it when it is unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        targets = data.get("targets", {}) if isinstance(data, dict) else None
        if not isinstance(targets, dict) or not all(
                isinstance(keys, list) and all(isinstance(key, str) for key in keys)
                for keys in targets.values()):
            raise ValueError("'targets' is not a list of keys per target")
        done = {str(t): list(keys) for t, keys in targets.items()}
        return done, _partial_entries(data.get("partial", {}))
    except FileNotFoundError:
        return {}, {}
    except (OSError, ValueError, RecursionError) as exc:
        raise ValueError(f"{path}: unreadable ({exc}); delete it to send "
                         "everything again") from exc


def _partial_entries(partial: Any) -> dict[str, dict[str, Any]]:
    """The ``partial`` entries an earlier copy wrote, checked; ValueError otherwise."""
    def fits(progress: Any) -> bool:
        return isinstance(progress, dict) and type(progress.get("spans")) is int and \
            progress["spans"] >= 0 and isinstance(progress.get("options"), dict) and \
            set(progress["options"]) <= set(_OLD_LAYOUT)

    if not isinstance(partial, dict) or not all(
            isinstance(keys, dict) and all(fits(progress) for progress in keys.values())
            for keys in partial.values()):
        raise ValueError("'partial' is not span counts and options per key per target")
    return partial


def send_new_dumps(root: str | Path, endpoint: str, **options: Any) -> list[Any]:
    """Send each converted dump of the dataset at ``root`` that has not reached
    ``endpoint`` yet (``options`` as for ``to_otlp``); one report per dump sent. A dump
    whose export stopped halfway sends only the spans that had not arrived (its
    report's ``unanswered_spans`` counts those left out because their request may
    have arrived).
    ValueError naming the file when ``exports.json`` or a journal is unreadable, and
    naming the dataset when another export of it to ``endpoint`` is under way."""
    from ..sources.dataset.manifest import Manifest

    root = Path(root)
    target = f"otlp:{endpoint}"
    # read before the lock, so no lock is made in a folder that is not a run dataset;
    # the lock is not the manifest's (a convert may rewrite it at any time, under its
    # own), so a second read under it would see nothing this one could not
    converted = Manifest.load(root, must_exist=True).converted()
    with _only_export(root, target, endpoint):
        return _send_new_dumps(root, target, endpoint, converted, options)


def export_progress(root: str | Path, endpoint: str) -> tuple[int, int]:
    """How many dumps the dataset at ``root`` holds converted, and how many of them its
    ``exports.json`` records as sent to ``endpoint``: what :func:`send_new_dumps` will
    find done. DumpError when ``root`` is no run dataset, ValueError naming the ledger
    when it is unreadable."""
    from ..sources.dataset.manifest import Manifest

    root = Path(root)
    converted = Manifest.load(root, must_exist=True).converted()
    done = _sent_hashes(Ledger(root).keys(f"otlp:{endpoint}"))
    return len(converted), sum(_key(entry) in done for entry in converted)


@contextmanager
def _only_export(root: Path, target: str, endpoint: str) -> Iterator[None]:
    """Hold the lock of the dataset's exports to ``target`` for the block; ValueError
    naming the dataset when another export to it holds that lock (two at once would
    each send every span)."""
    lock = root / JOURNALS / f"{_journal_folder(root, target).name}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    try:
        held = locked_file(lock)
    except BlockingIOError:
        raise ValueError(f"{root}: another export of this dataset to {endpoint} is "
                         "under way; try again when it is done") from None
    with held:
        yield


def _send_new_dumps(root: Path, target: str, endpoint: str,
                    converted: list[dict[str, Any]], options: dict[str, Any]) -> list[Any]:
    """:func:`send_new_dumps` of the ``converted`` manifest entries, under the lock: the
    ledger and journals read now (another export to ``target`` may have written them
    until the lock was taken)."""
    from ..sources.dataset.layout import read_dump
    from .otlp import to_otlp
    from .otlp_journal import SpanJournal

    ledger = Ledger(root)
    done = _sent_hashes(ledger.keys(target))
    entries = [entry for entry in converted if _key(entry) not in done]
    journals = _journal_folder(root, target)
    _drop_stale_journals(journals, {_journal_name(key) for entry in entries
                                    for key in (_key(entry), _old_key(entry))})
    _adopt_partial(root, ledger, target, entries, journals)
    reports = []
    for entry in entries:
        key = _key(entry)
        if key in _sent_hashes(ledger.keys(target)):  # the same bytes twice in the manifest
            continue
        journal, identity = _journal_of(journals, entry)
        frames = read_dump(root, entry)
        if frames is not None:
            reports.append(to_otlp(frames, endpoint,
                                   journal=SpanJournal(journal, f"{target}\n{identity}"),
                                   **options))
        ledger.add(target, [key])
        for name in {_journal_name(key), _journal_name(_old_key(entry))}:
            (journals / name).unlink(missing_ok=True)
    return reports


def _adopt_partial(root: Path, ledger: Ledger, target: str, entries: list[dict[str, Any]],
                   journals: Path) -> None:
    """Turn ``target``'s ``partial`` ledger entries (written by an earlier copy, which
    resumed by span count) into journals: a dump's first ``spans`` spans, in the order
    ``otlp_batches`` gives them with the stored options, marked taken; then forget the
    entries. An entry of a dump sent or changed since goes with nothing to convert."""
    from ..sources.dataset.layout import read_dump
    from .otlp_journal import SpanJournal
    from .otlp_spans import batch_layout, otlp_batches, span_ids

    progress = {_content_of(key): part for key, part in ledger.partial.get(target, {}).items()}
    for entry in entries:
        part = progress.get(_key(entry))
        frames = read_dump(root, entry) if part and part["spans"] else None
        if frames is None:
            continue
        taken: list[bytes] = []
        for batch in otlp_batches(frames, **batch_layout(**part["options"])):
            taken += span_ids(batch)
            if len(taken) >= part["spans"]:
                break
        journal = SpanJournal(journals / _journal_name(_key(entry)), f"{target}\n{_key(entry)}")
        try:
            journal.sending(taken[:part["spans"]])
            journal.taken()
        finally:
            journal.close()  # synced before the entry is forgotten
    ledger.drop_partial(target)


def _key(entry: dict[str, Any]) -> str:
    """A converted dump's key in the ledger: its content hash (a renamed or copied dump
    holds the same spans, with the same ids: it is not sent again)."""
    return str(entry["blake2b"])


def _old_key(entry: dict[str, Any]) -> str:
    """A converted dump's key as earlier copies wrote it: its stem and content hash."""
    return f"{entry['stem']}:{entry['blake2b']}"


def _content_of(key: str) -> str:
    """The content hash a ledger key names: the key itself, or what follows the stem in
    an earlier copy's ``stem:hash``."""
    return key.rpartition(":")[2]


def _sent_hashes(keys: set[str]) -> set[str]:
    """The content hashes of the dumps the ledger ``keys`` of a target record as sent."""
    return {_content_of(key) for key in keys}


def _journal_of(journals: Path, entry: dict[str, Any]) -> tuple[Path, str]:
    """The journal of ``entry``'s export and its identity: by its content hash, or, when
    an earlier copy began the export (a journal by its old key, none by the new), that
    one, so its spans that arrived are not sent again."""
    old = journals / _journal_name(_old_key(entry))
    if old.exists() and not (journals / _journal_name(_key(entry))).exists():
        return old, _old_key(entry)
    return journals / _journal_name(_key(entry)), _key(entry)


def _journal_folder(root: Path, target: str) -> Path:
    return root / JOURNALS / hashlib.blake2b(target.encode(), digest_size=8).hexdigest()


def _journal_name(key: str) -> str:
    return hashlib.blake2b(key.encode(), digest_size=12).hexdigest() + ".spans"


def _drop_stale_journals(folder: Path, wanted: set[str]) -> None:
    """Remove the journals in ``folder`` of dumps no longer waiting to be sent: sent
    whole, or changed on disk since (a new key, sent whole)."""
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        if path.name not in wanted:
            path.unlink(missing_ok=True)


def log_new_trends(root: str | Path, target: str, *, snapshots: bool = False) -> Any:
    """Log the trends of the dataset's rollouts that ``target`` has not logged yet; with
    ``snapshots`` (W&B), each one's HTML snapshot as an artifact. Returns the report.
    Each row goes into the ledger as soon as it has reached ``target``, so a rerun after
    a failure logs only the rows that had not. Rows are keyed by their dump's content
    (:func:`trend_key`); an earlier copy's keys by file name (``row_key``) of the dumps
    the dataset holds now are first written as these."""
    from ..answers.trends import rollout_trends
    from .trend_log import log_trends, row_key

    root = Path(root).resolve()
    ledger = Ledger(root)
    trends = rollout_trends(root)
    hashes = _label_hashes(root)

    def key(row: pd.Series) -> str:
        return trend_key(row, hashes)

    logged = ledger.keys(target)
    ledger.rename(target, {row_key(row): key(row) for _, row in trends.iterrows()
                           if pd.notna(row["rollout_id"]) and row_key(row) in logged
                           and row_key(row) != key(row)})
    return log_trends(trends, target, skip=ledger.keys(target), run_name=root.name,
                      run_id=_run_id(root),
                      snapshot=_snapshot_writer(root) if snapshots else None,
                      on_logged=lambda keys: ledger.add(target, keys), key=key)


def trend_key(row: pd.Series, hashes: dict[str, str]) -> str:
    """A trends row's key in the ledger: its kind, rollout id and its dump's content hash
    (``hashes``: by dump label, :func:`_label_hashes`), so a renamed dump is not logged
    again and a rewritten one is; by file name (``row_key``) for a dump not in
    ``hashes``."""
    from .trend_log import content_row_key, row_key

    content = hashes.get(str(row["dump_file"]))
    return row_key(row) if content is None else content_row_key(row, content)


def _label_hashes(root: Path) -> dict[str, str]:
    """The content hash of each converted dump of the dataset, by the label its trends
    rows carry as ``dump_file`` (:func:`~..sources.dumps.paths.dump_labels`)."""
    from ..sources.dataset.manifest import Manifest
    from ..sources.dumps.paths import dump_labels

    entries = Manifest.load(root, must_exist=True).converted()
    labels = dump_labels([entry["path"] for entry in entries])
    return {label: str(entry["blake2b"]) for label, entry in zip(labels, entries, strict=True)}


def _run_id(root: Path) -> str:
    """A W&B run id of the dataset's own, so that every ``convert`` adds to one run."""
    return "stw-" + hashlib.blake2b(str(root).encode(), digest_size=8).hexdigest()


def _snapshot_writer(root: Path) -> Any:
    def write(row: pd.Series, folder: Path) -> Path | None:
        from ..sources.dataset.reading import open_dataset
        from ..view.page.snapshot import write_snapshot

        frames = open_dataset(root, rollouts=[int(row["rollout_id"])],
                              kinds=[str(row["dump_kind"])], dumps=[str(row["dump_file"])])
        name = f"{row['dump_kind']}-{int(row['rollout_id'])}.html"
        return write_snapshot(folder / name, frames, title=f"{row['dump_file']}")

    return write
