"""Out to other tools: Perfetto's trace JSON, hive-partitioned Parquet, OTLP to the
OpenTelemetry backends teams run, and trends to TensorBoard, MLflow and W&B.

Exporters are functions of frames (``to_parquet(frames, path)``,
``to_otlp(frames, url)``): they import the data model, which never imports them
back. ``run_exports`` sends a run dataset out a little more on each ``convert``.
"""
