"""slime-trace-widget: record, load, explore and share slime rollout traces in Jupyter.

The notebook entry point is :class:`TraceTimeline` (``TraceTimeline.from_dump(path)``);
the data model is :class:`TraceFrames` (``load_frames(path)``); the recording API
lives in :mod:`slime_trace_widget.tracing`.

The package is laid out in layers, each importing only those below it:
the stdlib-only modules (``schema``, ``values``, ``vocabularies``, ``whole_files``,
``file_locks``, ``machine_memory``) < ``tracing`` (record) < ``tables`` (records to Arrow) <
``frames`` (the model) < ``sources`` (dumps, the run dataset, followed folders, the
engines) < ``answers`` (stats, query, links, plots) < ``view`` (widget and page) <
``export`` (Perfetto, Parquet, OTLP, trend loggers) < ``analysis``, the CLI and the
demo; ``docs/architecture.md`` draws it.

Names are imported on first use: ``import slime_trace_widget.tracing`` in a
rollout worker, or the CLI's cached path, should not pay for pandas and the
widget stack; loading never imports torch unless raw samples are asked for.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Any

from ._version import __version__

_EXPORTS = {
    "DumpError": ".sources.dumps.errors",
    "RunView": ".view.run_view",
    "TraceFrames": ".frames.model",
    "TraceTimeline": ".view.widget",
    "analysis": None,
    "build_frames": ".frames.flatten",
    "load_dump": ".sources.loading",
    "load_dumps": ".sources.loading",
    "load_engine_traces": ".sources.engine.store",
    "load_frames": ".sources.loading",
    "load_live": ".sources.live",
    "save_dump": ".sources.dumps.files",
}

__all__ = [*_EXPORTS, "__version__"]

#: Names whose use means a dump is about to be loaded: a worker process is started
#: before their modules are imported, so its imports run alongside these
#: (see :mod:`slime_trace_widget.sources.dumps.pool`).
_LOADING_NAMES = frozenset({"TraceTimeline", "load_dump", "load_dumps", "load_frames"})

#: Modules users import by their names from before the package was laid out by
#: stage (the README shows them): each name is the very module of its stage, not a
#: copy, so classes, state and ``isinstance`` are shared.
_MODULE_ALIASES = {
    "dataset": "sources.dataset",
    "links": "answers.links",
    "parquet": "export.parquet",
    "perfetto": "export.perfetto",
    "plots": "answers.plots",
    "query": "answers.query",
}


def __getattr__(name: str) -> Any:
    if name in _MODULE_ALIASES and name not in _EXPORTS:
        return importlib.import_module(f"{__name__}.{name}")
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = _EXPORTS[name]
    if name in _LOADING_NAMES:
        from .sources.dumps.pool import start_worker

        start_worker()
    if module is None:
        return importlib.import_module(f".{name}", __name__)
    return getattr(importlib.import_module(module, __name__), name)


class _AliasLoader(importlib.abc.Loader):
    """Hands the import system the real module, so ``slime_trace_widget.query`` is
    ``slime_trace_widget.answers.query`` itself rather than a second copy of it."""

    def __init__(self, real_name: str) -> None:
        self.real_name = real_name
        self.real_spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.real_name)
        self.real_spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system has stamped the alias's spec on the real module: undo it.
        module.__spec__ = self.real_spec


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Finds ``slime_trace_widget.<alias>[.<sub>]`` as the module it names (above)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None
                  ) -> importlib.machinery.ModuleSpec | None:
        prefix, _, rest = fullname.partition(".")
        if prefix != __name__ or not rest:
            return None
        head, _, tail = rest.partition(".")
        if head not in _MODULE_ALIASES:
            return None
        real_name = f"{__name__}.{_MODULE_ALIASES[head]}" + (f".{tail}" if tail else "")
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(real_name))


if not any(isinstance(finder, _AliasFinder) for finder in sys.meta_path):
    sys.meta_path.insert(0, _AliasFinder())
