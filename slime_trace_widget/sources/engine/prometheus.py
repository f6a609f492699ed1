"""The Prometheus text exposition format (0.0.4, and OpenMetrics text) into series, bounded.

What a ``/metrics`` answer says becomes one :class:`Exposition`: per kept sample its
metric name (the sample's own, e.g. ``sglang:e2e_request_latency_seconds_bucket``),
its labels as canonical text, its family's type and its value. Nothing in the body is
trusted:

* a body over ``max_bytes`` is cut at the last whole line before the limit
  (``cut_off``);
* a line over ``max_line`` characters is skipped (``long_lines``);
* a line that is not a comment and not a well-formed sample (bad name, a label value
  with an escape other than ``\\\\``, ``\\"`` and ``\\n``, a repeated label, a value
  that is not a number) is skipped (``bad_lines``);
* a second sample of the same series in one answer is skipped (``duplicates``);
* once ``max_series`` samples are kept, the rest of the body is not read; its lines
  are counted (``over_series_limit``).

Values are floats as written: ``NaN``, ``+Inf`` and ``-Inf`` are kept as such. A
sample's own timestamp is ignored (a scrape has one time, the scraper's). ``# TYPE``
gives each family its type (``counter``, ``gauge``, ``histogram``, ``summary``, ...,
``untyped`` when not declared), found for ``_total``, ``_bucket``, ``_sum``,
``_count`` samples through their family. Creation-time samples (``_created``) of
counters, histograms and summaries are left out: they are not load. Only metrics
whose names start with one of ``prefixes`` are kept (default ``sglang:``; None keeps
all); the others are skipped without being counted (a line that is not a sample at
all still counts as a bad line).

Labels are kept as canonical text (:func:`slime_trace_widget.frames.engine_load.
canonical_labels`: sorted by name, written as the format writes them), so one series
always has one text.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from ...frames.engine_load import LABEL_PAIR, canonical_labels, unescape_label_value

#: Largest body read; the rest is cut off and counted.
MAX_BODY_BYTES = 4 << 20
#: Most samples kept from one answer.
MAX_SERIES = 20_000
#: Longest line read (characters); longer ones are skipped and counted.
MAX_LINE = 16_384
DEFAULT_PREFIXES: tuple[str, ...] = ("sglang:",)

#: A sample line: name, label text (quoted values may hold braces), value, timestamp,
#: and an OpenMetrics exemplar after ``#``. The label text is checked pair by pair.
_LINE = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)'
                   r'(?:[ \t]*\{([^"}]*(?:"(?:[^"\\\n]|\\.)*"[^"}]*)*)\}[ \t]*|[ \t]+)'
                   r'([^ \t]+)(?:[ \t]+([^ \t#][^ \t]*))?(?:[ \t]+#.*)?[ \t]*')
#: Label texts whose canonical form a cache keeps before it starts again.
_CACHE_LIMIT = 100_000
#: Label texts longer than this are not cached: the cache stays small whatever a target sends.
_CACHED_LABEL_CHARS = 512
_SUFFIXES = ("_total", "_bucket", "_count", "_sum", "_created", "_gcount", "_gsum", "_info")
_WITH_CREATED = {"counter", "histogram", "summary", "gaugehistogram"}
_TYPES = {"counter", "gauge", "histogram", "summary", "untyped", "unknown", "gaugehistogram",
          "stateset", "info"}


class _BadLine(ValueError):
    pass


@dataclass
class Exposition:
    """One answer's kept samples as columns, and what was skipped (see the module)."""

    metrics: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)

    def __len__(self) -> int:
        return len(self.values)


def parse_exposition(body: bytes, *, prefixes: tuple[str, ...] | None = DEFAULT_PREFIXES,
                     max_bytes: int = MAX_BODY_BYTES, max_series: int = MAX_SERIES,
                     max_line: int = MAX_LINE, cache: dict[str, str] | None = None
                     ) -> Exposition:
    """The samples of a ``/metrics`` answer ``body`` (see the module for what is kept).
    ``cache`` (a dict kept between the answers of one target) remembers the canonical
    text of label texts already read, which an engine repeats in every answer."""
    cache = {} if cache is None else cache
    out = Exposition()
    if len(body) > max_bytes:
        body = body[:max_bytes]
        body = body[:body.rfind(b"\n") + 1]
        out.skipped["cut_off"] += 1
    text = body.decode("utf-8", errors="replace")
    types: dict[str, str] = {}
    family_type: dict[str, str | None] = {}
    seen: set[tuple[str, str]] = set()
    position = 0
    size = len(text)
    while position < size:
        end = text.find("\n", position)
        if end < 0:
            end = size
        line = text[position:end]
        position = end + 1
        if len(line) > max_line:
            out.skipped["long_lines"] += 1
            continue
        if line.endswith("\r"):
            line = line[:-1]
        if not line or line.isspace():
            continue
        if line[0] == "#":
            if _comment(line, prefixes, types):
                break  # OpenMetrics' end of the exposition
            continue
        if prefixes is not None and not line.startswith(prefixes):
            if _LINE.fullmatch(line) is None:
                out.skipped["bad_lines"] += 1
            continue
        try:
            name, labels, value = _sample(line, cache)
        except _BadLine:
            out.skipped["bad_lines"] += 1
            continue
        if name not in family_type:
            family_type[name] = _family_type(name, types)
        kind = family_type[name]
        if kind is None:  # a creation time, not load
            continue
        if (name, labels) in seen:
            out.skipped["duplicates"] += 1
            continue
        if len(out.values) >= max_series:
            rest = text.count("\n", position) if position < size else 0
            if position < size and not text.endswith("\n"):
                rest += 1  # a last line without its newline
            out.skipped["over_series_limit"] += 1 + rest
            break
        seen.add((name, labels))
        out.metrics.append(name)
        out.labels.append(labels)
        out.types.append(kind)
        out.values.append(value)
    return out


def _comment(line: str, prefixes: tuple[str, ...] | None, types: dict[str, str]) -> bool:
    """Read a ``# TYPE`` line into ``types``; True at ``# EOF``."""
    parts = line[1:].split(None, 3)
    if parts == ["EOF"]:
        return True
    if len(parts) >= 3 and parts[0] == "TYPE":
        name, kind = parts[1], parts[2].lower()
        if kind in _TYPES and (prefixes is None or name.startswith(prefixes)):
            types[name] = kind
    return False


def _family_type(name: str, types: dict[str, str]) -> str | None:
    """The type of the family sample ``name`` belongs to; None for a creation time."""
    kind = types.get(name)
    if name.endswith("_created"):
        base = name[:-len("_created")]
        if kind in _WITH_CREATED or types.get(base) in _WITH_CREATED or \
                types.get(base + "_total") == "counter":
            return None  # OpenMetrics' _created sample, or 0.0.4's gauge beside a counter
    if kind is not None:
        return kind
    for suffix in _SUFFIXES:
        if name.endswith(suffix) and name[:-len(suffix)] in types:
            return types[name[:-len(suffix)]]
    return "untyped"


def _sample(line: str, cache: dict[str, str]) -> tuple[str, str, float]:
    """Name, canonical labels and value of a sample line (:class:`_BadLine` if it is not
    one). ``cache`` keeps the canonical text of each label text already read."""
    match = _LINE.fullmatch(line)
    if match is None:
        raise _BadLine
    name, raw, value, stamp = match.groups()
    if stamp is not None:
        _number(stamp)  # a timestamp: must be a number, is not used
    if raw is None:
        return name, "", _number(value)
    labels = cache.get(raw)
    if labels is None:
        pairs: dict[str, str] = {}
        if _labels("{" + raw + "}", 1, pairs) != len(raw) + 2:
            raise _BadLine
        labels = canonical_labels(pairs)
        if len(raw) <= _CACHED_LABEL_CHARS:  # long label texts are parsed each time
            if len(cache) >= _CACHE_LIMIT:
                cache.clear()
            cache[raw] = labels
    return name, labels, _number(value)


def _labels(line: str, position: int, pairs: dict[str, str]) -> int:
    """Read ``name="value"`` pairs up to the closing brace into ``pairs``; where they end."""
    while True:
        while position < len(line) and line[position] in " \t":
            position += 1
        if line.startswith("}", position):
            return position + 1
        pair = LABEL_PAIR.match(line, position)
        if pair is None or pair.group(1) in pairs:
            raise _BadLine
        try:
            pairs[pair.group(1)] = unescape_label_value(pair.group(2))
        except ValueError:
            raise _BadLine from None
        position = pair.end()
        if line.startswith(",", position):
            position += 1
        elif not line.startswith("}", position):
            raise _BadLine


def _number(token: str) -> float:
    if "_" in token:  # Python's float() takes 1_000; the format does not
        raise _BadLine
    try:
        return float(token)
    except ValueError:
        raise _BadLine from None
