"""The ``--otlp`` options that ``view`` and ``convert`` share, and sending one load's
frames with them."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .errors import CliError
from .terminal import say

if TYPE_CHECKING:
    from ..frames.model import TraceFrames

#: The one line for a missing extra, whichever import failed.
MISSING_EXTRA = "--otlp needs the otel extra: pip install 'slime-trace-widget[otel]'"


def add_otlp_arguments(parser: argparse.ArgumentParser, which: str = "") -> None:
    """``--otlp`` and its companions; ``which`` says what is sent, in the help."""
    parser.add_argument("--otlp", metavar="ENDPOINT",
                        help="also send the traces to an OpenTelemetry backend" + which +
                             ", e.g. http://127.0.0.1:6006/v1/traces (Phoenix)")
    parser.add_argument("--otlp-protocol", choices=("http/protobuf", "grpc"),
                        default="http/protobuf", help="OTLP transport (default http/protobuf;"
                                                      " grpc takes HOST:PORT)")
    parser.add_argument("--otlp-header", action="append", default=[], metavar="KEY=VALUE",
                        type=header, help="a header for every request (repeatable)")
    parser.add_argument("--service-name", default="slime-rollout",
                        help="the service the traces are from (default slime-rollout)")


def header(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` as a (key, value) pair."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key.strip(), value


def send_otlp(frames: TraceFrames, args: argparse.Namespace) -> None:
    """``--otlp``: send ``frames`` and print the report, or fail in one line."""
    try:  # the otel extra may be missing: said in one line, not a traceback
        from ..export.otlp import to_otlp
        from ..export.otlp_transport import OtlpExportError
    except ImportError as exc:
        raise CliError(MISSING_EXTRA) from exc
    try:
        report = to_otlp(frames, args.otlp, protocol=args.otlp_protocol,
                         headers=dict(args.otlp_header), service_name=args.service_name)
    except OtlpExportError as exc:
        raise CliError(str(exc)) from exc
    say(report.summary())
