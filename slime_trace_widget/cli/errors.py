"""The one kind of failure the command reports without a traceback."""

from __future__ import annotations


class CliError(Exception):
    """A problem to report in one line (no traceback) with a non-zero exit."""
