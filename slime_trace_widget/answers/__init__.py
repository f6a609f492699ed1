"""Answers from frames as DataFrames: statistics, critical path, flame, diff, trends.

``stats``, ``critical``, ``flame``, ``diff`` and ``trends`` (a run dataset, in
DuckDB) do the work and ``analysis`` gathers them for users; ``query`` is the
filter language, ``links`` the links between rows, ``plots`` matplotlib views.
"""
