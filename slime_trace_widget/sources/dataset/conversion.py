"""Convert a run's dumps into the run dataset: on the local worker pool or on Ray.

Both engines run the same per-dump job (the guarded load and flatten of
``load_frames``, then ``layout.write_dump``) where the dump is, so only a small
report per dump reaches the driver, which keeps the manifest. Dumps are
converted only when new or changed, when a file of theirs in the dataset is
gone or damaged (:func:`damaged_file`), or when their rows carry another kind
than their path tells (converted before folders told it); one that is still being
written is left for the next run; one that fails is recorded with its error and
retried next run, and one that cannot be looked at (a link to nothing, a dump deleted
since the glob) is reported as failed, by the path given, while the others go on.
Each conversion writes under a stem of its own, never over the files
the manifest lists, and the files it replaces go only once it is recorded: a dump
converted again from the same content that fails keeps its earlier data, read as
before, while one whose content changed loses it (:meth:`Manifest.record` says why).
The dumps themselves are only ever read. A dump is known by its real path (links
resolved), so one file is one dump however it is named.

One convert at a time writes into a dataset folder (``lock``): a second one fails
at once with :class:`~.lock.ConvertBusy`. A convert that ends on an exception (Ctrl-C
included) removes the files of the conversions it started and did not record, and
each convert first removes what one cut short could not (``leftovers``): only the
files the manifest lists stay. While a convert runs, the folders also hold the files
of the conversions under way, which the manifest does not list yet.

Dumps that left their path: a converted dump whose file is gone keeps its data in
the dataset (the run's history), and each convert lists it in
``ConvertReport.missing``. When the same content (blake2b) is converted under a path
that exists, as after a rename, the entry of the gone path is dropped with its files
(``ConvertReport.renamed``), so no dump is read back twice. A renamed dump is
converted again under its new path, because its files name the dump (the
``dump_file`` column, the file stem): re-used files would keep its old name.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..dumps.errors import failure_line
from ..dumps.paths import PathLike, dump_kind, expand_paths
from ..dumps.pool import default_workers, expected_peak, new_job, run_jobs
from ..dumps.progress import progress_bar
from ..follow import SETTLE_SECONDS, being_written
from . import ENGINES
from .leftovers import remove_file, remove_stems, sweep
from .lock import exclusive_convert
from .manifest import Manifest


@dataclass
class ConvertReport:
    """What one convert run did, by dump path."""

    converted: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    in_progress: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    removed_files: int = 0
    #: Files an earlier convert cut short had left, which no manifest entry listed
    #: (``leftovers.sweep``), removed before this one began.
    leftovers: int = 0
    #: Converted dumps whose file is gone; their data stays in the dataset.
    missing: list[str] = field(default_factory=list)
    #: (gone path, path now holding the same content): the gone entry was dropped.
    renamed: list[tuple[str, str]] = field(default_factory=list)
    #: Unchanged dumps converted again because a file of theirs in the dataset was
    #: missing or damaged (also in ``converted`` or ``failed``).
    repaired: list[str] = field(default_factory=list)
    #: Dumps of ``failed`` converted again from the content they were converted from
    #: before (an engine-trace join, their kind, damaged files): their earlier data stays
    #: in the dataset, read as before, and the next convert retries them.
    kept: list[str] = field(default_factory=list)

    def summary(self) -> str:
        text = (f"{len(self.converted)} converted, {len(self.unchanged)} unchanged, "
                f"{len(self.in_progress)} still being written, {len(self.failed)} failed")
        if self.kept:
            text += f" (the earlier data of {len(self.kept)} kept)"
        if self.renamed:
            text += f", {len(self.renamed)} renamed"
        if self.repaired:
            text += f", {len(self.repaired)} with damaged dataset files converted again"
        if self.missing:
            text += f", {len(self.missing)} gone from disk (their data kept)"
        if self.leftovers:
            text += f", removed {self.leftovers} file(s) an interrupted convert left"
        return text


def convert(paths_or_globs: PathLike | Iterable[PathLike], out: str | Path, *,
            engine: str = "local", address: str | None = None, workers: int | None = None,
            progress: bool | None = None, settle_seconds: float = SETTLE_SECONDS,
            time_limit: float | None = None, memory_limit: int | None = None,
            engine_traces: PathLike | None = None, warn_failures: bool = True) -> ConvertReport:
    """Bring the run dataset at ``out`` up to date with the dumps given.

    A dump that fails is listed in ``report.failed``, retried by the next convert, and
    named in a warning unless ``warn_failures`` is False (for a caller that reports
    ``report.failed`` itself).

    ``engine="ray"`` runs each dump as a Ray task on the cluster at ``address``
    (default: a local Ray started for the job, with ``workers`` CPUs); the
    workers must see the dumps and ``out`` at the same paths. ``engine_traces``
    (a ``slime-trace-viewer collect`` folder, seen by the workers at the same path)
    joins each dump's engine requests into what is written.
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    root = Path(out).resolve()
    root.mkdir(parents=True, exist_ok=True)
    with exclusive_convert(root):  # from loading the manifest to its last save
        report = _convert_locked(paths_or_globs, root, engine=engine, address=address,
                                 workers=workers, progress=progress,
                                 settle_seconds=settle_seconds, time_limit=time_limit,
                                 memory_limit=memory_limit, engine_traces=engine_traces)
    if warn_failures:
        for path, reason in report.failed:
            warnings.warn(f"not converted {failure_line(path, reason)} (retried next run)",
                          RuntimeWarning, stacklevel=2)
    return report


def _convert_locked(paths_or_globs: PathLike | Iterable[PathLike], root: Path, *,
                    engine: str, address: str | None, workers: int | None,
                    progress: bool | None, settle_seconds: float,
                    time_limit: float | None, memory_limit: int | None,
                    engine_traces: PathLike | None) -> ConvertReport:
    """:func:`convert`, with the dataset at ``root`` held by this convert."""
    manifest = Manifest.load(root)
    report = ConvertReport(leftovers=sweep(root, manifest))
    _settle_linked_paths(manifest, root, report)
    run = _Conversions(manifest, root, report, engine_traces)
    for real, given in _dumps_by_real_path(paths_or_globs).items():
        run.take(given, real, settle_seconds)
    todo = list(run.stats)
    run.stems = dict(zip(todo, manifest.new_stems(todo), strict=True))
    if todo:
        limits = {"time_limit": time_limit, "memory_limit": memory_limit,
                  "engine_traces": None if engine_traces is None else
                  os.path.abspath(engine_traces)}
        stems = [run.stems[path] for path in todo]
        try:
            if engine == "local":
                convert_in_workers(todo, str(root), stems, on_done=run.done,
                                   workers=workers, progress=progress, **limits)
            else:
                _convert_on_ray(todo, str(root), stems, run.done, address, workers, limits)
        except BaseException:  # Ctrl-C included: the unrecorded conversions' files go
            remove_stems(root, run.unrecorded_stems())
            raise
    _settle_gone_dumps(manifest, root, report)
    manifest.save()
    return report


def _dumps_by_real_path(paths_or_globs: PathLike | Iterable[PathLike]) -> dict[str, str]:
    """The dumps the paths and globs name, by real path (links resolved), each with the
    path it was first given as: one file is one dump, however it is reached (a link to
    it, a linked folder)."""
    given_as: dict[str, str] = {}
    for given in expand_paths(paths_or_globs):
        given_as.setdefault(os.path.realpath(given), given)
    return given_as


def _unreadable_dump(given: str, real: str, error: OSError) -> str:
    """Why the dump given as ``given`` (at the real path ``real``) cannot be looked at:
    the path given, the system's reason, and where that leads elsewhere (a link), the
    file it leads to, which is the one missing."""
    reason = "no such file" if isinstance(error, FileNotFoundError) else (
        error.strerror or str(error))
    beyond = "" if os.path.abspath(given) == real else f" (it leads to {real})"
    return f"{given}: {reason}{beyond}"


class _Conversions:
    """One convert's dumps, in the driver: which it converts, each under a stem of its
    own (:meth:`Manifest.new_stems`), and each conversion's end noted in the manifest
    and the report as it comes."""

    def __init__(self, manifest: Manifest, root: Path, report: ConvertReport,
                 engine_traces: PathLike | None) -> None:
        self.manifest, self.root, self.report = manifest, root, report
        self.engine_traces = engine_traces
        #: The dumps to convert, with their stat at the scan.
        self.stats: dict[str, os.stat_result] = {}
        #: Those among them whose converted data is of the content they hold now.
        self.same_content: set[str] = set()
        self.stems: dict[str, str] = {}
        #: The dumps whose conversion's end was recorded (the manifest saved right after).
        self.recorded: set[str] = set()

    def take(self, given: str, path: str, settle_seconds: float) -> None:
        """Look at the dump given as ``given``, at the real path ``path``: unchanged,
        still being written, to convert (new, changed, its dataset files damaged, or its
        data wanting a new engine-trace join, another kind or a retry after a failure),
        or failed, by the path given, when it cannot be looked at (a link to nothing, a
        dump deleted since the glob): one such dump never stops the others."""
        manifest, report = self.manifest, self.report
        try:
            stat = os.stat(path)
            same_content = manifest.converted_from(path, stat)
            settling = being_written(path, stat, settle_seconds)
        except OSError as error:
            report.failed.append((given, _unreadable_dump(given, path, error)))
            return
        if same_content and manifest.unchanged(path, stat) and _same_engine_traces(
                manifest.dumps[path], self.engine_traces) and _same_kind(
                manifest.dumps[path], path):
            if _files_whole(self.root, manifest.dumps[path]):
                report.unchanged.append(path)
                return
            report.repaired.append(path)  # its dataset files are damaged or gone
        elif settling:
            report.in_progress.append(path)
            return
        self.stats[path] = stat
        if same_content:
            self.same_content.add(path)

    def unrecorded_stems(self) -> set[str]:
        """The stems of the conversions given out whose end was never recorded: no
        entry of a saved manifest lists their files."""
        return {stem for path, stem in self.stems.items() if path not in self.recorded}

    def done(self, path: str, verdict: dict[str, Any]) -> None:
        """Note the end of ``path``'s conversion (``verdict``). The manifest is saved
        before any file goes: the files of the entry a conversion replaces, then, when
        it failed, whatever it wrote under its own stem (no entry lists those)."""
        manifest, report = self.manifest, self.report
        stale = manifest.record(path, self.stats[path], self.stems[path], verdict,
                                same_content=path in self.same_content)
        if "ok" in verdict and self.engine_traces is not None:
            manifest.dumps[path]["engine_traces"] = _engine_files(
                manifest.dumps[path], self.engine_traces)
        # Recorded before the save: a stop that lands once the save has put the manifest
        # in place must not remove files it lists. One that lands before leaves this
        # conversion's files unlisted, for the next convert's sweep.
        self.recorded.add(path)
        manifest.save()
        for relative in stale:
            report.removed_files += _remove_inside(self.root, relative)
        if "ok" in verdict:
            report.converted.append(path)
            return
        report.removed_files += remove_stems(self.root, {self.stems[path]})
        report.failed.append((path, str(verdict.get("error"))))
        if manifest.dumps[path].get("status") == "ok":
            report.kept.append(path)


def _files_whole(root: Path, entry: dict[str, Any]) -> bool:
    """Whether every file the manifest lists for a converted dump looks whole
    (:func:`damaged_file`)."""
    return all(damaged_file(root / relative) is None for relative in entry.get("files", ()))


def damaged_file(path: Path) -> str | None:
    """Why a Parquet file of the dataset is not whole, or None when it looks whole: it is
    there, not empty, and its footer reads (the footer only: a cheap check that finds a
    file deleted, emptied or cut short)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        return f"{path}: no such file"
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    if not size:
        return f"{path}: empty file"
    try:
        pq.read_metadata(path)
    except (OSError, pa.ArrowException, ValueError) as exc:
        return f"{path}: {' '.join(str(exc).split())[:300]}"
    return None


def _settle_linked_paths(manifest: Manifest, root: Path, report: ConvertReport) -> None:
    """Key each converted dump by its real path (links resolved), as this convert names
    the dumps it is given: an entry made under a link to its file or through a linked
    folder moves to the file's real path, or is dropped with its files when the real
    path has an entry of its own (one file is one dump). Only an entry whose real file
    holds what was converted moves: a link that points at another file now leaves the
    entry, and the data of the file it was made from, as they are. An entry that moves
    under another file name is converted again when next given (its rows name the dump
    by the name it had)."""
    for path in sorted(manifest.dumps):
        real = os.path.realpath(path)
        if real == path or not _holds_now(manifest, path):
            continue
        entry = manifest.dumps.pop(path)
        if real in manifest.dumps:
            kept = set(manifest.dumps[real].get("files", ()))
            for stale in entry.get("files", ()):
                if stale not in kept:
                    report.removed_files += _remove_inside(root, stale)
            continue
        if os.path.basename(real) != os.path.basename(path):
            entry["size"] = None  # never unchanged: its next convert names it anew
        manifest.dumps[real] = entry


def _holds_now(manifest: Manifest, path: str) -> bool:
    """Whether the file at ``path`` holds what its entry was converted from; False when
    it cannot be looked at (gone, or unreadable since: the entry stays as it is, and
    the dumps given are converted all the same)."""
    try:
        return manifest.holds(path, os.stat(path))
    except OSError:
        return False


def _settle_gone_dumps(manifest: Manifest, root: Path, report: ConvertReport) -> None:
    """Drop each converted dump whose file is gone and whose content another converted
    dump that exists holds (a rename: never read twice); list the rest as missing."""
    present: dict[Any, str] = {}  # content hash -> an existing path converted from it
    gone: list[str] = []
    for path, entry in sorted(manifest.dumps.items()):
        if entry.get("status") != "ok":
            continue
        if os.path.exists(path):
            present.setdefault(entry.get("blake2b"), path)
        else:
            gone.append(path)
    for path in gone:
        digest = manifest.dumps[path].get("blake2b")
        now = present.get(digest) if digest else None
        if now is None:
            report.missing.append(path)
            continue
        kept = set(manifest.dumps[now].get("files", ()))
        for stale in manifest.dumps.pop(path).get("files", ()):
            if stale not in kept:
                report.removed_files += _remove_inside(root, stale)
        report.renamed.append((path, now))


def _engine_files(entry: dict[str, Any], engine_traces: PathLike) -> list[list]:
    """The engine-trace and engine-load files a converted dump's join read: those of its
    time window, and where its spans waited for requests the window lacked (its
    warnings tell), the trace files the join searched beyond it
    (:func:`..engine.window.spans_read`)."""
    from ..engine import load_store, store
    from ..engine.window import spans_read

    meta = entry.get("meta") or {}
    t0, t1 = meta.get("t0"), meta.get("t1")
    if t0 is None or t1 is None:
        return []
    window = [int(t * 1e9) for t in spans_read(t0, t1)]
    searched = [int(t * 1e9) for t in spans_read(t0, t1, meta.get("warnings") or {})]
    return (store.window_files(engine_traces, *searched)
            + load_store.window_files(engine_traces, *window))


def _same_engine_traces(entry: dict[str, Any], engine_traces: PathLike | None) -> bool:
    """Whether a converted dump needs no new join: no engine traces asked for, or the
    files its join read are the ones there are now (a collector keeps adding files; one
    beyond the window counts where the join searched there: it may list a request of a
    host whose clock is far off in ``engine_unmatched``)."""
    if engine_traces is None:
        return True
    return entry.get("engine_traces") == _engine_files(entry, engine_traces)


def _same_kind(entry: dict[str, Any], path: str) -> bool:
    """Whether a converted dump's rows carry the kind its path tells (:func:`dump_kind`);
    not so for a dump converted while only its file's name told it (slime's
    ``eval_3/data.pt``, written as train then), which is converted again."""
    return entry.get("kind") == dump_kind(path)


def _remove_inside(root: Path, relative: str | Path) -> int:
    """Delete a file of the dataset (never anything outside ``root``)."""
    target = (root / relative).resolve()
    return remove_file(target) if root in target.parents else 0


# --------------------------------------------------------------------------- Ray


def _convert_on_ray(paths: list[str], out: str, stems: list[str],
                    done: Callable[[str, dict], None], address: str | None,
                    workers: int | None, limits: dict[str, Any]) -> None:
    try:
        import ray
    except ImportError as exc:
        raise RuntimeError('engine="ray" needs Ray: pip install "slime-trace-widget[ray]"'
                           ) from exc
    started = not ray.is_initialized()
    if started:
        _start_ray(ray, address, workers or default_workers(paths))
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(convert_one)
        largest = largest_node_memory(ray.nodes())
        pending = {}
        for path, stem in zip(paths, stems, strict=True):
            try:
                size = os.path.getsize(path)
            except OSError as error:  # gone since the convert looked at it: fails alone
                done(path, {"error": _unreadable_dump(path, path, error)})
                continue
            memory = memory_request(size, largest)
            pending[task.options(memory=memory).remote(path, out, stem, limits)] = path
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                path = pending.pop(ref)
                try:
                    verdict = ray.get(ref)
                except Exception as exc:  # the task died: the dump is retried next run
                    verdict = {"error": f"{path}: the Ray task failed ({type(exc).__name__}: "
                                        f"{' '.join(str(exc).split())[:240]})"}
                done(path, verdict)
    finally:
        if started:
            ray.shutdown()


def largest_node_memory(nodes: list[dict[str, Any]]) -> int:
    """The most memory (bytes) any live node of a Ray cluster offers, as ``ray.nodes()``
    reports it; 0 when none reports any."""
    return max((int(node.get("Resources", {}).get("memory", 0)) for node in nodes
                if node.get("Alive", True)), default=0)


def memory_request(size: int, largest_node: int) -> int:
    """The memory a Ray task converting a dump of ``size`` bytes asks for: the worker's
    expected peak, but never more than the largest node offers (``largest_node``): Ray
    never schedules a task no node can hold, and the convert would wait for ever. The
    worker's own memory limit still guards the machine. 0 (ask for none) when no node
    offers memory."""
    return min(expected_peak(size), max(0, largest_node))


def _start_ray(ray: Any, address: str | None, cpus: int) -> None:
    """Join the cluster at ``address``, or start a local Ray with ``cpus`` CPUs. Ray
    gives a local node 30 s to start, which a busy machine can miss: two more tries."""
    for attempt in range(3):
        try:
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
            return
        except Exception:
            ray.shutdown()
            if address or attempt == 2:
                raise


def convert_one(path: str, out: str, stem: str, limits: dict[str, Any]) -> dict[str, Any]:
    """One dump's job where it runs (a Ray task): the local pool's guarded worker."""
    verdicts: list[dict] = []
    convert_in_workers([path], out, [stem], on_done=lambda _, verdict: verdicts.append(verdict),
                       workers=1, progress=False, **limits)
    return verdicts[0]


def convert_in_workers(paths: list[str], out: str, stems: list[str], *,
                       on_done: Callable[[str, dict], None], workers: int | None = None,
                       progress: bool | None = None, time_limit: float | None = None,
                       memory_limit: int | None = None, engine_traces: str | None = None
                       ) -> None:
    """Write each dump of ``paths`` into the run dataset at ``out`` (file names from
    ``stems``), each read, flattened and written in a worker process under the limits
    of :func:`load_frames`; ``on_done(path, verdict)`` as each ends, in this thread.
    A verdict is ``{"ok": True, "report": {...}}`` or ``{"error": "..."}``.
    ``engine_traces``: join the engine requests of that collector folder."""
    jobs = []
    for path, stem in zip(paths, stems, strict=True):
        try:
            jobs.append(new_job(path, "dataset", out, time_limit, memory_limit, stem=stem,
                                engine_traces=engine_traces))
        except OSError as error:  # gone since the convert looked at it: fails alone
            on_done(path, {"error": _unreadable_dump(path, path, error)})
    if not jobs:
        return
    with progress_bar([job.size for job in jobs], progress) as bar:
        run_jobs(jobs, workers or default_workers(paths), bar,
                 on_done=lambda job: on_done(job.name, job.verdict or {}))
