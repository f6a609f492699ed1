"""``view --follow DIR``: a served page of a run's dumps that grows as slime writes new
ones. Only new dumps load; each change rewrites the page and ``follow.json``, which the
page polls and then offers the update."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path

from ..view.page.htmlpage import page
from ..whole_files import write_whole
from .errors import CliError
from .files import HTML_SUFFIX
from .load import load
from .server import serve

#: What a followed page polls: ``{"version": n, "dumps": k}``, rewritten on each change.
FOLLOW_STATE = "follow.json"


def follow(args: argparse.Namespace) -> int:
    """Serve the page of ``args.follow``'s dumps until Ctrl-C, adding new dumps as they
    are complete."""
    # Imported here: the frames' and payload's imports (pandas) only for this mode.
    from ..frames.flatten import build_frames
    from ..frames.model import combine_frames
    from ..sources.follow import POLL_SECONDS, DumpWatcher, Poller
    from ..view.page.snapshot import data_blocks
    from ..view.payload import encode

    folder = Path(args.follow)
    if not folder.is_dir():
        raise CliError(f"{folder}: not a folder")
    if args.no_serve or args.dumps or args.demo:
        raise CliError("--follow serves one folder's dumps: no dump paths, --demo or --no-serve")
    out_dir = Path(args.out_dir) if args.out_dir else folder
    out_dir.mkdir(parents=True, exist_ok=True)
    html_path = out_dir / f"{folder.resolve().name}{HTML_SUFFIX}"
    watcher = DumpWatcher(folder, args.pattern)
    shown = {"frames": build_frames([]), "version": 0}

    def publish(new: list[str]) -> None:
        if new:
            added = load([Path(p) for p in new], args.trusted)
            shown["frames"] = (combine_frames([shown["frames"], added])
                               if len(shown["frames"].samples) else added)
            print(f"added {len(new)} dump(s), {len(shown['frames'].paths)} in all", flush=True)
        shown["version"] += 1
        state = {"state": FOLLOW_STATE, "version": shown["version"]}
        frames = shown["frames"]
        blocks = data_blocks(frames, encode(frames, title=f"{folder.name} (following)"),
                             source={"follow": state})
        write_whole(html_path, page(blocks, blocks.header()["payload"]["meta"]["title"],
                                    follow=True))
        write_whole(out_dir / FOLLOW_STATE, json.dumps(
            {"version": shown["version"], "dumps": len(frames.paths)}))

    stopping = threading.Event()

    def look() -> None:
        new = watcher.new_dumps()
        if new and not stopping.is_set():  # after Ctrl-C, no dump starts loading
            publish(new)

    publish(watcher.new_dumps())
    poller = Poller(look,
                    lambda exc: print(f"slime-trace-viewer: {exc}", file=sys.stderr, flush=True),
                    POLL_SECONDS if args.interval is None else args.interval)
    try:
        serve(out_dir, [html_path.name, FOLLOW_STATE], args.host, args.port)
    finally:
        stopping.set()
        poller.stop(wait=False)  # a dump still loading dies with the process; writes are atomic
    return 0
