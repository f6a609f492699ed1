"""Helpers for the project's own tests and benchmarks (not part of the API):
driving Chromium and JupyterLab (``browser``), and building large or hostile
dumps (``heavy_inputs``). Playwright and JupyterLab come with the ``test`` extra."""
