"""notebooks/quickstart.ipynb runs top to bottom (nbclient) and is stored without outputs."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).parents[2] / "notebooks" / "quickstart.ipynb"


def test_quickstart_is_stored_without_outputs() -> None:
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    assert code and all(not c["outputs"] and c["execution_count"] is None for c in code)


def test_quickstart_runs_clean(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("STW_QUICKSTART_SAMPLES", "24")
    monkeypatch.setenv("STW_QUICKSTART_DIR", str(tmp_path))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in notebook.cells for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors, errors
    printed = "".join(o.get("text", "") for c in notebook.cells for o in c.get("outputs", [])
                      if o.get("output_type") == "stream")
    assert "sample-seconds over" in printed
    assert not re.findall(r"\b\d+\.\d+ samples", printed), "a count printed as a float"
    assert (tmp_path / "rollout_12.html").exists()
    assert (tmp_path / "rollout_12.perfetto.json").exists()
    assert os.path.getsize(tmp_path / "rollout_12.html") > 10_000
