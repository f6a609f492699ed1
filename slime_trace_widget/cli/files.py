"""The files the command writes: their names, and writing them whole or not at all."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

#: The page beside the dumps: ``rollout_0.trace_timeline_viewer.html``, as slime's viewer.
HTML_SUFFIX = ".trace_timeline_viewer.html"


def atomic_write(path: Path, data: bytes) -> None:
    """Write via a temp file and rename, so a crash never leaves half a page or cache,
    and a reader (a browser, a second run) sees the old file or the new one.

    The temp file is opened with mode 0666 for the umask to trim, as any tool's output
    (``tempfile.mkstemp`` would make every page and cache 0600 whatever the umask).
    """
    temp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    handle = os.open(temp, flags, 0o666)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
