"""The run overview in a notebook: one row per dump of a run dataset, with its
trends; clicking a row opens that rollout's timeline below the table.

The table is a small anywidget of its own (``js/src/run/run_table.js``): rows are
``analysis.rollout_trends`` figures, a few hundred small dicts; the timeline
of the chosen rollout is read lazily from the dataset, only its own files.
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

import anywidget
import ipywidgets
import traitlets

from ..answers.tail import OVERSAMPLE
from ..answers.trends import rollout_trends
from ..sources.dumps.errors import DumpError
from .widget import TraceTimeline

_STATIC = Path(__file__).parent / "static"
#: (label, trends column, kind) of the table, in order; ``kind`` sets how a cell reads.
COLUMNS = (
    ("rollout", "rollout_id", "text"), ("kind", "dump_kind", "text"),
    ("dump", "dump_file", "text"), ("samples", "samples", "number"), ("wall s", "wall_s", "number"),
    ("p50 s", "duration_p50", "number"), ("p95 s", "duration_p95", "number"),
    ("max s", "duration_max", "number"), ("stragglers", "straggler_share", "share"),
    ("tool errors", "tool_errors", "number"), ("retries", "retries", "number"),
    ("aborted", "aborted", "number"), ("truncated", "truncated", "number"),
    ("signal", "share_signal", "share"), ("no signal", "share_no_signal", "share"),
    ("filtered", "share_filtered", "share"), ("90% done s", "finished_90", "number"),
    (f"saved at {OVERSAMPLE:g}x", "saved_share", "share"),
)


def _title(name: str, trends: Any) -> str:
    """The table's title: its dumps, told apart by file (a row is one rollout id of one
    dump, so a dump of several ids has several rows)."""
    dumps = trends["dump_file"].nunique() if len(trends) else 0
    rows = "" if dumps == len(trends) else f" in {len(trends)} rows"
    return f"{name}: {dumps} dumps{rows}"


class RunTable(anywidget.AnyWidget):
    """The clickable table of a run's dumps (``chosen`` is the row clicked)."""

    # Text, not paths: see TraceTimeline (a path would keep every table alive).
    _esm = (_STATIC / "run.js").read_text(encoding="utf-8")
    _css = (_STATIC / "run.css").read_text(encoding="utf-8")

    title = traitlets.Unicode("").tag(sync=True)
    rows = traitlets.List(traitlets.Dict()).tag(sync=True)
    columns = traitlets.List(traitlets.Dict()).tag(sync=True)
    chosen = traitlets.Dict().tag(sync=True)


class RunView(ipywidgets.VBox):
    """A run dataset's overview table above the timeline of the rollout clicked."""

    def __init__(self, directory: str | Path, **timeline_options: Any) -> None:
        """``timeline_options`` go to each clicked rollout's ``TraceTimeline.from_dataset``
        (``where=``, ``engine_traces=``...), but for what a click chooses itself."""
        chosen_by_click = {"rollouts", "kinds", "dumps"} & set(timeline_options)
        if chosen_by_click:
            raise ValueError(f"RunView chooses {', '.join(sorted(chosen_by_click))} by the "
                             "row clicked: give the timeline's other options only")
        self.directory = Path(directory)
        self.trends = rollout_trends(self.directory)
        self.table = RunTable(title=_title(self.directory.name, self.trends),
                              rows=_json_rows(self.trends),
                              columns=[{"label": label, "key": key, "kind": kind}
                                       for label, key, kind in COLUMNS])
        self.timeline: TraceTimeline | None = None
        self._options = timeline_options
        self.table.observe(self._open, names="chosen")
        super().__init__(children=[self.table])

    def show_rollout(self, rollout_id: int, dump_kind: str = "train",
                     dump_file: str | None = None) -> TraceTimeline:
        """Show one rollout's timeline below the table: of one dump, ``dump_file`` (its
        row's, as a click gives it), or of every dump of that rollout id and kind."""
        timeline = TraceTimeline.from_dataset(
            self.directory, [int(rollout_id)], kinds=[dump_kind],
            dumps=None if dump_file is None else [dump_file], **self._options)
        self._close_timeline()
        self.timeline = timeline
        self.children = [self.table, self.timeline]
        return self.timeline

    def _close_timeline(self) -> None:
        """Close the rollout shown, whose place another takes: its frames and comm go."""
        if self.timeline is not None:
            self.timeline.close()
            self.timeline = None

    def _open(self, change: dict) -> None:
        """A click: the rollout's timeline below the table, or, when it cannot be opened
        (``where=`` keeps none of its samples, a damaged file), a line saying so in its
        place; an error here would only reach the kernel's log, leaving the rollout shown
        before on screen as if it were the one clicked."""
        chosen = change["new"]
        if not (isinstance(chosen.get("rollout_id"), int) and chosen.get("dump_kind") in (
                "train", "eval")):
            return
        dump_file = chosen.get("dump_file")
        try:
            self.show_rollout(chosen["rollout_id"], chosen["dump_kind"],
                              dump_file if isinstance(dump_file, str) else None)
        except (DumpError, ValueError, OSError) as exc:
            self._close_timeline()
            line = f"rollout {chosen['rollout_id']} ({chosen['dump_kind']}): {exc}"
            self.children = [self.table, ipywidgets.HTML(
                f'<div class="stw-run-error">{html.escape(line)}</div>')]


def _json_rows(trends: Any) -> list[dict[str, Any]]:
    """The trends table as JSON-ready dicts (NaN as None, numpy scalars as Python)."""
    keys = [key for _, key, _ in COLUMNS]  # dump_file among them: which dump a click opens
    rows = []
    for record in trends[keys].to_dict("records"):
        rows.append({key: None if isinstance(v, float) and not math.isfinite(v)
                     else v.item() if hasattr(v, "item") else v for key, v in record.items()})
    return rows
