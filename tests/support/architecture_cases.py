"""Made-up module texts for tests/test_architecture.py to check its own checks with:
each is parsed there, never written into the package nor imported."""

from __future__ import annotations


def edges(*written: str) -> list[str]:
    """``"a.b -> c"`` edges in the package, named as the layer check reports them."""
    return [" -> ".join(f"slime_trace_widget.{side}" for side in edge.split(" -> "))
            for edge in written]


#: Tables importing the model (at module level, in a function, for types only) and
#: frames importing an exporter.
_UPWARD_STATEMENTS = {
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

#: A lazy map in a package ``__init__``, ``importlib.import_module``, the facade names
#: (``from .. import perfetto`` is the exporter).
_UPWARD_BY_NAME_AND_FACADE = {
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

#: Made-up package trees -> (files, the upward edges the layer check must report).
UPWARD_TREES = {
    "statements": (_UPWARD_STATEMENTS, edges(
        "frames.model -> export", "frames.model -> export.parquet",
        "tables.build -> frames", "tables.build -> frames.model",
        "tables.build -> sources", "tables.build -> sources.loading",
        "tables.build -> view", "tables.build -> view.widget")),
    "by_name_and_facade": (_UPWARD_BY_NAME_AND_FACADE, edges(
        "frames.model -> analysis", "frames.model -> export", "frames.model -> export.perfetto",
        "sources.load -> view", "sources.load -> view.widget",
        "tables -> view", "tables -> view.widget",
        "tables.build -> export", "tables.build -> export.parquet")),
}

#: No dotted name of the package in any string: only resolving the call can see these.
_SPLIT = "PREFIX = 'slime_trace_widget.'\n"
_WIDGET = "slime_trace_widget.view.widget"
#: ``tables/build.py`` reaching ``view.widget`` with no import statement: case -> text.
HIDDEN_UPWARD_IMPORTS = {
    "dunder_import": f"def f():\n    return __import__('{_WIDGET}')\n",
    "dunder_import_fromlist": "__import__('slime_trace_widget.view', fromlist=['widget'])\n",
    "dunder_import_level": "__import__('view.widget', globals(), None, [], 2)\n",
    "builtins_dunder_import": "import builtins\nbuiltins.__import__('view.widget', level=2)\n",
    "bare_import_module": (f"from importlib import import_module\n"
                           f"def f():\n    return import_module('{_WIDGET}')\n"),
    "aliased_import_module": (f"{_SPLIT}from importlib import import_module as load\n"
                              "load(PREFIX + 'view.widget')\n"),
    "importlib_aliased": ("import importlib as il\n"
                          "il.import_module('.widget', 'slime_trace_widget.view')\n"),
    "computed_f_string": ("import importlib\nSTAGE = 'view'\n"
                          "importlib.import_module(f'slime_trace_widget.{STAGE}.widget')\n"),
    "computed_concatenation": (f"{_SPLIT}import importlib\n"
                               "importlib.import_module(PREFIX + 'view.widget')\n"),
    "relative_to_package_argument": (
        "import importlib\ndef f():\n"
        "    return importlib.import_module('..view.widget', __package__)\n"),
    "relative_to_spec_parent": ("import importlib\n"
                                "importlib.import_module('..view.widget', __spec__.parent)\n"),
    "subprocess_c": (f"import subprocess, sys\n"
                     f"subprocess.run([sys.executable, '-c', 'import {_WIDGET}'])\n"),
    "subprocess_c_from_import": ("import subprocess, sys\n"
                                 "CODE = 'from slime_trace_widget.view import widget'\n"
                                 "subprocess.run([sys.executable, '-c', CODE])\n"),
    "python_m": f"import subprocess, sys\nsubprocess.run([sys.executable, '-m', '{_WIDGET}'])\n",
    "absolute_lazy_map": (f"import importlib\n_HOMES = {{'W': '{_WIDGET}'}}\n"
                          "def __getattr__(n):\n"
                          "    return getattr(importlib.import_module(_HOMES[n]), n)\n"),
    "lazy_map_from_pairs": (f"{_SPLIT}import importlib\n"
                            "_HOMES = (('W', PREFIX + 'view.widget'),)\n"
                            "def f(n):\n    return importlib.import_module(dict(_HOMES)[n])\n"),
    "tuple_lazy_map": ("import importlib\n_HOMES = (('W', '..view.widget'),)\n"
                       "def __getattr__(n):\n    return getattr(\n"
                       "        importlib.import_module(dict(_HOMES)[n], __name__), n)\n"),
    "relative_name_in_a_list": "_HOMES = ['..view.widget']\n",
    "runpy": f"import runpy\ndef f():\n    runpy.run_module('{_WIDGET}')\n",
    "run_module_imported": (f"{_SPLIT}from runpy import run_module as run\n"
                            "run(PREFIX + 'view.widget')\n"),
    "attribute_chain": ("import slime_trace_widget\n"
                        "def f():\n    return slime_trace_widget.view.widget\n"),
    "attribute_chain_aliased": "import slime_trace_widget as stw\nstw.view.widget.TraceTimeline\n",
}

#: Import-by-name calls -> (text, the calls reported as not decided by the text).
IMPORTS_BY_NAME = {
    "parameter": ("import importlib\ndef load(name):\n    return importlib.import_module(name)\n",
                  ["importlib.import_module(name)"]),
    "f_string_of_a_parameter": ("def f(stage):\n"
                                "    return __import__(f'slime_trace_widget.{stage}')\n",
                                ["__import__(f'slime_trace_widget.{stage}')"]),
    "name_assigned_twice": ("import importlib\nNAME = 'a'\nNAME = 'b'\n"
                            "importlib.import_module(NAME)\n", ["importlib.import_module(NAME)"]),
    "conditional_name": ("import sys\n__import__('a' if sys.platform == 'linux' else 'b')\n",
                         ["__import__('a' if sys.platform == 'linux' else 'b')"]),
    "relative_to_unknown_package": ("from importlib import import_module\n"
                                    "def f(where):\n    import_module('.x', where)\n",
                                    ["import_module('.x', where)"]),
    "level_not_constant": ("def f(depth):\n    __import__('x', None, None, (), depth)\n",
                           ["__import__('x', None, None, (), depth)"]),
    "c_code_not_constant": ("import subprocess, sys\ndef f(code):\n"
                            "    subprocess.run([sys.executable, '-c', code])\n", ["-c code"]),
    "undecided_inside_c_code": (
        "import subprocess, sys\nsubprocess.run([sys.executable, '-c', "
        "'import importlib, sys; importlib.import_module(sys.argv[1])'])\n",
        ["importlib.import_module(sys.argv[1])"]),
    "constant": ("import importlib\nimportlib.import_module('json')\n", []),
    "module_constant": ("import runpy\nNAME = 'json.tool'\nrunpy.run_module(NAME)\n", []),
    "table_with_none": ("import importlib\n_HOMES = {'a': '.x', 'b': None}\n"
                        "def f(n):\n    return importlib.import_module(_HOMES[n], __name__)\n",
                        []),
    "shell_c_is_not_python": ("import subprocess\n"
                              "subprocess.run(['bash', '-c', 'echo hi && exit'])\n", []),
}

#: Ways of reaching another project's private name, and public or own names, which the
#: check leaves alone: case -> (text, what is reported).
PRIVATE_NAMES = {
    "private_imports": ("import _compat_pickle\nfrom pandas._libs import lib\n"
                        "from pickle import _Unpickler\nfrom . import _native\n",
                        {"_compat_pickle", "pandas._libs", "pandas._libs.lib",
                         "pickle._Unpickler"}),
    "attribute_of_a_module": ("import os\ndef f():\n    os._exit(0)\n", {"os._exit"}),
    "aliased_module": ("import sys as system\nsystem._getframe()\n", {"sys._getframe"}),
    "name_from_a_module": ("from os import path\npath._get_sep('x')\n", {"os.path._get_sep"}),
    "attribute_chain": ("import os.path\nos.path._joinrealpath\n", {"os.path._joinrealpath"}),
    "getattr_constant": ("import os\ngetattr(os, '_exit')\n", {"os._exit"}),
    "hasattr_through_a_constant": ("import os\nNAME = '_exit'\nhasattr(os, NAME)\n",
                                   {"os._exit"}),
    "setattr_on_an_import_by_name": (
        "import importlib\nsetattr(importlib.import_module('json'), '_default_encoder', 1)\n",
        {"json._default_encoder"}),
    "module_from_sys_modules": (
        "import sys\nNAME = '_rollout'\ndef f():\n"
        "    module = sys.modules.get('slime.hooks')\n    return getattr(module, NAME, None)\n",
        {"slime.hooks._rollout"}),
    "module_from_a_helper": (
        "import importlib\ndef _load(name):\n    try:\n"
        "        return importlib.import_module(name)\n    except ImportError:\n"
        "        return None\n"
        "def patch():\n    module = _load('slime.trace')\n    setattr(module, '_append', 1)\n",
        {"module._append"}),
    "dunder_names_are_public": (
        "import numpy as np\nnp.__version__\ngetattr(np, '__array_interface__', None)\n", set()),
    "the_package_s_own": ("from . import sibling\nimport slime_trace_widget\nsibling._helper()\n"
                          "slime_trace_widget._version\n", set()),
    "the_package_s_own_by_name": (
        "import importlib\ngetattr(importlib.import_module('.x', __package__), '_y')\n", set()),
    "values_are_not_followed": ("def f(obj):\n    return obj._x, getattr(obj, '_y')\n", set()),
}
