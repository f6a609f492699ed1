"""The run dataset's manifest: which dumps it holds, from which file contents.

``<root>/manifest.json`` maps each dump's absolute path to its size, mtime and
blake2b content hash, its status (``ok``, with ``last_error`` when a conversion of the
same content failed since, or ``failed`` with the error), the rollout ids and kind it
holds and the files written for it, named by a stem no other dump's files have
(:meth:`Manifest.new_stems`). A rerun compares sizes and mtimes (a stat per dump, no
reading of the dump; a footer read per dataset file, to find one gone or damaged) and
converts only what changed; the manifest is rewritten whole, by rename, after every
dump, so a crash loses at most the dump in flight, and before the files of the
conversion a dump's new one replaces are deleted. Only one convert at a time loads and
saves it (``lock.exclusive_convert``), so no convert's save drops another's dumps.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import Any

from ...whole_files import write_whole
from ..dumps.errors import DumpError

MANIFEST = "manifest.json"
VERSION = 1
#: Bytes of the path hash in a dump's file stem (twice as many hex digits). 32 bits were
#: too few: among slime's ``eval_N/data.pt`` dumps, all named ``data``, a pair alike turns
#: up after some 80 000 paths. Among a million dumps of one name, 64 bits are alike by
#: chance about once in 4e7 runs, and :meth:`Manifest.new_stems` tells those apart too.
STEM_HASH_BYTES = 8


class Manifest:
    """The manifest of the dataset at ``root`` (empty when there is none yet)."""

    def __init__(self, root: Path, dumps: dict[str, dict[str, Any]]) -> None:
        self.root = root
        self.dumps = dumps

    @classmethod
    def load(cls, root: str | Path, must_exist: bool = False) -> Manifest:
        root = Path(root)
        path = root / MANIFEST
        if not path.exists():
            if must_exist:
                raise DumpError(f"{root}: not a run dataset (no {MANIFEST}; see "
                                "`slime-trace-viewer convert`)")
            return cls(root, {})
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("version") != VERSION or not isinstance(data.get("dumps"), dict):
                raise ValueError(f"version {data.get('version')!r} is not {VERSION}")
            for dump, entry in data["dumps"].items():
                if not isinstance(entry, dict):
                    raise ValueError(f"the entry of {dump!r} is not an object")
        except (OSError, ValueError, AttributeError) as exc:
            raise DumpError(f"{path}: unreadable manifest ({exc})") from exc
        return cls(root, data["dumps"])

    def save(self) -> None:
        write_whole(self.root / MANIFEST,
                    json.dumps({"version": VERSION, "dumps": self.dumps}, indent=1))

    def converted(self) -> list[dict[str, Any]]:
        """Entries of the dumps converted without error, in path order."""
        return [dict(entry, path=path) for path, entry in sorted(self.dumps.items())
                if entry.get("status") == "ok"]

    def unchanged(self, path: str, stat: os.stat_result) -> bool:
        """Whether ``path`` needs no conversion: :meth:`converted_from` what it holds now,
        and no conversion of it failed since (``last_error``: retried)."""
        return self.converted_from(path, stat) and "last_error" not in self.dumps[path]

    def converted_from(self, path: str, stat: os.stat_result) -> bool:
        """Whether the dataset holds ``path`` converted, without error, from exactly what
        it holds now (:meth:`holds`)."""
        return self.dumps.get(path, {}).get("status") == "ok" and self.holds(path, stat)

    def holds(self, path: str, stat: os.stat_result) -> bool:
        """Whether the file ``path`` (of ``stat``) holds what its entry was made from.

        Same size and mtime: yes, without reading. Same size, other mtime (the file
        was touched or copied): yes if its content hash is the entry's, and the new
        mtime is noted.
        """
        entry = self.dumps.get(path)
        if not entry or entry.get("size") != stat.st_size:
            return False
        if entry.get("mtime_ns") == stat.st_mtime_ns:
            return True
        if content_hash(path) != entry.get("blake2b"):
            return False
        entry["mtime_ns"] = stat.st_mtime_ns
        return True

    def new_stems(self, paths: list[str]) -> list[str]:
        """The file stem each dump of ``paths`` (one convert's) is written under.

        Each gets its name and a hash of its path (two runs' ``rollout_3.pt``, slime's
        ``eval_N/data.pt``), unique by construction: never the stem of a converted entry,
        its own earlier conversion's included, nor one given to another of ``paths``,
        compared without case (a case-insensitive file system, as macOS has, takes
        ``A-…`` and ``a-…`` for one file). So two dumps' files never share a name, and a
        conversion never writes over files the manifest lists: a dump converted again
        keeps its earlier files, read as before, until the new ones are recorded (and
        for good when the new conversion fails, :meth:`record`). On a clash the next
        stem of a fixed series is taken (:func:`candidate_stems`): the same manifest and
        paths give the same stems.
        """
        taken = {str(entry["stem"]).casefold() for entry in self.dumps.values()
                 if entry.get("status") == "ok" and entry.get("stem")}
        stems = []
        for path in paths:
            stem = next(stem for stem in candidate_stems(path) if stem.casefold() not in taken)
            taken.add(stem.casefold())
            stems.append(stem)
        return stems

    def record(self, path: str, stat: os.stat_result, stem: str, verdict: dict[str, Any],
               *, same_content: bool = False) -> list[str]:
        """Note a dump's conversion, written under ``stem`` (:meth:`new_stems`); return
        the files of the entry it replaces, to delete once the manifest is saved.

        A failed conversion of a dump whose converted data is of the very content it
        holds now (``same_content``: converted again for an engine-trace join, for its
        kind, or for damaged files) keeps that entry and its files, read as before, and
        notes the error as ``last_error``: the convert reports the dump as failed, and
        the next one retries it (:meth:`unchanged`). A failed conversion of a dump whose
        content changed drops its earlier data: those rows hold samples the file no
        longer holds (a run resumed from a checkpoint writes its steps' dumps again,
        with other samples), and the dataset would pass them off as the file's with no
        sign; the entry says failed, with the error, until a convert succeeds.
        """
        earlier = self.dumps.get(path, {})
        if "ok" not in verdict and same_content and earlier.get("status") == "ok":
            earlier["last_error"] = str(verdict.get("error"))
            return []
        before = set(earlier.get("files", []))
        entry: dict[str, Any] = {"file": os.path.basename(path), "stem": stem,
                                 "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
        if "ok" in verdict:
            report = verdict["report"]
            entry.update(status="ok", blake2b=report["blake2b"], kind=report["kind"],
                         rollouts=report["rollouts"], files=report["files"],
                         meta=report["meta"], samples=report["samples"],
                         spans=report["spans"], events=report["events"])
        else:
            entry.update(status="failed", error=str(verdict.get("error")), files=[])
        self.dumps[path] = entry
        return sorted(before - set(entry["files"]))


def candidate_stems(path: str) -> Iterator[str]:
    """The stems a dump at ``path`` may be written under, in the order they are tried: its
    file name and :func:`path_tag` of its path, the first time with none, then with 1,
    2, ..."""
    name = Path(path).stem
    for attempt in count():
        yield f"{name}-{path_tag(path, attempt)}"


def path_tag(path: str, attempt: int) -> str:
    """The hash in a dump's ``attempt``-th candidate stem (0 the first): blake2b of its
    path, and after the first, of the path and the attempt's number."""
    data = os.fsencode(path)
    if attempt:
        data += b"\0" + str(attempt).encode()
    return hashlib.blake2b(data, digest_size=STEM_HASH_BYTES).hexdigest()


def content_hash(path: str) -> str:
    """blake2b of a file's bytes, read in 1 MiB pieces."""
    digest = hashlib.blake2b()
    with open(path, "rb") as handle:
        while piece := handle.read(1 << 20):
            digest.update(piece)
    return digest.hexdigest()
