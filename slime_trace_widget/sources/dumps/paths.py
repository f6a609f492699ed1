"""Dump paths: one path, a glob, or a list of them, in natural order.

The CLI resolves globs and reports bad input before it knows whether it will
load anything (a cached run never does), so these live apart from ``dump``.
"""

from __future__ import annotations

import glob
import os
import re
from collections import Counter
from collections.abc import Iterable

from .errors import DumpError

PathLike = str | os.PathLike

_GLOB_CHARS = frozenset("*?[")
_EVAL = re.compile(r"(^|[_-])eval([_-]|$)")


def dump_kind(file_name: str) -> str:
    """``eval`` for slime's evaluation dumps (``rollout_eval_3.pt``), else ``train``."""
    return "eval" if _EVAL.search(os.path.splitext(os.path.basename(file_name))[0]) \
        else "train"


def dump_labels(paths: list[str]) -> list[str]:
    """A name for each dump of ``paths`` that tells it from the others: its file name,
    or where two share one, the shortest end of its path that differs (two runs'
    ``runA/rollout_5.pt`` and ``runB/rollout_5.pt``); a path given twice gets `` #2``,
    `` #3``... on its later copies. Labels are what trends and exports key dumps by, so
    two dumps never share one."""
    parts = [_path_parts(path) for path in paths]
    depth = [1] * len(paths)
    while True:
        labels = ["/".join(part[-level:]) for part, level in zip(parts, depth, strict=True)]
        crowded = {label for label, count in Counter(labels).items() if count > 1}
        deeper = [position for position, label in enumerate(labels)
                  if label in crowded and depth[position] < len(parts[position])]
        if not deeper:
            break
        for position in deeper:
            depth[position] += 1
    seen: Counter[str] = Counter()
    for position, label in enumerate(labels):
        seen[label] += 1
        if seen[label] > 1:
            labels[position] = f"{label} #{seen[label]}"
    return labels


def _path_parts(path: str) -> list[str]:
    """The names along ``path``, the file's last (``["runA", "rollout_5.pt"]``)."""
    names = [name for name in os.path.normpath(path).replace(os.sep, "/").split("/") if name]
    return names or [path]


def natural_key(path: str) -> list:
    """Sort key that orders rollout_2 before rollout_10."""
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", path)]


def _expand(spec: PathLike) -> list[str]:
    """One path, or the naturally sorted matches of a glob (which must match something).

    A path that exists as written is that path, even when its name holds glob
    characters (``rollout[1].pt``): a file is never taken for a pattern."""
    text = os.path.expanduser(os.fspath(spec))
    if isinstance(spec, os.PathLike) or not _GLOB_CHARS & set(text) or os.path.exists(text):
        return [text]
    matches = sorted(glob.glob(text, recursive=True), key=natural_key)
    if not matches:
        raise DumpError(f"{text}: no files match this pattern")
    return matches


def expand_paths(paths_or_glob: PathLike | Iterable[PathLike]) -> list[str]:
    """Expand every path/glob, keeping the caller's order and dropping repeats: a file
    named again, however spelled (``run/a.pt``, ``./run/a.pt``), keeps its first name."""
    specs = [paths_or_glob] if isinstance(paths_or_glob, (str, os.PathLike)) else paths_or_glob
    first: dict[str, str] = {}
    for path in (path for spec in specs for path in _expand(spec)):
        first.setdefault(os.path.abspath(path), path)
    return list(first.values())

