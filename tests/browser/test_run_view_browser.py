"""The run overview in JupyterLab: the table draws, a click opens that rollout."""

from __future__ import annotations

from pathlib import Path

from tests.support.browser import VIEWPORT, JupyterLab, NotebookPage
from tests.view.test_run_view import make_run_dataset


def test_run_overview_opens_the_rollout_clicked(lab: JupyterLab, chromium,
                                                 tmp_path: Path) -> None:
    root = make_run_dataset(tmp_path)
    url = lab.write_notebook("run.ipynb", [
        f"from slime_trace_widget import RunView\nv = RunView({str(root)!r})\nv",
        "print('ROWS', len(v.timeline.samples), v.timeline.frames.paths[0].rsplit('/', 1)[1])",
    ])
    page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1)
    try:
        notebook = NotebookPage(page)
        notebook.open(url)
        notebook.run_cell(0)
        rows = page.locator(".jp-Cell:nth-child(1) .stw-run-row")
        rows.nth(2).wait_for(timeout=60_000)
        assert rows.count() == 3
        assert "22" in rows.nth(1).inner_text()  # samples of rollout_eval_3
        rows.nth(1).click()
        page.wait_for_selector('.jp-Cell:nth-child(1) .stw-root[data-ready="1"][data-rows="22"]',
                               timeout=60_000)
        assert "stw-run-chosen" in (rows.nth(1).get_attribute("class") or "")
        notebook.run_cell(1)
        assert "ROWS 22 rollout_eval_3.pt" in notebook.output_text(1)
    finally:
        page.close()
