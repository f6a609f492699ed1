"""Option types that refuse bad values while parsing (``cli/arguments``)."""

from __future__ import annotations

import argparse

import pytest

from slime_trace_widget.cli.arguments import seconds


def test_seconds_lie_above_0_and_below_a_day() -> None:
    """As the old ``collect`` option type had it: 0 < value < 86,400."""
    assert seconds("0.5") == 0.5 and seconds("86399.5") == 86399.5
    for text in ("0", "86400", "-1", "nan", "inf", "soon"):
        with pytest.raises(argparse.ArgumentTypeError, match="seconds above 0"):
            seconds(text)
