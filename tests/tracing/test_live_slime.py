"""The live stream patches slime's own recording function: every record slime's
``trace_utils`` writes goes through ``_append_event``, so a wrapper there sees them all.

slime itself is not installed here; the stand-in package written below has the same
module paths, the same ``_append_event`` signature and the same record shape as
slime's ``slime/observability/trace_utils.py`` (checked against slime's source at
624b824a: keyword-only ``kind, name, timestamp, attrs, span_id, parent_span_id``; the
record's keys in the order ``type, name, ts, trace_id, sample_id, group_id, attempt``,
then ``span_id``, ``parent_span_id`` and ``attrs`` when given; its callers reach it
through the module's globals), and slime's ``slime.rollout.sample_hooks`` rollout id.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from slime_trace_widget.tracing import live

RECORDING_MODULE = '''
from dataclasses import dataclass, field

@dataclass
class TraceHandle:
    trace_id: str
    carrier: dict = field(default_factory=dict)
    sample_id: object = None
    group_id: object = None
    attempt: int = 0
    parent_span_id: object = None

def _append_event(handle, *, kind, name, timestamp, attrs=None, span_id=None,
                  parent_span_id=None):
    event = {"type": kind, "name": name, "ts": timestamp, "trace_id": handle.trace_id,
             "sample_id": handle.sample_id, "group_id": handle.group_id,
             "attempt": int(handle.carrier.get("attempt", handle.attempt))}
    if span_id is not None:
        event["span_id"] = span_id
    if parent_span_id is not None:
        event["parent_span_id"] = parent_span_id
    if attrs:
        event["attrs"] = dict(attrs)
    handle.carrier["events"].append(event)
    return event

def record_span(handle, name, start, end, span_id, attrs=None):
    """What slime's trace_span does, reduced to its two calls."""
    _append_event(handle, kind="span_start", name=name, timestamp=start, span_id=span_id,
                  parent_span_id=handle.parent_span_id)
    _append_event(handle, kind="span_end", name=name, timestamp=end, span_id=span_id,
                  attrs=attrs)

def record_event(handle, name, timestamp, attrs=None):
    _append_event(handle, kind="event", name=name, timestamp=timestamp, attrs=attrs)

def broken(handle):
    return _append_event(handle, kind="event", name="x", timestamp=0.0)
'''

SAMPLE_HOOKS = '''
_current_rollout_id = None

def set_current_rollout_id(rollout_id):
    global _current_rollout_id
    _current_rollout_id = rollout_id
'''


@pytest.fixture
def fake_slime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """slime's module paths, holding the stand-in above; removed again afterwards."""
    files = {
        "slime/__init__.py": "",
        "slime/observability/__init__.py": "",
        "slime/observability/trace_utils.py": RECORDING_MODULE,
        "slime/utils/__init__.py": "",
        "slime/utils/trace_utils.py": RECORDING_MODULE,
        "slime/rollout/__init__.py": "",
        "slime/rollout/sample_hooks.py": SAMPLE_HOOKS,
    }
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv(live.ENV_VAR, raising=False)
    yield tmp_path
    stream = live.current_stream()
    if stream is not None:
        stream.close(timeout=1.0)
    live.set_rollout(None)
    for name in [name for name in sys.modules if name == "slime" or name.startswith("slime.")]:
        del sys.modules[name]


def test_every_record_slime_writes_is_streamed(fake_slime: Path, sink) -> None:
    from slime.observability import trace_utils
    from slime.rollout.sample_hooks import set_current_rollout_id

    stream = live.install(sink.endpoint)
    assert stream.slime_modules == ("slime.observability.trace_utils", "slime.utils.trace_utils")
    carrier = {"trace_id": "a" * 32, "events": [], "attempt": 0}
    handle = trace_utils.TraceHandle("a" * 32, carrier, sample_id=3, group_id=1)
    set_current_rollout_id(7)  # as slime's RolloutManager.generate does
    trace_utils.record_span(handle, "sglang_generate", 10.0, 12.5, "b" * 32, {"tokens": 5})
    trace_utils.record_event(handle, "tool_result", 11.0, {"chars": 3})
    stats = stream.close()
    assert stats.sent == 3 and stats.dropped == 0
    arrived = sink.records()
    assert [body for _, body in arrived] == json.loads(json.dumps(carrier["events"]))
    assert [attrs["slime.rollout_id"] for attrs, _ in arrived] == [7, 7, 7]
    assert [attrs["slime.sample_id"] for attrs, _ in arrived] == [3, 3, 3]
    (span,) = sink.spans()
    assert span.name == "sglang_generate" and span.end_time_unix_nano == 12_500_000_000


def test_the_older_module_is_streamed_too(fake_slime: Path, sink) -> None:
    from slime.utils import trace_utils

    stream = live.install(sink.endpoint)
    carrier = {"trace_id": "c" * 32, "events": []}
    trace_utils.record_event(trace_utils.TraceHandle("c" * 32, carrier), "old", 1.0)
    stream.close()
    assert [body["name"] for _, body in sink.records()] == ["old"]


def test_set_rollout_wins_over_slimes(fake_slime: Path, sink) -> None:
    from slime.observability import trace_utils
    from slime.rollout.sample_hooks import set_current_rollout_id

    stream = live.install(sink.endpoint)
    set_current_rollout_id(7)
    live.set_rollout(9)
    carrier = {"trace_id": "d" * 32, "events": []}
    trace_utils.record_event(trace_utils.TraceHandle("d" * 32, carrier), "e", 1.0)
    stream.close()
    assert [attrs["slime.rollout_id"] for attrs, _ in sink.records()] == [9]


def test_patching_twice_wraps_once_and_a_closed_stream_passes_through(
        fake_slime: Path, sink) -> None:
    from slime.observability import trace_utils

    first = live.install(sink.endpoint)
    wrapper = trace_utils._append_event
    first.close()
    second = live.install(sink.endpoint)
    assert trace_utils._append_event is wrapper and second is not first
    second.close()
    carrier = {"trace_id": "e" * 32, "events": []}
    trace_utils.record_event(trace_utils.TraceHandle("e" * 32, carrier), "after", 1.0)
    assert len(carrier["events"]) == 1 and second.stats().seq == 0


def test_slimes_own_failure_reaches_slime_unchanged(fake_slime: Path, sink) -> None:
    """slime's callers catch what ``_append_event`` raises: the wrapper adds nothing."""
    from slime.observability import trace_utils

    stream = live.install(sink.endpoint)
    with pytest.raises(KeyError):
        trace_utils.broken(trace_utils.TraceHandle("f" * 32, {}))
    assert stream.close().seq == 0


def test_slime_left_alone_when_asked(fake_slime: Path, sink) -> None:
    from slime.observability import trace_utils

    original = trace_utils._append_event
    stream = live.install(sink.endpoint, slime=False)
    assert stream.slime_modules == () and trace_utils._append_event is original
