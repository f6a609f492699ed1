"""The files the command writes: their names (each is written whole or not at all,
by :mod:`slime_trace_widget.whole_files`)."""

from __future__ import annotations

#: The page beside the dumps: ``rollout_0.trace_timeline_viewer.html``, as slime's viewer.
HTML_SUFFIX = ".trace_timeline_viewer.html"

