"""Notebooks the browser tests write for JupyterLab."""

from __future__ import annotations

import pickle
from typing import Any

from tests.support.browser import JupyterLab, NotebookPage


def samples_notebook(lab: JupyterLab, samples: list[dict[str, Any]], stem: str) -> str:
    """A notebook whose one cell shows the timeline of ``samples`` (plain dicts the test
    built, handed over as a pickle next to the notebook); returns its URL."""
    data = lab.notebooks / f"{stem}.pickle"
    data.write_bytes(pickle.dumps(samples))
    return lab.write_notebook(f"{stem}.ipynb", [
        "import pickle\n"
        "from slime_trace_widget import TraceTimeline\n"
        "from slime_trace_widget.frames import build_frames\n"
        f"samples = pickle.loads(open({str(data)!r}, 'rb').read())\n"
        "tl = TraceTimeline(build_frames(samples))\ntl",
    ])


#: The timeline of a notebook's first cell.
FIRST_WIDGET = ".jp-Cell:nth-child(1) .stw-root"


def run_first_widget(page: Any, url: str, timeout_ms: int = 60_000) -> NotebookPage:
    """Open the notebook at ``url``, run its first cell and wait until that cell's
    timeline has drawn (``data-ready``); the open notebook, to run more cells."""
    notebook = NotebookPage(page)
    notebook.open(url)
    notebook.run_cell(0)
    page.wait_for_selector(f'{FIRST_WIDGET}[data-ready="1"]', timeout=timeout_ms)
    return notebook
