"""Find a contract's tables written out again in source text, entry after entry.

A contract file (the query grammar, the vocabularies) is read by the Python and the
JS code alike; a source that spells one of its tables out again would drift from it.
"""

from __future__ import annotations

import re
from pathlib import Path

#: between two entries of a written-out table: spaces, quotes, brackets,
#: separators and numbers (``"us": (1, 1e6), "ms"``, ``us: [1, 1e6], ms``, ``us|ms``);
#: possessive, so a long run of digits is read one way and cannot backtrack
_BETWEEN = r"""(?:[\s,;:'"`|()\[\]{}]|[-+]?[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)*+"""
#: the same between quoted entries, whose quotes the entries' pattern takes
_BETWEEN_QUOTED = _BETWEEN.replace("""'"`""", "")
#: a table this short is a copy only written as quoted strings: prose names
#: two words in a row ("attempt, duration") often enough
_BARE_FROM = 3


def _entry(text: str) -> str:
    """One entry, not part of a longer word or operator."""
    edge = "A-Za-z0-9_" if text[0].isalnum() else "<>=!"
    return rf"(?<![{edge}]){re.escape(text)}(?![{edge}])"


def _table_pattern(entries: list[str]) -> str:
    if len(entries) >= _BARE_FROM:
        return _BETWEEN.join(_entry(entry) for entry in entries)
    return _BETWEEN_QUOTED.join(f"""['"]{re.escape(entry)}['"]""" for entry in entries)


def written_out(tables: dict[str, list[str]], source: str) -> list[str]:
    """The names of the ``tables`` (of two or more entries) that ``source`` writes out."""
    return [name for name, entries in tables.items()
            if len(entries) >= 2 and re.search(_table_pattern(entries), source)]


def source_files(root: Path) -> list[Path]:
    """The product's sources under the repository ``root`` that a contract's reader
    may be: the package's Python and the front end's JS."""
    return sorted([*(root / "slime_trace_widget").rglob("*.py"),
                   *(root / "js" / "src").rglob("*.js")])
