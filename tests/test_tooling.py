"""The project's own checks: ruff, the JS unit tests and type check, the wheel's bundle."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
JS = ROOT / "js"


def _run(command: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def node_modules() -> Path:
    if not (JS / "node_modules" / ".bin" / "tsc").exists():
        _run(["npm", "ci", "--no-audit", "--no-fund"], JS)
    return JS / "node_modules"


def test_ruff_is_clean() -> None:
    _run([sys.executable, "-m", "ruff", "check", "."], ROOT)


def test_js_unit_tests(node_modules: Path) -> None:
    result = _run(["npm", "test", "--silent"], JS)
    assert "# fail 0" in result.stdout


def test_js_type_check(node_modules: Path) -> None:
    _run(["npm", "run", "typecheck", "--silent"], JS)


@pytest.mark.slow
def test_wheel_ships_the_bundle(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        "node_modules", "static", ".git", "test-artifacts", "benchmarks", "*.pt", ".ruff_cache",
        "__pycache__", ".hypothesis", "build", "dist"))
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "w"),
          str(source)], tmp_path)
    wheel = next((tmp_path / "w").glob("slime_trace_widget-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "slime_trace_widget/view/static/widget.js" in names
    assert "slime_trace_widget/view/static/widget.css" in names


def test_notebooks_are_valid_without_repair() -> None:
    """Every notebook we ship passes nbformat's validation with its warnings as errors:
    a cell without an id, which nbformat still repairs with a warning, is to become an
    error in its future versions."""
    import warnings

    import nbformat

    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert notebooks
    for path in notebooks:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            notebook = nbformat.read(path, as_version=4)
            nbformat.validate(notebook)
        ids = [cell.id for cell in notebook.cells]
        assert len(set(ids)) == len(ids), path.name


def test_free_ports_are_bindable_outside_the_outgoing_range_and_never_repeat() -> None:
    import socket

    from tests.support.browser import free_port, outgoing_ports

    outgoing = outgoing_ports()
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    if len(outgoing) < 60_000:  # a machine whose kernel gives out only some ports
        assert not any(port in outgoing for port in ports)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", ports[-1]))
