"""``slime-trace-viewer collect DIR``: receive the engines' own request traces over OTLP
and keep them in DIR (for ``--engine-traces DIR``), and a rollout's live records (OTLP
logs) in DIR/live (for ``load_live(DIR)``); with ``--scrape``, poll the engines'
Prometheus metrics into DIR too. Ctrl-C, SIGTERM or SIGHUP writes what is waiting and
exits."""

from __future__ import annotations

import argparse
import threading
from typing import TYPE_CHECKING

from .arguments import MIN_SCRAPE_INTERVAL, scrape_interval
from .errors import CliError
from .signals import stop_on_signals
from .terminal import say

if TYPE_CHECKING:
    from ..sources.engine.receiver import Received
    from ..sources.engine.scrape import Target

NAME = "collect"
SUMMARY = ("receive the engines' request traces (OTLP), metrics and a rollout's live "
           "records into a folder")
DESCRIPTION = ("Receive the engines' own request traces (SGLang --enable-trace "
               "--otlp-traces-endpoint) over OTLP and keep them in DIR, for "
               "--engine-traces DIR, and a rollout's live records (OTLP logs from "
               "slime_trace_widget.tracing.live) in DIR/live, for load_live(DIR); "
               "with --scrape, poll the engines' Prometheus "
               "metrics (SGLang --enable-metrics) into DIR too. Ctrl-C, SIGTERM or "
               "SIGHUP writes what is waiting and exits.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", help="the collector's folder")
    parser.add_argument("--http", type=address, default=("127.0.0.1", 4318),
                        metavar="HOST:PORT", help="OTLP/HTTP (default 127.0.0.1:4318)")
    parser.add_argument("--grpc", type=address, default=("127.0.0.1", 4317),
                        metavar="HOST:PORT", help="OTLP/gRPC (default 127.0.0.1:4317)")
    parser.add_argument("--no-grpc", action="store_true", help="OTLP/HTTP only")
    parser.add_argument("--scrape", action="append", type=scrape_target, default=[],
                        metavar="[NAME=]URL",
                        help="an engine's metrics URL to poll (http or https; /metrics when "
                             "the URL has no path); repeat for each engine. NAME (default "
                             "HOST:PORT) names its rows; a NAME equal to an engine host of "
                             "the trace join's engine_skew shifts them by that host's skew "
                             "(docs/engine-load.md)")
    parser.add_argument("--scrape-interval", type=scrape_interval, default=1.0,
                        metavar="SECONDS",
                        help="seconds between two scrapes of an engine (default 1; at "
                             f"least {MIN_SCRAPE_INTERVAL})")


def run(args: argparse.Namespace) -> int:
    from ..sources.engine.durable import StoreInUse
    from ..sources.engine.receiver import collect  # the receiver's imports only here

    names = [target.name for target in args.scrape]
    if len(set(names)) != len(names):
        raise CliError(f"--scrape: two targets are named alike ({', '.join(sorted(names))}); "
                       "name them with NAME=URL")
    stop = threading.Event()
    try:
        with stop_on_signals(stop):
            received = collect(args.dir, args.http, None if args.no_grpc else args.grpc,
                               say, stop,
                               targets=args.scrape, scrape_interval=args.scrape_interval)
    except StoreInUse as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot receive OTLP: {exc.strerror or exc}") from exc
    say(stop_line(received, args.dir))
    return 0


def stop_line(received: Received, directory: str) -> str:
    """What the receiver kept, and what it did not: log records that are not slime's,
    and requests asked to come back later because the writers were behind the disk."""
    live = received.live
    notes = [f"{live.foreign_records} log record(s) not slime's, not kept"] \
        if live.foreign_records else []
    retried = received.spans.refused + live.refused
    if retried:
        notes.append(f"{retried} request(s) asked to come back later while the disk was behind")
    return (f"stopped: {received.spans.accepted_spans} span(s) and {live.accepted_records} "
            f"live record(s) kept in {directory}" + (f" ({'; '.join(notes)})" if notes else ""))


def scrape_target(text: str) -> Target:
    """``--scrape [NAME=]URL`` as the scraper's target."""
    from ..sources.engine.scrape import parse_target

    try:
        return parse_target(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:4318`` for IPv6) as a (host, port) pair."""
    host, _, port = text.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    return host, int(port)
