"""Test and benchmark support that is not part of the installed package: drivers of other
projects' real code (SGLang's tracing and metrics) for the tests to run against."""
