"""What ``engine_traces=`` may name, checked before anything is read: a collector folder
(``slime-trace-viewer collect DIR``), one of its stores' folders, or files of them (the
stores' finished Parquet files or write-ahead Arrow files). Anything else is refused with
an error naming it: read as a store, it would hold nothing, be warned of once per read
and have every generation span of the frames counted as missing its request."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from . import load_store, store
from .durable import Layout, files_of

LAYOUTS = (store.LAYOUT, load_store.LAYOUT)


class EngineTracesError(ValueError):
    """``engine_traces`` names neither a collector folder nor files of its stores: the
    ``path`` given and the ``problem`` with it."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"engine traces {path}: {problem}")
        self.path, self.problem = path, problem


def checked_source(source: str | os.PathLike | Iterable[str | os.PathLike]
                   ) -> str | os.PathLike | list[str | os.PathLike]:
    """``source`` (a list when an iterable), after checking it names a collector folder (or
    an empty folder, one whose collector has not started), a store's folder or store
    files; EngineTracesError (FileNotFoundError when missing) naming the path and the
    problem otherwise."""
    if isinstance(source, (str, os.PathLike)):
        root = Path(source)
        if root.is_dir():
            # An empty folder is a collector folder whose collector has not started yet
            # (``--follow`` may be started first): it holds no span, so joins nothing.
            if not (_is_empty(root) or any(_is_store_folder(layout, root)
                                           for layout in LAYOUTS)):
                raise EngineTracesError(root, f"not a collector folder (no {store.SUBDIR}/ "
                                              f"or {load_store.SUBDIR}/ in it)")
            return source
        files = [root]
    else:
        source = list(source)
        files = [Path(item) for item in source]
    for path in files:
        if not path.is_file():
            raise FileNotFoundError(f"engine traces {path}: no such file")
        _check_file(path)
    return source


def _is_empty(folder: Path) -> bool:
    return next(folder.iterdir(), None) is None


def _is_store_folder(layout: Layout, folder: Path) -> bool:
    return ((folder / layout.subdir).is_dir() or folder.name == layout.subdir
            or bool(files_of(layout, folder)))


def _check_file(path: Path) -> None:
    """EngineTracesError unless ``path`` is a Parquet file with a store's time columns or
    an Arrow stream of a store's schema."""
    try:
        names = pq.read_schema(path).names
    except (pa.ArrowException, OSError):
        names = None
    if names is not None:
        if any(layout.start in names and layout.end in names for layout in LAYOUTS):
            return
        raise EngineTracesError(path, "a Parquet file without the engine stores' time "
                                      "columns (start_ns and end_ns, or ts_ns)")
    try:
        with open(path, "rb") as handle:
            schema = ipc.open_stream(handle).schema
    except (pa.ArrowException, OSError, EOFError):
        schema = None
    if schema is None or not any(schema.equals(layout.schema) for layout in LAYOUTS):
        raise EngineTracesError(path, "not an engine-trace file (a collector folder's "
                                      "Parquet or write-ahead Arrow file)")
