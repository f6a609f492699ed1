"""Argument types the subcommands share: each refuses a bad value while the command line
is parsed, so it is a usage error (argparse's message, exit code 2), never a traceback
or a silent no-op later."""

from __future__ import annotations

import argparse
from pathlib import PurePath

#: The shortest wait between two looks at a folder or an engine: below it, a poller
#: would keep a core busy.
MIN_INTERVAL = 0.1
#: The longest: a day.
MAX_INTERVAL = 86_400.0


def port(text: str) -> int:
    """A TCP port, 0 (a free one) to 65535."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0 to 65535)")
    return value


def positive_count(text: str) -> int:
    """A whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value


def interval(text: str) -> float:
    """Seconds between two looks: at least :data:`MIN_INTERVAL`, at most a day."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not MIN_INTERVAL <= value <= MAX_INTERVAL:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of seconds from {MIN_INTERVAL} to {MAX_INTERVAL:.0f}")
    return value


def dump_pattern(text: str) -> str:
    """A glob of file names relative to the followed folder (``*.pt``, ``run*/*.pt``):
    not empty, not absolute (``Path.glob`` refuses both)."""
    if not text.strip() or PurePath(text).anchor:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a pattern of file names inside the folder (e.g. '*.pt')")
    return text
