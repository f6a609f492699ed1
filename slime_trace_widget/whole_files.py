"""Files written whole or not at all: the one way every module of the package writes an
output file that something else may read meanwhile (a page a browser reloads, a cache
a second run opens, a manifest, a store's Parquet file).

The data goes to a temporary file beside the target, named ``.<target name>.<random>.tmp``,
and replaces the target in one rename, so a reader finds the old file or the new one and
a crash leaves no half-written file under the target's name. The random part keeps two
writers of one target (threads of one process included) off each other's temporary file.
Stores that clean up after a crash may remove leftover dot-files ending in ``.tmp``.
Standard library only: every layer may use it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

__all__ = ["TEMPORARY_SUFFIX", "fsync_folder", "replaced", "replaced_folder", "write_whole"]

#: How every temporary file of :func:`replaced` ends (its name also starts with a dot).
TEMPORARY_SUFFIX = ".tmp"


@contextlib.contextmanager
def replaced(target: str | os.PathLike[str], *, durable: bool = False) -> Iterator[Path]:
    """A temporary path beside ``target`` for the block to write; when the block ends
    without an exception, that file replaces ``target``, else it is removed.

    ``durable``: the file's data is synced to disk before the rename and the folder's
    entry after it, so the new file survives a power cut once this returns.

    As writing in place would: a symbolic link is written through (the file it names is
    replaced, the link stays), and a file that existed keeps its permission bits. An
    OSError about the temporary file (a folder where the file goes, a folder missing or
    read-only) names ``target``, the path the caller gave, instead.
    """
    final = Path(target)
    if final.is_symlink():
        final = final.resolve()
    temporary = final.with_name(f".{final.name}.{secrets.token_hex(8)}{TEMPORARY_SUFFIX}")
    try:
        yield temporary
        with contextlib.suppress(FileNotFoundError):  # a new file: the umask decides
            os.chmod(temporary, stat.S_IMODE(os.stat(final).st_mode))
        if durable:
            with open(temporary, "rb") as handle:
                os.fsync(handle.fileno())
        os.replace(temporary, final)
    except OSError as exc:
        if exc.filename is None or Path(os.fsdecode(exc.filename)) != temporary:
            raise
        raise type(exc)(exc.errno, exc.strerror, os.fspath(target)) from exc
    finally:
        temporary.unlink(missing_ok=True)  # gone already when it was renamed
    if durable:
        fsync_folder(final.parent)


@contextlib.contextmanager
def replaced_folder(target: Path) -> Iterator[Path]:
    """A new folder beside ``target`` for the block to fill; when the block ends without
    an exception it takes ``target``'s place, whose earlier files go, else it is
    removed. Between the two renames ``target`` is briefly missing, never a mix of the
    two."""
    token = secrets.token_hex(8)
    building = target.with_name(f".{target.name}.{token}{TEMPORARY_SUFFIX}")
    earlier = target.with_name(f".{target.name}.{token}.old")
    try:
        yield building
        if target.is_dir() and not target.is_symlink():
            os.replace(target, earlier)
        os.replace(building, target)
    finally:
        shutil.rmtree(building, ignore_errors=True)
        shutil.rmtree(earlier, ignore_errors=True)


def write_whole(target: str | os.PathLike[str], data: bytes | str, *,
                durable: bool = False) -> Path:
    """Write ``data`` (text as UTF-8) to ``target`` whole or not at all (:func:`replaced`:
    a new file's permissions are the umask's, an existing file keeps its own). Returns
    the path."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    with replaced(target, durable=durable) as temporary:
        temporary.write_bytes(payload)
    return Path(target)


def fsync_folder(folder: str | os.PathLike[str]) -> None:
    """Sync ``folder``'s entries (a rename or a new file in it) to disk."""
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)
