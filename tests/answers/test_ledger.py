"""The signal ledger, the tail's price, and their columns in trends and the run view.

Every dump here is a real ``.pt`` file read by the real loader: the fixtures as slime
wrote them, or a fixture's samples changed the way slime's rollout code would change
them (a group's rewards, ``remove_sample``, a status, a ``filter_dropped`` event
recorded with the tracing API) and saved the way slime saves them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch

from slime_trace_widget import analysis, answers
from slime_trace_widget.answers.ledger import FATES, filter_dropped, sample_fates, signal_ledger
from slime_trace_widget.answers.tail import finish_order, tail_price
from slime_trace_widget.demo import make_demo_samples, write_demo_dump
from slime_trace_widget.export.trend_log import scalars
from slime_trace_widget.frames import build_frames
from slime_trace_widget.frames.model import TraceFrames, combine_frames
from slime_trace_widget.sources.dataset import convert, open_dataset
from slime_trace_widget.sources.dumps.files import save_dump
from slime_trace_widget.sources.engine.join import join_engine
from slime_trace_widget.sources.engine.store import load_engine_traces
from slime_trace_widget.sources.loading import load_dump, load_frames
from slime_trace_widget.tracing import trace_event, use_clock
from tests.sources.runs import FIXTURES, copy_run
from tests.sources.test_engine_join import SKEWS, store_requests
from tests.support.dump_samples import slime_status_enum
from tests.support.engine_traces import requests_for

LOADABLE = sorted(p.name for p in FIXTURES.glob("*.pt") if "corrupt" not in p.name)


def edited(tmp_path: Path, fixture: str, name: str, edit: Callable[[list[dict]], None],
           rollout_id: int | None = 5) -> TraceFrames:
    """``fixture``'s samples changed by ``edit``, saved as ``name`` and read back."""
    samples = load_dump(FIXTURES / fixture).samples
    edit(samples)
    path = tmp_path / name
    save_dump(path, samples, rollout_id=rollout_id)
    return load_frames(path)


def fates(frames: TraceFrames, **options: str) -> list[str]:
    return sample_fates(frames, **options).astype(str).tolist()


# --------------------------------------------------------------------------- the sums


def assert_ledger_adds_up(frames: TraceFrames) -> None:
    fate = sample_fates(frames)
    assert list(fate.cat.categories) == list(FATES)
    assert fate.index.equals(frames.samples.index) and fate.notna().all()
    ledger = signal_ledger(frames)
    seconds = frames.samples["duration"].fillna(0.0)
    rollout = frames.samples["rollout_id"].astype("Float64").fillna(-1).astype(int)
    expected = seconds.groupby(rollout.to_numpy()).sum()
    counts = rollout.value_counts()
    assert list(ledger.index) == sorted(counts.index)
    fate_seconds = ledger[[f"seconds_{f}" for f in FATES]].sum(axis=1)
    fate_samples = ledger[[f"samples_{f}" for f in FATES]].sum(axis=1)
    np.testing.assert_allclose(fate_seconds.to_numpy(), expected.reindex(ledger.index),
                               rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(ledger["seconds"].to_numpy(), expected.reindex(ledger.index),
                               rtol=1e-12, atol=1e-9)
    assert (fate_samples == counts.reindex(ledger.index)).all()
    assert (ledger["samples"] == counts.reindex(ledger.index)).all()
    shares = ledger[[f"share_{f}" for f in FATES]].sum(axis=1)
    assert np.allclose(shares[ledger["seconds"] > 0], 1.0)
    for by in ("source", "group", "dump"):
        other = signal_ledger(frames, by=by)
        assert other["samples"].sum() == len(frames.samples)
        assert other["seconds"].sum() == pytest.approx(seconds.sum(), rel=1e-12, abs=1e-9)


@pytest.mark.parametrize("fixture", LOADABLE)
def test_ledger_adds_up_on_every_fixture(fixture: str) -> None:
    frames = load_frames(FIXTURES / fixture)
    assert_ledger_adds_up(frames)
    for by in ("rollout", "source", "group", "dump"):
        kinds = analysis.ledger_kinds(frames, by=by)
        parts = [c for c in kinds.columns if c.endswith("_s") and not c.startswith("engine_")]
        np.testing.assert_allclose(kinds[parts].sum(axis=1), kinds["seconds"], atol=1e-6)
        assert (kinds[parts] >= -1e-9).all().all()
        # every sample is in the kinds: their seconds per key add up to the ledger's
        per_key = kinds["seconds"].groupby(level=list(range(kinds.index.nlevels - 1)),
                                           dropna=False).sum()
        ledger = signal_ledger(frames, by=by)
        assert len(per_key) == len(ledger)
        np.testing.assert_allclose(np.sort(per_key.to_numpy()),
                                   np.sort(ledger["seconds"].to_numpy()), atol=1e-6)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> TraceFrames:
    """The quickstart's demo step: 256 samples, rollout 12."""
    path = tmp_path_factory.mktemp("demo") / "rollout_12.pt"
    write_demo_dump(path, n_samples=256, seed=12, rollout_id=12)
    return load_frames(path)


def test_ledger_adds_up_on_the_demo_run(demo: TraceFrames) -> None:
    assert_ledger_adds_up(demo)
    ledger = signal_ledger(demo).loc[12]
    status = demo.samples["status"].astype(str)
    for fate in ("truncated", "aborted", "failed"):
        assert ledger[f"samples_{fate}"] == (status == fate).sum() > 0
    assert ledger["samples_signal"] == (status == "completed").sum()


def test_the_kinds_split_each_fate_by_priority(demo: TraceFrames) -> None:
    kinds = analysis.ledger_kinds(demo)
    ledger = signal_ledger(demo)
    for fate in kinds.index.get_level_values("fate"):
        assert kinds.loc[(12, fate), "seconds"] == pytest.approx(
            ledger.loc[12, f"seconds_{fate}"])
    reward_only = analysis.ledger_kinds(demo, kinds={"reward": ("*reward*", "*judge*")})
    # what is not reward is other or idle: generation and tools move into other
    assert reward_only["reward_s"].to_numpy() == pytest.approx(kinds["reward_s"].to_numpy())
    assert reward_only["other_s"].to_numpy() == pytest.approx(
        (kinds["tools_s"] + kinds["generation_s"] + kinds["other_s"]).to_numpy())


def test_the_kinds_carry_the_engine_phases(tmp_path: Path) -> None:
    frames = build_frames(make_demo_samples(20, seed=6))
    folder = store_requests(requests_for(frames, seed=2), tmp_path, SKEWS)
    joined = join_engine(frames, load_engine_traces(folder))
    kinds = analysis.ledger_kinds(joined)
    engine = analysis.engine_breakdown(joined, by="rollout")
    for phase in ("queue", "prefill", "decode", "pd", "other"):
        column = kinds[f"engine_{phase}_s"].groupby(level="rollout_id").sum()
        assert column.to_numpy() == pytest.approx(engine[f"{phase}_s"].to_numpy())
    assert kinds["engine_decode_s"].sum() > 0
    parts = ["reward_s", "tools_s", "generation_s", "other_s", "idle_s"]
    np.testing.assert_allclose(kinds[parts].sum(axis=1), kinds["seconds"], atol=1e-6)
    assert_ledger_adds_up(joined)  # engine spans change no sample's seconds
    assert not any(c.startswith("engine_") for c in analysis.ledger_kinds(frames).columns)


# --------------------------------------------------------------------------- the rules


def test_status_and_group_rules_on_small(tmp_path: Path) -> None:
    frames = load_frames(FIXTURES / "small.pt")
    # group 0: rewards 1, 0, 1, 1 vary; group 1 varies; rows 5 and 7 are truncated
    assert fates(frames) == ["signal"] * 5 + ["truncated", "signal", "truncated"]

    def change(samples: list[dict]) -> None:
        for member in samples[:4]:
            member["reward"] = 1.0  # group 0: all equal
        samples[4]["status"] = "failed"
        samples[5]["status"] = "aborted"
        samples[6]["remove_sample"] = True
        samples[7]["status"] = "pending"  # judged like a completed sample

    assert fates(edited(tmp_path, "small.pt", "rollout_5.pt", change)) == [
        "no_signal"] * 4 + ["failed", "aborted", "filtered", "signal"]


def test_precedence_failed_aborted_filtered_truncated(tmp_path: Path) -> None:
    def change(samples: list[dict]) -> None:
        for member, status in zip(samples[4:], ("failed", "aborted", "truncated", "truncated"),
                                  strict=True):
            member["status"] = status
            member["remove_sample"] = True
        samples[7]["remove_sample"] = False

    assert fates(edited(tmp_path, "small.pt", "rollout_5.pt", change))[4:] == [
        "failed", "aborted", "filtered", "truncated"]


def test_a_filter_event_marks_the_group_filtered(tmp_path: Path) -> None:
    def change(samples: list[dict]) -> None:
        group = samples[:4]
        end = max(e["ts"] for s in group for e in s["trace"]["events"])
        with use_clock(lambda: end):
            trace_event(group, "filter_dropped", {"reason": "zero_std_1.0"})

    frames = edited(tmp_path, "small.pt", "rollout_5.pt", change)
    assert (frames.events["name"] == "filter_dropped").sum() == 4
    assert fates(frames)[:4] == ["filtered"] * 4
    # the dropped group does not count toward the batch: one group left, stop at it
    tail = tail_price(frames, oversample=1.0).loc[5]
    assert tail["units"] == 1 and tail["batch_units"] == 1
    order = finish_order(frames)
    assert order["counted"].tolist().count(False) == 1
    assert tail["stop_s"] == pytest.approx(order.loc[5][order.loc[5]["counted"]]["seconds"].max())


def test_a_group_with_an_untraced_member_not_dropped_counts(tmp_path: Path) -> None:
    """Group 0's traced members carry ``filter_dropped``, its untraced member (saved
    without a trace, so without times) does not: not every member was dropped, so the
    group counts toward the batch, finishing with its last traced member."""
    def change(samples: list[dict]) -> None:
        del samples[0]["trace"]
        dropped = samples[1:4]
        end = max(e["ts"] for s in dropped for e in s["trace"]["events"])
        with use_clock(lambda: end):
            trace_event(dropped, "filter_dropped")

    frames = edited(tmp_path, "small.pt", "rollout_5.pt", change)
    assert frames.samples["start"].isna().tolist() == [True] + [False] * 7
    assert filter_dropped(frames).tolist() == [False, True, True, True] + [False] * 4
    tail = tail_price(frames, oversample=1.0).loc[5]
    assert tail["units"] == 2 and tail["batch_units"] == 2
    order = finish_order(frames).loc[5]
    assert order["counted"].tolist() == [True, True]
    samples = frames.samples
    finishes = np.sort([samples["end"][1:4].max(), samples["end"][4:].max()])
    assert order["seconds"].to_numpy() == pytest.approx(finishes - samples["start"].min())
    assert tail["stop_s"] == pytest.approx(order["seconds"].max())
    convert([str(tmp_path / "rollout_5.pt")], tmp_path / "ds", settle_seconds=0,
            progress=False)
    for source in (frames, tmp_path / "ds"):
        trends = analysis.ledger_trends(source, oversample=1.0).iloc[0]
        assert trends["stop_s"] == pytest.approx(tail["stop_s"])


def test_missing_rewards_and_groups_of_one(tmp_path: Path) -> None:
    def change(samples: list[dict]) -> None:
        samples[0]["reward"] = None  # group 0 keeps 0, 1, 1: varies
        samples[4]["reward"], samples[5]["reward"] = None, float("nan")
        samples[6]["reward"] = float("inf")  # group 1: only row 7's reward is usable
        samples[2]["group_index"] = 99  # a group of one

    frames = edited(tmp_path, "small.pt", "rollout_5.pt", change)
    assert fates(frames) == ["no_signal", "no_signal", "no_signal", "no_signal", "no_signal",
                             "truncated", "no_signal", "truncated"]


@pytest.mark.parametrize("broken", [float("nan"), float("inf"), -float("inf"), None])
def test_a_member_training_on_no_usable_reward_takes_its_groups_signal(
        tmp_path: Path, broken: object) -> None:
    # slime's check_reward_nonzero_std drops [1, 0, nan] (its deviation is NaN) and GRPO
    # gives each member a NaN advantage; a None fails its normalisation. An aborted or
    # failed member ends without a reward and trains nothing: it spoils nothing.
    def change(samples: list[dict]) -> None:
        for index, (reward, status) in enumerate([(1.0, "completed"), (0.0, "completed"),
                                                   (broken, "completed"), (1.0, "completed"),
                                                   (1.0, "completed"), (0.0, "completed"),
                                                   (broken, "aborted"), (None, "failed")]):
            samples[index].update(reward=reward, status=status, group_index=index // 4)

    frames = edited(tmp_path, "small.pt", "rollout_5.pt", change)
    assert fates(frames) == ["no_signal"] * 4 + ["signal", "signal", "aborted", "failed"]
    convert([str(tmp_path / "rollout_5.pt")], tmp_path / "ds", settle_seconds=0,
            progress=False)
    for where in ("sample_index = 0", "sample_index = 4"):  # the rest are group peers
        partial = open_dataset(tmp_path / "ds", where=where)
        assert fates(partial) == (["no_signal"] if where.endswith("0") else ["signal"])
    whole = analysis.ledger_trends(tmp_path / "ds", oversample=1.0).iloc[0]
    assert (whole["share_signal"] > 0) and whole["share_no_signal"] > 0


def test_rewards_within_slimes_zero_std_are_equal(tmp_path: Path) -> None:
    def change(samples: list[dict]) -> None:
        for i, member in enumerate(samples[:4]):
            member["reward"] = 0.5 + i * 1e-8  # std 1.3e-8: slime's filter calls it zero

    assert fates(edited(tmp_path, "small.pt", "rollout_5.pt", change))[:4] == ["no_signal"] * 4


def test_dict_rewards_whole_or_by_key(tmp_path: Path) -> None:
    """The eval fixture's dict rewards in a training dump of two groups."""
    def change(samples: list[dict]) -> None:
        for i, member in enumerate(samples[:8]):
            member["group_index"] = i // 4
            member["reward"] = {"score": 1.0 if i < 4 else float(i % 2), "pred": f"p{i}"}
        del samples[8:]

    frames = edited(tmp_path, "rollout_eval_3.pt", "rollout_3.pt", change, rollout_id=3)
    # whole dicts differ in "pred" everywhere; by score group 0 is all 1.0
    assert fates(frames) == ["signal"] * 8
    assert fates(frames, reward_key="score") == ["no_signal"] * 4 + ["signal"] * 4


def test_dict_rewards_equal_as_values_are_equal(tmp_path: Path) -> None:
    """Group 0's dict rewards are one value spelled four ways (keys in another order,
    1.0 or true for 1): it gives no signal, over frames and over a dataset (DuckDB
    reads the rewards' JSON text there); group 1's differ in ``acc``."""
    def change(samples: list[dict]) -> None:
        for member, reward in zip(samples[:4], ({"acc": 1, "fmt": 1}, {"fmt": 1, "acc": 1},
                                               {"acc": 1.0, "fmt": 1}, {"fmt": 1.0, "acc": True}),
                                  strict=True):
            member["reward"] = reward
        for i, member in enumerate(samples[4:]):
            member["reward"] = {"acc": i % 2, "fmt": 1}

    frames = edited(tmp_path, "small.pt", "rollout_5.pt", change)
    assert fates(frames) == ["no_signal"] * 4 + ["signal", "truncated", "signal", "truncated"]
    convert([str(tmp_path / "rollout_5.pt")], tmp_path / "ds", settle_seconds=0,
            progress=False)
    assert fates(open_dataset(tmp_path / "ds")) == fates(frames)
    ledger = signal_ledger(frames).loc[5]
    assert ledger["share_no_signal"] > 0
    for trends in (analysis.ledger_trends(tmp_path / "ds"), analysis.rollout_trends(frames)):
        for fate in FATES:
            assert trends.iloc[0][f"share_{fate}"] == pytest.approx(ledger[f"share_{fate}"])


def test_an_eval_dump_buys_no_signal(tmp_path: Path) -> None:
    frames = load_frames(FIXTURES / "rollout_eval_3.pt")
    assert frames.samples["group_index"].isna().all()
    assert fates(frames) == ["no_signal"] * len(frames.samples)

    def grouped(samples: list[dict]) -> None:
        for i, member in enumerate(samples):
            member["group_index"], member["reward"] = i // 2, float(i % 2)

    # groups whose rewards vary: signal in a training dump, none in an eval dump
    as_eval = edited(tmp_path, "rollout_eval_3.pt", "rollout_eval_3.pt", grouped, 3)
    as_train = edited(tmp_path, "rollout_eval_3.pt", "rollout_3.pt", grouped, 3)
    assert fates(as_eval) == ["no_signal"] * 22 and fates(as_train) == ["signal"] * 22
    trends = analysis.rollout_trends(combine_frames([as_eval, as_train]))
    assert trends.set_index("dump_kind")["share_signal"].to_dict() == {"eval": 0.0,
                                                                        "train": 1.0}


def test_an_eval_dump_in_a_folder_of_its_own_buys_no_signal(tmp_path: Path) -> None:
    """slime formats ``--save-debug-rollout-data`` with ``rollout_id=f"eval_{id}"``: the
    template ``<run>/{rollout_id}/data.pt`` saves evaluation at ``eval_3/data.pt``, a
    file name without the marker. Its groups buy no signal over frames, over a dataset
    and in trends; the run folder's name (``eval_runs``) makes no dump eval."""
    samples = load_dump(FIXTURES / "rollout_eval_3.pt").samples
    for i, member in enumerate(samples):
        member["group_index"], member["reward"] = i // 2, float(i % 2)
    run = tmp_path / "eval_runs"
    for folder in ("eval_3", "3"):
        (run / folder).mkdir(parents=True)
        save_dump(run / folder / "data.pt", samples, rollout_id=3)
    frames = load_frames([run / "eval_3" / "data.pt", run / "3" / "data.pt"])
    assert fates(frames) == ["no_signal"] * 22 + ["signal"] * 22
    convert(str(run / "*" / "data.pt"), tmp_path / "ds", progress=False, settle_seconds=0)
    assert fates(open_dataset(tmp_path / "ds", kinds=["eval"])) == ["no_signal"] * 22
    for source in (frames, tmp_path / "ds", open_dataset(tmp_path / "ds")):
        for trends in (analysis.ledger_trends(source), analysis.rollout_trends(source)):
            shares = trends.set_index("dump_file")[["dump_kind", "share_signal"]]
            assert shares.to_dict("index") == {
                "3/data.pt": {"dump_kind": "train", "share_signal": 1.0},
                "eval_3/data.pt": {"dump_kind": "eval", "share_signal": 0.0}}


def test_remove_sample_reads_from_legacy_and_object_dumps(tmp_path: Path) -> None:
    for fixture in ("legacy_v0_pd.pt", "legacy_v1_pd.pt", "edge_legacy_torch_format.pt"):
        frames = edited(tmp_path, fixture, f"rollout_{fixture}",
                        lambda s: s[1].update(remove_sample=True))
        assert frames.samples["remove_sample"].tolist() == [False, True] + [False] * (
            len(frames.samples) - 2)
        assert fates(frames)[1] == "filtered"
        assert_ledger_adds_up(frames)
    objects = load_frames(FIXTURES / "edge_sample_objects.pt")
    assert not objects.samples["remove_sample"].any()


def test_a_dataset_written_before_remove_sample_opens(tmp_path: Path) -> None:
    convert(str(copy_run(tmp_path) / "*.pt"), tmp_path / "ds", progress=False)
    for file in (tmp_path / "ds" / "samples").glob("*/*.parquet"):
        table = pq.read_table(file)
        pq.write_table(table.drop_columns(["remove_sample"]), file)
    frames = open_dataset(tmp_path / "ds")
    assert not frames.samples["remove_sample"].any()
    assert_ledger_adds_up(frames)
    old = analysis.rollout_trends(tmp_path / "ds")
    assert old["share_filtered"].eq(0).all()


# --------------------------------------------------------------------------- the tail


def test_tail_by_hand_on_the_eval_dump() -> None:
    frames = load_frames(FIXTURES / "rollout_eval_3.pt")
    tail = tail_price(frames).loc[3]
    start, ends = frames.samples["start"].min(), np.sort(frames.samples["end"].to_numpy())
    n = len(ends)
    assert tail["samples"] == n == 22 and tail["unit"] == "sample"
    assert tail["finished_50"] == pytest.approx(ends[10] - start)  # the 11th of 22
    assert tail["finished_90"] == pytest.approx(ends[19] - start)  # the 20th
    assert tail["finished_99"] == pytest.approx(ends[21] - start)
    assert tail["step_s"] == pytest.approx(ends[-1] - start)
    assert tail["batch_units"] == math.ceil(22 / 1.25) == 18
    assert tail["stop_s"] == pytest.approx(ends[17] - start)
    assert tail["saved_s"] == pytest.approx(ends[-1] - ends[17])
    assert tail["saved_share"] == pytest.approx(tail["saved_s"] / tail["step_s"])


def test_the_batch_is_made_of_whole_groups(demo: TraceFrames) -> None:
    samples = demo.samples
    start = samples["start"].min()
    finishes = np.sort(samples.groupby("group_index")["end"].max().to_numpy()) - start
    for oversample in (1.0, 1.25, 2.0):
        tail = tail_price(demo, oversample).loc[12]
        assert tail["unit"] == "group" and tail["units"] == len(finishes)
        batch = math.ceil(len(finishes) / oversample)
        assert tail["batch_units"] == batch
        assert tail["stop_s"] == pytest.approx(finishes[batch - 1])
    assert tail_price(demo, 1.0).loc[12, "saved_s"] == 0
    order = finish_order(demo).loc[12]
    assert np.allclose(order["seconds"].to_numpy(), finishes)
    with pytest.raises(ValueError, match="oversample"):
        tail_price(demo, 0.8)


def test_the_tail_leaves_out_samples_without_times() -> None:
    frames = load_frames(FIXTURES / "edge_untraced_mixed.pt")
    timed = frames.samples["start"].notna()
    assert 0 < timed.sum() < len(frames.samples)
    assert tail_price(frames).iloc[0]["samples"] == timed.sum()
    assert tail_price(load_frames(FIXTURES / "edge_empty.pt")).empty


# --------------------------------------------------------------------------- every view


def test_exported_from_analysis_and_answers() -> None:
    for module in (analysis, answers):
        assert module.signal_ledger is signal_ledger and module.tail_price is tail_price
        assert module.sample_fates is sample_fates and tuple(module.FATES) == FATES


def test_trends_carry_the_ledger_and_the_tail(tmp_path: Path) -> None:
    convert(str(copy_run(tmp_path) / "*.pt"), tmp_path / "ds", progress=False)
    from_dataset = analysis.rollout_trends(tmp_path / "ds")
    frames = open_dataset(tmp_path / "ds")
    from_frames = analysis.rollout_trends(frames)
    columns = [*(f"share_{fate}" for fate in FATES), "finished_50", "finished_90",
               "finished_99", "stop_s", "saved_s", "saved_share"]
    pd.testing.assert_frame_equal(from_dataset[columns], from_frames[columns])
    only = analysis.ledger_trends(tmp_path / "ds")
    pd.testing.assert_frame_equal(only, from_dataset[[*only.columns[:3], *columns]])
    for _, row in from_dataset.iterrows():
        dump = load_frames(tmp_path / "debug" / _dump_name(row["dump_file"]))
        ledger = signal_ledger(dump).iloc[0]
        tail = tail_price(dump).iloc[0]
        for fate in FATES:
            assert row[f"share_{fate}"] == pytest.approx(ledger[f"share_{fate}"])
        for column in ("finished_50", "finished_90", "finished_99", "stop_s", "saved_share"):
            assert row[column] == pytest.approx(tail[column])
        assert row["wall_s"] == pytest.approx(tail["step_s"])
    assert from_dataset.set_index("dump_kind").loc["eval", "share_no_signal"] == 1.0
    logged = scalars(from_dataset.iloc[0], "rollout")  # what the trend logs send
    assert {f"rollout/{column}" for column in columns} <= set(logged)


def _dump_name(dump_file: str) -> str:
    return Path(dump_file).name


def test_the_trends_rules_are_the_ledgers(tmp_path: Path) -> None:
    """Filtered and no-signal samples, through DuckDB, as the frames' ledger has them."""
    def change(samples: list[dict]) -> None:
        for member in samples[:4]:
            member["reward"] = 0.0
        samples[6]["remove_sample"] = True
        samples[5]["status"] = "Truncated"  # statuses are read whatever their case
        samples[7]["status"] = "ABORTED"
        end = max(e["ts"] for e in samples[4]["trace"]["events"])
        with use_clock(lambda: end):
            trace_event(samples[4], "filter_dropped")

    frames = edited(tmp_path, "small.pt", "rollout_5.pt", change)
    trends = analysis.rollout_trends(frames).iloc[0]
    ledger = signal_ledger(frames).loc[5]
    assert ledger["samples_no_signal"] == 4 and ledger["samples_filtered"] == 2
    assert (ledger["samples_truncated"], ledger["samples_aborted"]) == (1, 1)
    assert (trends["truncated"], trends["aborted"]) == (1, 1)
    for fate in FATES:
        assert trends[f"share_{fate}"] == pytest.approx(ledger[f"share_{fate}"])


def test_a_status_pickled_as_slimes_enum_reads_as_its_value(tmp_path: Path) -> None:
    """Rollout code that saves ``dataclasses.asdict(sample)`` keeps ``Sample.Status``
    members in the sample dicts. A safe load reads each as its value, as a trusted load
    and ``Sample.to_dict()`` give it, so the ledger and trends count an aborted sample
    aborted whichever way its status was saved."""
    statuses = ["completed"] * 4 + ["failed", "aborted", "truncated", "pending"]
    samples = load_dump(FIXTURES / "small.pt").samples
    with slime_status_enum() as status:
        enums = [{**sample, "status": status(text)} for sample, text in zip(
            samples, statuses, strict=True)]
        torch.save({"rollout_id": 5, "samples": enums}, tmp_path / "rollout_5.pt")
    as_text = edited(tmp_path, "small.pt", "rollout_6.pt", lambda members: [
        member.update(status=text) for member, text in zip(members, statuses, strict=True)])
    assert load_dump(tmp_path / "rollout_5.pt").samples[5]["status"] == "aborted"
    frames = load_frames(tmp_path / "rollout_5.pt")
    assert frames.samples["status"].astype(str).tolist() == statuses
    assert fates(frames) == fates(as_text) == [
        "signal"] * 4 + ["failed", "aborted", "truncated", "signal"]
    trends = analysis.rollout_trends(frames).iloc[0]
    assert (trends["aborted"], trends["truncated"]) == (1, 1)


def test_two_runs_dumps_of_one_name_stay_apart_in_trends(tmp_path: Path) -> None:
    """Two runs' ``rollout_5.pt``: one row each, told apart by their folders, over frames
    and over a dataset converted from both, each with its own ledger."""
    samples = load_dump(FIXTURES / "small.pt").samples
    for run, reward in (("runA", 1.0), ("runB", 0.0)):  # no group varies in either run
        (tmp_path / run).mkdir()
        save_dump(tmp_path / run / "rollout_5.pt",
                  [{**sample, "reward": reward, "status": "completed"} for sample in samples],
                  rollout_id=5)
    frames = load_frames([tmp_path / "runA" / "rollout_5.pt", tmp_path / "runB" / "rollout_5.pt"])
    convert(str(tmp_path / "run*" / "*.pt"), tmp_path / "ds", progress=False, settle_seconds=0)
    for source in (frames, tmp_path / "ds", open_dataset(tmp_path / "ds")):
        for trends in (analysis.ledger_trends(source), analysis.rollout_trends(source)):
            assert trends["dump_file"].tolist() == ["runA/rollout_5.pt", "runB/rollout_5.pt"]
            assert trends["share_no_signal"].tolist() == [1.0, 1.0]
            assert trends["share_signal"].tolist() == [0.0, 0.0]
    assert analysis.rollout_trends(tmp_path / "ds")["samples"].tolist() == [8, 8]


def test_a_filtered_dataset_read_keeps_each_sample_s_fate(tmp_path: Path) -> None:
    """Members a ``where`` filter leaves out still count toward their group's rewards:
    each sample read keeps the fate it has in the whole dump, in the ledger, the view's
    fates and trends alike."""
    def change(samples: list[dict]) -> None:
        for member, reward in zip(samples[4:], (0.5, 1.0, 0.5, 1.0), strict=True):
            member["reward"] = reward  # group 1: completed 0.5, 0.5; truncated 1.0, 1.0
        samples[0]["reward"] = {"score": 1.0}  # group 0 mixes a dict reward in

    whole = edited(tmp_path, "small.pt", "rollout_5.pt", change)
    run = tmp_path / "run"
    run.mkdir()
    for name in ("rollout_5.pt", "rollout_6.pt"):
        (run / name).write_bytes((tmp_path / "rollout_5.pt").read_bytes())
    convert(str(run / "*.pt"), tmp_path / "ds", progress=False, settle_seconds=0)
    expected = fates(whole)
    assert expected[4:] == ["signal", "truncated", "signal", "truncated"]
    for key in (None, "score"):
        completed = open_dataset(tmp_path / "ds", where="status = 'completed'")
        rows = (whole.samples["status"].astype(str) == "completed").to_numpy()
        chosen = sample_fates(whole, reward_key=key)[rows].astype(str).tolist()
        assert fates(completed, **({"reward_key": key} if key else {})) == chosen * 2
        assert len(completed.group_peers) == 2 * (len(whole.samples) - rows.sum())
    one = open_dataset(tmp_path / "ds", where="sample_index = 4")
    assert fates(one) == ["signal"] * 2  # alone, its group would have one member
    trends = analysis.ledger_trends(one)
    assert trends["share_signal"].tolist() == [1.0, 1.0]
    ledger = signal_ledger(one, by="dump")
    assert ledger["samples_signal"].tolist() == [1, 1]


def test_rollout_ids_past_float_precision_keep_their_digits(tmp_path: Path) -> None:
    """A rollout id is an int64: 2**53 + 1, which a float64 rounds to 2**53, keys the
    ledger, its kinds, the tail and trends as itself, over frames and over a dataset."""
    big = 2**53 + 1
    samples = load_dump(FIXTURES / "small.pt").samples
    save_dump(tmp_path / "rollout_big.pt", samples, rollout_id=big)
    frames = load_frames(tmp_path / "rollout_big.pt")
    convert(str(tmp_path / "rollout_big.pt"), tmp_path / "ds", progress=False,
            settle_seconds=0)
    for source in (frames, open_dataset(tmp_path / "ds")):
        assert source.samples["rollout_id"].tolist() == [big] * 8
        for by in ("rollout", "source", "group"):
            index = signal_ledger(source, by=by).index
            assert set(index.get_level_values("rollout_id")) == {big}, by
        assert set(analysis.ledger_kinds(source).index.get_level_values("rollout_id")) == {big}
        assert tail_price(source).index.get_level_values("rollout_id").tolist() == [big]
        assert finish_order(source).index.get_level_values("rollout_id").unique().tolist() \
            == [big]
    for source in (frames, tmp_path / "ds"):
        for trends in (analysis.ledger_trends(source), analysis.rollout_trends(source)):
            assert trends["rollout_id"].tolist() == [big]


def test_ledger_diff_compares_two_rollouts() -> None:
    frames = load_frames([FIXTURES / "small.pt", FIXTURES / "legacy_v1_pd.pt"])
    table = analysis.rollout_diff(frames, of="ledger")
    assert table.equals(analysis.ledger_diff(frames, 0, 1))
    assert list(table.index) == [*FATES, "all"]
    by_dump = signal_ledger(frames, by="dump")
    for fate in FATES:
        assert table.at[fate, "seconds_a"] == pytest.approx(by_dump.at[0, f"seconds_{fate}"])
        assert table.at[fate, "seconds_b"] == pytest.approx(by_dump.at[1, f"seconds_{fate}"])
        assert table.at[fate, "samples_diff"] == (by_dump.at[1, f"samples_{fate}"]
                                                  - by_dump.at[0, f"samples_{fate}"])
    assert table.at["all", "samples_a"] == 8 and table.at["all", "share_a"] == 1.0
    assert table["share_diff"].sum() == pytest.approx(0.0, abs=1e-12)
    with_empty = load_frames([FIXTURES / "small.pt", FIXTURES / "edge_empty.pt"])
    empty = analysis.ledger_diff(with_empty, 0, 1)  # a dump of no samples: zeros, NaN shares
    assert (empty["samples_b"] == 0).all() and empty["share_b"].isna().all()
    with pytest.raises(ValueError, match="7 is not a dump position"):
        analysis.ledger_diff(frames, 0, 7)
    with pytest.raises(ValueError, match="of must be"):
        analysis.rollout_diff(frames, of="fates")


@pytest.mark.parametrize("sizes, expected", [((4, 4), "no_signal"), ((5, 3), "signal")])
def test_groups_of_unequal_sizes_are_normalised_as_one_batch(
        tmp_path: Path, sizes: tuple[int, int], expected: str) -> None:
    # slime normalises per group only while the batch is n_samples_per_prompt x
    # rollout_batch_size samples; otherwise over the whole batch (rewards.view(-1, n)),
    # where a group of equal rewards still differs from the batch's mean.
    def change(samples: list[dict]) -> None:
        for index, member in enumerate(samples):
            first = index < sizes[0]
            member.update(group_index=0 if first else 1, reward=1.0 if first else 0.0,
                          status="completed")

    frames = edited(tmp_path, "small.pt", "rollout_5.pt", change)
    assert fates(frames) == [expected] * 8
    convert([str(tmp_path / "rollout_5.pt")], tmp_path / "ds", settle_seconds=0,
            progress=False)
    for index in (0, 7):  # read alone: every other sample comes along as a peer
        assert fates(open_dataset(tmp_path / "ds", where=f"sample_index = {index}")) \
            == [expected]
    shares = analysis.ledger_trends(tmp_path / "ds", oversample=1.0).iloc[0]
    assert shares[f"share_{expected}"] == pytest.approx(1.0)


def test_a_sample_without_a_group_makes_the_batch_one_group(tmp_path: Path) -> None:
    def change(samples: list[dict]) -> None:
        for index, member in enumerate(samples):
            member.update(group_index=None if index == 7 else index // 4, status="completed",
                          reward=1.0 if index < 4 else 0.0)
            member["trace"].pop("group_id", None)

    frames = edited(tmp_path, "small.pt", "rollout_5.pt", change)
    assert fates(frames) == ["signal"] * 8
