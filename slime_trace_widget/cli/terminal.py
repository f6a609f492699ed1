"""What the command writes to the terminal, and the one way it writes it.

The command's lines name files and quote reasons, and neither is the command's own
text: a dump folder is written by other people and other jobs, and a reason can
quote a dump's bytes. An escape sequence or a carriage return among them would act
on the reader's terminal (retitle it, recolour or clear it, write over the line
above), so every line goes out through :func:`say`, :func:`note` or :func:`complain`,
which write each control character but newline and tab as ``\\xNN``: what the reader
sees is what the name holds.
"""

from __future__ import annotations

import sys

PROG = "slime-trace-viewer"

#: Every C0 control character but tab and newline, DEL and every C1 control
#: character, as ``\xNN``.
_CONTROLS = str.maketrans({code: f"\\x{code:02x}"
                           for code in (*range(0x20), *range(0x7F, 0xA0))
                           if chr(code) not in "\t\n"})


def terminal_text(text: str) -> str:
    """``text`` with each control character but tab and newline written as ``\\xNN``."""
    return text.translate(_CONTROLS)


def say(text: str) -> None:
    """Print ``text`` on stdout, made terminal text, at once (a long-running command
    is watched line by line)."""
    print(terminal_text(text), flush=True)


def note(text: str) -> None:
    """Print ``text`` on stderr, made terminal text, at once."""
    print(terminal_text(text), file=sys.stderr, flush=True)


def complain(text: str) -> None:
    """Print ``PROG: text`` on stderr, made terminal text, at once."""
    note(f"{PROG}: {text}")
