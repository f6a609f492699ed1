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
#: ``eval`` as a word of a file's stem: ``rollout_eval_3``, ``eval_3``, ``eval``.
_EVAL = re.compile(r"(^|[_-])eval([_-]|$)")
#: The rollout id in a name as slime's template writes it (``rollout_7``,
#: ``rollout_eval_3``, ``eval_3``); the second is also the eval marker of a folder.
_ROLLOUT_ID = re.compile(r"rollout_(?:eval_)?(\d+)")
_EVAL_ID = re.compile(r"(?:^|[_-])eval[_-](\d+)")
_DIGIT = re.compile(r"\d")


def rollout_part(path: str) -> str:
    """The name along a dump's path that slime's ``--save-debug-rollout-data`` template
    filled with the rollout id: the file's stem when it holds a digit, else the nearest
    folder that holds one (``eval_3`` of ``/runs/x/eval_3/data.pt``, the template
    ``/runs/x/{rollout_id}/data.pt``), else the stem. The path is read as written: a
    relative path's folders are not looked up. A template that writes other digits after
    its ``{rollout_id}``, in a deeper name (``{rollout_id}/shard_0.pt``), is read by
    that deeper name."""
    names = _path_parts(path)
    stem = os.path.splitext(names[-1])[0]
    return next((name for name in (stem, *reversed(names[:-1])) if _DIGIT.search(name)),
                stem)


#: The kinds :func:`dump_kind` tells.
DUMP_KINDS = ("train", "eval")


def dump_kind(path: str) -> str:
    """``eval`` for slime's evaluation dumps, else ``train``, by the dump's path.

    slime saves evaluation at its template formatted with ``rollout_id=f"eval_{id}"``,
    so the marker stands where the template's ``{rollout_id}`` does: in the file's name
    (``rollout_eval_3.pt``) or in a folder's (``/runs/x/eval_3/data.pt``). A dump is
    eval when its file's stem has ``eval`` as a word (``rollout_eval_3``, ``eval_3``,
    ``eval``), or when :func:`rollout_part` is a folder holding slime's ``eval_<id>``
    (``eval_3``, ``rollout_eval_3``). Folders above the one that holds the id never
    decide: ``/runs/eval_runs/rollout_3.pt``, ``/runs/eval_2024/3/data.pt`` and
    ``/home/evaluation_team/rollout_3.pt`` are training dumps."""
    stem = os.path.splitext(_path_parts(path)[-1])[0]
    return "eval" if _EVAL.search(stem) or _EVAL_ID.search(rollout_part(path)) else "train"


def rollout_number(path: str) -> str | None:
    """The digits of the rollout id a dump's path names (``rollout_7.pt``,
    ``rollout_eval_3.pt``, ``eval_3.pt``, ``eval_3/data.pt``), from the name
    :func:`rollout_part` finds, the one :func:`dump_kind` reads; None if it names none."""
    part = rollout_part(path)
    match = _ROLLOUT_ID.search(part) or _EVAL_ID.search(part)
    return match.group(1) if match else None


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

