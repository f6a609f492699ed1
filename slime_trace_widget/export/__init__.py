"""Out to other tools: Perfetto's trace JSON, hive-partitioned Parquet, OTLP to the
OpenTelemetry backends teams run, and trends to TensorBoard, MLflow and W&B.

Exporters read frames and import nothing of the data model's own code, so the
model can offer them as methods (``TraceFrames.to_parquet``, ``TraceFrames.to_otlp``)
without a circle. ``run_exports`` sends a run dataset out a little more on each
``convert``.
"""
