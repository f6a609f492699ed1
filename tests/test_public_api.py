"""What users import keeps working after the package was laid out by stage.

The names of ``slime_trace_widget`` and ``slime_trace_widget.tracing`` are the
public API; the module names the README shows (``slime_trace_widget.analysis``
and the others below) must be the very modules of their stage, not copies, or a
class would exist twice and ``isinstance`` would fail across them.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import slime_trace_widget

#: Every name ``slime_trace_widget`` offered before the layout, and where it lives now.
TOP_NAMES = {
    "DumpError": "slime_trace_widget.sources.dumps.errors",
    "RunView": "slime_trace_widget.view.run_view",
    "TraceFrames": "slime_trace_widget.frames.model",
    "TraceTimeline": "slime_trace_widget.view.widget",
    "build_frames": "slime_trace_widget.frames.flatten",
    "load_dump": "slime_trace_widget.sources.loading",
    "load_dumps": "slime_trace_widget.sources.loading",
    "load_engine_traces": "slime_trace_widget.sources.engine.store",
    "load_frames": "slime_trace_widget.sources.loading",
    "load_live": "slime_trace_widget.sources.live",
    "save_dump": "slime_trace_widget.sources.dumps.files",
}
TRACING_NAMES = [
    "SGLANG_PD_DECODE_SEGMENTS", "SGLANG_PD_PREFILL_SEGMENTS", "SGLANG_PD_SUMMARY_KEYS",
    "SGLANG_TRACE_META_KEYS", "TRACE_CHILDREN_KEY", "TRACE_VERSION", "TraceHandle", "TraceSpan",
    "TraceSpanContext", "bind_trace", "bind_trace_carrier", "build_sglang_meta_trace_attrs",
    "export_trace", "get_clock", "import_trace", "merge_trace", "set_clock", "trace_event",
    "trace_function", "trace_headers", "trace_next_attempt", "trace_span", "use_clock",
]
#: Module names from before the layout -> the module of its stage.
OLD_MODULES = {
    "slime_trace_widget.analysis": "slime_trace_widget.analysis",
    "slime_trace_widget.plots": "slime_trace_widget.answers.plots",
    "slime_trace_widget.query": "slime_trace_widget.answers.query",
    "slime_trace_widget.links": "slime_trace_widget.answers.links",
    "slime_trace_widget.perfetto": "slime_trace_widget.export.perfetto",
    "slime_trace_widget.parquet": "slime_trace_widget.export.parquet",
    "slime_trace_widget.dataset": "slime_trace_widget.sources.dataset",
    "slime_trace_widget.dataset.layout": "slime_trace_widget.sources.dataset.layout",
}


@pytest.mark.parametrize("name", sorted(TOP_NAMES))
def test_top_level_names_are_where_they_were(name: str) -> None:
    value = getattr(slime_trace_widget, name)
    assert value is getattr(importlib.import_module(TOP_NAMES[name]), name)
    assert name in slime_trace_widget.__all__


def test_tracing_names_are_all_there() -> None:
    tracing = importlib.import_module("slime_trace_widget.tracing")
    assert sorted(tracing.__all__) == sorted(TRACING_NAMES)
    for name in TRACING_NAMES:
        assert getattr(tracing, name) is not None


@pytest.mark.parametrize("old", sorted(OLD_MODULES))
def test_old_module_names_are_the_stage_modules(old: str) -> None:
    real = importlib.import_module(OLD_MODULES[old])
    assert importlib.import_module(old) is real
    assert real.__spec__ is not None and real.__spec__.name == OLD_MODULES[old]


def test_analysis_keeps_its_functions() -> None:
    from slime_trace_widget import analysis
    from slime_trace_widget.answers import critical, diff, flame, stats

    assert analysis.critical_path is critical.critical_path
    assert analysis.flame is flame.flame
    assert analysis.rollout_diff is diff.rollout_diff
    assert analysis.measured_spans is stats.measured_spans
    assert callable(analysis.rollout_trends)


def test_an_unknown_old_name_still_fails() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("slime_trace_widget.dataset.no_such_module")
    with pytest.raises(AttributeError):
        slime_trace_widget.no_such_name  # noqa: B018


def test_old_names_work_in_a_fresh_interpreter() -> None:
    """``from slime_trace_widget.query import parse`` as the first import of a process,
    and the class identity across both names."""
    script = (
        "from slime_trace_widget.query import parse\n"
        "import slime_trace_widget.perfetto as old, slime_trace_widget.export.perfetto as new\n"
        "from slime_trace_widget.dataset import open_dataset\n"
        "assert old is new and parse('name:x')\n"
        "import sys; print(sorted(m for m in sys.modules if m.startswith('slime_trace_widget.')"
        " and sys.modules[m].__name__ != m))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300, check=True).stdout
    assert "slime_trace_widget.query" in out and "slime_trace_widget.perfetto" in out
