"""What the command writes to the terminal, and the one way it writes it.

The command's lines name files and quote reasons, and neither is the command's own
text: a dump folder is written by other people and other jobs, and a reason can
quote a dump's bytes. An escape sequence or a carriage return among them would act
on the reader's terminal (retitle it, recolour or clear it, write over the line
above, or start a line that reads as the command's own), so every line goes out
through :func:`say`, :func:`note` or :func:`complain`, which write each control
character but tab as ``\\xNN``: one call is one line, and what the reader sees is
what the name holds.
"""

from __future__ import annotations

import sys

from ..values import plain_line

PROG = "slime-trace-viewer"


def say(text: str) -> None:
    """Print ``text`` on stdout as one line of terminal text, at once (a long-running
    command is watched line by line)."""
    print(plain_line(text), flush=True)


def note(text: str) -> None:
    """Print ``text`` on stderr as one line of terminal text, at once."""
    print(plain_line(text), file=sys.stderr, flush=True)


def complain(text: str) -> None:
    """Print ``PROG: text`` on stderr as one line of terminal text, at once."""
    note(f"{PROG}: {text}")
