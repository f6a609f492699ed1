"""The wheel ships the product only: the package with its front end bundle, nothing that
only the tests or benchmarks run.

The wheel is built the way pip installs the project (``pip wheel``, hatchling in an
isolated build environment) from this tree, and its file list is read back.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
PACKAGE = "slime_trace_widget"
#: The front end the jupyter-builder hook puts into the package (pyproject's ensured-targets).
BUNDLE = [f"{PACKAGE}/view/static/{name}"
          for name in ("widget.js", "widget.css", "page.html", "run.js", "run.css")]
#: Path parts that only tests and benchmarks use.
NOT_SHIPPED = {"tests", "benchmarks", "devtools", "support", "conftest.py", "fixtures"}
#: Hang guard for the build: hatchling's environment may be fetched on a busy machine.
BUILD_SECONDS = 900


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet",
                           "--wheel-dir", str(out), str(ROOT)],
                          capture_output=True, text=True, timeout=BUILD_SECONDS)
    assert done.returncode == 0, done.stderr[-4000:]
    (built,) = out.glob(f"{PACKAGE}-*.whl")
    return built


@pytest.fixture(scope="module")
def wheel_files(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def test_the_wheel_holds_the_package_and_its_metadata_only(wheel_files: list[str]) -> None:
    tops = {name.split("/", 1)[0] for name in wheel_files}
    assert PACKAGE in tops
    assert {top for top in tops if top != PACKAGE} == {
        top for top in tops if top.startswith(f"{PACKAGE}-") and top.endswith(".dist-info")}


def test_nothing_the_tests_or_benchmarks_use_is_shipped(wheel_files: list[str]) -> None:
    shipped = [name for name in wheel_files if NOT_SHIPPED & set(name.split("/"))
               or Path(name).name.startswith(("test_", "bench_"))]
    assert not shipped, shipped


def test_the_wheel_carries_the_front_end_and_the_command(wheel_files: list[str]) -> None:
    assert set(BUNDLE) <= set(wheel_files)
    assert f"{PACKAGE}/cli/command.py" in wheel_files
    assert f"{PACKAGE}/demo.py" in wheel_files  # slime-trace-viewer --demo runs it


def test_the_shipped_bundle_carries_no_test_hooks(wheel: Path) -> None:
    """The hooks the browser tests drive (``root.stwDebug``, ``js/test/hooks/``) are
    injected by the tests; the bundle a user gets leaves them out."""
    with zipfile.ZipFile(wheel) as archive:
        bundle = archive.read(f"{PACKAGE}/view/static/widget.js").decode("utf-8")
    assert "stwDebug" not in bundle
    assert "stwApp" in bundle  # the one handle the hooks take the view by


def test_the_front_end_imports_nothing_from_its_tests() -> None:
    """What the bundle is built from (``js/src``) reaches no test or developer script."""
    support = [ROOT / "js" / "test", ROOT / "js" / "dev", ROOT / "tests", ROOT / "benchmarks"]
    found, read = [], 0
    for path in (ROOT / "js" / "src").rglob("*.js"):
        text = path.read_text(encoding="utf-8")
        for specifier in re.findall(r"""(?:\bfrom|\bimport)\s*\(?\s*["']([^"']+)["']""", text):
            read += 1
            target = (path.parent / specifier).resolve()
            if any(folder.resolve() in target.parents for folder in support):
                found.append(f"{path.relative_to(ROOT)}: {specifier}")
    assert read > 100, f"only {read} imports read: the pattern no longer reads js/src"
    assert not found, found


def test_the_package_imports_nothing_from_tests_or_benchmarks() -> None:
    """What the wheel leaves out, the installed package must not need."""
    found = []
    for path in (ROOT / PACKAGE).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom)
                     and not node.level else [])
            found += [f"{path.relative_to(ROOT)}: {name}" for name in names
                      if name.split(".")[0] in ("tests", "benchmarks")]
    assert not found, found
