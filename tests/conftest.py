"""Settings for the whole test session."""

from __future__ import annotations

import signal

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Let Ctrl-C through, as a terminal does. Several tests press it (SIGINT) on the
    CLI's server or on a load; a session started from a background job of a shell
    inherits SIGINT ignored, every process it starts keeps it ignored, and those
    presses would do nothing. Python's own handler here makes it default again in
    each child."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
