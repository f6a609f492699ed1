"""``view --follow DIR``: a served page of a run's dumps that grows as slime writes new
ones. Only new dumps load (with ``--engine-traces`` joined, ``--trusted`` as asked); a
dump that fails is named and loaded again once its file changes, and a dump written
again (a run resumed from a checkpoint) is loaded again in place of what it showed.
Each change rewrites the page and its state file (``<name>.follow.json``), which the
page polls and then offers the update; ``<name>`` is the folder's name, or
``<name>-<hash>`` where another view holds it in ``--out-dir`` (``names``). The options
that act once on a fixed set of dumps (``--perfetto``, ``--parquet``, ``--otlp``,
``--rebuild``) are refused."""

from __future__ import annotations

import argparse
import json
import secrets
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from ..view.page.htmlpage import page
from .errors import CliError
from .files import FOLLOW_SUFFIX, HTML_SUFFIX, output_folder, write_output
from .load import check_engine_traces, load
from .names import FOLLOWED_KEY, folder_claim, follow_name
from .server import serve
from .terminal import complain, say

if TYPE_CHECKING:
    from ..frames.model import TraceFrames

#: ``view`` options that ``--follow`` cannot apply, by their attribute.
NOT_FOLLOWED = {"perfetto": "--perfetto", "parquet": "--parquet", "otlp": "--otlp",
                "rebuild": "--rebuild"}


def check_follow_options(args: argparse.Namespace) -> Path:
    """The followed folder; CliError naming an option ``--follow`` cannot apply, or a
    folder or engine-trace path that is not there."""
    folder = Path(args.follow).expanduser()  # as a dump's path: the shell leaves --follow=~/x
    if not folder.is_dir():
        raise CliError(f"{folder}: not a folder")
    if not args.serve or args.dumps or args.demo or args.demo_samples is not None:
        raise CliError("--follow serves one folder's dumps: no dump paths, --demo, "
                       "--demo-samples or --no-serve")
    refused = [option for name, option in NOT_FOLLOWED.items() if getattr(args, name)]
    if refused:
        raise CliError(f"{', '.join(refused)}: not with --follow (run the command on the "
                       "dumps for it)")
    check_engine_traces(args.engine_traces)
    return folder


def load_new(new: list[str], args: argparse.Namespace) -> TraceFrames | None:
    """The frames of the dumps in ``new`` that load, or None when none does; each that
    fails is named on stderr (the watcher offers it again once it changes)."""
    from ..sources.follow import load_new as follow_loads

    return follow_loads(
        new, lambda names: load([Path(p) for p in names], args.trusted, args.engine_traces),
        complain)


def follow(args: argparse.Namespace) -> int:
    """Serve the page of ``args.follow``'s dumps until Ctrl-C, adding new dumps as they
    are complete."""
    # Imported here: the frames' and payload's imports (pandas) only for this mode.
    from ..sources.follow import DUMP_PATTERN, POLL_SECONDS, DumpWatcher, FollowedFrames, Poller
    from ..view.page.snapshot import data_blocks
    from ..view.payload import encode

    folder = check_follow_options(args)
    out_dir = output_folder(args.out_dir, folder)
    name = follow_name(out_dir, folder)
    html_path = out_dir / f"{name}{HTML_SUFFIX}"
    state_path = out_dir / f"{name}{FOLLOW_SUFFIX}"
    claim = folder_claim(folder)
    run = secrets.token_hex(8)
    watcher = DumpWatcher(folder, args.pattern or DUMP_PATTERN)
    followed = FollowedFrames(lambda names: load_new(names, args), watcher.forget)
    shown = {"version": 0}

    def publish(new: list[str]) -> None:
        if new:
            added = load_new(new, args)
            if added is None:
                return  # nothing new to show
            again = followed.add(added)
            if len(added.paths) > len(again):
                say(f"added {len(added.paths) - len(again)} dump(s), "
                    f"{len(followed.frames.paths)} in all")
            for path in again:
                say(f"loaded {path} again: it was written again")
        shown["version"] += 1
        state = {"state": state_path.name, "version": shown["version"], "run": run}
        frames = followed.frames
        blocks = data_blocks(frames, encode(frames, title=f"{folder.name} (following)"),
                             source={"follow": state})
        write_output(html_path, page(blocks, blocks.header()["payload"]["meta"]["title"],
                                     follow=True))
        write_output(state_path, json.dumps(
            {"version": shown["version"], "dumps": len(frames.paths), "run": run,
             FOLLOWED_KEY: claim}))

    stopping = threading.Event()

    def look() -> None:
        new = watcher.new_dumps()
        if new and not stopping.is_set():  # after Ctrl-C, no dump starts loading
            publish(new)

    publish(watcher.new_dumps())
    if shown["version"] == 0:  # the first dumps all failed: an empty page to start with
        publish([])
    if not any(folder.glob(watcher.pattern)):  # a typo in --pattern would wait in silence
        say(f"no dump matching {watcher.pattern} in {folder} yet: the page adds each "
            "one slime writes")
    poller = Poller(look,
                    lambda exc: complain(str(exc)),
                    POLL_SECONDS if args.interval is None else args.interval)
    try:
        serve(out_dir, [html_path.name, state_path.name], args.host, args.port)
    finally:
        stopping.set()
        # A dump still loading is abandoned: the exit hook ends its helpers and removes
        # its scratch folder (sources/dumps/exit_cleanup.py). Writes are atomic.
        poller.stop(wait=False)
    return 0
