"""The engines' own view: SGLang's request traces (OTLP) and its load (Prometheus), stored.

``receiver`` speaks OTLP/HTTP and OTLP/gRPC and runs the command (``slime-trace-viewer
collect DIR``), ``otlp`` turns a request into rows, ``store`` keeps spans durably in
Parquet files named by the time they cover and reads a window back
(``load_engine_traces``). ``scrape`` polls each engine's ``/metrics`` (``--scrape
URL``), ``prometheus`` parses the text format, bounded, and ``load_store`` keeps the
samples and reads a window back (``load_engine_load``). Both stores are a ``durable``
store (write-ahead file, rolls, recovery) behind a ``group_commit`` writer. ``window``
reads what frames need of both for their time and joins the requests under the spans
that made them: ``requests`` reads them (decode loops folded by ``stretches``),
``match`` finds their spans (a reused rid's by the host clocks ``skew``
estimates), ``join`` attaches them (``docs/engine-join.md``), and
``beyond`` lists those a host's clock put outside the window. The
load as named tracks is the model's (:mod:`slime_trace_widget.frames.engine_load`).
Reading needs pyarrow only; receiving needs the ``otel`` extra.
"""
