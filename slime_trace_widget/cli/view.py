"""``slime-trace-viewer [view] DUMPS``: dumps to an offline HTML timeline, served on
localhost.

Compatible with the workflow of slime's ``tools/trace_timeline_viewer.py``:
``slime-trace-viewer rollout_0.pt`` writes ``rollout_0.trace_timeline_cache.stw`` (see
``cache``) and ``rollout_0.trace_timeline_viewer.html`` beside the dump (or in
``--out-dir``), then serves that page, and nothing else of its folder, on 127.0.0.1;
another dump's view already named ``rollout_0`` there makes this one's
``rollout_0-<hash of its path>`` (``names``). Files are written with the user's umask.
Several dumps or a glob make one combined view; ``--follow DIR`` serves a page that
grows with DIR's dumps (``follow``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ..view.page.htmlpage import page
from ..whole_files import replaced_folder
from .arguments import (
    MIN_INTERVAL,
    dump_pattern,
    interval,
    listen_host,
    port,
    positive_count,
)
from .cache import PageCache, source_note
from .errors import CliError
from .files import HTML_SUFFIX, output_folder, write_output, writing
from .follow import follow
from .load import check_engine_traces, dump_files, load
from .names import dumps_view
from .otlp_options import add_otlp_arguments, send_otlp
from .server import serve
from .terminal import say

if TYPE_CHECKING:
    from ..frames.model import TraceFrames
    from ..view.page.htmlpage import Blocks

NAME = "view"
SUMMARY = "dumps to an offline HTML timeline, served on this machine (the default)"
DESCRIPTION = "Turn slime rollout dumps into an offline HTML timeline and serve it."
#: What ``--demo`` writes into ``--out-dir``.
DEMO_DUMP = "demo_rollout.pt"
#: Samples in the ``--demo`` rollout unless ``--demo-samples`` says.
DEMO_SAMPLES = 256


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dumps", nargs="*", help="dump files or globs (rollout_*.pt)")
    parser.add_argument("--demo", action="store_true",
                        help=f"simulate a rollout, write {DEMO_DUMP} and open it")
    parser.add_argument("--demo-samples", type=positive_count,
                        help=f"samples in the --demo rollout ({DEMO_SAMPLES})")
    parser.add_argument("--out-dir", help="where to write the cache and page "
                                          "(default: beside the first dump)")
    parser.add_argument("--rebuild", action="store_true", help="ignore an existing cache")
    parser.add_argument("--serve", action=argparse.BooleanOptionalAction, default=True,
                        help="serve the page once written (default), as slime's viewer; "
                             "--no-serve only writes the files")
    parser.add_argument("--host", type=listen_host, default="127.0.0.1",
                        help="interface to serve on (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=port, default=9999, help="port to serve on (9999)")
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
    parser.add_argument("--pattern", type=dump_pattern,
                        help="with --follow: dump files to follow, inside DIR (*.pt)")
    parser.add_argument("--interval", type=interval, metavar="SECONDS",
                        help=f"with --follow: seconds between looks (5; at least "
                             f"{MIN_INTERVAL})")


def run(args: argparse.Namespace) -> int:
    if args.follow:
        return follow(args)
    inputs = input_dumps(args)
    out_dir = output_folder(args.out_dir, inputs[0].parent)
    name, cache = dumps_view(out_dir, inputs)
    html_path = out_dir / f"{name}{HTML_SUFFIX}"
    demo_samples = (args.demo_samples or DEMO_SAMPLES) if args.demo else None
    if demo_samples is not None:
        write_demo_dump_unless_cached(inputs[0], cache, demo_samples)

    source = source_note(inputs, args.engine_traces, args.trusted, demo_samples)
    blocks = None if args.rebuild else cache.fresh_blocks(inputs, source)
    frames = None
    if blocks is None:
        frames, blocks = build(inputs, cache.path, source, args)
    else:
        say(f"reusing {cache.path.name} (newer than its dumps; --rebuild to rebuild)")
    meta = blocks.header()["payload"]["meta"]
    if meta.get("warnings"):
        say(warnings_line(meta["warnings"]))
    write_output(html_path, page(blocks, meta["title"]))
    say(f"wrote {html_path}")
    if args.perfetto or args.parquet or args.otlp:
        frames = frames or load(inputs, args.trusted, args.engine_traces)
        exports(frames, out_dir, name, args)
    if not args.serve:
        return 0
    serve(out_dir, [html_path.name], args.host, args.port)
    return 0


def input_dumps(args: argparse.Namespace) -> list[Path]:
    """The dumps to view: the demo's (written by :func:`write_demo_dump_unless_cached`),
    or the files the paths and globs name (:func:`~.load.dump_files`; a link to nothing
    among them is skipped and named, as a dump that fails to load); CliError for
    both at once (the demo's dump would be shown instead of those named), for
    ``--demo-samples`` without ``--demo`` (it would size nothing), and for ``--pattern``
    or ``--interval`` without ``--follow`` (they would say nothing)."""
    if args.demo and args.dumps:
        raise CliError("--demo shows a simulated rollout of its own: no dump paths with it")
    if args.demo_samples is not None and not args.demo:
        raise CliError("--demo-samples sizes the --demo rollout: give --demo too")
    if args.pattern is not None or args.interval is not None:
        raise CliError("--pattern and --interval say how to --follow a folder: "
                       "give --follow DIR too")
    if args.demo:
        inputs = [output_folder(args.out_dir, Path(".")) / DEMO_DUMP]
    elif args.dumps:
        inputs = [Path(path) for path in dump_files(args.dumps, links_to_nothing=True)]
    else:
        raise CliError("give a dump (rollout_0.pt), a glob, or --demo")
    check_engine_traces(args.engine_traces)
    return inputs


def build(inputs: list[Path], cache: Path, source: dict,
          args: argparse.Namespace) -> tuple[TraceFrames, Blocks]:
    """The frames and page blocks of ``inputs``; the blocks are cached only when every
    dump loaded and every engine-store file was read (a dump or file that failed is
    tried, and named, again on the next run)."""
    frames = load(inputs, args.trusted, args.engine_traces)
    from ..view.page.snapshot import data_blocks  # only when building: pandas
    from ..view.payload import encode

    view = encode(frames)
    blocks = data_blocks(frames, view, source=source)
    drawn = f"{len(frames.samples)} samples, {len(view.span_index)} spans drawn"
    skipped = [f"{len(frames.failures)} dump(s)"] if frames.failures else []
    if frames.engine_unreadable:
        skipped.append(f"{len(frames.engine_unreadable)} engine-trace file(s)")
    if skipped:
        loaded = f"{len(inputs) - len(frames.failures)} of " if frames.failures else ""
        say(f"built the page from {loaded}{len(inputs)} dump(s): {drawn} "
            f"({' and '.join(skipped)} skipped; no cache kept, the next run tries again)")
    else:
        write_output(cache, blocks.to_bytes())
        say(f"built {cache.name} from {len(inputs)} dump(s): {drawn}")
    return frames, blocks


def warnings_line(counts: dict[str, int]) -> str:
    """One line of what the loader skipped or repaired (the payload's ``meta.warnings``)."""
    kinds = ", ".join(f"{kind}={count}" for kind, count in counts.items())
    return f"load warnings ({sum(counts.values())}): {kinds}"


def write_demo_dump_unless_cached(path: Path, cache: PageCache, samples: int) -> None:
    """``--demo``: the simulated rollout's dump written at ``path``, unless there is one
    of ``samples`` samples already (as the note of its page's ``cache`` records)."""
    from ..demo import write_demo_dump

    if not path.exists() or cache.source().get("demo_samples") != samples:
        try:
            write_demo_dump(path, n_samples=samples, seed=0)
        except OSError as exc:  # the folder read-only or full
            raise CliError(f"{path}: could not write the dump ({exc.strerror or exc})") from exc
        say(f"wrote demo dump {path} ({samples} samples)")


def exports(frames: TraceFrames, out_dir: Path, name: str, args: argparse.Namespace) -> None:
    """``--perfetto``, ``--parquet`` and ``--otlp``; CliError naming the output that cannot
    be written (a folder where the file goes, a file where the folder goes, a read-only
    or full folder)."""
    from ..export.parquet import to_parquet
    from ..export.perfetto import export_perfetto

    if args.perfetto:
        target = out_dir / f"{name}.perfetto.json"
        with writing(target):
            say(f"wrote {export_perfetto(frames, target)}")
    if args.parquet:
        target = out_dir / f"{name}.parquet"
        try:
            with writing(target), replaced_folder(target) as folder:
                to_parquet(frames, folder)
            say(f"wrote {target}")
        except ImportError as exc:
            # pyarrow is a dependency, but a build may lack Parquet (conda-forge's
            # pyarrow-core): pandas then explains over five lines; one is enough.
            raise CliError("--parquet needs pyarrow with Parquet support: "
                           "pip install pyarrow (or conda's pyarrow, not pyarrow-core)") from exc
    if args.otlp:
        send_otlp(frames, args)

