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
Loading checks each entry (:func:`check_entry`): a field holding a value of another
kind (a hand edit) makes it an unreadable manifest, named with the entry and the field,
for a convert and every reader alike.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Iterator
from itertools import count
from pathlib import Path
from typing import Any

from ...whole_files import write_whole
from ..dumps.errors import DumpError
from ..dumps.paths import DUMP_KINDS

MANIFEST = "manifest.json"
VERSION = 1
#: A dump's status in its entry: converted, or its last conversion failed.
STATUSES = ("ok", "failed")
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
                check_entry(dump, entry)
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


def check_entry(dump: str, entry: Any) -> None:
    """ValueError naming the dump and the field when ``entry``, the manifest's entry of
    ``dump``, is not what :meth:`Manifest.record` writes: an object whose fields hold
    values of their kind (:data:`ENTRY_FIELDS`; a field it does not know is left alone),
    with ``status`` and, when converted, every field a reader looks up
    (:data:`CONVERTED_FIELDS`). Checked once as the manifest loads, so no reader or
    convert meets a value that is not what it looks up."""
    if not isinstance(entry, dict):
        raise ValueError(f"the entry of {dump!r} is not an object")
    needed = ("status", *CONVERTED_FIELDS) if entry.get("status") == "ok" else ("status",)
    for name in needed:
        if name not in entry:
            raise ValueError(f"the entry of {dump!r} has no {name!r}")
    for name, (fits, meaning) in ENTRY_FIELDS.items():
        if name in entry and not fits(entry[name]):
            shown = json.dumps(entry[name])
            shown = shown if len(shown) <= 60 else f"{shown[:57]}..."
            raise ValueError(f"the entry of {dump!r}: {name!r} is {shown}, not {meaning}")


def _text(value: Any) -> bool:
    return isinstance(value, str)


def _integer(value: Any) -> bool:
    """An integer; never a bool, which JSON keeps apart (``true`` is no size)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _integer_or_null(value: Any) -> bool:
    return value is None or _integer(value)


def _texts(value: Any) -> bool:
    return isinstance(value, list) and all(_text(item) for item in value)


def _integers(value: Any) -> bool:
    return isinstance(value, list) and all(_integer(item) for item in value)


def _lists(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, list) for item in value)


def _time(value: Any) -> bool:
    """A time in epoch seconds, or null: a finite number (a join's window is reckoned
    from it)."""
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)
                             and math.isfinite(value))


def _frames_meta(value: Any) -> bool:
    """What ``arrow_files.meta_of`` writes of a dump's frames, read back by
    ``parse_meta`` and by a convert's engine-trace join."""
    return (isinstance(value, dict) and _texts(value.get("paths"))
            and isinstance(value.get("rollout_ids"), list)
            and all(r is None or _integer(r) for r in value["rollout_ids"])
            and isinstance(value.get("warnings"), dict)
            and all(_integer(count) for count in value["warnings"].values())
            and "t0" in value and "t1" in value and _time(value["t0"]) and _time(value["t1"]))


def _stem(value: Any) -> bool:
    """A file stem: a name in the folder it is joined to, never a path into another (a
    backslash is a name's own character here, as in a dump named ``a\\b.pt``)."""
    return _text(value) and value not in ("", ".", "..") and "/" not in value \
        and "\0" not in value


#: Each field a manifest entry may hold -> (whether a value fits it, what it must be).
ENTRY_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "status": (lambda value: value in STATUSES, f"one of {', '.join(map(repr, STATUSES))}"),
    "file": (_text, "a string"),
    "stem": (_stem, "a file name without a folder"),
    "size": (_integer_or_null, "an integer or null"),
    "mtime_ns": (_integer_or_null, "an integer or null"),
    "blake2b": (_text, "a string"),
    "kind": (lambda value: value in DUMP_KINDS, f"one of {', '.join(map(repr, DUMP_KINDS))}"),
    "rollouts": (_integers, "a list of integers"),
    "files": (_texts, "a list of strings"),
    "meta": (_frames_meta, "an object of paths, rollout_ids, warnings, t0 and t1"),
    "samples": (_integer, "an integer"),
    "spans": (_integer, "an integer"),
    "events": (_integer, "an integer"),
    "error": (_text, "a string"),
    "last_error": (_text, "a string"),
    "engine_traces": (_lists, "a list of lists"),
}
#: The fields a converted dump's entry has held since the first manifest, which readers
#: and converts look up (``size`` and ``mtime_ns`` may be null: never unchanged).
CONVERTED_FIELDS = ("file", "stem", "size", "mtime_ns", "blake2b", "kind", "rollouts",
                    "files", "meta")


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
