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
from pathlib import Path

from .errors import CliError

NAME = "demo"
SUMMARY = "write a simulated rollout step as a slime dump (streamed live with --live)"
DESCRIPTION = ("Simulate an agentic RL rollout step (single-turn and multi-turn groups, "
               "retries, aborts, PD timings), recorded with this package's tracing API, "
               "and write it as slime writes a debug rollout dump. With --live URL, the "
               "step plays on the real clock and streams its records to a "
               "'slime-trace-viewer collect' receiver while it runs.")
#: Seconds ``--live`` waits at the end for the queued records to be sent.
CLOSE_SECONDS = 30.0


def _count(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
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
    parser.add_argument("--rollout-id", type=int, default=0, help="the step's rollout id (0)")
    parser.add_argument("--live", metavar="URL",
                        help="stream the records to a collector's OTLP/HTTP address "
                             "(http://127.0.0.1:4318) while the step plays on the real clock")
    parser.add_argument("--speed", type=_speed, default=0.05, metavar="FACTOR",
                        help="with --live: real seconds per simulated second (0.05 plays a "
                             "5-minute step in 15 s)")


def run(args: argparse.Namespace) -> int:
    from ..demo import write_demo_dump
    from ..sources.loading import load_frames

    options = {"n_samples": args.samples, "seed": args.seed, "rollout_id": args.rollout_id}
    if args.live:
        path = _write_streamed(Path(args.out), args.live, args.speed, options)
    else:
        path = write_demo_dump(args.out, **options)
    frames = load_frames(path, progress=False)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")
    print(frames.summary())
    return 0


def _write_streamed(out: Path, endpoint: str, speed: float, options: dict) -> Path:
    """The step played at ``speed`` on the real clock, its records streamed to ``endpoint``;
    the dump's path once written."""
    from ..demo import write_demo_dump
    from ..tracing import live as streaming

    try:
        stream = streaming.install(endpoint)
    except streaming.EndpointError as exc:
        raise CliError(f"--live: {exc}") from exc
    if not stream.enabled:
        raise CliError(f"--live: {stream.reason}")
    streaming.set_rollout(options["rollout_id"])
    try:
        path = write_demo_dump(out, real_time_scale=speed, **options)
    finally:
        stats = stream.close(CLOSE_SECONDS)
        streaming.set_rollout(None)
    print(f"streamed {stats.sent} records to {endpoint} ({stats.dropped} dropped)")
    return path
