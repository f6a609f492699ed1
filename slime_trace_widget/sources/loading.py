"""The caller's API of loading: paths in, frames or samples out, the file never unpickled here.

``load_frames`` sends each dump to a worker of the pool (:mod:`.dumps.pool`) and
reads back only the frames, as Arrow files checked by :mod:`.dumps.wire`; the
caller never unpickles a file it did not write and never holds token lists or
raw records. Several dumps load at once and are combined in path order; a dump
that fails is skipped with a warning and listed in ``frames.failures``. A run
dataset's folder opens through :mod:`.dataset.reading` instead. ``load_dump``
(raw samples) has a worker load the file first, under the same limits, and then
loads the same bytes here, when what the worker's load took fits in the memory
available (:data:`READ_MEMORY_SHARE`).
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from ..machine_memory import available_memory, memory_amount
from .dumps.errors import DumpError, failure_line, one_line
from .dumps.exit_cleanup import raise_if_exiting, scratch_folder
from .dumps.files import LoadedDump, load_dump_bytes, load_trusted, read_header
from .dumps.paths import PathLike, expand_paths
from .dumps.pool import (
    SPARE_FLAG,
    default_workers,
    new_job,
    run_jobs,
    start_worker,
)
from .dumps.progress import progress_bar

__all__ = ["load_dump", "load_dumps", "load_frames"]

#: A worker's tables are read into this process only while they take at most this
#: share of the memory available then: the worker's own limits bound what it may
#: build (gigabytes), and a small dump whose pickle shares one value among many rows
#: can make tables hundreds of times its size. Past it the dump is refused, named,
#: rather than the kernel running out of memory. ``load_dump`` loads a file here
#: only while what its worker's load took at its peak fits in the same share.
READ_MEMORY_SHARE = 0.5


def load_frames(paths_or_glob: PathLike | Iterable[PathLike], *, trusted: bool = False,
                workers: int | None = None, progress: bool | None = None,
                time_limit: float | None = None, memory_limit: int | None = None,
                rollouts: Iterable[int] | None = None, where: str | None = None,
                engine_traces: PathLike | Iterable[PathLike] | None = None,
                warn_failures: bool = True) -> Any:
    """Load one dump, a glob or a list of them into one :class:`TraceFrames`.

    A run dataset's folder (``slime-trace-viewer convert``) opens lazily instead:
    only the ``rollouts`` asked for (default all) and the samples for which the
    SQL condition ``where`` holds (see :func:`dataset.open_dataset`).

    Each dump is read and flattened in a worker process under ``time_limit``
    CPU seconds (default 10 s plus 1 s per MB) and ``memory_limit`` bytes of new
    memory (default 64 times the file size, at least 4 GiB); only its columns
    come back. ``workers`` dumps load at once (default: one per core, fewer when
    memory is short). A dump that fails is skipped with a warning (none when
    ``warn_failures`` is False, for a caller that reports ``frames.failures`` itself)
    and listed in ``frames.failures``; DumpError when every dump fails. ``trusted=True``
    unpickles here with torch's full unpickler, which runs code from the file.

    ``engine_traces`` (a ``slime-trace-viewer collect`` folder, or its files) adds
    the engines' own request traces: each request under the generation span that
    made it (:mod:`slime_trace_widget.sources.engine.join`); only the stored files that
    overlap the dumps' time are read.
    """
    frames = _load_frames(paths_or_glob, trusted=trusted, workers=workers, progress=progress,
                          time_limit=time_limit, memory_limit=memory_limit,
                          rollouts=rollouts, where=where, warn_failures=warn_failures)
    if engine_traces is None:
        return frames
    from .engine.window import with_engine_traces

    return with_engine_traces(frames, engine_traces)


def _load_frames(paths_or_glob: PathLike | Iterable[PathLike], *, trusted: bool,
                 workers: int | None, progress: bool | None, time_limit: float | None,
                 memory_limit: int | None, rollouts: Iterable[int] | None,
                 where: str | None, warn_failures: bool) -> Any:
    if isinstance(paths_or_glob, (str, os.PathLike)) and os.path.isdir(paths_or_glob):
        from .dataset.reading import open_dataset

        return open_dataset(paths_or_glob, rollouts=rollouts, where=where,
                            warn_failures=warn_failures)
    if rollouts is not None or where is not None:
        raise ValueError("rollouts= and where= select from a run dataset's folder; "
                         "for dumps, pass the paths you want")
    paths = expand_paths(paths_or_glob)
    # A dump that is empty, gone or not a file fails alone, as one that fails to load does.
    refused: dict[int, str] = {}
    for index, path in enumerate(paths):
        try:
            read_header(path)
        except DumpError as exc:
            refused[index] = str(exc)
    if len(refused) == len(paths):
        _raise_none_loaded(list(refused.values()))
    if not trusted:
        start_worker()  # its imports overlap the ones below
    import pyarrow as pa

    from ..frames.model import combine_frames

    if trusted:
        parts = _trusted_parts(paths, refused)
    else:
        parts = _worker_parts(paths, refused, workers, progress, time_limit, memory_limit)
    failures = [(paths[index], refused[index]) for index in sorted(refused)]
    if not parts:
        _raise_none_loaded([reason for _, reason in failures])
    if warn_failures:
        for name, reason in failures:
            warnings.warn(f"skipped {failure_line(name, reason)}", RuntimeWarning, stacklevel=3)
    frames = combine_frames(parts)
    frames.failures = failures
    del parts
    pa.default_memory_pool().release_unused()  # what reading and joining held, back to the system
    return frames


def _trusted_parts(paths: list[str], refused: dict[int, str]) -> list[Any]:
    """The frames of the dumps of ``paths`` not in ``refused``, unpickled here with
    torch's full unpickler, as one part (none when none loads); each that fails is
    added to ``refused`` with its reason, as a worker's failure is."""
    from ..frames.flatten import build_frames

    loaded = []
    for index, path in enumerate(paths):
        if index in refused:
            continue
        try:
            loaded.append(load_trusted(path))
        except DumpError as exc:
            refused[index] = str(exc)
    return [build_frames(loaded)] if loaded else []


def _worker_parts(paths: list[str], refused: dict[int, str], workers: int | None,
                  progress: bool | None, time_limit: float | None,
                  memory_limit: int | None) -> list[Any]:
    """The frames of each dump of ``paths`` not in ``refused`` that its worker loads, in
    path order; each that fails is added to ``refused`` with its reason. The workers'
    tables go through a scratch folder, removed when this returns or, should the
    process exit first (a load on a daemon thread), at exit."""
    from .dumps.wire import WireError, read_frames

    with scratch_folder() as scratch:
        jobs, indexes = [], []  # each job, and the index of its path
        # A core the other jobs leave idle: each job skims and builds a table there.
        # Else a job may get one later, when the pool has no other job to start.
        spare_core = len(paths) - len(refused) < (os.cpu_count() or 1)
        for index, path in enumerate(paths):
            if index in refused:
                continue
            out = os.path.join(scratch, str(index))
            os.mkdir(out)
            try:
                job = new_job(path, "frames", out, time_limit, memory_limit,
                              spare_core=spare_core,
                              spare_flag=None if spare_core else os.path.join(out, SPARE_FLAG))
            except OSError as exc:  # gone or changed since its header was read
                refused[index] = f"{path}: cannot be read ({one_line(exc.strerror or exc)})"
                continue
            jobs.append(job)
            indexes.append(index)
        read: dict[int, Any] = {}

        def read_part(job: Any) -> None:
            assert job.verdict is not None
            if "ok" in job.verdict:
                refusal = _too_large_to_read(job.request["out"])
                if refusal:
                    job.verdict = {"error": f"{job.name}: refused: {refusal}"}
                    return
                try:
                    read[id(job)] = read_frames(job.request["out"])
                except WireError as exc:
                    job.verdict = {"error": f"{job.name}: the worker's output was refused ({exc})"}

        # Each dump's frames are read as soon as its job ends, while other jobs still
        # run, and in a thread of their own: were this thread reading, a helper that
        # finished meanwhile would wait for its next job until the read ended.
        reads: list[Future] = []
        with ThreadPoolExecutor(max_workers=1) as reader, \
                progress_bar([job.size for job in jobs], progress) as bar:
            run_jobs(jobs, workers or default_workers([job.name for job in jobs]), bar,
                     on_done=lambda job: reads.append(reader.submit(read_part, job)))
        for done in reads:
            done.result()  # what a read raised, other than a refusal
        raise_if_exiting()  # a read refused because the exit hook removed the folder
        refused.update((index, str(job.verdict.get("error")))
                       for index, job in zip(indexes, jobs, strict=True)
                       if job.verdict is not None and "error" in job.verdict)
        return [read.pop(id(job)) for job in jobs if id(job) in read]


def _raise_none_loaded(reasons: list[str]) -> None:
    """DumpError for a call none of whose dumps loaded: the one reason, or all of them."""
    raise DumpError(reasons[0] if len(reasons) == 1 else
                    "no dump could be loaded: " + "; ".join(reasons))


def _too_large_to_read(folder: str) -> str | None:
    """Why the tables a worker wrote into ``folder`` are not read into this process
    (see :data:`READ_MEMORY_SHARE`), or None when they fit."""
    size = sum(entry.stat().st_size for entry in os.scandir(folder) if entry.is_file())
    return _past_share(size, "its frames would take {} in this process")


def _past_share(size: int, what: str) -> str | None:
    """Why ``size`` bytes are too many to take in this process (``what``, with ``{}``
    for the amount), or None while they fit in :data:`READ_MEMORY_SHARE` of the
    memory available (or nothing says how much that is)."""
    room = available_memory()
    if room is None or size <= READ_MEMORY_SHARE * room:
        return None
    return (f"{what.format(memory_amount(size))}, more than "
            f"{READ_MEMORY_SHARE:.0%} of the {memory_amount(room)} of memory available")


def load_dump(path: PathLike, *, trusted: bool = False, isolate: bool = True,
              time_limit: float | None = None, memory_limit: int | None = None) -> LoadedDump:
    """Load one slime dump into plain sample dicts, without running code from it.

    A worker process loads the file first under ``time_limit`` CPU seconds and
    ``memory_limit`` bytes (see :func:`load_frames`); only when it succeeds, and what
    its load took at its peak fits in half the memory available here (else
    DumpError), are the same bytes (checked by digest) loaded here, with real torch
    tensors. Pickled
    ``Sample`` objects and other unknown classes come back as dicts of their
    fields; refused globals are listed in ``blocked_globals``. ``isolate=False``
    skips the worker (for platforms that cannot start one): a hostile file can then
    freeze or exhaust this process. ``trusted=True`` uses plain ``torch.load``,
    which runs any code in the file.
    """
    name = os.fspath(path)
    read_header(name)
    if trusted:
        return load_trusted(name)
    if not isolate:
        with open(name, "rb") as handle:
            return load_dump_bytes(name, handle.read(), "torch")
    job = new_job(name, "check", None, time_limit, memory_limit)
    run_jobs([job], 1, None)
    assert job.verdict is not None
    if "error" in job.verdict:
        raise DumpError(str(job.verdict["error"]))
    peak = job.verdict.get("peak_bytes")
    refusal = _past_share(peak, "loading it took {} in the loader's worker") \
        if type(peak) is int else None
    if refusal:
        raise DumpError(f"{name}: refused: {refusal}")
    with open(name, "rb") as handle:
        data = handle.read()
    if hashlib.blake2b(data).hexdigest() != job.digest:
        raise DumpError(f"{name}: refused: the file changed while it was being loaded")
    return load_dump_bytes(name, data, "torch")


def load_dumps(paths_or_glob: PathLike | Iterable[PathLike], *, trusted: bool = False,
               isolate: bool = True, progress: bool | None = None,
               time_limit: float | None = None, memory_limit: int | None = None
               ) -> list[LoadedDump]:
    """:func:`load_dump` of every path or glob match, in order (natural order for globs),
    with a progress bar as :func:`load_frames` shows one."""
    paths = expand_paths(paths_or_glob)
    sizes = [os.path.getsize(p) if os.path.isfile(p) else 0 for p in paths]
    loaded = []
    with progress_bar(sizes, progress) as bar:
        for path, size in zip(paths, sizes, strict=True):
            loaded.append(load_dump(path, trusted=trusted, isolate=isolate,
                                    time_limit=time_limit, memory_limit=memory_limit))
            if bar is not None:
                bar.update(size)
    return loaded
