"""``slime-trace-viewer live DIR``: serve a live rollout's page (``docs/live-view.md``).

DIR is a ``slime-trace-viewer collect`` folder; the page shows the rollout its live
store holds (the latest, or ``--rollout``), updated while records arrive, and says
what was lost per sending process. Loopback only unless ``--host`` says otherwise.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from .collect import seconds
from .errors import CliError
from .server import audience

NAME = "live"
SUMMARY = "serve a page of the rollout a collector is taking in, while it runs"
DESCRIPTION = ("Serve a page that shows the rollout a 'slime-trace-viewer collect DIR' "
               "receiver is taking in, while it runs: open spans growing to now, "
               "stragglers and stalled samples flagged, what was lost per sender. "
               "Ctrl-C stops it.")
_log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", help="the collector's folder")
    parser.add_argument("--rollout", type=int, help="this rollout id (default: the latest)")
    parser.add_argument("--stall-after", type=seconds, default=60.0, metavar="SECONDS",
                        help="flag a sample whose open span had no record this long (60)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="interface to serve on (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=9998)


def run(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C: the start-up line names the URL and who can open it."""
    from ..sources.follow import Poller
    from ..view.live import LiveSession
    from ..view.live_feed import ReaderFeed
    from ..view.page.live_server import PAGE, make_live_server

    folder = Path(args.dir)
    if not folder.is_dir():
        raise CliError(f"{folder} is not a folder (start 'slime-trace-viewer collect "
                       f"{folder}')")
    session = LiveSession(ReaderFeed(folder, args.rollout), stall_after=args.stall_after,
                          title=f"{folder.name} (live)")
    try:
        server = make_live_server(session, args.host, args.port)
    except OSError as exc:
        raise CliError(f"cannot listen on {args.host}:{args.port}: "
                       f"{exc.strerror or exc}") from exc
    poller = Poller(session.poll, lambda exc: _log.warning("live %s: %s", folder, exc), 0.5)
    host, port = args.host, server.server_address[1]
    shown = host if host not in ("0.0.0.0", "::") else "127.0.0.1"
    try:
        print(f"serving {PAGE} to {audience(host, port)} at http://{shown}:{port}/{PAGE}"
              "  (Ctrl-C to stop)", flush=True)
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        print("stopped", flush=True)
    finally:
        poller.stop()
        server.server_close()
    return 0
