"""Text columns as codes into their distinct values, the way flattening keeps names.

Span, event and segment names repeat thousands of times over a few dozen
values; flattening works on the codes (PD lanes, lanes, parents' names) and
the core tables store them dictionary-encoded, without pandas.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["Names"]


class Names(NamedTuple):
    """Dictionary-encoded text: a code per value (-1 missing) into ``categories``."""

    codes: np.ndarray
    categories: list[str]

    def code_of(self, name: str) -> int | None:
        """The code of ``name``, None when no value has it."""
        try:
            return self.categories.index(name)
        except ValueError:
            return None
