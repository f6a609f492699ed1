"""The live parser's attribute cache stays small whatever attributes arrive."""

from __future__ import annotations

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from slime_trace_widget.sources.live.lean_logs import AttributeCache


def _raw(key: str, text: str) -> bytes:
    return KeyValue(key=key, value=AnyValue(string_value=text)).SerializeToString()


def test_short_attributes_are_decoded_once_long_ones_each_time() -> None:
    calls: list[str] = []

    def decode(pair: KeyValue) -> tuple[str, str]:
        calls.append(pair.key)
        return pair.key, pair.value.string_value

    cache = AttributeCache(decode, "slime.seq", "seq")
    short = _raw("slime.record", "span_start")
    long = _raw("app.payload", "x" * (AttributeCache.LARGEST_KEPT + 1))
    for _ in range(3):
        assert cache.meaning(short) == ("slime.record", "span_start")
        assert cache.meaning(long) == ("app.payload", "x" * (AttributeCache.LARGEST_KEPT + 1))
    # the short one is remembered; a long (say a foreign 100 KB) one is never kept
    assert calls == ["slime.record", "app.payload", "app.payload", "app.payload"]
