"""The name a view's files start with in their folder: the page, the cache, the exports
(``--perfetto``, ``--parquet``) and a followed run's state file.

One dump's view is named after it, ``rollout_0`` for ``rollout_0.pt`` (as slime's viewer
names it), unless another view holds that name in the folder: one whose cache was
built from another dump, or a followed run whose state file names another folder (two
runs' ``rollout_0.pt`` viewed into one ``--out-dir``). It is then named
``rollout_0-<8 hex digits of a hash of its resolved path>``, the same on every run: a
server of the first view keeps serving its page, and each view keeps its own cache.
A name whose files record no view (none written yet, or a page whose cache was not
kept) is free. A followed folder's view is named after the folder by the same rule;
several dumps make ``<first>+<N others>-<hash of all their paths>``, which no other set
of dumps shares.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

from .cache import CACHE_SUFFIX, PageCache, path_text
from .files import FOLLOW_SUFFIX

#: The key of a followed run's state file that names the folder it follows
#: (:func:`folder_claim`).
FOLLOWED_KEY = "of"


def dumps_view(folder: Path, inputs: Sequence[Path]) -> tuple[str, PageCache]:
    """The name of the view of ``inputs`` in ``folder`` (see the module), and its cache
    (whose header, read to tell who holds the name, is not read again)."""
    if len(inputs) > 1:
        name = f"{inputs[0].stem}+{len(inputs) - 1}-{path_digest(inputs)}"
        return name, PageCache(folder / f"{name}{CACHE_SUFFIX}")
    dump = inputs[0]
    plain = PageCache(folder / f"{dump.stem}{CACHE_SUFFIX}")
    if _free_or_own(folder, dump.stem, plain, path_text(dump)):
        return dump.stem, plain
    name = f"{dump.stem}-{path_digest([dump])}"
    return name, PageCache(folder / f"{name}{CACHE_SUFFIX}")


def follow_name(folder: Path, followed: Path) -> str:
    """The name of the view of the followed folder ``followed`` in ``folder``."""
    name = followed.resolve().name
    if _free_or_own(folder, name, PageCache(folder / f"{name}{CACHE_SUFFIX}"),
                    folder_claim(followed)):
        return name
    return f"{name}-{path_digest([followed])}"


def folder_claim(followed: Path) -> str:
    """What a followed run's state file records of the folder it follows: a digest of
    its resolved path (the state file is served, and the path is not the page's to
    tell)."""
    return hashlib.blake2b(path_text(followed).encode(), digest_size=16).hexdigest()


def path_digest(paths: Sequence[Path]) -> str:
    """8 hex digits of a hash of ``paths``, resolved."""
    joined = "\0".join(os.fsdecode(os.path.realpath(path)) for path in paths)
    return hashlib.blake2b(joined.encode("utf-8", "surrogateescape"), digest_size=4).hexdigest()


def _free_or_own(folder: Path, name: str, cache: PageCache, own: str) -> bool:
    """Whether no view but the one whose files record ``own`` holds ``name`` in
    ``folder``: the dumps ``cache`` (``name``'s) was built from, and the folder that
    ``name``'s state file names, are none but ``own``."""
    held_by = set(cache.built_from())
    followed = _followed(folder / f"{name}{FOLLOW_SUFFIX}")
    if followed is not None:
        held_by.add(followed)
    return held_by <= {own}


def _followed(state: Path) -> str | None:
    """The folder a followed run's state file records (:func:`folder_claim`); None when
    there is no readable one."""
    try:
        note = json.loads(state.read_bytes())
    except (OSError, ValueError):
        return None
    followed = note.get(FOLLOWED_KEY) if isinstance(note, dict) else None
    return followed if isinstance(followed, str) else None
