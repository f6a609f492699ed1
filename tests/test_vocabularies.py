"""The category names the frames and the payload share live in ``vocabularies.json``.

``vocabularies.py`` reads it for the frames' categoricals, the answers and the
payload's encoder; the renderer's decoder imports it; no other source writes a list
out again, so a name added there reaches every side in its code order.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from slime_trace_widget import vocabularies
from slime_trace_widget.frames.engine_load import _TRACK_RULES, TRACKS
from slime_trace_widget.view.contract import CONTRACT
from tests.support.written_out import source_files, written_out

ROOT = Path(__file__).parents[1]
VOCABULARIES_FILE = ROOT / "slime_trace_widget" / "vocabularies.json"
FILE = json.loads(VOCABULARIES_FILE.read_text(encoding="utf-8"))
LISTS = {name: value for name, value in FILE.items() if isinstance(value, list)}
#: The renderer's modules that decode codes by these names.
JS_READERS = ("data/decode.js", "data/fates.js", "data/load_tracks.js", "data/engine_lanes.js")


def test_the_module_holds_the_file_s_lists_in_their_order() -> None:
    assert set(LISTS) == {"event_kinds", "clip_reasons", "link_kinds", "fates", "load_tracks",
                          "engine_phase_priority"}
    for name, names in LISTS.items():
        assert list(getattr(vocabularies, name.upper())) == names
        assert len(set(names)) == len(names), f"{name} repeats a name: its codes would clash"


@pytest.mark.parametrize("module", JS_READERS)
def test_the_renderer_imports_the_file(module: str) -> None:
    source = (ROOT / "js" / "src" / module).read_text(encoding="utf-8")
    imported = (r'^import VOCABULARIES from "(\.\./)+slime_trace_widget/vocabularies\.json"'
                r' with \{ type: "json" \};$')
    assert re.search(imported, source, re.M), module


def test_the_payload_contract_names_no_vocabulary() -> None:
    assert not set(LISTS) & set(CONTRACT), "payload_contract.json repeats a vocabulary"


def test_every_load_track_has_its_rule_and_every_rule_a_track() -> None:
    assert [track.name for track in TRACKS] == LISTS["load_tracks"]
    assert sorted(rule.name for rule in _TRACK_RULES) == sorted(LISTS["load_tracks"])
    for table in ("load_track_units", "load_track_combine"):
        assert sorted(FILE[table]) == sorted(LISTS["load_tracks"]), table
    assert set(FILE["load_track_combine"].values()) <= {"sum", "max"}
    assert {track.name: (track.combine, track.unit) for track in TRACKS} == {
        name: (FILE["load_track_combine"][name], FILE["load_track_units"][name])
        for name in LISTS["load_tracks"]}


def test_the_engine_phases_count_and_show_in_the_file_s_priority() -> None:
    """The partition of ``answers.engine`` (the figures) reads the one priority the
    renderer's panel and band read (``js/src/data/engine_lanes.js``, checked above to
    import the file and below to write no copy): every phase once, ``other`` last."""
    from slime_trace_widget.answers import engine

    priority = LISTS["engine_phase_priority"]
    assert engine.PRIORITY == vocabularies.ENGINE_PHASE_PRIORITY == tuple(priority)
    assert sorted(priority) == sorted([*engine.PHASES, "other"]) and priority[-1] == "other"
    lanes = (ROOT / "js" / "src" / "data" / "engine_lanes.js").read_text(encoding="utf-8")
    assert "VOCABULARIES.engine_phase_priority" in lanes


@pytest.mark.parametrize("path", source_files(ROOT), ids=lambda path: str(path.relative_to(ROOT)))
def test_no_source_writes_a_vocabulary_out_again(path: Path) -> None:
    assert written_out(LISTS, path.read_text(encoding="utf-8")) == [], \
        f"{path.relative_to(ROOT)} writes out a list of {VOCABULARIES_FILE.name}: read it"


@pytest.mark.parametrize("copy", [
    'EVENT_KINDS = ["instant", "unmatched_end"]',
    "CLIP_REASONS = ('row_end', 'next_sibling', 'ancestor_end')",
    "const LINK_KINDS = [`group`, `attempt`, `remote`];",
    'FATES = ("signal", "no_signal", "filtered", "truncated", "aborted", "failed")',
    "tracks: running | queued | token_usage | throughput | retractions",
    'export const PRIORITY = ["prefill", "decode", "queue", "pd", "other"];',
])
def test_a_vocabulary_written_out_is_found(copy: str) -> None:
    assert written_out(LISTS, copy), copy


def _code_of(source: str) -> str:
    """JS or Python ``source`` without its comments and docstrings, where prose may name
    a span the way slime does."""
    source = re.sub(r"/\*.*?\*/|(?<![:\"'`])//[^\n]*", "", source, flags=re.S)
    source = re.sub(r'"""(?:.*?)"""', "", source, flags=re.S)
    return "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("#"))


def test_the_real_pd_spans_are_named_from_one_prefix() -> None:
    from slime_trace_widget import schema

    prefix = FILE["pd_span_prefix"]
    assert schema.PD_SPAN_PREFIX == vocabularies.PD_SPAN_PREFIX == prefix
    named = [*schema.PD_PHASE_LABELS, schema.PD_SUMMARY_EVENT,
             *(span for steps in schema.PD_SEGMENTS.values() for _, span in steps)]
    assert all(name.startswith(prefix) for name in named)
    for path in source_files(ROOT):
        assert prefix not in _code_of(path.read_text(encoding="utf-8")), \
            f"{path.relative_to(ROOT)} spells the PD span prefix: read vocabularies.json"


@pytest.mark.parametrize("copy", ['const PD_PREFIX = "sglang_pd_";',
                                  'name.replace(/^sglang_pd_/, "")',
                                  'PD_SUMMARY_EVENT = "sglang_pd_summary"'])
def test_a_spelled_pd_prefix_is_found(copy: str) -> None:
    assert FILE["pd_span_prefix"] in _code_of(copy)


@pytest.mark.parametrize("prose", ['/** Prefix of the real `sglang_pd_*` names. */',
                                   "// the real sglang_pd_* spans",
                                   '"""Mask of real ``sglang_pd_*`` spans."""',
                                   "# sglang_pd_summary attrs"])
def test_prose_may_name_pd_spans(prose: str) -> None:
    assert FILE["pd_span_prefix"] not in _code_of(prose)


def test_the_event_kinds_are_named_in_the_file_s_order() -> None:
    assert LISTS["event_kinds"] == [vocabularies.INSTANT_EVENT, vocabularies.UNMATCHED_END]
