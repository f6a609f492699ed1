"""The house stays as drawn: layers that only import downwards, no import circle, few
modules on top, tests beside each stage, no file over 700 lines.

Every import counts, at module level, inside functions and under ``TYPE_CHECKING``:
a circle through a type-only import still means two modules that cannot be read,
moved or tested apart. So do the imports no statement shows: a module named to
``importlib.import_module``, ``__import__`` or ``runpy.run_module`` (however those were
imported), a package module reached as an attribute (``slime_trace_widget.view.widget``),
a dotted name of the package in any string, a relative name in a lazy map, the code a
``python -c`` is given. The walk is over source text (AST), so nothing is imported.
"""

from __future__ import annotations

import ast
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache, cached_property
from importlib.util import resolve_name
from itertools import pairwise
from pathlib import Path

import pytest

from tests.support import architecture_cases as cases

ROOT = Path(__file__).parent.parent
PACKAGE = ROOT / "slime_trace_widget"
JS_SOURCE = ROOT / "js" / "src"
#: Top-level modules that every package has and that do no stage's work.
PACKAGE_PLUMBING = {"__init__.py", "__main__.py", "_version.py"}
#: Their names in LAYERS (``""`` is the package's own ``__init__``); the docs leave them out.
PLUMBING_IN_LAYERS = {"", "__main__", "_version"}
#: The front end's entry points (esbuild's inputs and the page's shell).
JS_ENTRY_POINTS = {"index.js", "standalone.js", "run_table.js", "page.html"}
#: The packages that are stages of the data flow; each has its tests folder.
STAGES = ("tracing", "tables", "frames", "sources", "answers", "view", "export")
#: The layers, lowest first, by the first name under the package: a module imports only
#: its own layer and those below it. The order is written at the top of
#: docs/architecture.md; the top layer is the package's face (the CLI, the demo, the
#: ``analysis`` facade) and may import anything.
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
#: The kinds of file the length limit holds for, wherever they are outside test fixtures.
LENGTH_CHECKED = (".py", ".js", ".mjs", ".ts", ".c", ".css", ".html")
#: Calls that import the module a string names -> the keyword of that string.
IMPORT_CALLS = {"importlib.import_module": "name", "importlib.__import__": "name",
                "builtins.__import__": "name", "__import__": "name",
                "runpy.run_module": "mod_name"}
#: Calls that reach an attribute by a string: ``getattr(os, "_exit")``.
ATTRIBUTE_CALLS = {"getattr", "hasattr", "setattr", "delattr"}
#: A dotted name of the package inside a string.
PACKAGE_NAME_IN_TEXT = re.compile(rf"\b{PACKAGE.name}(?:\.[A-Za-z_]\w*)+")
RELATIVE_NAME = re.compile(r"\.+[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
#: A module value whose name the text does not tell (``module = _import(name)``).
SOME_MODULE = "?"

#: Imports by a name the text does not decide, each read and found to stay in its layer:
#: (module, the call) -> why.
UNDECIDED_IMPORTS_ALLOWED = {
    ("slime_trace_widget", "importlib.import_module(f'{__name__}.{name}')"):
        "the top layer's lazy __getattr__: a _MODULE_ALIASES module (read as facade names)",
    ("slime_trace_widget", "importlib.import_module(f'.{name}', __name__)"):
        "the top layer's lazy __getattr__: an _EXPORTS name standing for its module",
    ("slime_trace_widget", "importlib.import_module(module, __name__)"):
        "the top layer's lazy __getattr__: an _EXPORTS module (read as facade names)",
    ("slime_trace_widget", "importlib.import_module(self.real_name)"):
        "the top layer's alias finder: the _MODULE_ALIASES module an old name stands for",
    ("slime_trace_widget.export.trend_backends", "__import__(module, fromlist=['_'])"):
        "_require is only given the backends' packages: tensorboard, mlflow, wandb, torch",
    ("slime_trace_widget.tracing.live.slime_patch", "importlib.import_module(name)"):
        "_import is only given slime's modules (SLIME_TRACE_MODULES), outside the package",
}
_FORKED_CHILD_EXIT = ("os._exit is the documented way to leave a forked child without "
                      "running the parent's cleanup (atexit, flushed buffers)")
_SLIME_HOOK = ("slime exposes no public hook for its trace records or rollout id; "
               "the patch is pinned to slime's trace_utils")
#: Other projects' private names the product uses on purpose: (module, name) -> why.
PRIVATE_USES_ALLOWED = {
    ("slime_trace_widget.sources.dumps.forked_attrs", "os._exit"): _FORKED_CHILD_EXIT,
    ("slime_trace_widget.sources.dumps.skim_stream", "os._exit"): _FORKED_CHILD_EXIT,
    ("slime_trace_widget.sources.dumps.worker", "os._exit"): _FORKED_CHILD_EXIT,
    ("slime_trace_widget.tracing.live.slime_patch", "module._append_event"): _SLIME_HOOK,
    ("slime_trace_widget.tracing.live.slime_patch",
     "slime.rollout.sample_hooks._current_rollout_id"): _SLIME_HOOK,
}


def absolute(name: str, package: str) -> str | None:
    """``name`` (``..view.widget``) made absolute from ``package``; None past the top."""
    try:
        return resolve_name(name, package)
    except (ImportError, ValueError):
        return None


def in_package(name: str) -> bool:
    return name == PACKAGE.name or name.startswith(PACKAGE.name + ".")


def is_private(name: str) -> bool:
    """``_exit`` is private; dunder names (``__version__``) are public."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def argument(call: ast.Call, index: int, keyword: str) -> ast.expr | None:
    """The argument a call passes at ``index`` or as ``keyword``, or None."""
    if len(call.args) > index and not isinstance(call.args[index], ast.Starred):
        return call.args[index]
    return next((kw.value for kw in call.keywords if kw.arg == keyword), None)


@dataclass
class Source:
    """One module's parsed text, its dotted name, and what its names stand for."""

    tree: ast.Module
    name: str
    is_package: bool = False

    @classmethod
    def of(cls, text: str, name: str, is_package: bool = False) -> Source:
        return cls(ast.parse(text), name, is_package)

    @cached_property
    def package(self) -> str:
        return self.name if self.is_package else self.name.rpartition(".")[0]

    def from_module(self, node: ast.ImportFrom) -> str | None:
        """The absolute name of the module a ``from`` import reads."""
        if not node.level:
            return node.module or ""
        return absolute("." * node.level + (node.module or ""), self.package)

    @cached_property
    def bindings(self) -> dict[str, str]:
        """Name -> the dotted name an import statement anywhere in the file binds it to."""
        bound: dict[str, str] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    head = alias.name.split(".")[0]
                    bound[alias.asname or head] = alias.name if alias.asname else head
            elif isinstance(node, ast.ImportFrom) and (module := self.from_module(node)):
                bound.update({alias.asname or alias.name: f"{module}.{alias.name}"
                              for alias in node.names})
        return bound

    @cached_property
    def constants(self) -> dict[str, ast.expr]:
        """Module-level names assigned once -> what they are assigned."""
        assigned: dict[str, list[ast.expr]] = {}
        for stmt in self.tree.body:
            for target in stmt.targets if isinstance(stmt, ast.Assign) else ():
                if isinstance(target, ast.Name):
                    assigned.setdefault(target.id, []).append(stmt.value)
        return {name: values[0] for name, values in assigned.items() if len(values) == 1}

    def qualified(self, node: ast.expr) -> str | None:
        """The dotted name ``node`` stands for through the file's imports (``il.import_module``
        is ``importlib.import_module``), a builtin call's own name, or None."""
        if isinstance(node, ast.Name):
            builtin = node.id if node.id in {"__import__", *ATTRIBUTE_CALLS} else None
            return self.bindings.get(node.id, builtin)
        if isinstance(node, ast.Attribute) and (owner := self.qualified(node.value)):
            return f"{owner}.{node.attr}"
        return None

    def strings(self, node: ast.expr | None, seen: frozenset[str] = frozenset()
                ) -> set[str] | None:
        """Every string ``node`` can be when the text decides it, else None: a constant, a
        module-level name assigned one, ``+`` and f-strings of such, a look-up in a table
        written in the module (``_HOMES[name]``)."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, ast.Name) and node.id in self.constants and node.id not in seen:
            return self.strings(self.constants[node.id], seen | {node.id})
        if isinstance(node, ast.FormattedValue) and node.conversion == -1 and not node.format_spec:
            return self.strings(node.value, seen)
        parts = (node.values if isinstance(node, ast.JoinedStr)
                 else [node.left, node.right] if isinstance(node, ast.BinOp)
                 and isinstance(node.op, ast.Add) else None)
        if parts is not None:
            found = {""}
            for part in parts:
                if (values := self.strings(part, seen)) is None:
                    return None
                found = {head + tail for head in found for tail in values}
            return found
        if isinstance(node, ast.Subscript):
            return self.table_strings(node.value, seen)
        return None

    def literal(self, node: ast.expr, seen: frozenset[str]) -> tuple[ast.expr, frozenset[str]]:
        """``node``, or what it was assigned when it is a module-level name."""
        while isinstance(node, ast.Name) and node.id in self.constants and node.id not in seen:
            node, seen = self.constants[node.id], seen | {node.id}
        return node, seen

    def table_strings(self, node: ast.expr, seen: frozenset[str] = frozenset()
                      ) -> set[str] | None:
        """The strings a look-up in a table can give: a dict literal's values, a list's or
        a tuple's items, ``dict(pairs)``'s second items; a None (no module) is left out."""
        node, seen = self.literal(node, seen)
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "dict" and node.args:
            pairs, seen = self.literal(node.args[0], seen)
            if not (isinstance(pairs, (ast.Tuple, ast.List)) and all(
                    isinstance(pair, ast.Tuple) and len(pair.elts) == 2 for pair in pairs.elts)):
                return None
            items = [pair.elts[1] for pair in pairs.elts]
        elif isinstance(node, (ast.Dict, ast.Tuple, ast.List)):
            items = node.values if isinstance(node, ast.Dict) else node.elts
        else:
            return None
        found: set[str] = set()
        for item in items:
            if not (isinstance(item, ast.Constant) and item.value is None):
                if (values := self.strings(item, seen)) is None:
                    return None
                found |= values
        return found

    def anchor(self, node: ast.expr | None) -> str | None:
        """The package a relative name given to ``import_module`` is read from."""
        if node is None or ast.unparse(node) in ("__package__", "__spec__.parent"):
            return self.package
        if ast.unparse(node) == "__name__":
            return self.name
        values = self.strings(node)
        return values.pop() if values and len(values) == 1 else None

    def imports_by_name(self, call: ast.Call) -> list[str] | None:
        """The modules an import-by-name call imports (``[]`` for any other call), or None
        when the text does not decide its module's name."""
        function = self.qualified(call.func)
        if function not in IMPORT_CALLS:
            return []
        names = self.strings(argument(call, 0, IMPORT_CALLS[function]))
        level = argument(call, 4, "level") if function.endswith("__import__") else None
        if names is None or not (level is None or isinstance(getattr(level, "value", None), int)):
            return None
        anchor = (self.anchor(argument(call, 1, "package"))
                  if function.endswith("import_module") else self.package)
        resolved = [absolute("." * (level.value if level else 0) + name, anchor or "")
                    for name in names]
        return None if None in resolved else resolved  # None: relative to an unknown package


def statement_imports(source: Source) -> Iterator[str]:
    """Every absolute module name an import statement of this file can mean."""
    for node in ast.walk(source.tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (module := source.from_module(node)):
            yield module
            # "from package import module" imports the module, not just a name.
            yield from (f"{module}.{alias.name}" for alias in node.names)


def command_arguments(source: Source, flag: str) -> Iterator[ast.expr]:
    """What follows ``flag`` in a list, a tuple or a call's arguments: given ``"-c"``, the
    code a ``python -c`` runs; given ``"-m"``, the module a ``python -m`` runs."""
    for node in ast.walk(source.tree):
        items = (node.elts if isinstance(node, (ast.List, ast.Tuple))
                 else node.args if isinstance(node, ast.Call) else [])
        for before, argument_ in pairwise(items):
            if isinstance(before, ast.Constant) and before.value == flag:
                yield argument_


def python_code(text: str) -> Source | None:
    """``text`` as the script ``python -c`` runs, or None when it is not Python."""
    try:
        return Source.of(text, "__main__")
    except SyntaxError:
        return None


def imported_modules(source: Source, other_processes: bool = True) -> Iterator[str]:
    """Every module name this file can import, absolute: by a statement, by name at run
    time (with ``__import__``'s ``fromlist``), as an attribute of an imported package
    module, as a dotted name of the package in a string, as a relative name in a table
    (a lazy map); with ``other_processes``, also the module another process is started
    on (``python -m``) and every import of the code one is given (``python -c``)."""
    yield from statement_imports(source)
    # A string that is a statement of its own (a docstring) does nothing.
    documentation = {id(node.value) for node in ast.walk(source.tree) if isinstance(node, ast.Expr)}
    # The code and the module names this file has another Python process run.
    launched = set() if other_processes else {
        text for flag in ("-c", "-m") for node in command_arguments(source, flag)
        for text in source.strings(node) or ()}
    for node in ast.walk(source.tree):
        if isinstance(node, ast.Call) and (names := source.imports_by_name(node)):
            yield from names
            fromlist = argument(node, 3, "fromlist")
            extra = source.table_strings(fromlist, frozenset()) if fromlist else None
            yield from (f"{name}.{item}" for name in names for item in extra or ())
        elif isinstance(node, ast.Attribute) and in_package(name := source.qualified(node) or ""):
            yield name
        elif isinstance(node, (ast.Dict, ast.Tuple, ast.List, ast.Set)):
            items = [*node.keys, *node.values] if isinstance(node, ast.Dict) else node.elts
            yield from (name for item in items if isinstance(item, ast.Constant)
                        and isinstance(item.value, str) and RELATIVE_NAME.fullmatch(item.value)
                        and (name := absolute(item.value, source.package)))
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and id(node) not in documentation and node.value not in launched):
            yield from PACKAGE_NAME_IN_TEXT.findall(node.value)
    for code in command_arguments(source, "-c") if other_processes else ():
        for script in filter(None, map(python_code, source.strings(code) or ())):
            yield from imported_modules(script)


def undecided_imports(source: Source) -> Iterator[str]:
    """The import-by-name calls, and the ``python -c`` code, whose module names the text
    does not decide: the layer check cannot see where they go."""
    for node in ast.walk(source.tree):
        if isinstance(node, ast.Call) and source.imports_by_name(node) is None:
            yield ast.unparse(node)
    for code in command_arguments(source, "-c"):
        if (texts := source.strings(code)) is None:
            yield f"-c {ast.unparse(code)}"
        for script in filter(None, map(python_code, texts or ())):
            yield from undecided_imports(script)


def module_name(path: Path) -> str:
    """The dotted name Python gives a file of the package."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources_of(files: dict[str, str]) -> dict[str, Source]:
    """A package's modules by name, parsed, from its files (path in the package: text)."""
    return {(name := module_name(PACKAGE / path)):
            Source.of(text, name, path.endswith("__init__.py")) for path, text in files.items()}


@cache
def product_sources() -> dict[str, Source]:
    return sources_of({str(path.relative_to(PACKAGE)): path.read_text(encoding="utf-8")
                       for path in PACKAGE.rglob("*.py")})


def facade_names(init: Source) -> dict[str, str]:
    """``package.name`` -> the module it stands for, for the names the package's own
    ``__init__`` hands out on first use (``_EXPORTS``: a name and its module, None for a
    module of that name; ``_MODULE_ALIASES``: an old module name and its stage's module):
    ``from slime_trace_widget import TraceTimeline`` imports ``view.widget``."""
    package = PACKAGE.name
    facades: dict[str, str] = {}
    for node in ast.walk(init.tree):
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


def import_graph(sources: dict[str, Source], other_processes: bool = True
                 ) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (a submodule import implies its parents),
    every way :func:`imported_modules` sees, and through the package's facade names."""
    facades = facade_names(sources[PACKAGE.name]) if PACKAGE.name in sources else {}
    graph: dict[str, set[str]] = {name: set() for name in sources}
    for name, source in sources.items():
        for target in imported_modules(source, other_processes):
            parts = real_module(target, facades).split(".")
            for end in range(1, len(parts) + 1):
                candidate = ".".join(parts[:end])
                if candidate in sources and candidate != name:
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


def dependency_graph(sources: dict[str, Source], other_processes: bool = True
                     ) -> dict[str, set[str]]:
    """The import graph less each module's edges to the packages that contain it.

    Importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__`` first, so an import from
    outside implies the parents (kept), while a module's own parents are not a dependency
    of its code. A package ``__init__`` that re-exports its modules does depend on them.
    """
    return {name: {target for target in targets if not name.startswith(target + ".")}
            for name, targets in import_graph(sources, other_processes).items()}


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


def upward_imports_of(files: dict[str, str]) -> list[str]:
    """:func:`upward_imports` of a package made up of ``files`` (path in it: its text)."""
    return upward_imports(dependency_graph(sources_of(files)))


def test_no_import_goes_up_the_layers() -> None:
    upward = upward_imports(dependency_graph(product_sources()))
    assert not upward, "imports up the layers:\n" + "\n".join(upward)


def test_every_import_by_name_is_decided_or_allowed() -> None:
    """A module name the text does not decide is an import the layer check cannot follow:
    each is read, found to stay in its layer and listed, and the list holds no other."""
    found = {(name, call) for name, source in product_sources().items()
             for call in undecided_imports(source)}
    assert found - set(UNDECIDED_IMPORTS_ALLOWED) == set(), "module names not decided"
    assert set(UNDECIDED_IMPORTS_ALLOWED) - found == set(), "allowed but no longer there"


@pytest.mark.parametrize(("files", "edges"), cases.UPWARD_TREES.values(),
                         ids=cases.UPWARD_TREES.keys())
def test_the_layer_check_catches_upward_imports(files: dict[str, str], edges: list[str]
                                                ) -> None:
    """Made-up trees with imports up the layers: by statements at module level, in a
    function and for types only; by name, in a lazy map and through the facade names."""
    assert upward_imports_of(files) == edges


@pytest.mark.parametrize("text", cases.HIDDEN_UPWARD_IMPORTS.values(),
                         ids=cases.HIDDEN_UPWARD_IMPORTS.keys())
def test_the_layer_check_sees_each_hidden_import(text: str) -> None:
    """``tables/build.py`` reaching ``view.widget`` a way no import statement shows."""
    files = {"__init__.py": "", "tables/__init__.py": "", "tables/build.py": text,
             "view/__init__.py": "", "view/widget.py": ""}
    assert upward_imports_of(files) == cases.edges("tables.build -> view",
                                                   "tables.build -> view.widget")


@pytest.mark.parametrize(("text", "calls"), cases.IMPORTS_BY_NAME.values(),
                         ids=cases.IMPORTS_BY_NAME.keys())
def test_import_names_the_text_does_not_decide_are_reported(text: str, calls: list[str]) -> None:
    assert list(undecided_imports(Source.of(text, f"{PACKAGE.name}.tables.build"))) == calls


def test_every_module_is_in_a_layer() -> None:
    for name in product_sources():
        layer_of(name)


def documented_layers(text: str) -> tuple[tuple[str, ...], ...]:
    """The layer order the doc draws: its first fenced block, one line, ``<`` between
    layers and ``,`` between the names of one."""
    block = re.search(r"^```\w*\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    assert block and block.group(1).count("\n") == 1, "no one-line fenced layer order on top"
    return tuple(tuple(name.strip() for name in layer.split(","))
                 for layer in block.group(1).split("<"))


def test_the_docs_draw_the_layers_the_test_holds() -> None:
    """docs/architecture.md's layer line is LAYERS, less the package's plumbing."""
    drawn = documented_layers((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))
    held = tuple(tuple(name for name in layer if name not in PLUMBING_IN_LAYERS)
                 for layer in LAYERS)
    assert drawn == held


def test_no_import_circle() -> None:
    """Within one process: a module that starts another process on a module (the loader's
    pool runs its worker with ``python -c``) does not import it; the layers still count it."""
    cycle = find_cycle(dependency_graph(product_sources(), other_processes=False))
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_circles() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None
    assert find_cycle({"a": {"a"}}) == ["a", "a"]


def own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a module's or a function's own code, not of the functions it defines."""
    pending = list(ast.iter_child_nodes(scope))
    while pending:
        yield (node := pending.pop())
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            pending.extend(ast.iter_child_nodes(node))


def module_value(node: ast.AST, source: Source, helpers: frozenset[str] = frozenset()
                 ) -> str | None:
    """The name of another project's module an expression gives (``SOME_MODULE`` when the
    text does not tell which): an import by name not given a package to resolve from,
    ``sys.modules[name]``, ``sys.modules.get(name)``, a call to one of ``helpers``."""
    if isinstance(node, ast.Subscript) and source.qualified(node.value) == "sys.modules":
        names = source.strings(node.slice)
    elif not isinstance(node, ast.Call):
        return None
    elif (function := source.qualified(node.func)) == "sys.modules.get":
        names = source.strings(argument(node, 0, "key"))
    elif function in IMPORT_CALLS:
        if (found := source.imports_by_name(node)) is None and argument(node, 1, "package"):
            return None  # a name relative to the package: one of its own modules
        names = None if found is None else set(found)
    elif isinstance(node.func, ast.Name) and node.func.id in helpers:
        names = None
    else:
        return None
    if names is None or len(names) != 1:
        return None if names and any(map(in_package, names)) else SOME_MODULE
    return None if in_package(name := names.pop()) else name


def module_helpers(source: Source) -> frozenset[str]:
    """The module's own functions that return another project's module (or None)."""
    found = set()
    for function in source.tree.body:
        returned = [node.value for node in own_nodes(function) if isinstance(node, ast.Return)
                    and node.value and ast.unparse(node.value) != "None"]
        if isinstance(function, ast.FunctionDef) and returned and all(
                module_value(value, source) for value in returned):
            found.add(function.name)
    return frozenset(found)


def foreign_owner(node: ast.expr, variables: dict[str, str], source: Source,
                  helpers: frozenset[str]) -> str | None:
    """What ``node`` names when it is another project's module or a name imported from
    one (``os``, ``os.path``, a module imported by name), else None."""
    if isinstance(node, ast.Name):
        bound = variables.get(node.id) or source.bindings.get(node.id)
        return bound if bound and not in_package(bound) else None
    if isinstance(node, ast.Attribute):
        owner = foreign_owner(node.value, variables, source, helpers)
        return f"{owner}.{node.attr}" if owner else None
    return module_value(node, source, helpers)


def private_uses(source: Source) -> set[str]:
    """Other projects' private names this module uses: an import of one (``_codecs``,
    ``pandas._libs``, ``from pickle import _Unpickler``), an underscored attribute of
    an imported module or name (``os._exit``), and one reached by ``getattr``,
    ``hasattr``, ``setattr`` or ``delattr`` with a string the text decides. A module
    assigned to a name of a function counts there (``module = _import(name)``). Dunder
    names (``__version__``) are public; the package's own names are its own."""
    imported = [*statement_imports(source), *(
        name for node in ast.walk(source.tree) if isinstance(node, ast.Call)
        for name in source.imports_by_name(node) or ())]
    found = {name for name in imported if not in_package(name)
             and any(map(is_private, name.split(".")))}
    helpers = module_helpers(source)
    for scope in [source.tree, *(node for node in ast.walk(source.tree)
                                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)))]:
        nodes = list(own_nodes(scope))
        variables = {target.id: target.id if module == SOME_MODULE else module for node in nodes
                     if isinstance(node, ast.Assign) and len(node.targets) == 1
                     and isinstance(target := node.targets[0], ast.Name)
                     and (module := module_value(node.value, source, helpers))}
        for node in nodes:
            if isinstance(node, ast.Attribute) and is_private(node.attr):
                owner, names = foreign_owner(node.value, variables, source, helpers), {node.attr}
            elif (isinstance(node, ast.Call) and source.qualified(node.func) in ATTRIBUTE_CALLS
                  and len(node.args) >= 2):
                owner = foreign_owner(node.args[0], variables, source, helpers)
                names = {name for name in source.strings(node.args[1]) or () if is_private(name)}
            else:
                continue
            found |= {f"{owner}.{name}" for name in names if owner}
    return found


def test_no_private_name_of_python_or_a_library() -> None:
    """Other projects' private names may change in any release; the few the product needs
    are listed with the reason, and the list holds no other."""
    found = {(name, use) for name, source in product_sources().items()
             for use in private_uses(source)}
    assert sorted(found - set(PRIVATE_USES_ALLOWED)) == [], "private names used"
    assert sorted(set(PRIVATE_USES_ALLOWED) - found) == [], "allowed but no longer used"


@pytest.mark.parametrize(("text", "expected"), cases.PRIVATE_NAMES.values(),
                         ids=cases.PRIVATE_NAMES.keys())
def test_the_private_check_sees_private_attributes(text: str, expected: set[str]) -> None:
    """Each way of reaching another project's private name, and names that are public or
    the package's own, which it leaves alone."""
    assert private_uses(Source.of(text, f"{PACKAGE.name}.stage.mod")) == expected


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


def project_files() -> list[Path]:
    """Every file of the project git tracks or would track: new files too, not ignored
    ones (node_modules, the built static bundle), nor tracked files deleted since."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout.split("\0")
    return [ROOT / name for name in listed if name and (ROOT / name).is_file()]


def test_no_source_file_is_too_long() -> None:
    """Every Python, JavaScript, C, CSS and HTML file of the project, the product, its
    tests, benchmarks, build hook, dev scripts and CI alike, but test fixtures."""
    checked = [path for path in project_files() if path.suffix in LENGTH_CHECKED
               and "fixtures" not in path.relative_to(ROOT).parts]
    assert any(path.name == "hatch_build.py" for path in checked)
    long = {str(p.relative_to(ROOT)): n for p in checked
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
