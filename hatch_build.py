"""Build hook: compile the native passes of the tables, where a C compiler is.

Each of :data:`SOURCES` is one C file against Python's own headers, compiled with
the compiler this Python was built with (or ``$CC``): ``_native_columns.c`` (the
attribute columns), ``_native_dicts.c`` (their dicts made again) and
``_native_records.c`` (a carrier's records).
Where there is none, or compiling fails, the package installs as pure Python and
``tables`` uses its Python passes, which make the same tables more slowly; the
build says so in a warning rather than failing.

An editable install compiles next to the source, where the package is imported
from; a wheel carries the compiled module and is tagged for this interpreter.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCES = (Path("slime_trace_widget/tables/_native_columns.c"),
           Path("slime_trace_widget/tables/_native_dicts.c"),
           Path("slime_trace_widget/tables/_native_records.c"))


class NativeColumnsHook(BuildHookInterface):
    """Compiles :data:`SOURCES` before a wheel (or an editable install) is built."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        for relative in SOURCES:
            source = Path(self.root) / relative
            module = source.with_name(source.stem + sysconfig.get_config_var("EXT_SUFFIX"))
            if not _up_to_date(module, source):
                problem = _compile(source, module)
                if problem is not None:
                    self.app.display_warning(
                        f"slime-trace-widget: {source.name} was not compiled ({problem}); "
                        "its Python pass will be used")
                    continue
            if version != "editable":
                build_data["force_include"][str(module)] = str(module.relative_to(self.root))
                build_data["pure_python"] = False
                build_data["infer_tag"] = True


def _up_to_date(module: Path, source: Path) -> bool:
    return module.exists() and module.stat().st_mtime >= source.stat().st_mtime


def _compile(source: Path, module: Path) -> str | None:
    """Compile ``source`` into ``module``; what went wrong, or None."""
    if sys.platform == "win32":
        return "not attempted on Windows"
    compiler = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    flags = ["-O2", "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}"]
    if sys.platform == "darwin":
        flags += ["-undefined", "dynamic_lookup"]
    partial = module.with_name(module.name + ".partial")  # never a half-written module
    try:
        done = subprocess.run([*compiler, *flags, str(source), "-o", str(partial)],
                              capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{compiler[0]}: {exc}"
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        return (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
    os.replace(partial, module)
    return None
