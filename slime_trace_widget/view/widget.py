"""TraceTimeline: the notebook widget (a thin anywidget class).

The Python side holds the frames and answers questions; the front end
(``js/``, bundled into ``static/``) draws. State crosses as traitlets:
``payload`` (binary columns, see ``docs/payload.md``), ``selected`` (what the
user clicked), ``view_range`` (two-way zoom) and ``view_state`` (filters, sort
and toggles, read back by :meth:`to_html`), ``view_alive_seconds`` (how often each
view says it is still drawn). Attributes stay in the kernel and
are sent on request when an item is clicked, and so does a sample's whole
prompt, response, label or metadata when the panel's "show all" asks for it.
"""

from __future__ import annotations

import base64
import functools
import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import anywidget
import numpy as np
import pandas as pd
import traitlets

from ..answers.query import attr_masks, check_terms, restrict
from ..frames.flatten import build_frames
from ..frames.model import TraceFrames, combine_frames
from ..sources.follow import (
    DUMP_PATTERN,
    POLL_SECONDS,
    SETTLE_SECONDS,
    DumpWatcher,
    FollowedFrames,
    Poller,
    load_new,
)
from ..sources.handover import new_dumps_watcher
from ..sources.loading import load_frames
from .contract import REQUEST_ECHOES, VIEW_ALIVE_SECONDS
from .details import event_detail, sample_text, span_detail
from .live import STALL_AFTER, LiveFeed, LiveFollower, LiveSession
from .live_blocks import LiveDelta
from .page.snapshot import write_snapshot
from .payload import EncodedView, encode
from .presence import VIEW_MESSAGES, ViewPresence

_STATIC = Path(__file__).parent / "static"
_log = logging.getLogger(__name__)
_VIEW_IDS = itertools.count(1)



def _folder_there(folder: str | Path, what: str) -> Path:
    """``folder`` (``~`` expanded, as a dump's path); FileNotFoundError naming it as
    ``what`` unless it is a folder."""
    path = Path(folder).expanduser()
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: not a folder; {what}")
    return path

class TraceTimeline(anywidget.AnyWidget):
    """Interactive timeline of slime rollout traces, one row per sample."""

    # The bundle's text, not its path: anywidget hooks every widget made from a path
    # to the file's change signal and never unhooks it, which kept each widget (and
    # its frames) alive after close() for as long as the kernel ran.
    _esm = (_STATIC / "widget.js").read_text(encoding="utf-8")
    _css = (_STATIC / "widget.css").read_text(encoding="utf-8")

    payload = traitlets.Dict().tag(sync=True)
    selected = traitlets.Dict().tag(sync=True)
    view_range = traitlets.List(traitlets.Float(), default_value=[]).tag(sync=True)
    view_state = traitlets.Dict().tag(sync=True)
    height = traitlets.Int(640).tag(sync=True)
    #: Each view says ``view_alive`` this often; one not heard from for a few such
    #: intervals (its page reloaded or closed) counts as gone (``view.presence``).
    view_alive_seconds = traitlets.Float(VIEW_ALIVE_SECONDS, min=0.05).tag(sync=True)

    def __init__(self, frames: TraceFrames, *, title: str | None = None,
                 align: str | None = None, **kwargs: Any) -> None:
        """``align``: "global" (one clock) or "rollout" (each dump from its own start);
        the default compares several dumps by their shape, "rollout", else "global"."""
        self._frames = frames
        self._poller: Poller | None = None
        #: A followed folder's loads (:meth:`follow`), which :meth:`add_frames` adds to.
        self._followed: FollowedFrames | None = None
        self._live: LiveFollower | None = None
        #: The views of this widget drawn now (``_follow_while_shown``).
        self._views = ViewPresence()
        self._following = threading.Lock()
        self._title = title
        self._align = align or ("rollout" if len(frames.paths) > 1 else "global")
        self._view = self._encode(frames)
        super().__init__(payload=self._view.payload, **kwargs)
        self.on_msg(self._on_message)

    # ------------------------------------------------------------------ constructors

    @classmethod
    def from_dump(cls, path_or_glob: Any, *, trusted: bool = False, engine_traces: Any = None,
                  **kwargs: Any) -> TraceTimeline:
        """Open one dump, a glob, or a list of dumps (combined into one view).

        ``trusted=True`` unpickles with torch's full unpickler, which runs code
        from the file; keep the default for files you did not write.
        ``engine_traces`` (a ``slime-trace-viewer collect`` folder) shows what the
        engine did inside each generation.
        """
        return cls(load_frames(path_or_glob, trusted=trusted, engine_traces=engine_traces),
                   **kwargs)

    @classmethod
    def from_dataset(cls, directory: Any, rollouts: Any = None, *, where: str | None = None,
                     kinds: Any = None, engine_traces: Any = None, dumps: Any = None,
                     **kwargs: Any) -> TraceTimeline:
        """Open rollouts of a run dataset (``slime-trace-viewer convert``), reading only
        their files; ``where`` keeps the samples a SQL condition holds for, ``dumps`` the
        dumps of those names (``rollout_trends``' ``dump_file``). A dataset converted with
        engine traces has them; ``engine_traces`` joins them now into one converted
        without."""
        from ..sources.dataset import open_dataset

        frames = open_dataset(directory, rollouts=rollouts, where=where, kinds=kinds,
                              dumps=dumps)
        if engine_traces is not None:
            from ..sources.engine.window import with_engine_traces

            frames = with_engine_traces(frames, engine_traces)
        return cls(frames, **kwargs)

    @classmethod
    def follow(cls, folder: str | Path, pattern: str = DUMP_PATTERN, *,
               interval: float = POLL_SECONDS, settle_seconds: float = SETTLE_SECONDS,
               **kwargs: Any) -> TraceTimeline:
        """Show the complete dumps in ``folder`` and add each new one as slime writes
        it, loading only the new ones (every ``interval`` seconds, once a file has not
        changed for ``settle_seconds``); a dump written again (a run resumed from a
        checkpoint repeats its steps) is loaded again in place of what it showed.
        ``stop_following()`` ends it. FileNotFoundError when ``folder`` is not a folder
        (a typo would wait for ever)."""
        folder = _folder_there(folder, "the dump folder to follow")
        watcher = DumpWatcher(folder, pattern, settle_seconds)

        def loaded(names: list[str]) -> TraceFrames | None:
            """The dumps of ``names`` that load; those that fail are offered again once
            they change (a dump seen half-written is added when it is whole)."""
            return load_new(names, functools.partial(load_frames, progress=False),
                            lambda message: _log.warning("following %s: %s", folder, message))

        followed = FollowedFrames(loaded, watcher.forget)
        first = watcher.new_dumps()
        added = loaded(first) if first else None
        if added is not None:
            followed.add(added)
        timeline = cls(followed.frames, **{"align": "global", **kwargs})
        timeline._followed = followed

        def look() -> None:
            if not timeline._follow_while_shown():
                return
            new = watcher.new_dumps()
            added = loaded(new) if new else None
            if added is not None:
                timeline.add_frames(added)

        timeline._poller = Poller(look, lambda exc: _log.warning(
            "following %s: %s", folder, exc), interval)
        return timeline

    @classmethod
    def live(cls, directory: str | Path | None = None, *, feed: LiveFeed | None = None,
             stall_after: float = STALL_AFTER, dumps: str | Path | None = None,
             pattern: str = DUMP_PATTERN, settle_seconds: float = SETTLE_SECONDS,
             interval: float = 0.5, title: str | None = None, **kwargs: Any
             ) -> TraceTimeline:
        """Watch a rollout while it runs: the live records a ``slime-trace-viewer collect
        DIR`` receiver keeps (``directory``; or any ``feed`` with the same ``poll``),
        updated at least once a second while records arrive (``docs/live-view.md``).

        Open spans grow to a "now" line; a sample whose open span had no record for
        ``stall_after`` seconds is flagged stalled, one running longer than the
        finished samples' p90 a straggler; the banner says what was lost, per
        sending process. With ``dumps`` (slime's dump folder), the view hands over
        to the step's dump once it lands (the first new complete dump, see
        :meth:`follow`, holding a sample seen live): the same samples and spans,
        now with their statuses, rewards and texts.
        ``stop_following()`` stops the updates. FileNotFoundError when ``directory`` or
        ``dumps`` is not a folder (start the collector first: it makes its folder).
        """
        if dumps is not None:
            dumps = _folder_there(dumps, "the dump folder")
        if feed is None:
            if directory is None:
                raise ValueError("TraceTimeline.live needs a collector folder or a feed")
            directory = _folder_there(directory, "the collector folder (start "
                                                 "'slime-trace-viewer collect DIR' first)")
            from .live_feed import ReaderFeed

            feed = ReaderFeed(directory)
        name = Path(directory).name if directory is not None else "feed"
        session = LiveSession(feed, stall_after=stall_after, title=title or f"{name} (live)")
        timeline = cls(build_frames([]), **kwargs)
        timeline.payload = session.starting_payload()
        watcher = None
        if dumps is not None:  # the steps' dumps already there are not this one's
            watcher = new_dumps_watcher(dumps, pattern, settle_seconds)

        def report(exc: BaseException) -> None:
            _log.warning("live %s: %s", directory, exc)

        def send(delta: LiveDelta) -> None:
            content, buffers = delta.as_message()
            timeline.send(content, buffers)

        def after() -> None:
            if timeline._follow_while_shown() and watcher is not None:
                timeline._hand_over(watcher)

        timeline._live = LiveFollower(session, send, report, interval, after)
        return timeline

    def _hand_over(self, watcher: DumpWatcher) -> bool:
        """Show the first new dump that holds a sample seen live, instead of the
        live view; whether it did."""
        live = self._live
        if live is None:
            return False
        found = live.session.step_dump(watcher)
        if found is None:
            return False
        self._live = None
        live.stop()
        self._frames = found[1]
        self._align = "global"
        self.show()
        return True

    def stop_following(self) -> None:
        """Stop adding new dumps (see :meth:`follow`) or live records (:meth:`live`)."""
        if self._poller is not None:
            self._poller.stop()
            self._poller = None
        if self._live is not None:
            self._live.stop()

    def add_frames(self, frames: TraceFrames) -> TraceTimeline:
        """Add more dumps' frames to what this widget shows (everything is shown again);
        while following a folder, as a load of it: a dump shown already is replaced."""
        if self._followed is not None:
            for path in self._followed.add(frames):
                _log.info("loaded %s again: it was written again", path)
            self._frames = self._followed.frames
        else:
            self._frames = combine_frames([self._frames, frames]) \
                if len(self._frames.samples) else frames  # nothing shown yet
        return self.show()

    def close(self) -> None:
        self.stop_following()
        super().close()

    @classmethod
    def from_frames(cls, frames: TraceFrames | list[TraceFrames] | Any, **kwargs: Any
                    ) -> TraceTimeline:
        """Show frames already built, several of them side by side (a list), or anything
        :func:`build_frames` accepts."""
        if isinstance(frames, list) and frames and all(isinstance(f, TraceFrames)
                                                      for f in frames):
            frames = combine_frames(frames)
        elif not isinstance(frames, TraceFrames):
            frames = build_frames(frames)
        return cls(frames, **kwargs)

    # ------------------------------------------------------------------ data access

    @property
    def frames(self) -> TraceFrames:
        """The frames shown (a live view: every sample so far, flattened now)."""
        if self._live is not None:
            return self._live.session.frames()
        return self._frames

    @property
    def samples(self) -> pd.DataFrame:
        """The samples shown (a live view: as of now, each access flattened again)."""
        return self.frames.samples

    @property
    def spans(self) -> pd.DataFrame:
        return self.frames.spans

    @property
    def events(self) -> pd.DataFrame:
        return self.frames.events

    @property
    def view(self) -> EncodedView:
        """The payload currently shown and its maps back to frame rows."""
        return self._view

    # ------------------------------------------------------------------ pandas round trip

    def show(self, samples: pd.DataFrame | pd.Index | None = None,
             spans: pd.DataFrame | pd.Index | None = None, *,
             query: str | None = None) -> TraceTimeline:
        """Show only these samples and/or spans (pandas filters) in this same widget,
        and of them only what ``query`` keeps (``docs/query.md``; the filter box's
        grammar, e.g. ``"name:tool_call tool=python duration>2s"``).

        ``tl.show()`` with no argument shows everything again. A query that does
        not parse raises ``ValueError`` (``query.QueryError``) saying what and where.
        A live view refuses it (``RuntimeError``) until it has handed over to the
        step's dump: its rows are the rollout's as they arrive (filter them in the
        view's query box).
        """
        if self._live is not None:
            raise RuntimeError("a live view shows the rollout as it runs: filter it in its "
                               "query box; show() filters once it has handed over to the "
                               "step's dump (or TraceTimeline.from_frames(tl.frames))")
        filters = (restrict(self._frames, query, samples, spans) if query
                   else {"samples": samples, "spans": spans})
        self._view = self._encode(self._frames, **filters)
        self.selected = {}
        self.payload = self._view.payload
        return self

    def _encode(self, frames: TraceFrames, **filters: Any) -> EncodedView:
        """``encode`` with a fresh ``meta.view_id``: two views of equal size are told
        apart by it, so a ``query_attrs`` answer meant for another one is not used."""
        view = encode(frames, title=self._title, align=self._align, **filters)
        meta = {**view.payload["meta"], "view_id": str(next(_VIEW_IDS))}
        return replace(view, payload={**view.payload, "meta": meta})

    # ------------------------------------------------------------------ sharing

    def to_html(self, path: str | Path) -> Path:
        """Write a standalone HTML snapshot of what this widget shows now.

        The same rows (``show`` filters), sort, text filter, toggles and zoom;
        all attributes of the included spans are embedded, so the file opens
        anywhere from ``file://`` without a kernel or a network. A live view's
        snapshot is its rollout as of now, open spans drawn to now, whole.
        """
        path = Path(path).expanduser()  # as from_dump's paths: "~/share/view.html"
        if self._live is not None:
            frames = self.frames
            return write_snapshot(path, frames, self._encode(frames))
        return write_snapshot(path, self._frames, self._view, view_state=dict(self.view_state),
                              view_range=list(self.view_range))

    # ------------------------------------------------------------------ selection

    @traitlets.validate("selected")
    def _complete_selection(self, proposal: dict[str, Any]) -> dict[str, Any]:
        """Add the frame index and span id to a selection made in the front end."""
        value = dict(proposal["value"] or {})
        if not value or "index" not in value or self._live is not None:
            return value
        if value.get("kind", "span") not in ("span", "event"):
            _log.debug("selection of no span or event: %r", value)
            return {}
        try:
            frame_index = self._frame_index(value.get("kind", "span"), int(value["index"]),
                                            self._view)
        except (IndexError, TypeError, ValueError, OverflowError):  # inf: OverflowError
            _log.debug("selection out of range: %r", value)
            return {}
        value["frame_index"] = frame_index
        if value.get("kind", "span") == "span":
            value["span_id"] = str(self._frames.span_core.at[frame_index, "span_id"])
        else:
            span_id = self._frames.event_core.at[frame_index, "span_id"]
            value["span_id"] = None if span_id is None else str(span_id)
        return value

    @staticmethod
    def _frame_index(kind: str, payload_index: int, view: EncodedView) -> int:
        table = view.span_index if kind == "span" else view.event_index
        if not 0 <= payload_index < len(table):
            raise IndexError(payload_index)
        return int(table[payload_index])

    @property
    def selected_span(self) -> pd.Series | None:
        """The clicked span as a row of :attr:`spans` (all attrs), or None (always, in a
        live view, whose rows change as records arrive: its details panel shows the
        clicked span)."""
        if self.selected.get("kind", "span") != "span" or "frame_index" not in self.selected:
            return None
        return self.spans.loc[self.selected["frame_index"]]

    @property
    def selected_event(self) -> pd.Series | None:
        """The clicked instant event / unmatched end as a row of :attr:`events`, or None."""
        if self.selected.get("kind") != "event" or "frame_index" not in self.selected:
            return None
        return self.events.loc[self.selected["frame_index"]]

    # ------------------------------------------------------------------ messages

    def _on_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        """Answer the front end's requests (``docs/payload.md``); other messages are ignored."""
        if not isinstance(content, dict) or not isinstance(content.get("type"), str):
            return
        if content["type"] in VIEW_MESSAGES:
            if self._views.heard(content["type"], content.get("view")):
                self._follow_while_shown()
        elif content["type"] == "live_sync" and self._live is not None:
            since, epoch = content.get("since"), content.get("epoch")
            self._live.send_since(since if type(since) is int and since >= 0 else 0,
                                  epoch if isinstance(epoch, str) else None)
        else:  # one of the contract's REQUEST_ECHOES, or not a request this kernel answers
            answers = {"attrs": self._attrs, "sample_text": self._sample_text,
                       "payload_inline": self._payload_inline, "query_attrs": self._query_attrs}
            answer = answers.get(content["type"])
            if answer is not None:
                self._reply(content, answer)

    def _follow_while_shown(self) -> bool:
        """Follow the folder (:meth:`follow`, :meth:`live`) only while a view shows it,
        and say whether one does: a re-run cell's widget stays in the kernel, and so
        does one whose page was reloaded or closed, and either would read for ever.
        Reading pauses once no view that opened is drawn (closed, or not heard from:
        ``view.presence``) and goes on when one is again; a widget no view ever opened
        (used from code) keeps reading. Called on each view message and on each look,
        so that views that went without a word are noticed too."""
        with self._following:
            shown = self._views.shown(self.view_alive_seconds)
            for follower in (self._poller, self._live):
                if follower is None:
                    continue
                if shown:
                    follower.resume()
                else:
                    follower.pause()
            return shown

    def _reply(self, content: dict[str, Any],
               answer: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        """Send ``answer(content)`` under the request's type, ``req`` and the keys the
        contract says its reply repeats (``REQUEST_ECHOES``).

        A bad request gets a reply with an ``error`` instead: an exception here would
        break the kernel's comm, and the front end would wait for nothing.
        """
        echoed = REQUEST_ECHOES[content["type"]]
        reply: dict[str, Any] = {"type": content["type"], "req": content.get("req"),
                                 **{key: content.get(key) for key in echoed}}
        try:
            reply.update(answer(content))
        except Exception as exc:
            _log.debug("%s request failed: %r", content["type"], content, exc_info=True)
            reply["error"] = f"{type(exc).__name__}: {exc}"
        self.send(reply)

    def _attrs(self, content: dict[str, Any]) -> dict[str, Any]:
        """Details of payload span or event ``index`` (see ``details.span_detail``);
        ValueError for a ``kind`` that is neither (the reply says so)."""
        kind = content.get("kind")
        if kind not in ("span", "event"):
            raise ValueError(f"kind must be 'span' or 'event', not {kind!r}")
        if self._live is not None:
            return {"detail": self._live.session.detail(kind, int(content["index"]))}
        view = self._view  # then the frames: a newer view's rows are not in older frames
        frames = self._frames
        _check_shown(view, content)
        frame_index = self._frame_index(kind, int(content["index"]), view)
        return {"detail": (span_detail if kind == "span" else event_detail)(frames, frame_index)}

    def _payload_inline(self, _content: dict[str, Any]) -> dict[str, Any]:
        """The payload shown, each buffer as base64 text, for a front end whose binary
        buffers were lost on the way (Colab's widget manager can drop them). Text, since
        the binary buffers of this reply could be lost just the same; the whole payload,
        so a reply that crosses a newer ``show()`` is still one consistent payload."""
        payload = self._view.payload
        buffers = {name: base64.b64encode(data).decode("ascii")
                   for name, data in payload["buffers"].items()}
        return {"payload": {**payload, "buffers": buffers}}

    def _sample_text(self, content: dict[str, Any]) -> dict[str, Any]:
        """The whole text ``field`` of payload sample ``sample`` (see ``details.sample_text``)."""
        view = self._view  # then the frames: a newer view's rows are not in older frames
        frames = self._frames
        _check_shown(view, content)
        rows = view.sample_rows
        position = content.get("sample")
        if type(position) is not int or not 0 <= position < len(rows):
            raise IndexError("no such sample in this view")
        return sample_text(frames, int(rows[position]), content.get("field"))

    def _query_attrs(self, content: dict[str, Any]) -> dict[str, Any]:
        """Whether the filter's attribute terms all hold, per payload span and event, as
        bitmaps (numpy ``packbits``, little bit order) in base64: the front end cannot
        see attributes, so it asks, and evaluates the other terms itself.

        ``follow()``'s thread may swap the frames and view meanwhile: read once, the
        view first (new frames still hold an older view's rows, not the reverse), and
        refuse a request made for another view than this one."""
        if self._live is not None:
            raise ValueError("a live view answers attribute terms once it shows the dump")
        view = self._view
        frames = self._frames
        terms = check_terms(content.get("terms"))
        _check_shown(view, content)
        spans, events = attr_masks(frames, terms, view.span_index, view.event_index)
        return {"n_spans": len(spans), "n_events": len(events),
                "spans": _bitmap(spans), "events": _bitmap(events)}


def _check_shown(view: EncodedView, content: dict[str, Any]) -> None:
    """ValueError when ``content`` names a view (``meta.view_id``) other than ``view``:
    its payload indices are another payload's, and ``show()`` may have swapped the view
    after the request was made. A request naming none is answered (a page's own)."""
    wanted = content.get("view")
    if wanted is not None and wanted != view.payload["meta"].get("view_id"):
        raise ValueError(f"view {wanted!r} is no longer shown")


def _bitmap(mask: Any) -> str:
    return base64.b64encode(np.packbits(mask, bitorder="little").tobytes()).decode("ascii")
