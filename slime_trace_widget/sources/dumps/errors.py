"""The loader's error type, and how a failure is put in one line."""

from __future__ import annotations

__all__ = ["DumpError", "failure_line", "one_line"]


class DumpError(ValueError):
    """A dump could not be read; the one-line message names the file and the problem."""


def one_line(text: str, limit: int = 240) -> str:
    """Collapse an exception text to one short line for a DumpError message.

    The text can quote the file (torch echoes a bad ``byteorder`` record), so
    control characters are shown escaped: printing the message must not send
    escape sequences to the user's terminal.
    """
    line = " ".join(str(text).split())
    line = line if len(line) <= limit else line[: limit - 3] + "..."
    return line if line.isprintable() else "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in line)


def failure_line(name: str, reason: str) -> str:
    """``NAME: REASON`` for a dump that failed, its name said once: the loader's reasons
    start with the file's name already (a DumpError names its file), which every line
    reporting a failure (a warning, the command's stderr) would otherwise repeat."""
    return f"{name}: {reason.removeprefix(f'{name}: ')}"
