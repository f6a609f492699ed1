"""The files of a run dataset that no manifest entry lists: what a convert cut short
leaves behind, and their removal.

A conversion writes its files under a stem of its own before the manifest lists them
(``conversion``), each first as a temporary ``.<name>.<random>.tmp`` beside it
(``whole_files.replaced``). A convert that ends early (Ctrl-C, a crash, a worker killed
while it wrote) may leave both, which a reader of the folders that globs them
(``read_parquet('ds/samples/*/*.parquet')``) would count. A convert that ends on an
exception removes the files of the conversions it started and did not record
(:func:`remove_stems`); each convert first removes what an earlier one could not (one
killed, or stopped again while it cleaned up: :func:`sweep`).

Both run while the convert holds the dataset (``lock``), and touch only the dataset's
own files in its own folders: ``<table>/rollout_id=<n>/<stem>.parquet`` and
``<report>/<stem>.parquet`` (``layout``) whose stem ends in the 16 hex digits of
:func:`~.manifest.path_tag`, their temporary files, and the manifest's. Any other file
(a user's notes, a ``to_parquet`` export, whose stems have 8 hex digits) stays. A file
the manifest lists is never removed, so a reader that follows the manifest
(``open_dataset``) never loses a file it may read.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ...whole_files import TEMPORARY_SUFFIX
from .layout import ENGINE_LOAD, ENGINE_REPORTS, PARTITION, TABLES
from .manifest import MANIFEST, STEM_HASH_BYTES, Manifest

_STEM = rf"(?P<stem>.+-[0-9a-f]{{{2 * STEM_HASH_BYTES}}})"
#: A data file a conversion writes, and its temporary file while it is written.
_DATA_FILES = (re.compile(rf"{_STEM}\.parquet", re.DOTALL),  # a name may hold a newline
               re.compile(rf"\.{_STEM}\.parquet\.[0-9a-f]+{re.escape(TEMPORARY_SUFFIX)}",
                          re.DOTALL))
#: The manifest's temporary file while it is saved.
_MANIFEST_TEMPORARY = re.compile(rf"\.{re.escape(MANIFEST)}\.[0-9a-f]+"
                                 rf"{re.escape(TEMPORARY_SUFFIX)}")
_ROLLOUT_FOLDER = re.compile(rf"{PARTITION}=-?[0-9]+")


def data_files(root: Path) -> list[tuple[Path, str]]:
    """Each file of the dataset at ``root`` that a conversion writes or was writing,
    with its stem: the files named as :data:`_DATA_FILES` in the dataset's folders."""
    # A folder that is a link leads out of the dataset: another's files, never leftovers.
    folders = [root / name for name in ENGINE_REPORTS if not (root / name).is_symlink()]
    for table in (*TABLES, ENGINE_LOAD):
        if not (root / table).is_symlink():
            folders += [Path(entry.path) for entry in _entries(root / table)
                        if entry.is_dir(follow_symlinks=False)
                        and _ROLLOUT_FOLDER.fullmatch(entry.name)]
    found = []
    for folder in folders:
        for entry in _entries(folder):
            named = next(filter(None, (kind.fullmatch(entry.name) for kind in _DATA_FILES)),
                         None)
            if named and not entry.is_dir():
                found.append((Path(entry.path), named["stem"]))
    return found


def remove_stems(root: Path, stems: set[str]) -> int:
    """Remove every file the conversions under ``stems`` wrote or were writing, in any
    table and rollout id; how many there were."""
    return sum(remove_file(path) for path, stem in data_files(root) if stem in stems)


def sweep(root: Path, manifest: Manifest) -> int:
    """Remove the files of the dataset at ``root`` that a convert cut short left: each
    data file no entry of ``manifest`` (the one saved there) lists, each temporary one,
    and the manifest's temporary file; how many there were.

    Where no manifest is saved, only the temporary files go: data files without one
    may be a dataset whose manifest was lost or moved, not leftovers (those of a
    first convert cut short go once a convert has saved one)."""
    listed = {name for entry in manifest.dumps.values() for name in entry.get("files", ())}
    saved = (root / MANIFEST).is_file()
    leftovers = [path for path, _ in data_files(root)
                 if path.relative_to(root).as_posix() not in listed
                 and (saved or path.name.endswith(TEMPORARY_SUFFIX))]
    leftovers += [Path(entry.path) for entry in _entries(root)
                  if _MANIFEST_TEMPORARY.fullmatch(entry.name) and not entry.is_dir()]
    return sum(remove_file(path) for path in leftovers)


def remove_file(path: Path) -> int:
    """Delete ``path``: 1, or 0 when it is gone already (a count of files removed)."""
    try:
        path.unlink()
    except FileNotFoundError:
        return 0
    return 1


def _entries(folder: Path) -> list[os.DirEntry]:
    """The entries of ``folder``; none when it is not there."""
    try:
        with os.scandir(folder) as entries:
            return list(entries)
    except (FileNotFoundError, NotADirectoryError):
        return []
