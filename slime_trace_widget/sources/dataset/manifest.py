"""The run dataset's manifest: which dumps it holds, from which file contents.

``<root>/manifest.json`` maps each dump's absolute path to its size, mtime and
blake2b content hash, its status (``ok`` or ``failed`` with the error), the
rollout ids and kind it holds and the files written for it. A rerun compares
sizes and mtimes (a stat per dump, no reading of the dump; a footer read per dataset
file, to find one gone or damaged) and converts only what changed;
the manifest is rewritten whole, by rename, after every dump, so a crash loses
at most the dump in flight. Only one convert at a time loads and saves it
(``lock.exclusive_convert``), so no convert's save drops another's dumps.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from ...whole_files import write_whole
from ..dumps.errors import DumpError

MANIFEST = "manifest.json"
VERSION = 1


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
        """Whether ``path`` was converted, without error, from exactly what it holds now
        (:meth:`holds`)."""
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

    def stem(self, path: str) -> str:
        """File name (without suffix) of a dump's tables: its own name, made unique by
        a hash of its path (two runs' ``rollout_3.pt`` do not collide)."""
        known = self.dumps.get(path, {}).get("stem")
        if known:
            return str(known)
        tag = hashlib.blake2b(os.fsencode(path), digest_size=4).hexdigest()
        return f"{Path(path).stem}-{tag}"

    def record(self, path: str, stat: os.stat_result, verdict: dict[str, Any]) -> list[str]:
        """Note a dump's conversion; return the files of its previous conversion that
        the new one did not rewrite (to delete)."""
        before = set(self.dumps.get(path, {}).get("files", []))
        entry: dict[str, Any] = {"file": os.path.basename(path), "stem": self.stem(path),
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


def content_hash(path: str) -> str:
    """blake2b of a file's bytes, read in 1 MiB pieces."""
    digest = hashlib.blake2b()
    with open(path, "rb") as handle:
        while piece := handle.read(1 << 20):
            digest.update(piece)
    return digest.hexdigest()
