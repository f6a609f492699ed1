"""``slime-trace-viewer live DIR``: serve a live rollout's page (``docs/live-view.md``).

DIR is a ``slime-trace-viewer collect`` folder; the page shows the rollout its live
store holds (the latest, or ``--rollout``), updated while records arrive, and says
what was lost per sending process. With ``--dumps FOLDER`` (slime's dump folder) the
page hands over to the step's dump once it lands: the first new complete dump holding
a sample seen live (the widget's rule, ``sources/handover.py``). Loopback only unless
``--host`` says otherwise.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..sources.listening import url_host
from .arguments import dump_pattern, listen_host, port, seconds
from .errors import CliError
from .server import audience
from .terminal import complain, say

NAME = "live"
SUMMARY = "serve a page of the rollout a collector is taking in, while it runs"
DESCRIPTION = ("Serve a page that shows the rollout a 'slime-trace-viewer collect DIR' "
               "receiver is taking in, while it runs: open spans growing to now, "
               "stragglers and stalled samples flagged, what was lost per sender. "
               "With --dumps, the page switches to the step's dump when it lands. "
               "Ctrl-C stops it.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", help="the collector's folder")
    parser.add_argument("--rollout", type=int, help="this rollout id (default: the latest)")
    parser.add_argument("--stall-after", type=seconds, default=60.0, metavar="SECONDS",
                        help="flag a sample whose open span had no record this long (60)")
    parser.add_argument("--dumps", metavar="FOLDER",
                        help="slime's dump folder: when a new complete dump holding a "
                             "sample seen live lands there, the page switches to it")
    parser.add_argument("--pattern", type=dump_pattern, default="*.pt",
                        help="which files in --dumps are dumps (default *.pt)")
    parser.add_argument("--settle", type=seconds, default=None, metavar="SECONDS",
                        help="a dump unchanged this long is complete (default 10)")
    parser.add_argument("--host", type=listen_host, default="127.0.0.1",
                        help="interface to serve on (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=port, default=9998, help="port to serve on (9998)")


def run(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C: the start-up line names the URL and who can open it."""
    from ..sources.follow import SETTLE_SECONDS, Poller
    from ..sources.handover import new_dumps_watcher
    from ..view.live import LiveSession
    from ..view.live_feed import ReaderFeed
    from ..view.page.live_server import PAGE, Handover, make_live_server

    folder = Path(args.dir)
    if not folder.is_dir():
        raise CliError(f"{folder} is not a folder (start 'slime-trace-viewer collect "
                       f"{folder}')")
    handover = None
    if args.dumps is not None:
        if not Path(args.dumps).is_dir():
            raise CliError(f"--dumps {args.dumps}: not a folder")
        handover = Handover(new_dumps_watcher(
            args.dumps, args.pattern, SETTLE_SECONDS if args.settle is None else args.settle))
    session = LiveSession(ReaderFeed(folder, args.rollout), stall_after=args.stall_after,
                          title=f"{folder.name} (live)")
    try:
        server = make_live_server(session, args.host, args.port, handover)
    except OSError as exc:
        raise CliError(f"cannot listen on {args.host}:{args.port}: "
                       f"{exc.strerror or exc}") from exc

    def look() -> None:
        if handover is not None and handover.page_bytes is not None:
            return  # handed over: the page shows the dump, not the live store
        session.poll()
        if handover is not None and handover.look(session):
            say(f"handed over to {handover.dump}")

    poller = Poller(look, lambda exc: complain(f"live {folder}: {exc}"), 0.5)
    host, port = args.host, server.server_address[1]
    shown = url_host(host) if host not in ("0.0.0.0", "::") else "127.0.0.1"
    try:
        say(f"serving {PAGE} to {audience(host, port)} at http://{shown}:{port}/{PAGE}"
            "  (Ctrl-C to stop)")
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        say("stopped")
    finally:
        # Not waiting for a look in progress: a step's dump still loading is abandoned,
        # its helpers ended and its scratch folder removed at exit
        # (sources/dumps/exit_cleanup.py), and the page it would show is served no more.
        poller.stop(wait=False)
        server.server_close()
    return 0
