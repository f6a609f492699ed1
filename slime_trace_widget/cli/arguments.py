"""Argument types the subcommands share: each refuses a bad value while the command line
is parsed, so it is a usage error (argparse's message, exit code 2), never a traceback
or a silent no-op later."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import PurePath
from typing import TypeVar

Number = TypeVar("Number", int, float)

#: The shortest wait between two looks at a folder or an engine: below it, a poller
#: would keep a core busy.
MIN_INTERVAL = 0.1
#: The longest: a day.
MAX_INTERVAL = 86_400.0
#: The shortest wait between two scrapes of an engine's metrics: a scrape is one small
#: request, so a tenth of the folder poll's floor still leaves the core idle.
MIN_SCRAPE_INTERVAL = 0.01


def listen_host(text: str) -> str:
    """An address or name to serve on. The empty text, which a socket takes as every
    interface, is refused: the start-up line could name neither who can open the page
    nor its URL (``0.0.0.0`` says every interface)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "needs an address (127.0.0.1: this machine only; 0.0.0.0: every interface)")
    return text


def port(text: str) -> int:
    """A TCP port, 0 (a free one) to 65535."""
    return _within(text, int, 0, 65535, "a port (0 to 65535)")


def positive_count(text: str) -> int:
    """A whole number of at least 1."""
    return _within(text, int, 1, math.inf, "a whole number of at least 1")


def interval(text: str) -> float:
    """Seconds between two looks: at least :data:`MIN_INTERVAL`, at most a day."""
    return _within(text, float, MIN_INTERVAL, MAX_INTERVAL,
                   f"a number of seconds from {MIN_INTERVAL} to {MAX_INTERVAL:.0f}")


def scrape_interval(text: str) -> float:
    """Seconds between two scrapes: at least :data:`MIN_SCRAPE_INTERVAL`, at most a day."""
    return _within(text, float, MIN_SCRAPE_INTERVAL, MAX_INTERVAL,
                   f"a number of seconds from {MIN_SCRAPE_INTERVAL} to {MAX_INTERVAL:.0f}")


def seconds(text: str) -> float:
    """A number of seconds above 0 and below a day (a wait, a settle time)."""
    value = _within(text, float, 0.0, MAX_INTERVAL, "a number of seconds above 0")
    if value in (0.0, MAX_INTERVAL):  # both ends left out, as the range says
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return value


def _within(text: str, parse: Callable[[str], Number], low: float, high: float,
            what: str) -> Number:
    """``text`` read by ``parse`` when that reads it and the value lies in
    ``[low, high]`` (NaN never does); else argparse's error, saying it is not ``what``."""
    try:
        value = parse(text)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
    return value


def dump_pattern(text: str) -> str:
    """A glob of file names relative to the followed folder (``*.pt``, ``run*/*.pt``):
    not empty, not absolute (``Path.glob`` refuses both)."""
    if not text.strip() or PurePath(text).anchor:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a pattern of file names inside the folder (e.g. '*.pt')")
    return text
