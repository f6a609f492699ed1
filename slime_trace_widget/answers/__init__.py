"""Answers from frames as DataFrames: statistics, critical path, flame, diff, trends,
and what a rollout's time bought (the signal ledger and the tail's price).

``stats``, ``critical``, ``flame``, ``diff``, ``ledger``, ``tail`` and ``trends`` (a
run dataset, in DuckDB) do the work and ``slime_trace_widget.analysis`` (on top)
gathers them for users; ``query`` is the filter language, ``links`` the links
between rows, ``plots`` matplotlib views.
"""

from .ledger import FATES, ledger_kinds, sample_fates, signal_ledger
from .tail import finish_order, tail_price

__all__ = ["FATES", "finish_order", "ledger_kinds", "sample_fates", "signal_ledger",
           "tail_price"]
