"""The package's HTTP servers (page, live page, receiver) share ``listening.HttpServer``."""

from __future__ import annotations

import http.server

from slime_trace_widget.sources.listening import HttpServer


def test_a_client_gone_mid_answer_is_not_reported_as_an_error(capsys) -> None:
    # A reload or a closed tab during a page's download: no traceback on the terminal.
    server = HttpServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    try:
        for error in (ConnectionResetError(104, "reset"), BrokenPipeError(32, "pipe"),
                      ValueError("a handler's own bug")):
            try:
                raise error
            except Exception:
                server.handle_error(None, ("127.0.0.1", 1))
    finally:
        server.server_close()
    reported = capsys.readouterr().err
    assert "ValueError: a handler's own bug" in reported
    assert "ConnectionResetError" not in reported and "BrokenPipeError" not in reported
