"""One convert at a time per run dataset.

A convert reads ``manifest.json`` once and rewrites it whole after every dump, so
two converts into one folder at once would each save only their own dumps, and the
last to save would win. :func:`exclusive_convert` holds an exclusive ``flock`` on
``<root>/.convert.lock`` from loading the manifest to its last save; a second
convert into the same folder fails at once with :class:`ConvertBusy` (naming the
folder) rather than waiting an unknown time behind the first. The lock is the
kernel's: it goes with the process that held it, so a crashed convert never leaves
the folder locked. Readers (``open_dataset``) take no lock: the manifest is always
replaced whole.

Limits: those of :mod:`slime_trace_widget.file_locks` (no lock where Python has no
``fcntl``; network file systems).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ...file_locks import locked_file
from ..dumps.errors import DumpError

#: The lock file a convert holds in the dataset folder.
LOCK_FILE = ".convert.lock"


class ConvertBusy(DumpError):
    """Another convert is writing into the same dataset folder."""


@contextmanager
def exclusive_convert(root: Path) -> Iterator[None]:
    """Hold the dataset at ``root`` for one convert until the block ends.

    Raises :class:`ConvertBusy` at once, taking nothing, when another convert (in this
    process or any other) holds it.
    """
    try:
        lock = locked_file(root / LOCK_FILE)
    except BlockingIOError:
        raise ConvertBusy(f"{root}: another convert is writing into this dataset "
                          "folder; run this one when it has finished") from None
    with lock:
        yield
