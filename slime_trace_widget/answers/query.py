"""The query grammar of the filter box and ``tl.show(query=...)`` (``docs/query.md``).

One grammar for Python and the widget (``js/src/data/query.js`` is the same parser
term for term; both read the tables of fields, operators and units from
``query_grammar.json``, and ``js/test/fixtures/query_cases.json`` holds the cases
both must agree on). A query is parsed into plain dict terms, then evaluated into boolean
masks over ``samples``, ``span_core`` and ``event_core`` with numpy and Arrow
over whole columns: sample terms (status, source, bare words) choose rows,
item terms (name, attempt, duration, ``is:``, attributes) choose spans and
events, and with any item term a row stays only when one of its items matches.
The widget's front end cannot see attributes, so it asks the kernel, which
answers with :func:`attr_masks` (the same code, the same answer).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..frames.model import TraceFrames

__all__ = ["Matches", "QueryError", "attr_masks", "fold_case", "glob_match", "match", "parse",
           "restrict", "select", "selection_labels"]

#: the grammar's tables, shared with the widget's parser
GRAMMAR: dict[str, Any] = json.loads(
    (Path(__file__).parent / "query_grammar.json").read_text(encoding="utf-8"))
_SPACE: str = GRAMMAR["space"]
_ATTR_PREFIX: str = GRAMMAR["attr_prefix"]
_COLON_FIELDS = tuple(GRAMMAR["colon_fields"])
_COMPARED_FIELDS = tuple(GRAMMAR["compared_fields"])
_IS_VALUES = tuple(GRAMMAR["is_values"])
_EQUALITY = tuple(GRAMMAR["equality_operators"])
_ORDER = tuple(GRAMMAR["order_operators"])
#: longest first, so ">=" is read before ">"
_OPERATORS = sorted(_EQUALITY + _ORDER, key=len, reverse=True)
#: seconds per unit as (multiply, divide), so 100us is 100 / 1e6 on both sides, exactly
_UNITS: dict[str, tuple[int, int]] = {unit: (times, per) for unit, (times, per)
                                      in GRAMMAR["units"].items()}
_DEFAULT_UNIT: str = GRAMMAR["default_unit"]
# [0-9], not \d: \d takes any Unicode digit ("٣"), which the widget's parser refuses
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_DURATION = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)("
                       + "|".join(re.escape(unit) for unit in _UNITS) + ")?")
_WHOLE = re.compile(r"[0-9]+")
#: Every whole number of at most these many digits is an int64.
_INT64_DIGITS = 18
SAMPLE_KINDS = tuple(GRAMMAR["sample_kinds"])
_ATTR_KINDS = tuple(GRAMMAR["attr_kinds"])
_SPAN_ONLY_KINDS = tuple(GRAMMAR["span_only_kinds"])
#: the sample columns a bare word searches, in the order their texts are joined
_BARE_WORD_FIELDS = tuple(GRAMMAR["bare_word_fields"])
#: what a column's searched text starts with ("#" before the sample index)
_BARE_WORD_MARKS: dict[str, str] = GRAMMAR["bare_word_marks"]


#: Greek small final sigma, which case folding writes as the medial one (:func:`fold_case`)
_FINAL_SIGMA = "\u03c2"
_SIGMA = "\u03c3"


def fold_case(text: str) -> str:
    """``text`` as the query compares names, statuses, sources and bare words: lower-cased
    by Unicode's full mapping (``str.lower``: "İ" becomes "i̇"), then every final sigma
    "ς" written as "σ"; ``foldCase`` in ``js/src/data/query.js`` is the same fold, and
    the shared cases' ``fold`` list pins both.

    Lower-casing alone writes "Σ" as "ς" at a word's end and "σ" inside one, so
    ``name:οδοσ``, typed as people type it, missed a span named "ΟΔΟΣ" (folded
    "οδος"), and ``name:ΟΔΟΣ*`` missed "ΟΔΟΣΟΣ". With one sigma a letter folds the same
    wherever it stands: a text's fold is its pieces' folds joined, so a glob's pieces
    and a bare word's substring fold as the text around them does."""
    return text.lower().replace(_FINAL_SIGMA, _SIGMA)


def _alternatives(options: list[str]) -> str:
    """``a, b or c``: how an error message lists what would have done."""
    return ", ".join(options[:-1]) + " or " + options[-1]

Term = dict[str, Any]


class QueryError(ValueError):
    """A query that does not parse: ``message`` says why, ``pos`` where (0-based, in code
    points: the widget's parser reports the same ``pos``, not its UTF-16 index)."""

    def __init__(self, message: str, pos: int) -> None:
        super().__init__(f"{message} (at character {pos + 1})")
        self.message = message
        self.pos = pos


# --------------------------------------------------------------------------- parsing


def _tokens(text: str) -> list[tuple[int, str, list[bool]]]:
    """Whitespace-separated tokens as (position, characters, which were quoted)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        if text[i] in _SPACE:
            i += 1
            continue
        start, chars, quoted, open_at = i, [], [], -1
        while i < n and (open_at >= 0 or text[i] not in _SPACE):
            c = text[i]
            if c == '"':
                open_at = -1 if open_at >= 0 else i
            elif open_at >= 0 and c == "\\" and i + 1 < n and text[i + 1] in '"\\':
                i += 1
                chars.append(text[i])
                quoted.append(True)
            else:
                chars.append(c)
                quoted.append(open_at >= 0)
            i += 1
        if open_at >= 0:
            raise QueryError("unclosed quote", open_at)
        out.append((start, "".join(chars), quoted))
    return out


def _operator(word: str, quoted: list[bool]) -> tuple[int, str]:
    """The first operator of the grammar written unquoted, the longest at its place."""
    for i in range(len(word)):
        if quoted[i]:
            continue
        for op in _OPERATORS:
            if word.startswith(op, i) and not any(quoted[i:i + len(op)]):
                return i, op
    return -1, ""


def _term(pos: int, word: str, quoted: list[bool]) -> Term:
    neg = word.startswith("-") and not quoted[0]
    if neg:
        word, quoted = word[1:], quoted[1:]
        if not word:
            raise QueryError('"-" needs a term after it', pos)
    colon = next((i for i, c in enumerate(word) if c == ":" and not quoted[i]), -1)
    at, op = _operator(word, quoted)
    field = word[:colon].lower() if colon > 0 else ""
    if field in _COLON_FIELDS and (at < 0 or colon < at):
        return {"kind": field, "neg": neg, **_field_value(pos, field, "=", word[colon + 1:])}
    if at < 0:
        return {"kind": "text", "neg": neg, "value": fold_case(word)}
    key, value = word[:at], word[at + len(op):]
    if not key:
        raise QueryError(f'"{op}" needs a key before it', pos)
    if not value:
        raise QueryError(f'"{key}{op}" needs a value after it', pos)
    if key.lower() in _COMPARED_FIELDS:
        return {"kind": key.lower(), "neg": neg, **_field_value(pos, key.lower(), op, value)}
    key = _attr_key(key)
    if op in _EQUALITY:
        return {"kind": "attr", "neg": neg, "key": key, "op": op, "value": value}
    if not _NUMBER.fullmatch(value):
        raise QueryError(f'"{op}" needs a number, not "{value}"', pos)
    return {"kind": "attr", "neg": neg, "key": key, "op": op, "value": float(value)}


def _field_value(pos: int, field: str, op: str, value: str) -> dict[str, Any]:
    if field == "attempt":
        if not _WHOLE.fullmatch(value):
            raise QueryError(f'attempt needs a whole number, not "{value}"', pos)
        # Past int64's digits, the nearest double (inf at the end), as the widget compares.
        return {"op": op, "value": int(value) if len(value) <= _INT64_DIGITS else float(value)}
    if field == "duration":
        found = _DURATION.fullmatch(value)
        if not found:
            raise QueryError(f'bad duration "{value}" (a number, then '
                             f'{_alternatives(list(_UNITS))})', pos)
        times, per = _UNITS[found[2] or _DEFAULT_UNIT]
        return {"op": op, "value": float(found[1]) * times / per}
    if not value:
        raise QueryError(f"{field}: needs a value", pos)
    if field == "is":
        if value.lower() not in _IS_VALUES:
            raise QueryError(f'unknown is: value "{value}" '
                             f'({_alternatives([f"is:{known}" for known in _IS_VALUES])})', pos)
        return {"value": value.lower()}
    if field == "has":
        return {"key": _attr_key(value)}
    return {"value": fold_case(value)}


def _attr_key(key: str) -> str:
    """``attr.duration`` is the attribute ``duration``, not the field."""
    prefixed = key.startswith(_ATTR_PREFIX) and len(key) > len(_ATTR_PREFIX)
    return key[len(_ATTR_PREFIX):] if prefixed else key


def parse(text: str) -> list[Term]:
    """The terms of ``text`` (all must hold); raises :class:`QueryError`."""
    return [_term(pos, word, quoted) for pos, word, quoted in _tokens(text or "")]


# --------------------------------------------------------------------------- evaluation


@dataclass
class Matches:
    """Boolean masks of what a query keeps: per sample row, span and event (frame order).

    ``spans`` / ``events`` are limited to kept samples; with no item term they
    are all the kept samples' items (``item_terms`` is False)."""

    samples: np.ndarray
    spans: np.ndarray
    events: np.ndarray
    item_terms: bool


def glob_match(pattern: str, text: str) -> bool:
    """Whether ``text`` is ``pattern`` with each ``*`` standing for any text (none too).

    Linear, unlike a regex (``*a*a*a*b`` backtracks for seconds on a long value):
    the pieces between stars are a prefix, a suffix and, in between, each found
    leftmost after the one before, none overlapping (``js/src/data/query.js`` alike)."""
    if "*" not in pattern:
        return text == pattern
    first, *middle, last = pattern.split("*")  # a run of stars leaves empty pieces: no-ops
    if len(first) + len(last) > len(text) or not text.startswith(first) \
            or not text.endswith(last):
        return False
    at, stop = len(first), len(text) - len(last)
    for piece in middle:
        found = text.find(piece, at, stop)
        if found < 0:
            return False
        at = found + len(piece)
    return True


def _glob_hits(pattern: str, texts: list[str]) -> np.ndarray:
    """:func:`glob_match` per distinct text (categories, a dictionary), not per row."""
    return np.fromiter((glob_match(pattern, text) for text in texts), dtype=bool,
                       count=len(texts))


def _categorical_mask(series: pd.Series, pattern: str) -> np.ndarray:
    """Glob over a categorical's categories, each case-folded (:func:`fold_case`), taken
    through its codes."""
    values = series.array
    if not isinstance(values, pd.Categorical):
        values = pd.Categorical(series.astype(str))
    texts = [fold_case(str(c)) for c in values.categories] + [""]  # code -1 (missing): ""
    return _glob_hits(pattern, texts)[np.asarray(values.codes)]


def sample_text(samples: pd.DataFrame) -> pd.Series:
    """What a bare word is searched in, case-folded: the grammar's ``bare_word_fields``
    of each sample in their order, each as text after its mark (``#<index>``), a missing
    value as "", joined by "\\x01" (the widget's filter searches the same fields).

    Folded by :func:`fold_case`, as the query's words are and as the widget's
    ``foldCase`` does (full case mapping: "İ" becomes "i̇"); pandas' ``.str.lower`` on
    Arrow text maps each character alone."""
    first, *rest = [(_BARE_WORD_MARKS.get(field, "") + samples[field].astype("string"))
                    .fillna("") for field in _BARE_WORD_FIELDS]
    joined = first.str.cat(rest, sep="\x01")
    return pd.Series([fold_case(text) for text in joined.tolist()], index=joined.index,
                     dtype=joined.dtype)


def _compare(values: np.ndarray, op: str, target: float) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        if op == "=":
            return values == target
        if op == "!=":
            return ~np.isnan(values) & (values != target)
        if op == ">":
            return values > target
        if op == ">=":
            return values >= target
        if op == "<":
            return values < target
        return values <= target


def _sample_mask(samples: pd.DataFrame, term: Term, searched: Callable[[], pd.Series]
                 ) -> np.ndarray:
    """Rows of ``samples`` a sample term holds for, before ``neg``; ``searched`` gives
    their :func:`sample_text`, made once for all of a query's bare words."""
    if term["kind"] == "text":
        return searched().str.contains(term["value"], regex=False).to_numpy(bool)
    return _categorical_mask(samples[term["kind"]], term["value"])


def _item_mask(core: pd.DataFrame, term: Term, attrs: Any) -> np.ndarray:
    """Spans or events (``core``) an item term holds for, before ``neg``; ``duration``
    and ``is:`` reach it for spans only (:func:`_items`)."""
    kind = term["kind"]
    if kind == "name":
        return _categorical_mask(core["name"], term["value"])
    if kind == "attempt":
        return _compare(core["attempt"].to_numpy(float), term["op"], term["value"])
    if kind == "duration":
        return _compare(core["duration"].to_numpy(float), term["op"], term["value"])
    if kind == "is":
        if term["value"] == "error":
            return core["error"].to_numpy(bool)
        return (core["state"] == "open").to_numpy(bool)
    return attrs(term)


def attr_value_mask(column: pa.ChunkedArray | None, n: int, term: Term) -> np.ndarray:
    """Rows of one attribute column that ``term`` (attr or has) holds for, before ``neg``.

    Absent keys and nulls never match. ``=`` compares numbers as numbers, bools
    as true/false and text exactly with ``*`` globs; ``!=`` needs the key present."""
    if column is None:
        return np.zeros(n, dtype=bool)
    present = _present(column)
    if term["kind"] == "has":
        return present
    kind, op, value = column.type, term["op"], term["value"]
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        # unsafe: an int64 past 2**53 (a seed) rounds, as in the widget, instead of raising
        numbers = column.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False)
        if op in _EQUALITY:
            target = float(value) if _NUMBER.fullmatch(value) else float("nan")
            equal = _compare(numbers, "=", target)
            return equal if op == "=" else present & ~equal
        return _compare(numbers, op, value) & present
    if op not in _EQUALITY:
        return np.zeros(n, dtype=bool)
    if pa.types.is_boolean(kind):
        flags = column.fill_null(False).to_numpy(zero_copy_only=False).astype(bool)
        wanted = value.lower()
        equal = present & (flags if wanted == "true" else ~flags if wanted == "false"
                           else np.zeros(n, dtype=bool))
    else:
        coded = pc.dictionary_encode(column.cast(pa.string())).combine_chunks()
        hits = np.append(_glob_hits(value, coded.dictionary.to_pylist()), False)
        equal = hits[coded.indices.fill_null(-1).to_numpy(zero_copy_only=False)]
    return equal if op == "=" else present & ~equal


def _present(column: pa.ChunkedArray) -> np.ndarray:
    return ~np.asarray(column.is_null().to_numpy(zero_copy_only=False), dtype=bool)


def _attr_span(frames: TraceFrames) -> Any:
    """A span's value of a key is its end value, else its start value, each compared
    as what it is: start ``5`` and another span's end ``"x"`` do not make the 5 a
    text (a snapshot page reads them so too, row by row)."""
    def mask(term: Term) -> np.ndarray:
        n, key = len(frames.span_core), term["key"]
        start, end = frames.span_start_attrs, frames.span_end_attrs
        early = start.column(key) if key in start.keys else None
        late = end.column(key) if key in end.keys else None
        hits = attr_value_mask(late, n, term)
        if early is None:
            return hits
        if late is None:
            return attr_value_mask(early, n, term)
        return np.where(_present(late), hits, attr_value_mask(early, n, term))
    return mask


def _attr_event(frames: TraceFrames) -> Any:
    def mask(term: Term) -> np.ndarray:
        attrs = frames.event_attrs
        column = attrs.column(term["key"]) if term["key"] in attrs.keys else None
        return attr_value_mask(column, len(frames.event_core), term)
    return mask


def _items(core: pd.DataFrame, terms: list[Term], attrs: Any, events: bool) -> np.ndarray:
    keep = np.ones(len(core), dtype=bool)
    for term in terms:
        if events and term["kind"] in _SPAN_ONLY_KINDS:
            return np.zeros(len(core), dtype=bool)  # span-only: never an event, negated or not
        hit = _item_mask(core, term, attrs)
        keep &= ~hit if term["neg"] else hit
    return keep


def match(frames: TraceFrames, query: str | list[Term]) -> Matches:
    """What ``query`` (text, or terms from :func:`parse`) keeps of ``frames``."""
    terms = parse(query) if isinstance(query, str) else query
    samples = frames.samples
    rows = np.ones(len(samples), dtype=bool)
    searched = functools.cache(lambda: sample_text(samples))
    for term in (t for t in terms if t["kind"] in SAMPLE_KINDS):
        hit = _sample_mask(samples, term, searched)
        rows &= ~hit if term["neg"] else hit
    item_terms = [t for t in terms if t["kind"] not in SAMPLE_KINDS]
    position = pd.Series(np.arange(len(samples)), index=samples.index)
    span_rows = position.reindex(frames.span_core["sample_row"]).to_numpy()
    event_rows = position.reindex(frames.event_core["sample_row"]).to_numpy()
    spans = _items(frames.span_core, item_terms, _attr_span(frames), False) & rows[span_rows]
    events = _items(frames.event_core, item_terms, _attr_event(frames), True) \
        & rows[event_rows]
    if item_terms:
        kept = np.zeros(len(samples), dtype=bool)
        kept[span_rows[spans & ~frames.span_core["pd_detail"].to_numpy(bool)]] = True
        kept[event_rows[events]] = True
        rows &= kept
    return Matches(rows, spans, events, bool(item_terms))


def select(frames: TraceFrames, query: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The samples, spans and events (with their ``attr.<key>`` columns) ``query`` keeps.

    Spans include real ``sglang_pd_*`` spans that match (rows of ``frames.spans``);
    a row matched only by one of them is dropped, as the timeline does not draw them."""
    found = match(frames, query)
    return (frames.samples[found.samples], frames.spans[found.spans],
            frames.events[found.events])


def restrict(frames: TraceFrames, query: str, samples: pd.DataFrame | pd.Index | None,
             spans: pd.DataFrame | pd.Index | None) -> dict[str, pd.Index | None]:
    """The ``samples``, ``spans`` and ``events`` filters that make ``payload.encode``
    send only what ``query`` keeps, within the caller's own ``samples`` / ``spans``.

    The spans are the matching ones the timeline draws (real ``sglang_pd_*`` spans
    only when the caller's own span filter asks for them); the events are the
    matching ones, and with a span filter of the caller's only those under a span
    it keeps, as events follow that filter without a query."""
    found = match(frames, query)
    rows = frames.samples.index[found.samples]
    if samples is not None:
        rows = rows.intersection(selection_labels(samples))
    if not found.item_terms:
        return {"samples": rows, "spans": None if spans is None else selection_labels(spans),
                "events": None}
    core, events = frames.span_core, frames.event_core
    if spans is None:
        kept = core.index[found.spans & ~core["pd_detail"].to_numpy(bool)]
        chosen_events = events.index[found.events]
    else:
        kept = core.index[found.spans].intersection(selection_labels(spans))
        parents = events["parent_index"].to_numpy()
        under = np.isin(parents, kept.to_numpy())
        chosen_events = events.index[found.events & under]
    return {"samples": rows, "spans": kept, "events": chosen_events}


def selection_labels(selection: pd.DataFrame | pd.Series | pd.Index | Any) -> pd.Index:
    """The row labels a selection of samples, spans or events names (``show``, ``restrict``,
    ``encode``): a frame's index, labels, or a boolean Series (a pandas mask such as
    ``tl.samples.reward > 0``), which names the labels where it holds. A bare boolean
    array is refused (TypeError): its positions name no rows once a frame is filtered."""
    if isinstance(selection, pd.DataFrame):
        return selection.index
    if isinstance(selection, pd.Series) and pd.api.types.is_bool_dtype(selection.dtype):
        return selection.index[selection.to_numpy(dtype=bool, na_value=False)]
    if not isinstance(selection, pd.Series) and np.asarray(selection).dtype == bool:
        raise TypeError("a boolean array names no rows: pass the mask as a Series "
                        "(tl.samples.reward > 0) or the rows it keeps (tl.samples[mask])")
    return pd.Index(selection)


def attr_masks(frames: TraceFrames, terms: list[Term], span_index: np.ndarray,
               event_index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Whether every attribute term (attr, has) holds, per given span and event
    (``spans.index`` / ``events.index`` labels, e.g. a payload's): the widget's
    front end asks for this, as attributes are not in the payload."""
    chosen = [t for t in terms if t["kind"] in _ATTR_KINDS]
    spans = _items(frames.span_core, chosen, _attr_span(frames), False)
    events = _items(frames.event_core, chosen, _attr_event(frames), True)
    span_at = frames.span_core.index.get_indexer(span_index)
    event_at = frames.event_core.index.get_indexer(event_index)
    if (span_at < 0).any() or (event_at < 0).any():  # -1 would read the last row
        raise KeyError("spans or events that these frames do not hold (another view?)")
    return spans[span_at], events[event_at]


def check_terms(terms: Any) -> list[Term]:
    """Terms sent by the front end, checked to be attribute terms of the right shape."""
    if not isinstance(terms, list):
        raise ValueError("terms must be a list")
    out = []
    for term in terms:
        if not isinstance(term, dict) or term.get("kind") not in _ATTR_KINDS \
                or not isinstance(term.get("key"), str) or not isinstance(term.get("neg"), bool):
            raise ValueError(f"not an attribute term: {term!r}")
        if term["kind"] == "attr":
            op, value = term.get("op"), term.get("value")
            ok = (isinstance(value, str) if op in _EQUALITY else
                  op in _ORDER and isinstance(value, int | float)
                  and not isinstance(value, bool))
            if not ok:
                raise ValueError(f"bad attribute term: {term!r}")
        out.append(term)
    return out
