"""Flatten: raw trace records into the core Arrow tables, with no pandas.

``carrier`` walks each sample's records once (in C where ``_native_records`` was
compiled), ``samples`` reads the per-sample
fields, ``pd_lanes`` derives the PD phase spans, ``span_geometry`` the depths,
display ends and lanes, ``attr_columns`` the attributes as typed columns (laid out
by ``attr_grouping``, in C where ``_native_columns`` was compiled, and made dicts
again, in C where ``_native_dicts`` was); ``build`` puts
them together as the tables of ``core_tables``, whose ``CORE_SCHEMA`` is the one
definition of their columns. A worker process imports this package alone: nothing
here imports pandas or any layer above (``docs/architecture.md``).
"""
