"""Import SGLang's own tracing and metrics modules on a machine without a GPU.

``pip install --no-deps sglang==0.5.23`` puts SGLang's source here without its
GPU stack. Its observability modules (``srt/observability/trace.py``,
``req_time_stats.py``, ``metrics_collector.py``) are plain Python, but they
import the scheduler's enums, which import model configs, kernels and layers.
:func:`import_sglang` makes those imports succeed with the fewest stand-ins:

* ``sglang/__init__.py`` (the frontend language, Hugging Face patches) is not
  run: ``sglang`` becomes a bare package over the installed folder;
* the modules of :data:`STUBBED` (GPU kernels and model libraries that only
  model code uses) are empty modules whose every attribute is an inert class.

Everything else is SGLang's real code. Call it only in a process of its own (a
driver child): the stand-ins stay in ``sys.modules`` for the process's life.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any

#: The release these helpers were written against (``.ci/run`` installs it).
SGLANG_VERSION = "0.5.23"

#: Packages replaced by inert modules, with the reason each is not the real one.
STUBBED = {
    "triton": "GPU kernel compiler (sglang.srt.utils.common imports it)",
    "torchvision": "image ops of multimodal configs",
    "transformers": "model configs (sglang.srt.configs subclass its classes)",
    "huggingface_hub": "model download helpers",
    "sentencepiece": "tokenizer of some model configs",
    "safetensors": "weight loading",
    # not needed to import, but its real modules (under a triton stub) add 850 modules
    # and over a second to every host process
    "sglang.kernels": "SGLang's own GPU kernels",
    "sglang.srt.layers": "SGLang's model layers (call torch.compile on import)",
}


class _Inert(type):
    """A class that stands for any attribute of a stubbed module: it can be subclassed
    (with keywords), called, used as a decorator, indexed and combined in type hints."""

    def __new__(mcs, name: str, bases: tuple, namespace: dict, **_: Any) -> _Inert:
        return super().__new__(mcs, name, bases, namespace)

    def __init__(cls, name: str, bases: tuple, namespace: dict, **_: Any) -> None:
        super().__init__(name, bases, namespace)

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _inert(f"{cls.__qualname__}.{name}")

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # used as a decorator: leave the function as it is
        return cls

    def __getitem__(cls, item: Any) -> Any:
        return cls

    def __setitem__(cls, item: Any, value: Any) -> None:
        pass

    def __or__(cls, other: Any) -> Any:
        return cls

    def __ror__(cls, other: Any) -> Any:
        return cls

    def __iter__(cls) -> Any:
        return iter(())

    def __bool__(cls) -> bool:
        return False


def _inert(qualname: str) -> _Inert:
    return _Inert(qualname.rsplit(".", 1)[-1], (), {"__qualname__": qualname,
                                                    "__module__": "sglang_stub"})


class _InertModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        value = _inert(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the modules of :data:`STUBBED` (and all below them) before the real ones."""

    def find_spec(self, name: str, path: Any = None, target: Any = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if not any(name == top or name.startswith(top + ".") for top in STUBBED):
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _InertModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def import_sglang() -> types.SimpleNamespace:
    """SGLang's ``trace``, ``req_time_stats`` and ``metrics_collector`` modules (and the
    enums its scheduler passes them), imported with the stand-ins above."""
    if not any(isinstance(finder, _StubFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _StubFinder())
    if "sglang" not in sys.modules:
        spec = importlib.util.find_spec("sglang")
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("sglang is not installed: pip install --no-deps "
                              f"sglang=={SGLANG_VERSION}")
        package = types.ModuleType("sglang")
        package.__path__ = list(spec.submodule_search_locations)
        package.__spec__ = spec
        sys.modules["sglang"] = package
    trace = importlib.import_module("sglang.srt.observability.trace")
    req_time_stats = importlib.import_module("sglang.srt.observability.req_time_stats")
    metrics_collector = importlib.import_module("sglang.srt.observability.metrics_collector")
    forward_batch_info = importlib.import_module("sglang.srt.model_executor.forward_batch_info")
    disaggregation = importlib.import_module("sglang.srt.disaggregation.utils")
    version = importlib.import_module("sglang.version")
    return types.SimpleNamespace(
        trace=trace, req_time_stats=req_time_stats, metrics_collector=metrics_collector,
        ForwardMode=forward_batch_info.ForwardMode,
        DisaggregationMode=disaggregation.DisaggregationMode,
        version=version.__version__)


def import_mooncake() -> types.SimpleNamespace:
    """SGLang's Mooncake KV sender (``srt/disaggregation/mooncake/conn.py``: the default
    transfer backend's ``MooncakeKVSender`` and ``MooncakeKVManager``), ``KVPoll``, and the
    trace stages its transfer workers write (``srt/observability/mooncake_trace.py``).

    The sender's ``__init__`` reads the server's runtime context, which a server
    publishes at start-up; here it stands in with tracing on and one data-parallel rank
    (``get_observability``, ``get_parallel`` of the two ``conn`` modules). Call
    :func:`import_sglang` first, in the same process."""
    common = importlib.import_module("sglang.srt.disaggregation.common.conn")
    mooncake = importlib.import_module("sglang.srt.disaggregation.mooncake.conn")
    stages = importlib.import_module("sglang.srt.observability.mooncake_trace")
    observability = types.SimpleNamespace(enable_trace=True)
    parallel = types.SimpleNamespace(num_dp_ranks=1, enable_dsa_cache_layer_split=False,
                                     enable_kv_cache_sharding=False)
    for module in (common, mooncake):
        if hasattr(module, "get_observability"):
            module.get_observability = lambda: observability
        if hasattr(module, "get_parallel"):
            module.get_parallel = lambda: parallel
    return types.SimpleNamespace(
        Sender=mooncake.MooncakeKVSender, Manager=mooncake.MooncakeKVManager,
        KVPoll=common.KVPoll, stages=stages)
