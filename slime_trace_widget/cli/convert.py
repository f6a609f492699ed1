"""``slime-trace-viewer convert DUMPS --out DIR``: a run's dumps into one Parquet dataset,
partitioned by rollout id; a rerun converts only new or changed dumps. ``--otlp`` and
``--log-trends`` then hand the dumps new to that endpoint or target onwards."""

from __future__ import annotations

import argparse
import os

from ..sources.dataset import ENGINES
from ..sources.dumps.errors import failure_line
from .arguments import positive_count
from .errors import CliError
from .load import check_engine_traces, dump_files
from .otlp_options import MISSING_EXTRA, add_otlp_arguments
from .terminal import complain, say

NAME = "convert"
SUMMARY = "a run's dumps into one Parquet dataset (a rerun converts only new dumps)"
DESCRIPTION = ("Convert a run's dumps into one Parquet dataset, partitioned by rollout "
               "id; a rerun converts only new or changed dumps.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dumps", nargs="+", help="dump files or globs (debug/rollout_*.pt)")
    parser.add_argument("--out", required=True, help="the dataset's folder")
    parser.add_argument("--engine", choices=ENGINES, default=ENGINES[0],
                        help="local worker processes (default) or Ray tasks")
    parser.add_argument("--address", help="Ray cluster address (default: a local Ray)")
    parser.add_argument("--workers", type=positive_count,
                        help="dumps at once, at least 1 (default: one per core)")
    parser.add_argument("--engine-traces", metavar="DIR",
                        help="join the engines' request traces kept by "
                             "'slime-trace-viewer collect DIR'")
    add_otlp_arguments(parser, " (the dumps converted by this run)")
    parser.add_argument("--log-trends", metavar="TARGET",
                        help="log each new rollout's trends to tensorboard:LOGDIR, "
                             "mlflow:TRACKING_URI[#EXPERIMENT] or wandb:PROJECT")
    parser.add_argument("--log-snapshots", action="store_true",
                        help="with --log-trends wandb:PROJECT, each new rollout's HTML "
                             "snapshot as an artifact of the run")


def run(args: argparse.Namespace) -> int:
    from ..sources.dataset import convert  # the dataset's imports only for this subcommand

    dumps = checked_inputs(args)
    try:  # the failures are listed below, one line each, not warned of
        report = convert(dumps, args.out, engine=args.engine, address=args.address,
                         workers=args.workers, engine_traces=args.engine_traces,
                         warn_failures=False)
    except OSError as exc:  # a file or folder gone or unwritable meanwhile
        raise CliError(f"{exc.filename or args.out}: {exc.strerror or exc}") from exc
    for path, reason in report.failed:
        complain(f"failed {failure_line(path, reason)}")
    for path in report.in_progress:
        say(f"later {path}: still being written")
    say(f"{args.out}: {report.summary()}")
    if args.otlp:
        send_dataset(args)
    if args.log_trends:
        log_dataset_trends(args)
    return 1 if report.failed else 0


def checked_inputs(args: argparse.Namespace) -> list[str]:
    """The dump files the paths and globs name (:func:`~.load.dump_files`; a link to
    nothing among them is converted as a failed dump), with ``--out`` a folder or
    absent, ``--engine-traces`` there when given and ``--log-snapshots`` only with W&B
    trends; CliError naming the first that is not."""
    paths = dump_files(args.dumps, links_to_nothing=True)
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise CliError(f"--out {args.out}: not a folder")
    check_engine_traces(args.engine_traces)
    if args.log_snapshots and not (args.log_trends or "").startswith("wandb:"):
        raise CliError("--log-snapshots adds each rollout's snapshot to a W&B run: "
                       "give --log-trends wandb:PROJECT too")
    return paths


def send_dataset(args: argparse.Namespace) -> None:
    """``--otlp``: the dataset's dumps not sent to that endpoint yet."""
    try:  # the otel extra may be missing: said in one line, not a traceback
        from ..export.otlp import rejected_note, unanswered_note
        from ..export.otlp_transport import OtlpExportError
        from ..export.run_exports import export_progress, send_new_dumps
    except ImportError as exc:
        raise CliError(MISSING_EXTRA) from exc
    try:
        reports = send_new_dumps(args.out, args.otlp, protocol=args.otlp_protocol,
                                 headers=dict(args.otlp_header),
                                 service_name=args.service_name)
    except (OtlpExportError, ValueError) as exc:  # ValueError: a ledger file, named
        raise CliError(str(exc)) from exc
    except OSError as exc:  # the ledger or a journal unwritable
        raise CliError(f"{exc.filename or args.out}: {exc.strerror or exc}") from exc
    spans = sum(report.spans for report in reports)
    rejected = sum(report.rejected_spans for report in reports)
    unanswered = sum(report.unanswered_spans for report in reports)
    say(f"sent {len(reports)} dump(s), {spans} spans, to {args.otlp}"
        + ("" if reports else nothing_sent_note(*export_progress(args.out, args.otlp)))
        + rejected_note(rejected)
        + unanswered_note(unanswered))


def nothing_sent_note(converted: int, sent_before: int) -> str:
    """Why ``--otlp`` sent no dump, from the dataset's state after it ran: its
    ``converted`` dumps, ``sent_before`` of them recorded as sent to the endpoint. "Sent
    before" only when it is true: a dump still being written, or one that failed, is
    not converted, and so not sent either."""
    if not converted:
        return " (no converted dump to send)"
    return " (every dump was sent before)" if sent_before == converted else ""


def log_dataset_trends(args: argparse.Namespace) -> None:
    """``--log-trends``: the rollouts the target has not logged yet."""
    from ..export.run_exports import log_new_trends
    from ..export.trend_backends import MissingBackend

    try:
        report = log_new_trends(args.out, args.log_trends, snapshots=args.log_snapshots)
    except (MissingBackend, ValueError) as exc:
        raise CliError(str(exc)) from exc
    except OSError as exc:  # the target's folder or file missing or unwritable
        reason = exc.strerror or str(exc) or type(exc).__name__
        where = f": {exc.filename}" if exc.filename else ""
        raise CliError(f"--log-trends {args.log_trends}: {reason}{where}") from exc
    say(report.summary())
