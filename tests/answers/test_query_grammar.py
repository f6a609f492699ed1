"""The query grammar's tables live in one contract file, ``answers/query_grammar.json``.

The Python parser (``answers/query.py``) and the widget's (``js/src/data/query.js``)
both read it; no source file writes a table out again, so a field, operator or
unit added to the file reaches both parsers and nothing else needs to change.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from slime_trace_widget.answers import query
from slime_trace_widget.sources.loading import load_frames
from tests.support.written_out import source_files
from tests.support.written_out import written_out as written_out_tables

ROOT = Path(__file__).parents[2]
GRAMMAR_FILE = ROOT / "slime_trace_widget" / "answers" / "query_grammar.json"
GRAMMAR = json.loads(GRAMMAR_FILE.read_text(encoding="utf-8"))
JS_PARSER = ROOT / "js" / "src" / "data" / "query.js"
FIXTURES = ROOT / "tests" / "fixtures"

def _tables() -> dict[str, list[str]]:
    """Each table of the grammar with two or more entries, as its entries' text."""
    out = {}
    for name, value in GRAMMAR.items():
        entries = list(value) if isinstance(value, dict | list) else []
        if len(entries) >= 2:
            out[name] = [str(entry) for entry in entries]
    return out


def written_out(source: str) -> list[str]:
    """The grammar's tables that ``source`` writes out, entry after entry."""
    return written_out_tables(_tables(), source)


def test_both_parsers_read_the_contract_file() -> None:
    assert query.GRAMMAR == GRAMMAR
    js = JS_PARSER.read_text(encoding="utf-8")
    imported = (r'^import GRAMMAR from "(\.\./)+slime_trace_widget/answers/query_grammar\.json"'
                r' with \{ type: "json" \};$')
    assert re.search(imported, js, re.M)


@pytest.mark.parametrize("path", source_files(ROOT), ids=lambda path: str(path.relative_to(ROOT)))
def test_no_source_writes_a_table_out_again(path: Path) -> None:
    assert written_out(path.read_text(encoding="utf-8")) == [], \
        f"{path.relative_to(ROOT)} defines a table of {GRAMMAR_FILE.name}: read it from there"


@pytest.mark.parametrize("copy", [
    '_UNITS = {"us": (1, 1e6), "ms": (1, 1e3), "s": (1, 1), "m": (60, 1), "h": (3600, 1)}',
    "const UNITS = { us: [1, 1e6], ms: [1, 1e3], s: [1, 1], m: [60, 1], h: [3600, 1] };",
    "const DURATION = /^(\\d+(?:\\.\\d*)?|\\.\\d+)(us|ms|s|m|h)?$/;",
    '_COLON_FIELDS = ("name", "status", "source", "attempt", "is", "has")',
    'ok = op in (">", ">=", "<", "<=")',
    "if op in ('=', '!='):",
    'const ATTR_KINDS = ["attr", "has"];',
    'for field in ("sample_index", "source", "status", "label", "trace_id"):',
])
def test_a_table_written_out_is_found(copy: str) -> None:
    assert written_out(copy), copy


def test_units_are_words_the_duration_pattern_can_take_as_they_are() -> None:
    # Both parsers join the unit names into a regular expression unescaped.
    assert all(re.fullmatch(r"[a-z]+", unit) for unit in GRAMMAR["units"])
    assert GRAMMAR["default_unit"] in GRAMMAR["units"]


def test_errors_list_what_the_tables_hold() -> None:
    with pytest.raises(query.QueryError, match="us, ms, s, m or h"):
        query.parse("duration>2x")
    with pytest.raises(query.QueryError, match="is:error or is:open"):
        query.parse("is:late")


def _searched(fields: list[str] | tuple[str, ...]) -> str:
    """What ``query.sample_text`` makes of a sample whose every field holds its own
    name (in capitals, which it lower-cases) when ``fields`` are searched in order."""
    marks = GRAMMAR["bare_word_marks"]
    return "\x01".join(marks.get(field, "") + field for field in fields)


def test_a_bare_word_searches_the_grammars_fields_in_its_order(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fields = GRAMMAR["bare_word_fields"]
    samples = pd.DataFrame({field: [field.upper(), None] for field in fields})
    assert query.sample_text(samples).tolist() == [_searched(fields),
                                                   "\x01" * (len(fields) - 1)]
    # the order (and the fields) come from the grammar, not from a list of its own
    reordered = tuple(reversed(fields))
    monkeypatch.setattr(query, "_BARE_WORD_FIELDS", reordered)
    assert query.sample_text(samples)[0] == _searched(reordered)


def test_a_bare_word_searches_columns_the_samples_frame_has() -> None:
    samples = load_frames(FIXTURES / "small.pt").samples
    assert set(GRAMMAR["bare_word_fields"]) <= set(samples.columns)
    assert set(GRAMMAR["bare_word_marks"]) <= set(GRAMMAR["bare_word_fields"])
