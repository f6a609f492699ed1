"""Links between rows (``links.links``), in the payload and in the Perfetto export.

One hand-built rollout, recorded through this package's tracing API on a fake
clock, whose links are known: a group span over three samples, a sample retried
twice, a span continued in a "remote process" and merged back; plus what must
not link: concurrent equal children in one sample, a group span left open, equal
spans in different groups, an export without an open span.
"""

from __future__ import annotations

import contextvars
from typing import Any

import numpy as np
import pandas as pd
import pytest

from slime_trace_widget.answers.links import LINK_KINDS, group_members, links
from slime_trace_widget.export.perfetto import perfetto_trace
from slime_trace_widget.frames import TraceFrames, build_frames
from slime_trace_widget.tracing import (
    export_trace,
    import_trace,
    merge_trace,
    trace_event,
    trace_next_attempt,
    trace_span,
    use_clock,
)
from slime_trace_widget.view.contract import COLUMN_DTYPES, column_values
from slime_trace_widget.view.payload import encode
from tests.support.perfetto_import import bound_flows, link_slices


class Clock:
    """A clock the test sets by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def at(self, t: float) -> Clock:
        self.now = 1000.0 + t
        return self


def _sample(index: int, group: int) -> dict[str, Any]:
    return {"index": index, "group_index": group, "reward": 1.0}


def scene_samples() -> list[dict[str, Any]]:
    """The scene's five samples (dicts holding their carriers), recorded in a context of
    their own: the span left open on purpose must not stay active for later tests."""
    return contextvars.copy_context().run(_record_scene)


def _record_scene() -> list[dict[str, Any]]:
    clock = Clock()
    group = [_sample(i, 0) for i in range(3)]
    retried = _sample(3, 1)
    remote_side = _sample(4, 1)
    with use_clock(clock):
        clock.at(0)
        with trace_span(group, "group_rm"):  # one span, three carriers
            for k, member in enumerate(group):  # each member's own work, at its own time
                clock.at(1 + k / 10)
                with trace_span(member, "own_work"):
                    clock.at(1.05 + k / 10)
            clock.at(2)
        # Concurrent children of one sample with equal name and times: one sample, no link.
        clock.at(3)
        first, second = trace_span(group[0], "tool"), trace_span(group[0], "tool")
        first.__enter__()
        second.__enter__()
        clock.at(4)
        second.__exit__(None, None, None)
        first.__exit__(None, None, None)
        # A group span left open (no end to match): no link.
        clock.at(5)
        trace_span(group[1:], "stuck").__enter__()

        # Retries: attempt 0 -> 1 -> 2.
        clock.at(0.5)
        with trace_span(retried, "generate"):
            clock.at(0.8)
        clock.at(0.9)
        with trace_span(retried, "setup"):
            clock.at(0.95)
        clock.at(1)
        trace_next_attempt(retried)
        clock.at(1.2)
        with trace_span(retried, "generate"):
            clock.at(1.8)
        clock.at(2)
        trace_next_attempt(retried)
        clock.at(2.2)
        with trace_span(retried, "generate"):
            clock.at(2.8)

        # Remote: exported from "reward_model", continued elsewhere, merged back.
        clock.at(10)
        with trace_span(remote_side, "reward_model"):
            clock.at(10.5)
            payload = export_trace(remote_side)
            clock.at(11)
            remote = import_trace(payload)
            with trace_span(remote, "remote_reward"):
                clock.at(12)
            trace_event(remote, "remote_done")
            clock.at(13)
        merge_trace(remote_side, remote.carrier)
        # An export outside any span has no parent: no mark, no link.
        clock.at(14)
        orphan = import_trace(export_trace(remote_side))
        with trace_span(orphan, "orphan_remote"):
            clock.at(15)
        merge_trace(remote_side, orphan.carrier)
        # Same name and times in another group is not a group copy.
        clock.at(0)
        with trace_span(retried, "group_rm"):
            clock.at(2)
    return [*group, retried, remote_side]


def build_scene() -> TraceFrames:
    return build_frames({"samples": scene_samples(), "rollout_id": 0})


@pytest.fixture(scope="module")
def scene() -> TraceFrames:
    return build_scene()


def _span(frames: TraceFrames, row: int, name: str, nth: int = 0) -> int:
    core = frames.span_core
    hits = core[(core["sample_row"] == row) & (core["name"] == name)].sort_values("start")
    return int(hits.index[nth])


def _event(frames: TraceFrames, row: int, name: str, nth: int = 0) -> int:
    events = frames.event_core
    hits = events[(events["sample_row"] == row) & (events["name"] == name)].sort_values("ts")
    return int(hits.index[nth])


def _as_set(table: pd.DataFrame) -> set[tuple[str, str, int, str, int]]:
    return {(str(k), str(fk), int(f), str(tk), int(t)) for k, fk, f, tk, t in
            table[["kind", "from_kind", "from_index", "to_kind", "to_index"]].itertuples(
                index=False)}


def test_the_scene_has_exactly_its_known_links(scene):
    members = sorted(_span(scene, row, "group_rm") for row in range(3))
    hub = members[0]
    retry_starts = [_event(scene, 3, "attempt_start", k) for k in range(2)]
    first_generate = _span(scene, 3, "generate", 0)
    exported = _span(scene, 4, "reward_model")
    mark = _event(scene, 4, "trace_import")
    expected = {
        ("group", "span", members[1], "span", hub),
        ("group", "span", members[2], "span", hub),
        ("attempt", "event", retry_starts[0], "span", first_generate),
        ("attempt", "event", retry_starts[1], "event", retry_starts[0]),
        ("remote", "span", exported, "event", mark),
    }
    table = links(scene)
    assert _as_set(table) == expected
    assert list(table["kind"].cat.categories) == LINK_KINDS
    # The mark sits under the exported span after the merge, and only once.
    assert (scene.event_core["name"] == "trace_import").sum() == 1


def test_group_members_expand_the_hub(scene):
    expanded = group_members(links(scene))
    members = sorted(_span(scene, row, "group_rm") for row in range(3))
    assert expanded["span"].tolist() == members
    assert set(expanded["hub"]) == {members[0]}


def test_no_links_in_a_trace_without_them():
    frames = build_frames({"samples": [{"index": 0, "group_index": 0}]})
    table = links(frames)
    assert table.empty and list(table.columns) == ["kind", "from_kind", "from_index", "to_kind",
                                                    "to_index"]


def test_group_links_scale_as_columns():
    """40k copies in 10k groups of four: each member to its group's hub (the 1M-span
    demo dump takes 0.23 s, one groupby)."""
    n_groups, per = 10_000, 4
    samples = [{"index": i, "group_index": i // per, "trace": {
        "version": 1, "trace_id": f"{i:032x}", "sample_id": i, "group_id": i // per,
        "attempt": 0, "events": [
            {"type": "span_start", "name": "g", "ts": 1.0 + i // per, "trace_id": f"{i:032x}",
             "sample_id": i, "group_id": i // per, "attempt": 0, "span_id": f"{i:031x}a"},
            {"type": "span_end", "name": "g", "ts": 1.5 + i // per, "trace_id": f"{i:032x}",
             "sample_id": i, "group_id": i // per, "attempt": 0, "span_id": f"{i:031x}a"},
        ]}} for i in range(n_groups * per)]
    frames = build_frames({"samples": samples})
    table = links(frames)
    assert len(table) == n_groups * (per - 1)
    hub_rows = frames.span_core["sample_row"].to_numpy()[table["to_index"].to_numpy()]
    assert (hub_rows % per == 0).all()


# --------------------------------------------------------------------------- payload


def _column(view, name: str) -> np.ndarray:
    return column_values(name, view.payload["buffers"][name])


def _payload_links(view) -> set[tuple[str, tuple[str, int], tuple[str, int]]]:
    """Payload links as (kind, (table, label), (table, label))."""
    def end(value: int) -> tuple[str, int]:
        if value >= 0:
            return "span", int(view.span_index[value])
        return "event", int(view.event_index[-1 - value])

    return {(LINK_KINDS[k], end(int(f)), end(int(t))) for k, f, t in zip(
        _column(view, "link_kind"), _column(view, "link_from"), _column(view, "link_to"),
        strict=True)}


def test_the_payload_carries_the_links_of_its_items(scene):
    view = encode(scene)
    expected = {(k, (fk, f), (tk, t)) for k, fk, f, tk, t in _as_set(links(scene))}
    assert _payload_links(view) == expected
    assert COLUMN_DTYPES["link_kind"] == "u1" and COLUMN_DTYPES["link_from"] == "i4"


def test_filters_keep_only_pairs_with_both_ends_shown(scene):
    members = sorted(_span(scene, row, "group_rm") for row in range(3))
    # Hide the hub's sample: the other two members are re-hubbed on each other.
    view = encode(scene, samples=scene.samples.index[[1, 2]])
    assert _payload_links(view) == {("group", ("span", members[2]), ("span", members[1]))}
    # One member alone links nothing; the retried sample keeps its two retry links.
    view = encode(scene, samples=scene.samples.index[[0, 3]])
    assert sorted(k for k, _, _ in _payload_links(view)) == ["attempt", "attempt"]
    # A span filter (show(spans=...)) keeping two of the three copies links those two.
    core = scene.span_core
    two = core[(core["name"] == "group_rm") & core["sample_row"].isin([0, 2])]
    assert _payload_links(encode(scene, spans=two)) == {
        ("group", ("span", members[2]), ("span", members[0]))}
    # The mark travels with its parent, the exported span; without that span both go.
    exported = core[core["name"] == "reward_model"]
    assert [k for k, _, _ in _payload_links(encode(scene, spans=exported))] == ["remote"]
    assert not _payload_links(encode(scene, spans=core[core["name"] == "remote_reward"]))


# --------------------------------------------------------------------------- Perfetto


def test_perfetto_carries_the_links_as_flows(scene):
    """Each link is one arrow between its own two slices, read as Perfetto reads the
    document: bound by ``bind_id`` on the slices' complete events, the events among
    them written as complete events of no duration."""
    doc = perfetto_trace(scene)
    events = doc["traceEvents"]
    wanted = link_slices(scene, doc)
    assert len(wanted) == len(links(scene)) == 5
    assert sorted(map(sorted, bound_flows(doc))) == sorted(map(sorted, wanted))
    assert not [e for e in events if e["ph"] in ("s", "f")]
    joined: dict[str, list[tuple[str, str]]] = {}
    for first, second in wanted:
        (kind,) = events[first]["args"]["slime.links"]
        assert events[second]["args"]["slime.links"] == [kind]
        joined.setdefault(kind, []).append((events[first]["name"], events[second]["name"]))
    assert sorted(joined) == ["attempt", "group", "remote"]
    assert joined["group"] == [("group_rm", "group_rm")] * 2
    assert sorted(joined["attempt"]) == [("attempt_start", "attempt_start"),
                                         ("attempt_start", "generate")]
    assert joined["remote"] == [("reward_model", "trace_import")]
    # The group copies live on three samples' threads of one rollout.
    group_threads = {(events[slot]["pid"], events[slot]["tid"])
                     for pair in wanted for slot in pair if events[slot]["name"] == "group_rm"}
    assert len(group_threads) == 3


def test_an_event_end_of_a_flow_sits_on_its_parent_span_thread():
    """``reward_model`` overlaps ``outer`` partly, so it goes to an extra thread; the
    ``trace_import`` mark under it goes there too, inside it, so that it nests."""
    from tests.frames.test_frames import frames_of, rec, sample

    frames = frames_of(sample(rec("span_start", "outer", 0, "o"),
                              rec("span_start", "reward_model", 1, "rm"),
                              rec("event", "trace_import", 1.5, None, "rm"),
                              rec("span_end", "outer", 2, "o"),
                              rec("span_end", "reward_model", 3, "rm"),
                              rec("event", "loose", 1.5)))
    assert list(links(frames)["kind"]) == ["remote"]
    doc = perfetto_trace(frames)
    slices = {e["name"]: e for e in doc["traceEvents"] if e["ph"] in ("X", "i")}
    assert slices["reward_model"]["tid"] != slices["outer"]["tid"]
    assert slices["trace_import"]["tid"] == slices["reward_model"]["tid"]
    assert slices["loose"]["tid"] == slices["outer"]["tid"]  # no parent: the sample's thread
    assert (slices["trace_import"]["ph"], slices["loose"]["ph"]) == ("X", "i")
    ((first, second),) = bound_flows(doc)
    assert {doc["traceEvents"][first]["name"], doc["traceEvents"][second]["name"]} == {
        "reward_model", "trace_import"}


def test_group_links_follow_the_rule_on_random_copies():
    """Against the rule stated in pandas: among closed real spans, rows equal in dump,
    group, name, start and end are copies; a sample's first copy counts; each copy
    but the lowest label links to that label."""
    from slime_trace_widget.answers.links import _group_pairs

    rng = np.random.default_rng(3)
    for trial in range(20):
        n_samples = int(rng.integers(1, 40))
        samples = []
        for i in range(n_samples):
            events = []
            for k in range(int(rng.integers(0, 6))):
                start = float(rng.integers(0, 3))
                span_id = f"{i:016x}{k:015x}a"
                base = {"trace_id": f"{i:032x}", "sample_id": i, "group_id": 0, "attempt": 0,
                        "span_id": span_id, "name": str(rng.choice(["g", "h"]))}
                events.append({**base, "type": "span_start", "ts": 1.0 + start})
                if rng.random() < 0.9:  # some stay open
                    events.append({**base, "type": "span_end",
                                   "ts": 1.0 + start + float(rng.integers(1, 3))})
            samples.append({"index": i, "group_index": int(rng.integers(0, 3)), "trace": {
                "version": 1, "trace_id": f"{i:032x}", "sample_id": i, "group_id": 0,
                "attempt": 0, "events": events}})
        frames = build_frames({"samples": samples})
        got = _group_pairs(frames)
        assert list(zip(*got, strict=True)) == _group_pairs_by_rule(frames), trial


def _group_pairs_by_rule(frames: TraceFrames) -> list[tuple[int, int]]:
    core, samples = frames.span_core, frames.samples
    rows = core["sample_row"].to_numpy()
    table = pd.DataFrame({
        "dump": samples["dump"].to_numpy()[rows], "group": samples["group_index"].to_numpy(
            dtype=np.float64, na_value=np.nan)[rows],
        "name": core["name"].astype(str).to_numpy(), "start": core["start"].to_numpy(),
        "end": core["end"].to_numpy(), "row": rows, "label": core.index.to_numpy()})
    keep = (~core["virtual"] & ~core["pd_detail"] & (core["state"] == "closed")).to_numpy()
    table = table[keep & ~np.isnan(table["group"].to_numpy())]
    keys = ["dump", "group", "name", "start", "end"]
    table = table.drop_duplicates([*keys, "row"])
    by_copy = table.groupby(keys, sort=False)["label"]
    size, hub = by_copy.transform("size"), by_copy.transform("min")
    member = (size > 1) & (table["label"] != hub)
    return list(zip(table["label"][member].tolist(), hub[member].tolist(), strict=True))
