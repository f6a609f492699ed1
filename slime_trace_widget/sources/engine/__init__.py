"""The engines' own request traces: SGLang's spans, received over OTLP and stored.

``receiver`` speaks OTLP/HTTP and OTLP/gRPC (``slime-trace-viewer collect DIR``),
``otlp`` turns a request into rows, ``store`` keeps them durably in Parquet files
named by the time they cover and reads a window back (``load_engine_traces``).
Joining them into a dump's samples is the flatten stage's
(:mod:`slime_trace_widget.frames.engine`). Reading needs pyarrow only; receiving
needs the ``otel`` extra.
"""
