"""Test and benchmark support that is not part of the installed package (the wheel test
checks): the Chromium and JupyterLab driver (``browser``), SGLang-shaped engine traces
(``engine_traces``), heavy and users'-size inputs (``heavy_inputs``, ``demo_shapes``),
and drivers of other projects' real code (SGLang's tracing and metrics) and of the
receiver for the tests to run against."""
