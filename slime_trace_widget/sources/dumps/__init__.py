"""Dump files in, frames out: safe reading, worker processes, and saving.

``load_frames`` is the main path (workers read and flatten, columns come
back); ``load_dump`` gives raw samples; ``save_dump`` writes slime's format.
Safety rules and the allowlist are in ``docs/loader-safety.md``.
"""

from __future__ import annotations

from .allowlist import CheckedArray
from .errors import DumpError
from .files import LoadedDump, load_dump_bytes, save_dump
from .paths import PathLike, expand_paths
from .placeholders import Placeholder
from .pool import default_memory_limit, default_time_limit, default_workers, start_worker

__all__ = ["CheckedArray", "DumpError", "LoadedDump", "PathLike", "Placeholder",
           "default_memory_limit", "default_time_limit", "default_workers", "expand_paths",
           "load_dump_bytes", "save_dump", "start_worker"]
