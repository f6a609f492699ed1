"""``slime-trace-viewer [view] DUMPS``: dumps to an offline HTML timeline, served on
localhost.

Compatible with the workflow of slime's ``tools/trace_timeline_viewer.py``:
``slime-trace-viewer rollout_0.pt`` writes ``rollout_0.trace_timeline_cache.stw`` (see
``cache``) and ``rollout_0.trace_timeline_viewer.html`` beside the dump (or in
``--out-dir``), then serves that page, and nothing else of its folder, on 127.0.0.1.
Files are written with the user's umask. Several dumps or a glob make one combined
view; ``--follow DIR`` serves a page that grows with DIR's dumps (``follow``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ..sources.dumps.paths import expand_paths
from ..view.page.htmlpage import page
from ..whole_files import write_whole
from .cache import CACHE_SUFFIX, fresh_cache, source_note
from .errors import CliError
from .files import HTML_SUFFIX
from .follow import follow
from .load import load
from .otlp_options import add_otlp_arguments, send_otlp
from .server import serve

if TYPE_CHECKING:
    from ..frames.model import TraceFrames

NAME = "view"
SUMMARY = "dumps to an offline HTML timeline, served on this machine (the default)"
DESCRIPTION = "Turn slime rollout dumps into an offline HTML timeline and serve it."
#: What ``--demo`` writes into ``--out-dir``.
DEMO_DUMP = "demo_rollout.pt"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dumps", nargs="*", help="dump files or globs (rollout_*.pt)")
    parser.add_argument("--demo", action="store_true",
                        help=f"simulate a rollout, write {DEMO_DUMP} and open it")
    parser.add_argument("--demo-samples", type=int, default=256)
    parser.add_argument("--out-dir", help="where to write the cache and page "
                                          "(default: beside the first dump)")
    parser.add_argument("--rebuild", action="store_true", help="ignore an existing cache")
    parser.add_argument("--no-serve", action="store_true", help="only write the files")
    parser.add_argument("--host", default="127.0.0.1",
                        help="interface to serve on (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=9999)
    parser.add_argument("--perfetto", action="store_true",
                        help="also write <name>.perfetto.json for ui.perfetto.dev")
    parser.add_argument("--parquet", action="store_true",
                        help="also write a <name>.parquet/ folder (hive layout)")
    parser.add_argument("--trusted", action="store_true",
                        help="unpickle with torch's full unpickler (runs code from the file)")
    parser.add_argument("--engine-traces", metavar="DIR",
                        help="join the engines' request traces kept by "
                             "'slime-trace-viewer collect DIR'")
    add_otlp_arguments(parser)
    parser.add_argument("--follow", metavar="DIR",
                        help="serve DIR's dumps and add each new one as slime writes it")
    parser.add_argument("--pattern", default="*.pt", help="dump files to follow (*.pt)")
    parser.add_argument("--interval", type=float, help="seconds between looks (5)")


def run(args: argparse.Namespace) -> int:
    if args.follow:
        return follow(args)
    if args.demo:
        inputs = [demo_dump(Path(args.out_dir or "."), args.demo_samples)]
    elif args.dumps:
        inputs = [Path(p) for p in expand_paths(args.dumps)]
    else:
        raise CliError("give a dump (rollout_0.pt), a glob, or --demo")
    for path in inputs:
        if not path.is_file():
            raise CliError(f"{path}: no such file")
    out_dir = Path(args.out_dir) if args.out_dir else inputs[0].parent
    out_dir.mkdir(parents=True, exist_ok=True)
    name = stem(inputs)
    cache = out_dir / f"{name}{CACHE_SUFFIX}"
    html_path = out_dir / f"{name}{HTML_SUFFIX}"

    frames = None
    source = source_note(inputs, args.engine_traces)
    blocks = None if args.rebuild else fresh_cache(cache, inputs, source)
    if blocks is None:
        frames = load(inputs, args.trusted, args.engine_traces)
        from ..view.page.snapshot import data_blocks  # only when building: pandas
        from ..view.payload import encode

        view = encode(frames)
        blocks = data_blocks(frames, view, source=source)
        write_whole(cache, blocks.to_bytes())
        print(f"built {cache.name} from {len(inputs)} dump(s): {len(frames.samples)} samples, "
              f"{len(view.span_index)} spans drawn")
    else:
        print(f"reusing {cache.name} (newer than its dumps; --rebuild to rebuild)")
    title = blocks.header()["payload"]["meta"]["title"]
    write_whole(html_path, page(blocks, title))
    print(f"wrote {html_path}")
    if args.perfetto or args.parquet or args.otlp:
        frames = frames or load(inputs, args.trusted, args.engine_traces)
        exports(frames, out_dir, name, args)
    if args.no_serve:
        return 0
    serve(out_dir, [html_path.name], args.host, args.port)
    return 0


def demo_dump(folder: Path, samples: int) -> Path:
    """``--demo``: the simulated rollout's dump in ``folder``, written if missing."""
    from ..demo import write_demo_dump

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / DEMO_DUMP
    if not path.exists():
        write_demo_dump(path, n_samples=samples, seed=0)
        print(f"wrote demo dump {path} ({samples} samples)")
    return path


def stem(inputs: list[Path]) -> str:
    """The name of a view's files: the first dump's, ``+N`` for the N others."""
    first = inputs[0].name.removesuffix(".pt")
    return first if len(inputs) == 1 else f"{first}+{len(inputs) - 1}"


def exports(frames: TraceFrames, out_dir: Path, name: str, args: argparse.Namespace) -> None:
    """``--perfetto``, ``--parquet`` and ``--otlp``."""
    from ..export.parquet import to_parquet
    from ..export.perfetto import export_perfetto

    if args.perfetto:
        print(f"wrote {export_perfetto(frames, out_dir / f'{name}.perfetto.json')}")
    if args.parquet:
        try:
            print(f"wrote {to_parquet(frames, out_dir / f'{name}.parquet')}")
        except ImportError as exc:
            # pyarrow is a dependency, but a build may lack Parquet (conda-forge's
            # pyarrow-core): pandas then explains over five lines; one is enough.
            raise CliError("--parquet needs pyarrow with Parquet support: "
                           "pip install pyarrow (or conda's pyarrow, not pyarrow-core)") from exc
    if args.otlp:
        send_otlp(frames, args)
