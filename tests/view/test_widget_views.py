"""A widget that follows a folder reads it only while a view shows it (``docs/payload.md``,
"Views"): each view the renderer draws says ``view_opened`` and, when removed (a re-run
cell), ``view_closed``. ipywidgets keeps every widget until it is closed, so without this
each re-run of ``TraceTimeline.live(DIR)`` left one more thread reading the store."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from slime_trace_widget.view.live import LiveBatch
from slime_trace_widget.view.widget import TraceTimeline
from tests.support.live_feeds import RecordQueue

#: Hang guard of the waits below: generous, for a busy machine.
DEADLINE_SECONDS = 60.0


class CountingFeed(RecordQueue):
    """A feed of no records that counts its polls and keeps the threads that made them."""

    def __init__(self) -> None:
        super().__init__()
        self.polls = 0
        self.readers: list[threading.Thread] = []

    def poll(self) -> LiveBatch:
        self.polls += 1
        if threading.current_thread() not in self.readers:
            self.readers.append(threading.current_thread())
        return super().poll()


def _wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)


def _reading_threads() -> set[threading.Thread]:
    """The follow threads alive now (other tests' may still be ending: compare sets)."""
    return {thread for thread in threading.enumerate()
            if thread.name == "slime-trace-follow" and thread.is_alive()}


def _ended(thread: threading.Thread) -> bool:
    thread.join(DEADLINE_SECONDS)
    return not thread.is_alive()


def _tell(timeline: TraceTimeline, kind: str, view: object) -> None:
    timeline._on_message(timeline, {"type": kind, "view": view}, [])


def _reads_on(count: Callable[[], int]) -> None:
    """Wait until ``count`` (of reads) goes up."""
    seen = count()
    _wait_for(lambda: count() > seen)


def test_a_live_widget_reads_while_a_view_shows_it() -> None:
    before = _reading_threads()
    feed = CountingFeed()
    timeline = TraceTimeline.live(feed=feed, interval=0.01)
    timeline.send = lambda *args, **kwargs: None  # type: ignore[method-assign]
    try:
        _reads_on(lambda: feed.polls)  # no view yet (used from code): it reads
        _tell(timeline, "view_opened", "a")
        _tell(timeline, "view_opened", "b")
        _tell(timeline, "view_closed", "a")
        _reads_on(lambda: feed.polls)  # b still shows it
        _tell(timeline, "view_closed", "nobody")  # never opened: changes nothing
        _tell(timeline, "view_closed", 7)
        _reads_on(lambda: feed.polls)
        assert len(feed.readers) == 1
        _tell(timeline, "view_closed", "b")  # the cell was run again
        assert _ended(feed.readers[0])
        polls = feed.polls
        _tell(timeline, "view_opened", "c")  # display(tl) again
        _wait_for(lambda: feed.polls > polls)
        assert len(feed.readers) == 2 and feed.readers[1].is_alive()
    finally:
        timeline.stop_following()
    assert _ended(feed.readers[-1])
    _tell(timeline, "view_opened", "d")  # stopped for good
    assert _reading_threads() - before == set()


def test_a_view_that_goes_silent_stops_the_reading() -> None:
    """A reloaded or closed page sends no ``view_closed``: its view just stops saying
    ``view_alive``. The widget stops reading once it has missed too many, and reads
    again when the view speaks (a background tab whose timers were held back)."""
    before = _reading_threads()
    feed = CountingFeed()
    timeline = TraceTimeline.live(feed=feed, interval=0.01)
    timeline.send = lambda *args, **kwargs: None  # type: ignore[method-assign]
    timeline.view_alive_seconds = 0.5  # gone after 2.5 s: a stall of the test is shorter
    try:
        _tell(timeline, "view_opened", "a")
        _reads_on(lambda: feed.polls)
        assert _ended(feed.readers[0])  # nothing heard from "a" since: gone
        polls = feed.polls
        _tell(timeline, "view_alive", "a")
        _wait_for(lambda: feed.polls > polls)
        assert feed.readers[-1].is_alive()
        # while it keeps speaking, reading goes on (a pause on a busy machine is
        # ended by the next message)
        target = feed.polls + 20
        while feed.polls < target:
            seen = feed.polls
            _tell(timeline, "view_alive", "a")
            _wait_for(lambda seen=seen: feed.polls > seen or not feed.readers[-1].is_alive())
    finally:
        timeline.stop_following()
    assert _ended(feed.readers[-1])
    assert _reading_threads() - before == set()


@pytest.mark.parametrize(("goes", "returns"), [
    ("view_closed", ("view_opened", "b")),  # its cell run again, then display(tl)
    (None, ("view_alive", "a")),  # its page gone without a word, then back in time
])
def test_a_followed_folder_is_read_while_a_view_shows_it(
        tmp_path: Path, goes: str | None, returns: tuple[str, str]) -> None:
    before = _reading_threads()
    timeline = TraceTimeline.follow(tmp_path, interval=0.01)
    if goes is None:
        timeline.view_alive_seconds = 0.5  # gone after 2.5 s: a stall of the test is shorter
    try:
        (first,) = _reading_threads() - before
        _tell(timeline, "view_opened", "a")
        if goes is not None:
            _tell(timeline, goes, "a")
        assert _ended(first)
        _tell(timeline, *returns)
        (second,) = _reading_threads() - before
        assert second is not first
    finally:
        timeline.stop_following()
    assert _ended(second)
