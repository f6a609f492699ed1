"""Out to other tools: Perfetto's trace JSON and hive-partitioned Parquet tables.

Exporters read frames and import nothing of the data model's own code, so the
model can offer them as methods (``TraceFrames.to_parquet``) without a circle.
"""
