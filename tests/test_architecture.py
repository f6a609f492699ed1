"""The house stays as drawn: layers that only import downwards, no import circle, few
modules on top, tests beside each stage.

Every import counts, at module level, inside functions and under ``TYPE_CHECKING``:
a circle through a type-only import still means two modules that cannot be read,
moved or tested apart. The walk is over source text (AST), so nothing is imported.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from importlib.util import resolve_name
from pathlib import Path

ROOT = Path(__file__).parent.parent
PACKAGE = ROOT / "slime_trace_widget"
JS_SOURCE = ROOT / "js" / "src"
#: Top-level modules that every package has and that do no stage's work.
PACKAGE_PLUMBING = {"__init__.py", "__main__.py", "_version.py"}
#: The front end's entry points (esbuild's inputs and the page's shell).
JS_ENTRY_POINTS = {"index.js", "standalone.js", "run_table.js", "page.html"}
#: The packages that are stages of the data flow; each has its tests folder.
STAGES = ("tracing", "tables", "frames", "sources", "answers", "view", "export")
#: The layers, lowest first, by the first name under the package (``""`` is the package's
#: own ``__init__``): a module imports only its own layer and those below it. The order
#: is written at the top of docs/architecture.md; the top layer is the package's face
#: (the CLI, the demo, the ``analysis`` facade) and may import anything.
LAYERS = (
    ("schema", "values", "vocabularies", "whole_files", "file_locks", "machine_memory",
     "_version"),
    ("tracing",),
    ("tables",),
    ("frames",),
    ("sources",),
    ("answers",),
    ("view",),
    ("export",),
    ("", "__main__", "analysis", "cli", "demo"),
)
MAX_TOP_MODULES = 8
MAX_JS_TOP_FILES = 6
MAX_SOURCE_LINES = 700


def module_name(path: Path, root: Path = ROOT) -> str:
    """The dotted name Python gives a file of the package under ``root``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules(root: Path = ROOT) -> dict[str, Path]:
    return {module_name(path, root): path for path in (root / PACKAGE.name).rglob("*.py")}


def imported_names(path: Path, name: str) -> Iterator[str]:
    """Every absolute module name an import statement of this file can mean."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                drop = node.level - 1 if is_package else node.level
                base = base[: len(base) - drop] if drop else base
                prefix = ".".join(base)
                module = f"{prefix}.{node.module}" if node.module else prefix
            else:
                module = node.module or ""
            yield module
            # "from package import module" imports the module, not just a name.
            yield from (f"{module}.{alias.name}" for alias in node.names)


def lazy_imported_names(path: Path, name: str) -> Iterator[str]:
    """The modules a file imports by name at run time: the string given to
    ``importlib.import_module``, and each relative module path (``".model"``) a dict
    literal holds, as the package's lazy ``__getattr__`` maps do (``_HOMES``)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "import_module" and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            target = node.args[0].value
            yield resolve_name(target, name) if target.startswith(".") else target
        elif isinstance(node, ast.Dict):
            for value in node.values:
                if (isinstance(value, ast.Constant) and isinstance(value.value, str)
                        and re.fullmatch(r"\.+[A-Za-z_][\w.]*", value.value)):
                    yield resolve_name(value.value, name)


def facade_names(root: Path = ROOT) -> dict[str, str]:
    """``package.name`` -> the module it stands for, for the names the package's own
    ``__init__`` hands out on first use (``_EXPORTS``: a name and its module, None for a
    module of that name; ``_MODULE_ALIASES``: an old module name and its stage's module):
    ``from slime_trace_widget import TraceTimeline`` imports ``view.widget``."""
    tree = ast.parse((root / PACKAGE.name / "__init__.py").read_text(encoding="utf-8"))
    package = PACKAGE.name
    facades: dict[str, str] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
                and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        table = node.targets[0].id
        for key, value in zip(node.value.keys, node.value.values, strict=True):
            if not (isinstance(key, ast.Constant) and isinstance(value, ast.Constant)):
                continue
            if table == "_EXPORTS":
                module = value.value if value.value is not None else f".{key.value}"
                facades[f"{package}.{key.value}"] = resolve_name(module, package)
            elif table == "_MODULE_ALIASES":
                facades[f"{package}.{key.value}"] = f"{package}.{value.value}"
    return facades


def real_module(target: str, facades: dict[str, str]) -> str:
    """``target`` with a facade name at its head replaced by the module it stands for."""
    for facade, module in facades.items():
        if target == facade or target.startswith(facade + "."):
            return module + target[len(facade):]
    return target


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (a submodule import implies its parents),
    by import statements, by name at run time, and through the package's facade names."""
    modules = package_modules(root)
    facades = facade_names(root) if (root / PACKAGE.name / "__init__.py").exists() else {}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for target in (*imported_names(path, name), *lazy_imported_names(path, name)):
            parts = real_module(target, facades).split(".")
            for end in range(1, len(parts) + 1):
                candidate = ".".join(parts[:end])
                if candidate in modules and candidate != name:
                    graph[name].add(candidate)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of the graph, or None; iterative so a deep graph cannot overflow."""
    state: dict[str, int] = {}  # 1 on the current path, 2 finished
    for root in sorted(graph):
        if root in state:
            continue
        path = [root]
        state[root] = 1
        pending = [iter(sorted(graph[root]))]
        while pending:
            target = next(pending[-1], None)
            if target is None:
                state[path.pop()] = 2
                pending.pop()
            elif state.get(target) == 1:
                return [*path[path.index(target):], target]
            elif target not in state:
                state[target] = 1
                path.append(target)
                pending.append(iter(sorted(graph[target])))
    return None


def dependency_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """The import graph less each module's edges to the packages that contain it.

    Importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__`` first, so an import from
    outside implies the parents (kept), while a module's own parents are not a dependency
    of its code. A package ``__init__`` that re-exports its modules does depend on them.
    """
    return {name: {target for target in targets if not name.startswith(target + ".")}
            for name, targets in import_graph(root).items()}


def layer_of(name: str) -> int:
    """The index in :data:`LAYERS` of a package module; a module in no layer fails here."""
    head = name.removeprefix(PACKAGE.name).removeprefix(".").split(".")[0]
    for index, members in enumerate(LAYERS):
        if head in members:
            return index
    raise AssertionError(f"{name} is in no layer: add {head!r} to LAYERS and the docs")


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every edge of the graph from a module to one of a higher layer."""
    return sorted(f"{name} -> {target}" for name, targets in graph.items()
                  for target in targets if layer_of(target) > layer_of(name))


def upward_imports_of(root: Path, files: dict[str, str]) -> list[str]:
    """:func:`upward_imports` of a package tree written under ``root`` from ``files``
    (path in the package: its text)."""
    for relative, text in files.items():
        path = root / PACKAGE.name / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return upward_imports(dependency_graph(root))


def in_package(*edges: str) -> list[str]:
    """``"a.b -> c"`` edges as :func:`upward_imports` names them, inside the package."""
    return [" -> ".join(f"{PACKAGE.name}.{side}" for side in edge.split(" -> "))
            for edge in edges]


def test_no_import_goes_up_the_layers() -> None:
    upward = upward_imports(dependency_graph())
    assert not upward, "imports up the layers:\n" + "\n".join(upward)


def test_the_layer_check_catches_an_upward_import(tmp_path: Path) -> None:
    """A tree whose tables import the model (at module level, in a function, and for
    types only) and whose frames import an exporter: each such edge is reported."""
    files = {
        "__init__.py": "",
        "tables/__init__.py": "",
        "tables/build.py": ("from typing import TYPE_CHECKING\n"
                            "from ..frames.model import TraceFrames\n"
                            "if TYPE_CHECKING:\n    from ..sources import loading\n"
                            "def late():\n    import slime_trace_widget.view.widget\n"),
        "frames/__init__.py": "",
        "frames/model.py": "from ..tables import build\nfrom ..export.parquet import to_parquet\n",
        "sources/__init__.py": "", "sources/loading.py": "from ..frames.model import TraceFrames\n",
        "view/__init__.py": "", "view/widget.py": "",
        "export/__init__.py": "", "export/parquet.py": "from ..frames import model\n",
    }
    assert upward_imports_of(tmp_path, files) == in_package(
        "frames.model -> export",
        "frames.model -> export.parquet",
        "tables.build -> frames",
        "tables.build -> frames.model",
        "tables.build -> sources",
        "tables.build -> sources.loading",
        "tables.build -> view",
        "tables.build -> view.widget",
    )


def test_the_layer_check_sees_imports_by_name_and_through_the_facade(tmp_path: Path) -> None:
    """Imports the statements do not show: a lazy map of relative module paths in a
    package ``__init__``, a module named to ``importlib.import_module``, and the names
    the package's ``__init__`` hands out (``from .. import perfetto`` is the exporter)."""
    files = {
        "__init__.py": ('_EXPORTS = {"TraceTimeline": ".view.widget", "analysis": None}\n'
                        '_MODULE_ALIASES = {"perfetto": "export.perfetto"}\n'),
        "analysis.py": "",
        "tables/__init__.py": '_HOMES = {"Widget": "..view.widget"}\n',
        "tables/build.py": ("import importlib\n"
                            "def late():\n    return importlib.import_module("
                            "'slime_trace_widget.export.parquet')\n"),
        "frames/__init__.py": "",
        "frames/model.py": "from .. import perfetto\nfrom slime_trace_widget import analysis\n",
        "sources/__init__.py": "",
        "sources/load.py": "from slime_trace_widget import TraceTimeline\n",
        "view/__init__.py": "", "view/widget.py": "",
        "export/__init__.py": "", "export/parquet.py": "", "export/perfetto.py": "",
    }
    assert upward_imports_of(tmp_path, files) == in_package(
        "frames.model -> analysis",
        "frames.model -> export",
        "frames.model -> export.perfetto",
        "sources.load -> view",
        "sources.load -> view.widget",
        "tables -> view",
        "tables -> view.widget",
        "tables.build -> export",
        "tables.build -> export.parquet",
    )


def test_every_module_is_in_a_layer() -> None:
    for name in package_modules():
        layer_of(name)


def test_no_import_circle() -> None:
    cycle = find_cycle(dependency_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_circles() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None
    assert find_cycle({"a": {"a"}}) == ["a", "a"]


def test_the_walk_sees_every_kind_of_import(tmp_path: Path) -> None:
    source = tmp_path / "slime_trace_widget" / "stage" / "mod.py"
    source.parent.mkdir(parents=True)
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ..frames import TraceFrames\n"
        "def late():\n    from . import sibling\n    import slime_trace_widget.view.widget\n",
        encoding="utf-8")
    names = set(imported_names(source, "slime_trace_widget.stage.mod"))
    assert {"slime_trace_widget.frames", "slime_trace_widget.frames.TraceFrames",
            "slime_trace_widget.stage.sibling", "slime_trace_widget.view.widget"} <= names


def private_imports(root: Path = ROOT) -> list[str]:
    """Every import of another project's private module or name: one whose dotted
    name has a part that starts with an underscore (``_codecs``, ``pandas._libs``),
    dunder names (``__future__``) aside."""
    found = []
    for name, path in package_modules(root).items():
        for target in imported_names(path, name):
            parts = target.split(".")
            if parts[0] != PACKAGE.name and any(
                    part.startswith("_") and not part.endswith("__") for part in parts):
                found.append(f"{name} -> {target}")
    return sorted(found)


def test_no_private_module_of_python_or_a_library() -> None:
    private = private_imports()
    assert not private, "private imports:\n" + "\n".join(private)


def test_the_private_check_catches_private_imports(tmp_path: Path) -> None:
    files = {"__init__.py": "from __future__ import annotations\n",
             "stage/__init__.py": "",
             "stage/mod.py": ("import _compat_pickle\nfrom pandas._libs import lib\n"
                              "from pickle import _Unpickler\nfrom . import _native\n"),
             "stage/_native.py": ""}
    for relative, text in files.items():
        path = tmp_path / PACKAGE.name / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    pkg = f"{PACKAGE.name}.stage.mod"
    assert private_imports(tmp_path) == [f"{pkg} -> _compat_pickle", f"{pkg} -> pandas._libs",
                                         f"{pkg} -> pandas._libs.lib",
                                         f"{pkg} -> pickle._Unpickler"]


def test_native_code_uses_python_s_public_c_api() -> None:
    """CPython's underscored C names (``_PyDict_NewPresized``) may change in any release."""
    private = {str(path.relative_to(ROOT)): sorted(set(re.findall(r"\b_Py\w+", text)))
               for path in PACKAGE.rglob("*.c")
               if "_Py" in (text := path.read_text(encoding="utf-8"))}
    assert not private, private


def test_few_modules_on_top() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in PACKAGE_PLUMBING)
    assert len(top) <= MAX_TOP_MODULES, top


def test_front_end_top_level_is_small() -> None:
    top = sorted(p.name for p in JS_SOURCE.iterdir()
                 if p.is_file() and p.name not in JS_ENTRY_POINTS)
    assert len(top) <= MAX_JS_TOP_FILES, top


def test_no_source_file_is_too_long() -> None:
    """The product's files and the tests and benchmarks around them alike."""
    sources = [path for root, kinds in ((PACKAGE, ("py", "c")),
                                        (JS_SOURCE, ("js", "ts", "css", "html")),
                                        (ROOT / "tests", ("py",)),
                                        (ROOT / "benchmarks", ("py",)),
                                        (ROOT / "js" / "test", ("js",)))
               for kind in kinds for path in root.rglob(f"*.{kind}")]
    long = {str(p.relative_to(ROOT)): n for p in sources
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_SOURCE_LINES}
    assert not long, long


def test_every_stage_has_its_tests() -> None:
    tests = Path(__file__).parent
    for stage in STAGES:
        assert (PACKAGE / stage / "__init__.py").exists(), f"no package {stage}"
        assert any((tests / stage).glob("test_*.py")), f"no tests/{stage}/"


def test_js_tests_mirror_the_source_folders() -> None:
    """A unit test sits in the folder named like its module's: js/test/render/lod.test.js."""
    js_tests = ROOT / "js" / "test"
    misplaced = [str(test.relative_to(js_tests)) for test in js_tests.rglob("*.test.js")
                 if not (JS_SOURCE / test.relative_to(js_tests).parent
                         / test.name.replace(".test.js", ".js")).exists()]
    assert not misplaced, misplaced
    folders = {p.name for p in JS_SOURCE.iterdir() if p.is_dir()}
    assert folders <= {p.name for p in js_tests.iterdir() if p.is_dir()}, folders
