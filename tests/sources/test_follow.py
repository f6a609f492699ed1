"""Following a live run: new dumps are picked up once complete, and only they load."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from slime_trace_widget import TraceTimeline
from slime_trace_widget.sources.follow import DumpWatcher, FollowedFrames, Poller
from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.view import widget as widget_module

FIXTURES = Path(__file__).parents[1] / "fixtures"


def _place(source: Path, target: Path, age: float = 3600) -> None:
    """Copy in one rename, dated ``age`` seconds ago (what a finished save looks like)."""
    partial = target.with_name(f".{target.name}.partial")
    shutil.copy(source, partial)
    os.replace(partial, target)
    then = time.time() - age
    os.utime(target, (then, then))


def _wait_for(condition, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_watcher_returns_each_complete_dump_once(tmp_path: Path) -> None:
    watcher = DumpWatcher(tmp_path, "rollout_*.pt")
    _place(FIXTURES / "small.pt", tmp_path / "rollout_0.pt")
    _place(FIXTURES / "small.pt", tmp_path / "rollout_1.pt", age=0)  # just written
    (tmp_path / "notes.txt").write_text("not a dump")
    assert watcher.new_dumps() == [str(tmp_path / "rollout_0.pt")]
    assert watcher.new_dumps() == []
    old = time.time() - 60
    os.utime(tmp_path / "rollout_1.pt", (old, old))
    assert watcher.new_dumps() == [str(tmp_path / "rollout_1.pt")]


def test_dumps_found_together_come_in_natural_order(tmp_path: Path) -> None:
    """As a glob of them loads: rollout_10 came before rollout_2, so a followed view's
    rows and its default diff (dumps 0 and 1) put step 10 before step 2."""
    for step in (10, 2, 1):
        _place(FIXTURES / "small.pt", tmp_path / f"rollout_{step}.pt")
    assert DumpWatcher(tmp_path, "rollout_*.pt").new_dumps() == [
        str(tmp_path / f"rollout_{step}.pt") for step in (1, 2, 10)]


@pytest.mark.filterwarnings("ignore:skipped .*rollout_1.pt:RuntimeWarning")
def test_timeline_follows_a_folder(tmp_path: Path, monkeypatch) -> None:
    _place(FIXTURES / "small.pt", tmp_path / "rollout_0.pt")
    loaded: list[list[str]] = []
    real = widget_module.load_frames
    monkeypatch.setattr(widget_module, "load_frames",
                        lambda paths, **kw: loaded.append(list(paths)) or real(paths, **kw))
    timeline = TraceTimeline.follow(tmp_path, "rollout_*.pt", interval=0.1)
    try:
        assert len(timeline.samples) == 8 and timeline.payload["meta"]["n_samples_total"] == 8
        (tmp_path / "rollout_1.pt").write_bytes(b"PK\x03\x04 broken")  # logged, not fatal
        old = time.time() - 3600
        os.utime(tmp_path / "rollout_1.pt", (old, old))
        _place(FIXTURES / "rollout_eval_3.pt", tmp_path / "rollout_2.pt")
        # frames change before the payload is rebuilt from them: wait for the payload
        _wait_for(lambda: timeline.payload["meta"]["n_samples_total"] == 30)
        assert len(timeline.frames.paths) == 2
        # Old dumps were not loaded again: each load got only new files.
        assert loaded[0] == [str(tmp_path / "rollout_0.pt")]
        assert all(str(tmp_path / "rollout_0.pt") not in paths for paths in loaded[1:])
    finally:
        timeline.stop_following()
    assert timeline._poller is None


def test_an_empty_folder_fills_in(tmp_path: Path) -> None:
    timeline = TraceTimeline.follow(tmp_path, interval=0.1)
    try:
        assert len(timeline.samples) == 0
        _place(FIXTURES / "small.pt", tmp_path / "rollout_0.pt")
        _wait_for(lambda: len(timeline.samples) == 8)
        assert timeline.frames.paths == [str(tmp_path / "rollout_0.pt")]
    finally:
        timeline.close()


@pytest.mark.filterwarnings("ignore:skipped .*rollout_1.pt:RuntimeWarning")
@pytest.mark.parametrize("with_good_dump", [True, False], ids=["one fails", "all fail"])
@pytest.mark.parametrize("broken", ["edge_corrupt_truncated.pt", "edge_corrupt_empty_file.pt"],
                         ids=["truncated", "empty"])
def test_timeline_adds_a_dump_that_failed_once_it_is_whole(tmp_path: Path, with_good_dump: bool,
                                                           broken: str) -> None:
    """A dump seen broken (slime still writing it, copied in halves) is looked at again
    when it changes; a folder whose only dumps fail still opens, empty. An empty file
    fails alone too, not the good dump beside it."""
    if with_good_dump:
        _place(FIXTURES / "small.pt", tmp_path / "rollout_0.pt")
    _place(FIXTURES / broken, tmp_path / "rollout_1.pt")
    timeline = TraceTimeline.follow(tmp_path, "rollout_*.pt", interval=0.1)
    try:
        assert len(timeline.samples) == (8 if with_good_dump else 0)
        _place(FIXTURES / "rollout_eval_3.pt", tmp_path / "rollout_1.pt", age=1800)
        _wait_for(lambda: str(tmp_path / "rollout_1.pt") in timeline.frames.paths)
        assert len(timeline.frames.paths) == (2 if with_good_dump else 1)
    finally:
        timeline.stop_following()


def test_poller_reports_errors_and_keeps_going() -> None:
    calls, errors = [], []

    def look() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("a dump could not be read")

    poller = Poller(look, errors.append, interval=0.01)
    _wait_for(lambda: len(calls) >= 3)
    poller.stop()
    assert not poller.running and len(errors) == 1


def _follow_threads() -> set[threading.Thread]:
    """The follow threads alive now (another test's may still be ending: compare sets)."""
    return {thread for thread in threading.enumerate()
            if thread.name == "slime-trace-follow" and thread.is_alive()}


def test_a_paused_poller_ends_its_thread_and_resumes_with_a_new_one() -> None:
    calls: list[int] = []
    before = _follow_threads()
    poller = Poller(lambda: calls.append(1), lambda exc: None, interval=0.01)
    try:
        _wait_for(lambda: len(calls) >= 2)
        poller.pause(wait=True)
        assert not poller.running and _follow_threads() - before == set()
        looked = len(calls)
        poller.resume()
        poller.resume()  # while polling: no second thread
        assert len(_follow_threads() - before) == 1
        _wait_for(lambda: len(calls) > looked)
    finally:
        poller.stop()
    assert not poller.running and _follow_threads() - before == set()
    poller.resume()  # stopped for good
    assert not poller.running and _follow_threads() - before == set()


def test_a_thread_resumed_during_a_look_waits_for_it() -> None:
    """Two looks never overlap: a follow look swaps the widget's frames."""
    inside, release, overlaps = threading.Event(), threading.Event(), []
    running = threading.Lock()

    def look() -> None:
        if not running.acquire(blocking=False):
            overlaps.append(1)
            return
        try:
            inside.set()
            release.wait(60)
        finally:
            running.release()

    poller = Poller(look, lambda exc: None, interval=0.01)
    try:
        assert inside.wait(60)
        poller.pause()
        poller.resume()  # the new thread's first look comes while the old one's runs
        _wait_for(lambda: poller.running)
        release.set()
        inside.clear()
        _wait_for(inside.is_set)
    finally:
        release.set()
        poller.stop()
    assert overlaps == []


class StopWhenAsked(threading.Event):
    """A set halt whose ``is_set`` has ``poller.stop()`` run on another thread first, and
    gives it up to a second to end: a stop landing in the middle of a resume."""

    def __init__(self, poller: Poller) -> None:
        super().__init__()
        self.set()
        self.poller = poller
        self.stopper: threading.Thread | None = None

    def is_set(self) -> bool:
        if self.stopper is None:
            self.stopper = threading.Thread(target=self.poller.stop)
            self.stopper.start()
            self.stopper.join(1.0)  # ends at once without a lock; waits for one with it
        return super().is_set()


def test_a_stop_during_a_resume_leaves_nothing_polling() -> None:
    """A widget's look resumes its follower (the views' check) while the user's
    ``stop_following()`` may run: the stop must win, with no thread left polling."""
    before = _follow_threads()
    poller = Poller(lambda: None, lambda exc: None, interval=0.01)
    poller.pause(wait=True)
    halt = StopWhenAsked(poller)
    poller._halt = halt
    poller.resume()
    assert halt.stopper is not None
    halt.stopper.join(60)
    _wait_for(lambda: _follow_threads() - before == set())
    assert not poller.running


def test_each_version_of_a_dump_is_returned_once(tmp_path: Path) -> None:
    """A dump that failed half-written is offered again once whole, and a step's dump
    written again (a run resumed from a checkpoint) is offered as the new dump it is;
    a file left as it is never comes back."""
    watcher = DumpWatcher(tmp_path, "rollout_*.pt")
    _place(FIXTURES / "small.pt", tmp_path / "rollout_0.pt", age=7200)
    (name,) = watcher.new_dumps()
    assert watcher.new_dumps() == []  # unchanged: not looked at again
    _place(FIXTURES / "legacy_v1_pd.pt", tmp_path / "rollout_0.pt")
    assert watcher.new_dumps() == [name]
    assert watcher.new_dumps() == []  # returned once more, then done
    then = time.time() - 60
    os.utime(name, (then, then))  # the same bytes, saved again
    assert watcher.new_dumps() == [name]


def test_a_dump_rewritten_while_it_settles_waits_for_its_new_version(tmp_path: Path) -> None:
    watcher = DumpWatcher(tmp_path, "rollout_*.pt")
    _place(FIXTURES / "small.pt", tmp_path / "rollout_0.pt", age=7200)
    assert watcher.new_dumps() == [str(tmp_path / "rollout_0.pt")]
    _place(FIXTURES / "legacy_v1_pd.pt", tmp_path / "rollout_0.pt", age=0)  # being saved
    assert watcher.new_dumps() == []
    then = time.time() - 60
    os.utime(tmp_path / "rollout_0.pt", (then, then))
    assert watcher.new_dumps() == [str(tmp_path / "rollout_0.pt")]


def test_a_followed_timeline_shows_a_rewritten_dump_in_place_of_the_old(tmp_path: Path) -> None:
    """The rollout_1 that a resumed run writes again replaces the one shown (8 samples
    of small.pt become the 22 of the evaluation dump), where the view kept the old."""
    for step in (0, 1):
        _place(FIXTURES / "small.pt", tmp_path / f"rollout_{step}.pt")
    timeline = TraceTimeline.follow(tmp_path, "rollout_*.pt", interval=0.1)
    try:
        assert len(timeline.samples) == 16
        _place(FIXTURES / "rollout_eval_3.pt", tmp_path / "rollout_1.pt", age=1800)
        _wait_for(lambda: timeline.payload["meta"]["n_samples_total"] == 30)
        frames = timeline.frames
        assert frames.paths == [str(tmp_path / f"rollout_{step}.pt") for step in (0, 1)]
        assert frames.samples.groupby("dump").size().tolist() == [8, 22]
        _place(FIXTURES / "small.pt", tmp_path / "rollout_0.pt", age=900)
        _wait_for(lambda: timeline.payload["meta"]["n_samples_total"] == 30
                  and timeline.frames.paths[-1] == str(tmp_path / "rollout_0.pt"))
        assert timeline.frames.samples.groupby("dump").size().tolist() == [22, 8]
    finally:
        timeline.stop_following()


def test_a_rewrite_loads_the_others_of_its_load_one_by_one(tmp_path: Path) -> None:
    loads: list[list[str]] = []

    def load(names: list[str]):
        loads.append(list(names))
        return load_frames(names, progress=False)

    paths = [str(tmp_path / f"rollout_{step}.pt") for step in range(3)]
    for path in paths:
        _place(FIXTURES / "small.pt", Path(path))
    followed = FollowedFrames(load, lambda path: pytest.fail(f"{path} retried"))
    assert followed.add(load(paths)) == []
    _place(FIXTURES / "rollout_eval_3.pt", Path(paths[1]))
    assert followed.add(load([paths[1]])) == [paths[1]]
    assert loads == [paths, [paths[1]], [paths[0]], [paths[2]]]
    assert followed.frames.paths == [paths[0], paths[2], paths[1]]
    assert followed.frames.samples.groupby("dump").size().tolist() == [8, 8, 22]
    _place(FIXTURES / "small.pt", Path(paths[2]))
    assert followed.add(load([paths[2]])) == [paths[2]]
    assert loads[4:] == [[paths[2]]]  # loaded alone now: nothing else again
    assert followed.frames.paths == [paths[0], paths[1], paths[2]]


def test_another_dump_of_the_load_that_fails_to_load_again_is_retried(tmp_path: Path) -> None:
    """Its old rows go with the split load, so it was gone from the page for good: the
    watcher, holding its version, never offered it again."""
    paths = [str(tmp_path / f"rollout_{step}.pt") for step in range(3)]
    for path in paths:
        _place(FIXTURES / "small.pt", Path(path))
    watcher = DumpWatcher(tmp_path, "rollout_*.pt")
    failing = {paths[2]}

    def load(names: list[str]):
        return None if failing & set(names) else load_frames(names, progress=False)

    followed = FollowedFrames(load, watcher.forget)
    followed.add(load_frames(watcher.new_dumps(), progress=False))
    _place(FIXTURES / "rollout_eval_3.pt", Path(paths[0]))
    assert watcher.new_dumps() == [paths[0]]
    assert followed.add(load_frames([paths[0]], progress=False)) == [paths[0]]
    assert followed.frames.paths == [paths[1], paths[0]]
    failing.clear()  # a worker out of memory once, say
    assert watcher.new_dumps() == [paths[2]]
    assert followed.add(load([paths[2]])) == []
    assert followed.frames.paths == [paths[1], paths[0], paths[2]]


def test_only_the_frames_shown_keep_pandas_views(tmp_path: Path) -> None:
    """The first load was both kept and shown; once a combination was shown, the load
    kept its views too, about doubling a followed run's pandas memory."""
    paths = [str(tmp_path / f"rollout_{step}.pt") for step in range(3)]
    for path in paths:
        _place(FIXTURES / "small.pt", Path(path))
    followed = FollowedFrames(lambda names: load_frames(names, progress=False),
                              lambda path: None)
    first = load_frames(paths[:2], progress=False)
    followed.add(first)
    assert followed.frames is first and len(first.spans)  # its views made, as shown
    followed.add(load_frames(paths[2:], progress=False))
    assert followed.frames is not first and len(followed.frames.spans)
    assert not first._views._made  # the load kept holds no view now


def test_a_dump_gone_during_a_look_is_left_for_a_later_one(tmp_path: Path,
                                                           monkeypatch) -> None:
    from slime_trace_widget.sources import follow as follow_module

    for index in (0, 1):
        _place(FIXTURES / "small.pt", tmp_path / f"rollout_{index}.pt")
    gone = str(tmp_path / "rollout_0.pt")
    real = follow_module.being_written

    def removed_meanwhile(path: str, stat: os.stat_result, settle: float) -> bool:
        if path == gone:
            os.remove(path)  # between the glob and the look, as a cleaner might
        return real(path, stat, settle)

    monkeypatch.setattr(follow_module, "being_written", removed_meanwhile)
    watcher = DumpWatcher(tmp_path, "rollout_*.pt")
    assert watcher.new_dumps() == [str(tmp_path / "rollout_1.pt")]
    monkeypatch.setattr(follow_module, "being_written", real)
    _place(FIXTURES / "small.pt", tmp_path / "rollout_0.pt")
    assert watcher.new_dumps() == [gone]


def test_frames_added_to_a_followed_timeline_stay_shown(tmp_path: Path) -> None:
    """Each look set the shown frames to the followed folder's, dropping what add_frames
    had added (the evaluation dump below was gone once rollout_1 arrived)."""
    _place(FIXTURES / "small.pt", tmp_path / "rollout_0.pt")
    timeline = TraceTimeline.follow(tmp_path, "rollout_*.pt", interval=0.1)
    try:
        timeline.add_frames(load_frames(FIXTURES / "rollout_eval_3.pt", progress=False))
        _place(FIXTURES / "small.pt", tmp_path / "rollout_1.pt")
        _wait_for(lambda: str(tmp_path / "rollout_1.pt") in timeline.frames.paths)
        assert [Path(path).name for path in timeline.frames.paths] == [
            "rollout_0.pt", "rollout_eval_3.pt", "rollout_1.pt"]
    finally:
        timeline.stop_following()
