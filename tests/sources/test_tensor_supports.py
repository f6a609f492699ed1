"""Both tensor supports serve exactly the rebuild globals of ``TENSOR_REBUILDERS``.

The table in :mod:`slime_trace_widget.sources.dumps.unpickler` is the one
spelling of torch's rebuild functions; a support that drifted from it would
otherwise show up only as tensors turned into placeholders in some load.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from slime_trace_widget.sources.dumps.placeholders import PlaceholderMeta
from slime_trace_widget.sources.dumps.plain_tensors import PLAIN_TENSORS
from slime_trace_widget.sources.dumps.torch_tensors import TORCH_TENSORS
from slime_trace_widget.sources.dumps.unpickler import (
    TENSOR_REBUILDERS,
    LoadSession,
    TensorSupport,
)

SUPPORTS = pytest.mark.parametrize("support", [PLAIN_TENSORS, TORCH_TENSORS],
                                   ids=["plain", "torch"])


@SUPPORTS
def test_support_serves_exactly_the_table_roles(support: TensorSupport) -> None:
    assert support.rebuilders(LoadSession(support)).keys() == TENSOR_REBUILDERS.keys()


@SUPPORTS
def test_every_rebuild_global_resolves_to_the_support_function(support: TensorSupport) -> None:
    session = LoadSession(support)
    # Each call makes new closures, so a rebuilder is told apart by its code.
    expected = {role: rebuild.__code__ for role, rebuild in support.rebuilders(session).items()}
    for role, (module, name) in TENSOR_REBUILDERS.items():
        resolved = session.resolve(module, name)
        assert not isinstance(resolved, PlaceholderMeta), (module, name)
        assert resolved.__code__ is expected[role], (role, module, name)
    assert not session.blocked


class _RolesChanged:
    """A support whose rebuilders are another's, passed through ``change``."""

    def __init__(self, support: TensorSupport,
                 change: Callable[[dict[str, Callable]], dict[str, Callable]]) -> None:
        self.support = support
        self.change = change
        self.globals = support.globals
        self.data_only = support.data_only

    def rebuilders(self, session: LoadSession) -> dict[str, Callable]:
        return self.change(self.support.rebuilders(session))

    def wrappers(self, session: LoadSession) -> dict[tuple[str, str], Callable]:
        return self.support.wrappers(session)


def _without_from_type(rebuilders: dict[str, Callable]) -> dict[str, Callable]:
    return {role: rebuild for role, rebuild in rebuilders.items() if role != "from_type"}


def _with_tensor_v4(rebuilders: dict[str, Callable]) -> dict[str, Callable]:
    return {**rebuilders, "tensor_v4": rebuilders["tensor_v3"]}


@SUPPORTS
@pytest.mark.parametrize(("change", "message"), [
    (_without_from_type, r"missing roles \['from_type'\]"),
    (_with_tensor_v4, r"roles not in TENSOR_REBUILDERS \['tensor_v4'\]"),
], ids=["missing", "unknown"])
def test_a_support_off_the_table_is_refused_when_the_session_is_made(
        support: TensorSupport, change: Callable, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        LoadSession(_RolesChanged(support, change))
