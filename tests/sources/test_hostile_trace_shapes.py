"""Trace shapes a hostile dump can hold that made reading or flattening quadratic.

Long parent chains, spans whose parent is recorded later, thousands of open
spans after an instant event, cycles among parents, attribute keys that all
share one hash or whose ``str`` raises: each runs under a 60 s guard sized so
the old quadratic code would take minutes, and the cycle rules stay as before.
"""

from __future__ import annotations

from slime_trace_widget.frames import build_frames
from slime_trace_widget.tables.carrier import RecordColumns, read_carrier
from tests.support.hostile_pickles import record, time_limit


def chain_records(n: int) -> list[dict]:
    """A chain of ``n`` closed spans, each inside the previous one."""
    starts = [record("span_start", "link", float(i), f"s{i}", parent=f"s{i - 1}" if i else None)
              for i in range(n)]
    return starts + [record("span_end", "link", float(2 * n - i), f"s{i}") for i in range(n)]


def read_within_a_minute(records: list[dict]) -> RecordColumns:
    out = RecordColumns()
    with time_limit(60):
        read_carrier(0, records, out)
    return out


def test_late_parents_on_a_long_chain_are_linear() -> None:
    """Spans whose parent is recorded later were each checked for a cycle by walking to
    the root: a long chain plus many such spans was quadratic (16 s for 20k, before; about
    2 minutes for these 60k, 0.3 s now)."""
    n = 60_000
    chain = [record("span_start", "link", float(i), f"c{i}", parent=f"c{i - 1}" if i else None)
             for i in range(n)]
    late = [record("span_start", "leaf", float(n), f"l{i}", parent=f"c{n - 1}")
            for i in range(n)]
    out = read_within_a_minute(chain[:-1] + late + chain[-1:])
    assert sum(parent >= 0 for parent in out.span_parent) == 2 * n - 1
    assert "parent_cycle" not in out.warnings


def test_parent_inference_scan_is_bounded() -> None:
    """Thousands of open spans that all begin after an instant event made inference scan
    every one of them for every event (15 s for 20k, before; about 2 minutes for these
    60k, 1.4 s now)."""
    n = 60_000
    opens = [record("span_start", "late", 100.0, f"o{i}") for i in range(n)]
    early = [record("event", "early", 1.0) for _ in range(n)]
    out = read_within_a_minute(opens + early)
    assert set(out.event_parent) == {-1}


def test_deferred_cycle_is_still_cut_at_the_guess() -> None:
    """The union-find keeps the old rule: a cycle is cut at an inferred link."""
    records = [record("span_start", "a", 0.0, "a", parent="c"),
               record("span_start", "b", 1.0, "b"),  # parent inferred: a
               record("span_start", "c", 2.0, "c", parent="b")]
    out = read_within_a_minute(records)
    assert out.span_parent_id == ["c", None, "b"]
    assert out.span_parent == [2, -1, 1]
    assert out.warnings["parent_cycle"] == 1


def test_recorded_cycle_is_cut_at_the_link_that_closes_it() -> None:
    records = [record("span_start", "a", 0.0, "a", parent="b"),
               record("span_start", "b", 1.0, "b", parent="a")]
    out = read_within_a_minute(records)
    assert out.span_parent == [-1, 0] and out.warnings["parent_cycle"] == 1


# The quadratic-input tests below size their input so the old quadratic code would run
# for minutes (past the 60 s guard) while the linear code takes about a second.


def test_deep_chain_depths_are_linear() -> None:
    """Depths were found by one array pass per level: O(n * depth), 7 s for 60k links,
    so about 2 minutes for this chain (2 s now)."""
    n = 240_000
    sample = {"index": 0, "trace": {"events": chain_records(n)}}
    with time_limit(60):
        frames = build_frames([sample])
    assert frames.span_core["depth"].max() == n - 1


def test_many_open_spans_display_ends_are_linear() -> None:
    """Each open span's clip scanned its whole row and walked its ancestors: 8 s for 10k,
    so about 2 minutes for these 40k (0.4 s now)."""
    n = 40_000
    records = [record("span_start", "open", float(i), f"o{i}") for i in range(n)]
    with time_limit(60):
        frames = build_frames([{"index": 0, "trace": {"events": records}}])
    assert (frames.span_core["state"] == "open").sum() == n


def test_huge_int_attribute_key_gets_a_column() -> None:
    """Columns were named with str(key), which raises for a 5,000-digit int."""
    sample = {"index": 0, "trace": {"events": [
        record("span_start", "a", 0.0, "a", attrs={10**5000: 1}),
        record("span_end", "a", 1.0, "a")]}}
    frames = build_frames([sample])
    assert len(frames.spans) == 1


def test_attribute_keys_that_share_one_hash_stay_linear() -> None:
    """Int keys hash alike in every process: 40,000 spans each with its own multiple of
    2**61 - 1 as a key made grouping rows by key quadratic (51 s); minutes for 120,000."""
    n = 120_000
    keys = [i * (2**61 - 1) for i in range(1, n + 1)]
    records = [record("span_start", "s", float(i), f"s{i}") for i in range(n)]
    records += [record("span_end", "s", float(n + i), f"s{i}", attrs={key: 1, "x": 2})
                for i, key in enumerate(keys)]
    frames = build_frames([{"index": 0, "trace": {"events": records}}])
    with time_limit(60):
        spans = frames.spans
    assert spans["attr.x"].eq(2).all()
    assert spans[f"attr.{keys[0]}"].iloc[0] == 1
