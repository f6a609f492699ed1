"""Which views of a widget count as drawn: opened and heard from within
``VIEW_GONE_AFTER_MISSED + 1`` intervals, not closed (``view.presence``)."""

from __future__ import annotations

from types import SimpleNamespace

from IPython.core.events import EventManager, available_events

from slime_trace_widget.view.contract import VIEW_ALIVE_SECONDS, VIEW_GONE_AFTER_MISSED
from slime_trace_widget.view.presence import IdleClock, ViewPresence, idle_clock_of


class Clock:
    """A monotonic clock a test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


GONE_AFTER = 2.0 * (VIEW_GONE_AFTER_MISSED + 1)  # with an interval of 2 s


def test_a_widget_no_view_opened_counts_as_shown() -> None:
    clock = Clock()
    views = ViewPresence(clock)
    clock.now += 10 * GONE_AFTER
    assert views.shown(2.0)
    assert views.heard("view_closed", "never-opened")
    assert views.shown(2.0), "closing a view never opened changes nothing"


def test_a_view_not_heard_from_counts_as_gone() -> None:
    clock = Clock()
    views = ViewPresence(clock)
    assert views.heard("view_opened", "a")
    clock.now += GONE_AFTER
    assert views.shown(2.0), "gone only once more than the allowed misses"
    clock.now += 0.001
    assert not views.shown(2.0)
    # a page whose timers were held back (a background tab) speaks again
    assert views.heard("view_alive", "a")
    assert views.shown(2.0)


def test_view_alive_keeps_a_view_shown_and_view_closed_ends_it() -> None:
    clock = Clock()
    views = ViewPresence(clock)
    views.heard("view_opened", "a")
    for _ in range(50):
        clock.now += 2.0 * VIEW_GONE_AFTER_MISSED  # each time just within the misses
        views.heard("view_alive", "a")
        assert views.shown(2.0)
    views.heard("view_opened", "b")
    views.heard("view_closed", "a")
    assert views.shown(2.0)
    views.heard("view_closed", "b")
    assert not views.shown(2.0)


def test_a_reloaded_page_leaves_only_its_new_view() -> None:
    """The old page's view never says closed; the new page's view speaks; the old one
    is dropped once it missed too many, so closing the new one leaves none."""
    clock = Clock()
    views = ViewPresence(clock)
    views.heard("view_opened", "old")
    clock.now += 1.0
    views.heard("view_opened", "new")  # the reload
    for _ in range(VIEW_GONE_AFTER_MISSED + 2):
        clock.now += 2.0
        views.heard("view_alive", "new")
    assert views.shown(2.0)
    views.heard("view_closed", "new")
    assert not views.shown(2.0), "the old page's view still counted"


def test_the_interval_is_read_at_each_look() -> None:
    clock = Clock()
    views = ViewPresence(clock)
    views.heard("view_opened", "a")
    clock.now += VIEW_ALIVE_SECONDS * (VIEW_GONE_AFTER_MISSED + 1) - 1
    assert views.shown(VIEW_ALIVE_SECONDS)
    assert not views.shown(1.0)


def test_only_view_messages_with_text_ids_count() -> None:
    views = ViewPresence(Clock())
    assert not views.heard("view_opened", 7)
    assert not views.heard("view_opened", None)
    assert not views.heard("attrs", "a")
    assert views.shown(2.0), "nothing counted as opened"


def test_silence_is_timed_only_while_no_cell_runs() -> None:
    """A kernel takes the views' messages only between cells: time spent in a cell does
    not count toward a view's silence, time between cells does."""
    clock = Clock()
    idle = IdleClock(clock)
    views = ViewPresence(idle)
    views.heard("view_opened", "a")
    idle.busy()
    clock.now += 10 * GONE_AFTER  # a long cell: "a" speaks, but nobody listens
    assert views.shown(2.0)
    idle.idle()
    clock.now += GONE_AFTER
    assert views.shown(2.0)
    clock.now += 0.001
    assert not views.shown(2.0)


def test_the_idle_clock_follows_an_ipython_shell_s_cells() -> None:
    """Registered with IPython's own event manager, as a kernel's shell has it."""
    clock = Clock()
    shell = SimpleNamespace(events=EventManager(None, available_events))
    idle = idle_clock_of(shell, clock)
    start = idle()
    shell.events.trigger("pre_run_cell", SimpleNamespace(raw_cell="sleep"))
    clock.now += 500.0
    assert idle() == start
    shell.events.trigger("post_run_cell", SimpleNamespace(success=True))
    clock.now += 3.0
    assert idle() == start + 3.0
