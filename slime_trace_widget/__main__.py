"""``python -m slime_trace_widget`` is the ``slime-trace-viewer`` command."""

from .cli import main

raise SystemExit(main())
