"""``python -m slime_trace_widget`` is the ``slime-trace-viewer`` command."""

from .cli import console

console()
