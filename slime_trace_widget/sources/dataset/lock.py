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

Limit: where Python has no ``fcntl`` (Windows), there is no lock, and two converts
into one folder at once must be avoided by the caller. On network file systems
``flock`` is only as good as the file system makes it (NFS maps it to byte-range
locks, which hold between machines on NFSv4).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..dumps.errors import DumpError

try:
    import fcntl
except ImportError:  # Windows: no lock (see the module's docstring)
    fcntl = None  # type: ignore[assignment]

#: The lock file a convert holds in the dataset folder.
LOCK_FILE = ".convert.lock"


class ConvertBusy(DumpError):
    """Another convert is writing into the same dataset folder."""


@contextmanager
def exclusive_convert(root: Path) -> Iterator[None]:
    """Hold the dataset at ``root`` for one convert until the block ends.

    Raises :class:`ConvertBusy` at once, taking nothing, when another convert (in this
    process or any other) holds it. Without ``fcntl`` the block runs unlocked.
    """
    if fcntl is None:
        yield
        return
    handle = os.open(root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConvertBusy(f"{root}: another convert is writing into this dataset "
                              "folder; run this one when it has finished") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
    finally:
        os.close(handle)
