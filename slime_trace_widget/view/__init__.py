"""Show the frames: the notebook widget, the payload the renderer reads, the run view.

``payload`` encodes frames into the binary payload (its contract,
``payload_contract.json``, is shared with ``js/src/data/decode.js``), ``details``
says what the details panel shows, ``widget`` is :class:`TraceTimeline`,
``run_view`` the run's table of dumps, and ``page/`` the standalone HTML page.
The bundled front end is in ``static/``.
"""
