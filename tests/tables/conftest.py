"""The tables tests' fixtures: each pass-level promise checked by the compiled passes
(where they were built) and by the Python passes alone."""

from __future__ import annotations

import pytest

from slime_trace_widget.tables import attr_grouping, attr_python, carrier

#: The compiled passes as imported; None where the package was built without them.
NATIVE = (carrier._native_records, attr_grouping._native_columns, attr_python._native_dicts)


@pytest.fixture(params=["native", "python"])
def passes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test with the compiled passes, then with the Python passes only."""
    if request.param == "native":
        if None in NATIVE:
            pytest.skip("built without a C compiler")
    else:
        monkeypatch.setattr(carrier, "_native_records", None)
        monkeypatch.setattr(attr_grouping, "_native_columns", None)
        monkeypatch.setattr(attr_python, "_native_dicts", None)
    return request.param
