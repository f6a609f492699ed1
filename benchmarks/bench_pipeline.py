"""Benchmark: dump to frames on the shapes users bring, ours against slime's viewer.

For each shape of demo_dumps.SHAPES (62 MB agentic, 612 MB with token lists,
146 MB with ~1M records, and on request the 20,000-sample one) it prints, each
figure from a fresh interpreter whose imports are done before the clock starts
(the way ``../shared/tools/compare_with_slime.py`` measures "N x faster"):

* slime's viewer building its data from the dump (``_build_cache_data(path)``:
  torch.load and its span rebuild, no JSON writing): seconds and the peak RSS of
  its process;
* the floor of any reader that unpickles: Python's C unpickler on the dump's
  ``data.pkl`` with the garbage collector off;
* ours, ``load_frames(path)``: seconds, the caller's (kernel's) RSS growth over
  the load (VmHWM after minus VmRSS before), the largest RSS any one worker
  process reached and the tree's peak (summed; forked processes share pages, so
  this counts some twice), sampled from here every 20 ms; ours/floor and slime/ours;
* slime's whole CLI (``--no-serve --rebuild``, JSON written) against our CLI's
  first run (``python -m slime_trace_widget DUMP --no-serve``, fresh out dir).

Each measurement runs ``--runs`` times (default 3), alternating with the others
as the compare tool does; a time is the best of its runs, a memory figure the
largest. Then eight 62 MB dumps in one ``load_frames`` call against one call after
another, and a hash-bomb dump (a dict key whose hashing takes 2**60 steps) that
must end in a DumpError within the load's time limit. Last, the targets, met or
not. The package's bytecode is compiled first, as a wheel install leaves it (an
editable install under ``PYTHONDONTWRITEBYTECODE`` never caches any). Figures
only, no assertions. slime's viewer is not part of this project:
its path comes from ``--slime-viewer`` or ``$SLIME_VIEWER``.

    python benchmarks/bench_pipeline.py
    python benchmarks/bench_pipeline.py --shapes 62mb_agentic 146mb_1m
    SLIME_VIEWER=~/slime/tools/trace_timeline_viewer.py python benchmarks/bench_pipeline.py

slime's viewer imports slime's tracing module: ``slime_stub.sh`` (in ../shared/tools)
writes the viewer with a ``slimestub`` folder beside it, which goes on its path.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

OUT = Path(__file__).parent / "out"  # where demo_dumps keeps the dumps; temp dirs go there too
DEFAULT_VIEWER = "/work/scratch/slime/trace_timeline_viewer.py"
MANY = 8
BOMB_DEPTH = 60
BOMB_TIME_LIMIT = 5.0
#: A child still running after this long is killed (the bomb's must answer much sooner).
CHILD_TIMEOUT = 1800.0
BOMB_TIMEOUT = 120.0
SAMPLE_SECONDS = 0.02
PAGE = os.sysconf("SC_PAGE_SIZE")
MB = 1e6


# ----------------------------------------------------------------------- measuring


def _dumps() -> ModuleType:
    """demo_dumps, imported by the parent only: a child's imports belong to its figures."""
    import demo_dumps

    return demo_dumps


def _rss(pid: int) -> int:
    """Resident bytes of one process (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/statm") as statm:
            return int(statm.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as listing:
                kids.extend(int(kid) for kid in listing.read().split())
    except OSError:
        pass
    return kids


def tree_sizes(pid: int) -> list[int]:
    """RSS of ``pid`` (first) and of each of its descendants at this moment."""
    sizes, pending = [], [pid]
    while pending:
        current = pending.pop()
        sizes.append(_rss(current))
        pending.extend(_children(current))
    return sizes


@dataclass
class Run:
    """One child process: its wall time, the tree's peak RSS (summed) and the largest
    any one descendant reached, and what it printed."""

    seconds: float
    peak: int
    #: The largest RSS any one descendant process reached.
    process_peak: int
    returncode: int | None
    stdout: str
    stderr: str

    def result(self) -> dict:
        """The JSON line a ``--child`` run prints last."""
        lines = self.stdout.strip().splitlines()
        if self.returncode != 0 or not lines:
            tail = self.stderr.strip().splitlines()[-1:] or ["no output"]
            raise RuntimeError(f"child failed ({self.returncode}): {tail[0]}")
        return json.loads(lines[-1])


def run_sampled(argv: list[str], cwd: Path | None = None,
                timeout: float = CHILD_TIMEOUT) -> Run:
    """Run ``argv`` while a thread samples its process tree's RSS every 20 ms.

    The child gets its own session, so a timeout can kill it with everything it
    started.
    """
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    peak = process_peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak, process_peak
        while not done.is_set():
            sizes = tree_sizes(proc.pid)
            peak = max(peak, sum(sizes))
            process_peak = max(process_peak, *sizes[1:], 0)
            done.wait(SAMPLE_SECONDS)

    sampler = threading.Thread(target=sample, daemon=True)
    started = time.perf_counter()
    sampler.start()
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
        returncode: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        returncode = None
    seconds = time.perf_counter() - started
    done.set()
    sampler.join()
    return Run(seconds, peak, process_peak, returncode, stdout, stderr)


def run_child(mode: str, paths: list[Path], timeout: float = CHILD_TIMEOUT) -> Run:
    """This script's ``--child`` mode in a fresh interpreter."""
    return run_sampled([sys.executable, __file__, "--child", mode, *map(str, paths)],
                       timeout=timeout)


# ----------------------------------------------------------------------- children


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise LookupError(field)


def _machine_busy_seconds() -> float | None:
    """CPU seconds all of the machine's cores have spent busy since boot (``/proc/stat``;
    None elsewhere). Over one load on an idle machine: that load's CPU, its forks' and
    helpers' included, which counting the children this process waited for would miss."""
    try:
        with open("/proc/stat") as stat:
            ticks = [int(field) for field in stat.readline().split()[1:8]]
    except (OSError, ValueError):
        return None
    # user, nice, system, then irq and softirq; not idle, iowait, nor a hypervisor's steal
    busy = sum(ticks[0:3]) + ticks[5] + ticks[6]
    return busy / os.sysconf("SC_CLK_TCK")


def child(mode: str, paths: list[str]) -> None:
    """Child process: import, then load in ``mode``; print seconds and RSS growth as JSON."""
    if mode == "slime":
        _slime_child(*paths)
        return
    if mode == "floor":
        _floor_child(paths[0])
        return
    import pandas  # noqa: F401  (imports before the clock, as for slime's viewer)
    import pyarrow  # noqa: F401

    from slime_trace_widget import DumpError, load_frames

    started = time.perf_counter()
    busy_before = _machine_busy_seconds()

    before = _status_bytes("VmRSS")
    figures: dict[str, object] = {}
    # span_core: the frames as loaded. ``.spans`` would add the lazy attribute dicts
    # and columns, which a user pays for on first access, not on the path to frames.
    # One dump's frames are dropped inside the clock, as slime's child drops its result.
    # The two ways of loading 8 dumps keep theirs past it: freeing 8 dumps' frames
    # takes 0.15 s, and were only one side to pay it, the ratio would measure that.
    if mode == "one":
        figures["spans"] = len(load_frames(paths[0]).span_core)
    elif mode == "many":
        frames = load_frames(paths)
        figures["spans"] = len(frames.span_core)
    elif mode == "sequential":
        frames = [load_frames(path) for path in paths]
        figures["spans"] = sum(len(part.span_core) for part in frames)
    elif mode == "bomb":
        figures["outcome"] = _load_bomb(paths[0], load_frames, DumpError)
    else:
        raise SystemExit(f"unknown child mode {mode!r}")
    figures["seconds"] = time.perf_counter() - started
    busy_after = _machine_busy_seconds()
    if busy_before is not None and busy_after is not None:
        figures["busy"] = busy_after - busy_before
    figures["growth"] = _status_bytes("VmHWM") - before
    if mode == "many":
        figures["workers"] = _pool_size(paths)
    print(json.dumps(figures), flush=True)


def _slime_child(viewer: str, dump: str) -> None:
    """slime's ``_build_cache_data(dump)``, its imports (torch among them) done first."""
    import importlib.util

    sys.path.insert(0, str(Path(viewer).parent / "slimestub"))
    spec = importlib.util.spec_from_file_location("slime_viewer", viewer)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["slime_viewer"] = module
    spec.loader.exec_module(module)
    import torch  # noqa: F401

    started = time.perf_counter()
    module._build_cache_data(Path(dump))
    print(json.dumps({"seconds": time.perf_counter() - started}), flush=True)


def _floor_child(dump: str) -> None:
    """Python's C unpickler on the dump's data.pkl, garbage collector off: the floor."""
    import gc
    import io
    import pickle

    class Plain(pickle.Unpickler):
        def persistent_load(self, pid: object) -> None:
            return None

    started = time.perf_counter()
    with zipfile.ZipFile(dump) as archive:
        data = archive.read(next(n for n in archive.namelist() if n.endswith("data.pkl")))
    gc.disable()
    Plain(io.BytesIO(data)).load()
    print(json.dumps({"seconds": time.perf_counter() - started}), flush=True)


def _pool_size(paths: list[str]) -> int | None:
    """Workers the loader uses for ``paths`` (the CPU count before it chose its own)."""
    try:
        from slime_trace_widget.sources.dumps import default_workers
    except ImportError:
        return os.cpu_count()
    return default_workers(paths)


def _load_bomb(path: str, load_frames: Callable[..., object], error: type[Exception]) -> str:
    """The outcome of loading the bomb, with the 5 s time limit where the loader takes one."""
    options = ({"time_limit": BOMB_TIME_LIMIT}
               if "time_limit" in inspect.signature(load_frames).parameters else {})
    try:
        load_frames(path, **options)
    except error as exc:
        return f"DumpError: {(str(exc).splitlines() or [''])[0][:120]}"
    except Exception as exc:
        return f"{type(exc).__name__} (not DumpError): {str(exc)[:120]}"
    return "loaded without an error"


# ----------------------------------------------------------------------- inputs


def _pickle_text(text: str) -> bytes:
    data = text.encode()
    return b"X" + struct.pack("<I", len(data)) + data  # BINUNICODE


def hash_bomb_pickle(depth: int = BOMB_DEPTH) -> bytes:
    """``{"rollout_id": 0, "samples": [{key: 1}]}``, ``key`` nested ``(t, t)`` ``depth`` deep.

    The memo makes both halves of each level one object, so the pickle is a few
    hundred bytes, while hashing ``key`` to store it visits 2**depth leaves.
    """
    ops = [b"\x80\x02", b"}", _pickle_text("rollout_id"), b"K\x00", b"s",  # PROTO 2, dict
           _pickle_text("samples"), b"]", b"}", b"N"]  # list, sample dict, None
    for level in range(depth):
        memo = struct.pack("<I", level)
        ops += [b"r" + memo, b"j" + memo, b"\x86"]  # LONG_BINPUT, LONG_BINGET, TUPLE2
    ops += [b"K\x01", b"s", b"a", b"s", b"."]  # the key's value, SETITEM, APPEND, SETITEM
    return b"".join(ops)


def write_hash_bomb(path: Path) -> Path:
    """The bomb in torch's zip layout, as ``torch.save`` would lay out a dump."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", hash_bomb_pickle())
        archive.writestr("archive/version", "3\n")
        archive.writestr("archive/byteorder", "little")
    return path


def _place(source: Path, folder: Path, name: str) -> Path:
    """``source`` under ``folder/name``: a hard link when possible, else a copy.

    Not a symlink: slime's viewer resolves links and would write its cache beside
    the original.
    """
    target = folder / name
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)
    return target


# ----------------------------------------------------------------------- reports


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    return numerator / denominator if numerator and denominator else None


def _fmt(value: float | None, spec: str, unit: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{unit}"


def report_viewer(viewer: Path | None, dump: Path) -> Run | None:
    """slime's viewer on a private copy of ``dump`` (it writes its cache beside it)."""
    if viewer is None:
        return None
    with tempfile.TemporaryDirectory(dir=OUT) as folder:
        copy = _place(dump, Path(folder), dump.name)
        run = run_sampled([sys.executable, str(viewer), str(copy), "--no-serve", "--rebuild"],
                          cwd=Path(folder))
    if run.returncode != 0:
        print(f"  slime viewer failed ({run.returncode}): {run.stderr.strip()[-300:]}")
        return None
    return run


def _shape_round(viewer: Path | None, dump: Path) -> dict[str, Run | None]:
    """One run of each measurement of a shape, in the same order every round."""
    slime = run_child("slime", [viewer, dump]) if viewer else None
    floor = run_child("floor", [dump])
    ours = run_child("one", [dump])
    slime_cli = report_viewer(viewer, dump)
    with tempfile.TemporaryDirectory(dir=OUT) as out_dir:
        cli = run_sampled([sys.executable, "-m", "slime_trace_widget", str(dump), "--no-serve",
                           "--out-dir", out_dir])
    return {"slime": slime, "floor": floor, "ours": ours, "slime_cli": slime_cli, "cli": cli}


def _best(values: list[float]) -> float | None:
    return min(values) if values else None


def report_shape(shape: str, viewer: Path | None, results: dict, runs: int) -> None:
    """slime's viewer, the floor, our load and both CLIs on one shape, ``runs`` rounds
    alternating: times are the best of the rounds, memory the largest."""
    dumps = _dumps()
    dump = dumps.demo_dump(shape)
    print(f"\n== {shape}: {dump.name}  {dump.stat().st_size / MB:.1f} MB  "
          f"{dumps.SHAPES[shape][0]:,} samples ==")
    if viewer is None:
        print("  slime viewer not found: skipped")
    rounds = [_shape_round(viewer, dump) for _ in range(runs)]
    slimes = [r["slime"] for r in rounds if r["slime"] is not None]
    slime_s = _best([run.result()["seconds"] for run in slimes])
    floor_s = min(r["floor"].result()["seconds"] for r in rounds)
    ours = [r["ours"] for r in rounds]
    figures = [run.result() for run in ours]
    ours_s = min(f["seconds"] for f in figures)
    growth = max(f["growth"] for f in figures)
    process_peak = max(run.process_peak for run in ours)
    tree_peak = max(run.peak for run in ours)
    slime_cli_s = _best([r["slime_cli"].seconds for r in rounds if r["slime_cli"] is not None])
    clis = [r["cli"] for r in rounds]
    cli_s = _best([run.seconds for run in clis if run.returncode == 0])
    failed = [run.returncode for run in clis if run.returncode != 0]
    print(f"  best of {runs} alternating runs; memory: the largest of them")
    print(f"  {'':34}{'s':>8}{'kernel +MB':>12}{'worker MB':>11}{'all MB':>8}")
    print(f"  {'slime, _build_cache_data':34}{_fmt(slime_s, '.2f'):>8}{'-':>12}{'-':>11}"
          f"{_fmt(max(run.peak for run in slimes) / MB if slimes else None, '.0f'):>8}")
    print(f"  {'floor: C unpickler, gc off':34}{floor_s:8.2f}")
    print(f"  {'ours, load_frames':34}{ours_s:8.2f}{growth / MB:12.0f}"
          f"{process_peak / MB:11.0f}{tree_peak / MB:8.0f}"
          f"   ({figures[0]['spans']:,} spans)")
    speed, of_floor = _ratio(slime_s, ours_s), ours_s / floor_s
    print(f"  ours/floor {of_floor:.2f}x   slime/ours {_fmt(speed, '.2f', 'x')}")
    cli_note = f"   (failed: exit {failed})" if failed else ""
    cli_peak = max(run.peak for run in clis)
    print(f"  CLIs, whole process: slime {_fmt(slime_cli_s, '.2f', ' s')}, ours first run "
          f"{_fmt(cli_s, '.2f', ' s')} (peak {cli_peak / MB:.0f} MB){cli_note}, slime/ours "
          f"{_fmt(_ratio(slime_cli_s, cli_s), '.2f', 'x')}")
    results[shape] = {"speed": speed, "of_floor": of_floor, "growth": growth,
                      "peak": tree_peak, "worker": process_peak,
                      "cli_speed": None if failed else _ratio(slime_cli_s, cli_s)}


def report_many(results: dict, runs: int) -> None:
    """Eight dumps in one call against one call after another, in one fresh interpreter
    each, ``runs`` rounds alternating: the best time of each."""
    dumps = [_dumps().demo_dump("62mb_agentic", seed=7 + k, rollout_id=k) for k in range(MANY)]
    print(f"\n== {MANY} dumps of the 62mb_agentic shape "
          f"({sum(p.stat().st_size for p in dumps) / MB:.0f} MB) ==")
    with tempfile.TemporaryDirectory(dir=OUT) as folder:
        paths = [_place(dump, Path(folder), f"rollout_{k}.pt") for k, dump in enumerate(dumps)]
        rounds = [(run_child("many", paths), run_child("sequential", paths))
                  for _ in range(runs)]
    print(f"  best of {runs} alternating runs; memory: the largest of them")
    print(f"  {'':34}{'wall s':>9}{'caller +MB':>12}{'tree peak MB':>14}{'each run s':>14}")
    best = []
    for label, side in (("load_frames(8 paths)", 0), ("[load_frames(p) for p in paths]", 1)):
        side_runs = [one_round[side] for one_round in rounds]
        figures = [run.result() for run in side_runs]
        seconds = [f["seconds"] for f in figures]
        best.append(min(figures, key=lambda f: f["seconds"]))
        print(f"  {label:34}{min(seconds):9.2f}{max(f['growth'] for f in figures) / MB:12.0f}"
              f"{max(run.peak for run in side_runs) / MB:14.0f}   "
              f"{' '.join(f'{s:.2f}' for s in seconds)}   ({figures[0]['spans']:,} spans)")
    call, one_by_one = best
    speedup = one_by_one["seconds"] / call["seconds"]
    print(f"  speedup {speedup:.2f}x   pool size {rounds[0][0].result()['workers']}")
    _report_cores(call, one_by_one)
    results["many"] = speedup


def _report_cores(call: dict, one_by_one: dict) -> None:
    """The machine's busy CPU over each side's best run, and the speedup the call would
    have were that CPU spread evenly over every core: one call runs the dumps' jobs side
    by side, while one load uses a second core only for its forks, so the ratio is
    bounded by how much CPU the call spends against how long one load after another
    waits."""
    if "busy" not in call or "busy" not in one_by_one:
        return
    cores = os.cpu_count() or 1
    bound = one_by_one["seconds"] / (call["busy"] / cores)
    print(f"  machine CPU over the best runs: one call {call['busy']:.1f} s "
          f"({call['busy'] / call['seconds']:.2f} cores busy), one by one "
          f"{one_by_one['busy']:.1f} s ({one_by_one['busy'] / one_by_one['seconds']:.2f} cores); "
          f"the call's CPU on all {cores} cores would give {bound:.2f}x at most")


def report_bomb(results: dict) -> None:
    """Time the hash bomb's refusal."""
    with tempfile.TemporaryDirectory(dir=OUT) as folder:
        bomb = write_hash_bomb(Path(folder) / "rollout_0.pt")
        print(f"\n== hash bomb: a {BOMB_DEPTH}-level tuple key, {bomb.stat().st_size} bytes ==")
        run = run_child("bomb", [bomb], timeout=BOMB_TIMEOUT)
    if run.returncode is None:
        print(f"  no answer within {BOMB_TIMEOUT:.0f} s: killed")
        results["bomb"] = None
        return
    figures = run.result()
    print(f"  {figures['outcome']}")
    print(f"  {figures['seconds']:.2f} s   caller +{figures['growth'] / MB:.0f} MB   "
          f"tree peak {run.peak / MB:.0f} MB")
    results["bomb"] = figures


def _verdict(ok: bool | None) -> str:
    return "not measured" if ok is None else "met" if ok else "not met"


def _at_least(value: float | None, target: float) -> bool | None:
    return None if value is None else value >= target


def summarize(results: dict) -> None:
    """Each target of the issue with its figure: met, not met, or not measured."""
    print("\n== targets ==")
    rows = []
    trace_heavy = results.get("146mb_1m")
    if trace_heavy:
        rows.append(("146 MB: ours <= 1.5x the floor", trace_heavy["of_floor"] <= 1.5,
                     f"{trace_heavy['of_floor']:.2f}x"))
        rows.append(("146 MB: >= 3x faster than slime", _at_least(trace_heavy["speed"], 3.0),
                     _fmt(trace_heavy["speed"], ".2f", "x")))
    tokens = results.get("612mb_tokens")
    if tokens:
        rows.append(("612 MB: >= 3x faster than slime", _at_least(tokens["speed"], 3.0),
                     _fmt(tokens["speed"], ".2f", "x")))
        rows.append(("612 MB: every process under 1.5 GB",
                     max(tokens["growth"], tokens["worker"]) < 1500 * MB,
                     f"kernel +{tokens['growth'] / MB:.0f} MB, largest worker process "
                     f"{tokens['worker'] / MB:.0f} MB"))
    agentic = results.get("62mb_agentic")
    if agentic:
        rows.append(("62 MB: >= 2.5x faster than slime", _at_least(agentic["speed"], 2.5),
                     _fmt(agentic["speed"], ".2f", "x")))
        rows.append(("62 MB: CLI first run >= 3x faster than slime's CLI",
                     _at_least(agentic["cli_speed"], 3.0), _fmt(agentic["cli_speed"], ".2f", "x")))
    big = results.get("20k_samples")
    if big:
        rows.append(("20k samples: path to frames within 2x the floor", big["of_floor"] <= 2.0,
                     f"{big['of_floor']:.2f}x (the drawn widget: bench_render.py)"))
    if "many" in results:
        rows.append((f"{MANY}x62 MB: one call >= 1.6x faster than one by one",
                     results["many"] >= 1.6, f"{results['many']:.2f}x"))
    if "bomb" in results:
        bomb = results["bomb"]
        ok = bomb is not None and bomb["outcome"].startswith("DumpError") \
            and bomb["growth"] < 512 * MB
        figure = ("killed" if bomb is None
                  else f"{bomb['outcome'].split(':')[0]}, +{bomb['growth'] / MB:.0f} MB, "
                       f"{bomb['seconds']:.1f} s")
        rows.append(("hash bomb: DumpError, growth < 512 MB", ok, figure))
    for label, ok, figure in rows:
        print(f"  {label:55} {_verdict(ok):>12}   {figure}")


def _attempt(part: Callable[[], None]) -> None:
    """Run one measurement; a failing child is reported and the others still run."""
    try:
        part()
    except RuntimeError as exc:
        print(f"  failed: {exc}")


def _viewer(path: str) -> Path | None:
    viewer = Path(path).expanduser()
    return viewer if viewer.is_file() else None


def _compiled_bytecode() -> str:
    """Compile the package's modules to bytecode, as installing it from a wheel does.

    An editable install has none, and where ``PYTHONDONTWRITEBYTECODE`` is set (as
    in some sandboxes) none is ever cached: every fresh process (each CLI run, each
    loader worker) would then compile every module it imports, 0.1 s of a 3 s CLI
    run, a cost no installed copy pays."""
    import compileall

    import slime_trace_widget

    package = Path(slime_trace_widget.__file__).parent
    compiled = compileall.compile_dir(str(package), quiet=1)
    return (f"bytecode of {package} compiled, as a wheel install leaves it" if compiled
            else f"bytecode of {package} could not be compiled: CLI and first loads pay for it")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", help="keys of demo_dumps.SHAPES (default: all)")
    parser.add_argument("--slime-viewer", default=os.environ.get("SLIME_VIEWER", DEFAULT_VIEWER),
                        help="slime's tools/trace_timeline_viewer.py (default: $SLIME_VIEWER, "
                             f"else {DEFAULT_VIEWER})")
    parser.add_argument("--runs", type=int, default=3,
                        help="alternating rounds per measurement; the best time counts "
                             "(default 3)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("paths", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.paths)
        return
    shapes = args.shapes or [shape for shape in _dumps().SHAPES if shape != "20k_samples"]
    unknown = set(shapes) - set(_dumps().SHAPES)
    if unknown:
        parser.error(f"unknown shapes: {', '.join(sorted(unknown))}")
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} (timings assume an "
          "otherwise idle machine)")
    print(_compiled_bytecode())
    viewer = _viewer(args.slime_viewer)
    if viewer is None:
        print(f"slime viewer not found: skipped ({args.slime_viewer})")
    OUT.mkdir(parents=True, exist_ok=True)
    results: dict = {}
    runs = max(1, args.runs)
    for shape in shapes:
        _attempt(functools.partial(report_shape, shape, viewer, results, runs))
    _attempt(functools.partial(report_many, results, runs))
    _attempt(functools.partial(report_bomb, results))
    summarize(results)


if __name__ == "__main__":
    main()
