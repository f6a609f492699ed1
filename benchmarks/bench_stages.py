"""Benchmark: where the path from a dump to touched frames spends its time, stage by stage.

``load_frames`` then ``samples``, ``spans`` and ``events`` (what the compare tool's
``x_faster_touched`` times) is five stages, each waiting for the one before:

* helper: the loader's helper process starting (the real command, environment and
  flags) and importing what a frames job needs, until it answers a first job;
* read: the job reading the dump (``read_for_frames``, the skim forked as a job on a
  spare core does it);
* build: flattening it into tables (the span ends' and events' attribute tables in
  the fork a job starts) and writing them as Arrow files;
* wire: the caller reading those files back (``wire.read_frames``);
* views: the caller making the three pandas views.

Each stage runs in a fresh interpreter whose imports are done before the clock, as
the compare tool's processes are; read and build run in one process, as in a job.
The views are timed inside the whole path, after ``load_frames``: made alone in a
fresh process from the job's files, the 146 MB dump's spans view is mostly slower than
inside the path (the commit that chose this says by how much), so only there is its
figure the path's. The whole path is timed too, and, given slime's viewer
(``--slime-viewer``, the ``anchor_viewer.py`` that ``../shared/tools/slime_stub.sh``
writes), slime's ``_build_cache_data``. Then the budget: for ``--ratio`` times slime's
time, what is left for read and build once the other stages have had theirs. Each
figure is the best of ``--runs``, the stages alternating; take them on an idle machine.

    python benchmarks/bench_stages.py [--shapes 62mb_agentic] [--runs 5] \\
        [--slime-viewer SCRATCH/slime_anchor/anchor_viewer.py] [--ratio 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

#: A stage's processes still running after this long are killed, and the run fails.
CHILD_TIMEOUT = 600.0
STAGES = ("helper", "read", "build", "wire", "views")


def _child_figures(argv: list[str]) -> dict[str, float]:
    """The JSON figures a fresh interpreter running ``argv`` prints on its last line,
    once every process it started has ended too: a fork still freeing a big heap
    would otherwise take a core from the next stage."""
    process = subprocess.Popen([sys.executable, *argv], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=CHILD_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise SystemExit(f"{' '.join(argv[:3])} still ran after {CHILD_TIMEOUT:g} s") from None
    _wait_for_group(process.pid)
    lines = stdout.strip().splitlines()
    if process.returncode or not lines:
        tail = stderr.strip().splitlines()[-1:] or ["no output"]
        raise SystemExit(f"{' '.join(argv[:3])} failed ({process.returncode}): {tail[0]}")
    return json.loads(lines[-1])


def _wait_for_group(group: int) -> None:
    """Return once no process of the process group ``group`` is left (else kill them)."""
    deadline = time.monotonic() + CHILD_TIMEOUT
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)
    os.killpg(group, signal.SIGKILL)
    raise SystemExit(f"processes of group {group} still ran after {CHILD_TIMEOUT:g} s")


def _stage_child(mode: str, *args: str) -> dict[str, float]:
    return _child_figures([__file__, "--child", mode, *args])


def helper_seconds() -> float:
    """Seconds from starting the loader's helper, exactly as the pool starts it, until
    it answers a first job: one for a file that does not exist, which its forked child
    refuses as soon as it starts."""
    from slime_trace_widget.sources.dumps import pool

    missing = os.path.join(tempfile.mkdtemp(prefix="bench-stages-"), "missing.pt")
    request = pool.new_job(__file__, "frames", None, None, None).request
    request.update(path=missing, name=missing)
    command = [sys.executable, *pool._interpreter_flags(), "-c", pool._WORKER_COMMAND,
               pool._PACKAGE_PARENT]
    started = time.perf_counter()
    helper = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              env=pool._worker_environment())
    assert helper.stdin is not None and helper.stdout is not None
    helper.stdin.write(json.dumps(request).encode("ascii") + b"\n")
    helper.stdin.flush()
    answer = helper.stdout.readline()
    seconds = time.perf_counter() - started
    helper.stdin.close()
    helper.wait(timeout=CHILD_TIMEOUT)
    os.rmdir(os.path.dirname(missing))
    if b"no such file" not in answer:
        raise SystemExit(f"the helper answered {answer[:200]!r}, not that the file is missing")
    return seconds


# ----------------------------------------------------------------------- children


def _job_child(dump: str, out: str) -> None:
    """As a frames job: read the dump, build its tables, write them into ``out``."""
    from slime_trace_widget.sources.dumps import worker
    from slime_trace_widget.sources.dumps.arrow_files import write_tables
    from slime_trace_widget.sources.dumps.forked_attrs import ForkedAttrTables
    from slime_trace_widget.tables.build import build_tables, cyclic_gc_paused

    worker._prepare("frames")
    worker._use_the_system_allocator()
    worker._refuse_pandas()  # as in a job's child: pyarrow would import it to no end
    with cyclic_gc_paused():
        started = time.perf_counter()
        loaded = worker.read_for_frames(dump, dump, pipelined=True)
        read_done = time.perf_counter()
        tables = build_tables(loaded, ForkedAttrTables(out, final=True))
        write_tables(tables, out)
        built = time.perf_counter()
    print(json.dumps({"read": read_done - started, "build": built - read_done}), flush=True)


def _wire_child(out: str) -> None:
    """As the caller: read the job's files back."""
    import pandas  # noqa: F401  (the compare tool imports these before its clock)
    import pyarrow  # noqa: F401

    import slime_trace_widget  # noqa: F401
    from slime_trace_widget.sources.dumps.wire import read_frames

    started = time.perf_counter()
    read_frames(out)
    print(json.dumps({"wire": time.perf_counter() - started}), flush=True)


def _whole_child(dump: str) -> None:
    """The whole path as the compare tool times it, and within it the views."""
    import pandas  # noqa: F401
    import pyarrow  # noqa: F401

    import slime_trace_widget

    started = time.perf_counter()
    frames = slime_trace_widget.load_frames(dump, progress=False)
    figures = {}
    loaded = time.perf_counter()
    for view in ("samples", "spans", "events"):
        began = time.perf_counter()
        len(getattr(frames, view))
        figures[view] = time.perf_counter() - began
    ended = time.perf_counter()
    figures.update(views=ended - loaded, whole=ended - started)
    print(json.dumps(figures), flush=True)


def child(mode: str, args: list[str]) -> None:
    if mode == "job":
        _job_child(*args)
    elif mode == "wire":
        _wire_child(*args)
    elif mode == "whole":
        _whole_child(*args)
    elif mode == "slime":
        from bench_pipeline import child as pipeline_child

        pipeline_child("slime", args)
    else:
        raise SystemExit(f"unknown child mode {mode!r}")


# ----------------------------------------------------------------------- report


def measure(dump: Path, runs: int, viewer: str | None) -> dict[str, float]:
    """The best of ``runs`` of each stage, the whole path and slime's viewer."""
    best: dict[str, float] = {}

    def keep(figures: dict[str, float]) -> None:
        for name, seconds in figures.items():
            best[name] = min(seconds, best.get(name, seconds))

    for _ in range(runs):
        out = tempfile.mkdtemp(prefix="bench-stages-")
        try:
            keep({"helper": helper_seconds()})
            keep(_stage_child("job", str(dump), out))
            keep(_stage_child("wire", out))
        finally:
            shutil.rmtree(out, ignore_errors=True)
        keep(_stage_child("whole", str(dump)))
        if viewer:
            keep({"slime": _stage_child("slime", viewer, str(dump))["seconds"]})
    return best


def report(shape: str, dump: Path, best: dict[str, float], ratio: float) -> None:
    print(f"\n{shape} ({dump.name}):")
    for stage in STAGES:
        detail = (f"   (samples {best['samples']:.3f}, spans {best['spans']:.3f}, "
                  f"events {best['events']:.3f})" if stage == "views" else "")
        print(f"  {stage:<16} {best[stage]:7.3f} s{detail}")
    in_a_row = sum(best[stage] for stage in STAGES)
    print(f"  {'stages in a row':<16} {in_a_row:7.3f} s")
    print(f"  {'whole path':<16} {best['whole']:7.3f} s   (load_frames, views touched)")
    if "slime" not in best:
        return
    allowed = best["slime"] / ratio
    around = best["helper"] + best["wire"] + best["views"]
    print(f"  {'slime viewer':<16} {best['slime']:7.3f} s   "
          f"(ours {best['slime'] / best['whole']:.2f}x faster)")
    print(f"  for {ratio:g}x: {allowed:.3f} s in all; helper, wire and views take "
          f"{around:.3f} s, leaving {allowed - around:.3f} s for read and build "
          f"(now {best['read'] + best['build']:.3f} s)")


def main(argv: list[str] | None = None) -> None:
    from demo_dumps import SHAPES, demo_dump

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=["62mb_agentic"], choices=list(SHAPES),
                        help="demo dump shapes (default: 62mb_agentic)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--slime-viewer", default=os.environ.get("SLIME_VIEWER"),
                        help="slime's viewer (anchor_viewer.py of slime_stub.sh's folder)")
    parser.add_argument("--ratio", type=float, default=3.0,
                        help="the target, times faster than slime's viewer (default 3)")
    options = parser.parse_args(argv)
    load = os.getloadavg()[0]
    if load > 0.7:
        print(f"warning: load average {load:.1f}; these figures are not comparable "
              "until the machine is idle")
    subprocess.run([sys.executable, "-m", "compileall", "-q",
                    str(HERE.parent / "slime_trace_widget")], check=True)
    for shape in options.shapes:
        dump = demo_dump(shape)
        report(shape, dump, measure(dump, options.runs, options.slime_viewer), options.ratio)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:  # one stage, in the fresh interpreter measure() started
        child(sys.argv[2], sys.argv[3:])
    else:
        main()
