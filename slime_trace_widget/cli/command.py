"""The command: the subcommands' parsers under one, and the dispatch to the chosen one.

Each subcommand is a module of this package with ``NAME``, ``SUMMARY`` (its line in
``slime-trace-viewer --help``), ``DESCRIPTION``, ``add_arguments(parser)`` and
``run(args) -> int``; :data:`SUBCOMMANDS` lists them, so a new one is one module and
one entry. An argument list that does not start with a subcommand's name is ``view``'s.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from typing import NoReturn

from ..sources.dumps.errors import DumpError
from ..values import plain_line
from . import collect, convert, demo, live, view
from .errors import CliError
from .signals import Stopped, signals_as_ctrl_c
from .terminal import PROG, complain

#: The subcommands, in the order ``--help`` lists them.
SUBCOMMANDS = (view, convert, collect, live, demo)
#: What ``slime-trace-viewer ARGS`` runs when ARGS names no subcommand.
DEFAULT = view.NAME
#: Exit code besides a subcommand's own: a one-line failure.
FAILED = 2
#: The exit code of a run a signal stopped is this plus the signal's number, the
#: shell's code for a command the signal ended: 130 for Ctrl-C, 143 for SIGTERM, 129
#: for SIGHUP. A server, whose normal end is that stop, exits 0 instead.
SIGNALLED = 128


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors quote what was typed as terminal text
    (a shell glob can put any file's name among the arguments)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, plain_line(f"{self.prog}: error: {message}") + "\n")


def parser() -> argparse.ArgumentParser:
    """The command's parser, a subparser per subcommand (of its own class)."""
    top = _Parser(
        prog=PROG,
        description="Explore slime rollout traces: an offline HTML timeline of dumps, a "
                    "run's Parquet dataset, the engines' own request traces.",
        epilog=f"With no subcommand, '{DEFAULT}' runs: '{PROG} rollout_0.pt' is "
               f"'{PROG} {DEFAULT} rollout_0.pt'. '{PROG} SUBCOMMAND --help' for its options.")
    choices = top.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)
    for module in SUBCOMMANDS:
        sub = choices.add_parser(module.NAME, help=module.SUMMARY,
                                 description=module.DESCRIPTION)
        module.add_arguments(sub)
        sub.set_defaults(run=module.run)
    return top


def with_subcommand(argv: Sequence[str]) -> list[str]:
    """``argv`` led by a subcommand's name: the default's unless one is named (or only
    the command's own help is asked)."""
    names = {module.NAME for module in SUBCOMMANDS}
    if argv and (argv[0] in names or argv[0] in ("-h", "--help")):
        return list(argv)
    return [DEFAULT, *argv]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command on ``argv`` (default ``sys.argv[1:]``); the exit code. SIGTERM
    and SIGHUP stop it as Ctrl-C does (``signals.signals_as_ctrl_c``)."""
    _printable_names()
    args = parser().parse_args(with_subcommand(sys.argv[1:] if argv is None else argv))
    try:
        with signals_as_ctrl_c():
            return args.run(args)
    except (CliError, DumpError) as exc:
        complain(str(exc))
        return FAILED
    except MemoryError as exc:  # a view refused before it was made, or a failed allocation
        complain(str(exc) or "out of memory")
        return FAILED
    except KeyboardInterrupt as exc:
        return SIGNALLED + (exc.signum if isinstance(exc, Stopped) else signal.SIGINT)


def _printable_names() -> None:
    """Let the command's output name any file: the bytes of a name that is not UTF-8
    are written as ``\\xNN`` escapes where the stream would refuse them (a strict
    encoding, as ``PYTHONIOENCODING=utf-8`` sets), never end the run."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", None) == "strict":
            reconfigure(errors="backslashreplace")


def console() -> None:
    """The ``slime-trace-viewer`` entry point: :func:`main`'s code as the exit status."""
    sys.exit(main())
