"""``slime-trace-viewer demo OUT.pt``: a simulated rollout step, written as a slime dump.

The rollout (:mod:`slime_trace_widget.demo`) runs on a simulated clock, so a step of
minutes takes seconds and a seed always gives the same schedule. With ``--live`` it
plays on the real clock instead, each wait scaled by ``--speed``, and streams its
records to a collector while they are written (:mod:`slime_trace_widget.tracing.live`):
a rollout to watch with ``slime-trace-viewer live DIR`` without slime. The dump is
written when the step ends, where ``live --dumps`` finds it.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from .errors import CliError
from .terminal import say

NAME = "demo"
SUMMARY = "write a simulated rollout step as a slime dump (streamed live with --live)"
DESCRIPTION = ("Simulate an agentic RL rollout step (single-turn and multi-turn groups, "
               "retries, aborts, PD timings), recorded with this package's tracing API, "
               "and write it as slime writes a debug rollout dump. With --live URL, the "
               "step plays on the real clock and streams its records to a "
               "'slime-trace-viewer collect' receiver while it runs.")
#: Seconds ``--live`` waits at the end for the queued records to be sent; after Ctrl-C,
#: a failure, or a step of which no record got through, only the shorter while.
CLOSE_SECONDS = 30.0
SHORT_CLOSE_SECONDS = 2.0
#: Rollout ids the simulated clock places (an hour apart from 2026-01-01).
MAX_ROLLOUT_ID = 1_000_000
#: ``--speed`` unless given: real seconds per simulated second (a 5-minute step in 15 s).
DEFAULT_SPEED = 0.05


def _count(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _rollout_id(text: str) -> int:
    value = int(text)
    if not 0 <= value <= MAX_ROLLOUT_ID:
        raise argparse.ArgumentTypeError(f"must be from 0 to {MAX_ROLLOUT_ID:,}")
    return value


def _speed(text: str) -> float:
    value = float(text)
    if not 0 < value <= 100:
        raise argparse.ArgumentTypeError("must be above 0 and at most 100")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out", help="the dump to write (rollout_0.pt)")
    parser.add_argument("--samples", type=_count, default=64, help="samples in the step (64)")
    parser.add_argument("--seed", type=int, default=0, help="the schedule's seed (0)")
    parser.add_argument("--rollout-id", type=_rollout_id, default=0,
                        help="the step's rollout id (0)")
    parser.add_argument("--live", metavar="URL",
                        help="stream the records to a collector's OTLP/HTTP address "
                             "(http://127.0.0.1:4318) while the step plays on the real clock")
    parser.add_argument("--speed", type=_speed, metavar="FACTOR",
                        help="with --live: real seconds per simulated second (default "
                             f"{DEFAULT_SPEED}: a 5-minute step in 15 s)")


def run(args: argparse.Namespace) -> int:
    from ..demo import write_demo_dump
    from ..sources.loading import load_frames

    out = Path(args.out)
    if os.path.isdir(out):  # os.path's: a name too long is no folder, not an OSError
        raise CliError(f"{out}: a folder, not a dump file (give a file: {out / 'rollout_0.pt'})")
    if not os.path.isdir(out.parent):
        raise CliError(f"{out}: its folder {out.parent} does not exist")
    if args.live is not None and not args.live.strip():
        raise CliError("--live needs the collector's address (http://127.0.0.1:4318)")
    if args.speed is not None and args.live is None:
        raise CliError("--speed plays the step on the real clock, for --live: give --live too")
    options = {"n_samples": args.samples, "seed": args.seed, "rollout_id": args.rollout_id}
    delivered = True
    try:
        if args.live is not None:
            out, delivered = _write_streamed(out, args.live, args.speed or DEFAULT_SPEED,
                                             options)
        else:
            write_demo_dump(out, **options)
    except OSError as exc:  # the folder unwritable, or full
        raise CliError(f"{out}: could not write the dump ({exc.strerror or exc})") from exc
    frames = load_frames(out, progress=False)
    say(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")
    for line in frames.summary().splitlines():
        say(line)
    if not delivered:
        raise CliError(f"no record reached {args.live}: is a collector running there "
                       "('slime-trace-viewer collect DIR')? The dump was written all the same.")
    return 0


def _write_streamed(out: Path, endpoint: str, speed: float,
                    options: dict) -> tuple[Path, bool]:
    """The step played at ``speed`` on the real clock, its records streamed to ``endpoint``;
    the dump's path once written, and whether any record reached the collector."""
    from ..demo import write_demo_dump
    from ..tracing import live as streaming

    try:
        stream = streaming.install(endpoint)
    except streaming.EndpointError as exc:
        raise CliError(f"--live: {exc}") from exc
    if not stream.enabled:
        raise CliError(f"--live: {stream.reason}")
    try:
        streaming.set_rollout(options["rollout_id"])
        path = write_demo_dump(out, real_time_scale=speed, **options)
    except BaseException:  # Ctrl-C among them: what is queued gets a short while only
        stream.close(SHORT_CLOSE_SECONDS)
        raise
    finally:
        streaming.set_rollout(None)
    # A collector that has taken nothing in all the step long is not waited for.
    stats = stream.close(CLOSE_SECONDS if stream.stats().sent else SHORT_CLOSE_SECONDS)
    say(f"streamed {stats.sent} records to {endpoint} ({stats.dropped} dropped)")
    return path, stats.sent > 0
