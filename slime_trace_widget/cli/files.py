"""The files the command writes: their names and folder (each is written whole or not
at all, by :mod:`slime_trace_widget.whole_files`)."""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator
from pathlib import Path

from ..whole_files import write_whole
from .errors import CliError

#: The page beside the dumps: ``rollout_0.trace_timeline_viewer.html``, as slime's viewer.
HTML_SUFFIX = ".trace_timeline_viewer.html"
#: What a followed page polls, beside it: ``<name>.follow.json`` (``follow``), holding
#: ``{"version": n, "dumps": k, "run": token, "of": claim}``, rewritten on each change.
#: Named as the page is (``names``), so that two runs followed into one ``--out-dir``
#: keep their own; ``run`` is new in each process, so a tab of an earlier process sees
#: the restart as news; ``of`` tells which folder holds the name (``names.folder_claim``).
FOLLOW_SUFFIX = ".follow.json"


def output_folder(out_dir: str | None, default: Path) -> Path:
    """``--out-dir`` (else ``default``), made if missing; CliError naming it when it is a
    file or cannot be made. A leading ``~`` is the home folder, as in a dump's path (a
    shell leaves ``--out-dir=~/views`` as it is)."""
    folder = Path(out_dir).expanduser() if out_dir else default
    if folder.exists() and not folder.is_dir():
        raise CliError(f"--out-dir {folder}: not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"--out-dir {folder}: {exc.strerror or exc}") from exc
    return folder


def write_output(path: Path, data: str | bytes) -> None:
    """``data`` written whole at ``path``; CliError naming it when it cannot be (a
    read-only or full folder, a folder where the file goes)."""
    with writing(path):
        write_whole(path, data)


#: The reasons a folder refuses the files, where another folder would take them.
REFUSED = {errno.EACCES, errno.EPERM, errno.EROFS}


@contextlib.contextmanager
def writing(target: Path) -> Iterator[None]:
    """A block that writes ``target``: an OSError becomes a CliError naming it, and
    where the folder refuses files (read-only, not the user's: a shared dump folder)
    the option that writes them elsewhere."""
    try:
        yield
    except OSError as exc:
        elsewhere = "; --out-dir DIR writes them elsewhere" if exc.errno in REFUSED else ""
        raise CliError(f"{target}: cannot be written ({exc.strerror or exc}{elsewhere})") \
            from exc
