"""The payload's meta: the loader's warnings, status codes past what ``smp_status``
holds, and dump file names that are not UTF-8; and lanes past what ``span_lane`` holds."""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
import struct
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from slime_trace_widget.sources.dumps import save_dump
from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.view.page.htmlpage import MAGIC
from slime_trace_widget.view.page.snapshot import data_blocks, write_snapshot
from slime_trace_widget.view.payload import LABEL_CHARS, OVERFLOW_ENTRIES, encode
from tests.view.test_payload import decode
from tests.view.test_payload_times import EPOCH, span, traced_sample

FIXTURES = Path(__file__).parents[1] / "fixtures"
#: A file name that is not UTF-8, as a dump written by another tool may have.
NOT_UTF8 = os.fsdecode(b"rollout_\xff\xfe.pt")


def repaired_dump(path: Path) -> Path:
    """Samples the loader has to repair or skip records of: an end before its start,
    span ids used twice, timestamps that are not numbers, a span its own parent."""
    samples = [
        traced_sample(0, span("neg", EPOCH + 5, EPOCH + 2, "a")),
        traced_sample(1, [*span("dup", EPOCH, EPOCH + 1, "d"),
                          *span("dup2", EPOCH + 2, EPOCH + 6, "d")]),
        traced_sample(2, [{"type": "span_start", "name": "nan", "ts": float("nan"),
                           "span_id": "n"},
                          {"type": "span_end", "name": "inf", "ts": float("inf"),
                           "span_id": "n"}]),
        traced_sample(3, [{"type": "span_start", "name": "self", "ts": EPOCH, "span_id": "z",
                           "parent_span_id": "z"},
                          {"type": "span_end", "name": "self", "ts": EPOCH + 2, "span_id": "z"}]),
    ]
    save_dump(path, samples, rollout_id=3)
    return path


def test_the_loader_warnings_travel_in_the_meta(tmp_path: Path) -> None:
    frames = load_frames(repaired_dump(tmp_path / "edge.pt"))
    assert {"end_before_start", "duplicate_span_id", "bad_ts", "parent_cycle"} <= set(
        frames.warnings)
    warnings = encode(frames).payload["meta"]["warnings"]
    assert warnings == dict(frames.warnings)
    assert list(warnings.values()) == sorted(warnings.values(), reverse=True), "most first"
    json.dumps(warnings, allow_nan=False)


def test_a_clean_dump_has_no_warnings_in_its_meta() -> None:
    frames = load_frames(FIXTURES / "small.pt")
    assert not frames.warnings
    assert "warnings" not in encode(frames).payload["meta"]


def test_warning_kinds_are_cut_and_cleaned_like_other_dump_text() -> None:
    frames = load_frames(FIXTURES / "small.pt")
    long_kind, broken_kind = "k" * 5000, "bad\ud800kind"
    noisy = replace(frames, warnings=Counter({long_kind: 2, broken_kind: 1, "never": 0}))
    warnings = encode(noisy).payload["meta"]["warnings"]
    assert len(warnings) == 2
    cut, cleaned = list(warnings)
    assert cut.startswith("k" * LABEL_CHARS) and "truncated" in cut and len(cut) < 300
    assert cleaned == "bad\ufffdkind"
    json.dumps(warnings, ensure_ascii=False).encode()  # UTF-8 encodable


# --------------------------------------------------------------------------- statuses


def many_statuses_dump(path: Path, count: int, *, unset: int = -1) -> Path:
    """``count`` samples, each of its own status but sample ``unset``, which has none."""
    samples = []
    for i in range(count):
        sample = traced_sample(i, span("s", EPOCH + i, EPOCH + i + 1, "a"))
        if i != unset:
            sample["status"] = f"failed: error #{i:03d}"
        else:
            del sample["status"]
        samples.append(sample)
    save_dump(path, samples, rollout_id=0)
    return path


def test_statuses_past_the_code_cap_share_an_overflow_entry(tmp_path: Path) -> None:
    frames = load_frames(many_statuses_dump(tmp_path / "status.pt", 300))
    view = encode(frames)
    statuses = view.payload["meta"]["statuses"]
    codes = decode(view.payload)["smp_status"]
    true = frames.samples["status"].iloc[view.sample_rows].astype(str).tolist()
    shown = [statuses[code] for code in codes]
    overflow = OVERFLOW_ENTRIES["statuses"]
    assert len(statuses) == 256 and statuses[-1] == overflow and statuses[-2] == ""
    mislabelled = [(t, s) for t, s in zip(true, shown, strict=True) if s not in (t, overflow)]
    assert not mislabelled, mislabelled[:3]
    assert shown.count(overflow) == 300 - 254
    # each status shown names exactly one sample: a filter by it finds only that one
    named = Counter(s for s in shown if s != overflow)
    assert set(named.values()) == {1}


def test_a_missing_status_codes_to_the_empty_entry_past_the_cap(tmp_path: Path) -> None:
    frames = load_frames(many_statuses_dump(tmp_path / "status.pt", 301, unset=0))
    assert frames.samples["status"].isna().iloc[0]
    view = encode(frames)
    statuses = view.payload["meta"]["statuses"]
    assert statuses[decode(view.payload)["smp_status"][0]] == ""


def test_statuses_within_the_cap_keep_their_own_codes() -> None:
    frames = load_frames(FIXTURES / "small.pt")
    view = encode(frames)
    statuses = view.payload["meta"]["statuses"]
    assert OVERFLOW_ENTRIES["statuses"] not in statuses and statuses[-1] == ""
    shown = [statuses[c] for c in decode(view.payload)["smp_status"]]
    assert shown == frames.samples["status"].iloc[view.sample_rows].astype(str).tolist()


# --------------------------------------------------------------------------- file names


def _data_header(html: str) -> dict[str, Any]:
    """The header of a page's data block (``STW1 | u32 | header JSON | bytes``)."""
    match = re.search(r'<script type="text/plain" id="stw-data">(.*?)</script>', html, re.S)
    assert match, "no data block"
    raw = gzip.decompress(base64.b64decode(match.group(1)))
    assert raw.startswith(MAGIC)
    (length,) = struct.unpack("<I", raw[len(MAGIC):len(MAGIC) + 4])
    return json.loads(raw[len(MAGIC) + 4:len(MAGIC) + 4 + length].decode("utf-8"))


def test_a_dump_name_that_is_not_utf8_makes_a_page(tmp_path: Path) -> None:
    path = tmp_path / NOT_UTF8
    save_dump(path, [traced_sample(0, span("s", EPOCH, EPOCH + 1, "a"))], rollout_id=None)
    frames = load_frames(path)
    meta = encode(frames).payload["meta"]
    assert meta["title"] == meta["rollouts"][0] == "rollout_\ufffd\ufffd.pt"
    html = write_snapshot(tmp_path / "page.html", frames).read_text(encoding="utf-8")
    assert "<title>rollout_\ufffd\ufffd.pt</title>" in html
    assert _data_header(html)["payload"]["meta"]["title"] == "rollout_\ufffd\ufffd.pt"


def test_a_source_note_naming_a_path_that_is_not_utf8_makes_blocks(tmp_path: Path) -> None:
    """The CLI notes its inputs' paths in the data block (``cli.cache.source_note``)."""
    frames = load_frames(FIXTURES / "small.pt")
    path = str(tmp_path / NOT_UTF8)
    blocks = data_blocks(frames, encode(frames), source={"inputs": [[path, 1, 2]]})
    noted = blocks.header()["source"]["inputs"][0][0]
    assert noted.endswith("rollout_\ufffd\ufffd.pt")


def test_a_sample_deeper_than_the_packed_lanes_has_no_empty_lane(tmp_path: Path) -> None:
    """Spans nested 300 deep: lanes past 255 share the last one, and the sample's lane
    count stops there, so its row draws no lane that nothing is on."""
    depth = 300
    pairs = [span(f"s{level}", EPOCH + level * 0.01, EPOCH + 10 - level * 0.01, f"id{level}")
             for level in range(depth)]
    starts = [{**start, **({"parent_span_id": f"id{level - 1}"} if level else {})}
              for level, (start, _) in enumerate(pairs)]
    ends = [end for _, end in reversed(pairs)]
    save_dump(tmp_path / "deep.pt", [traced_sample(0, starts + ends)], rollout_id=0)
    frames = load_frames(tmp_path / "deep.pt")
    assert frames.spans["lane"].max() == depth - 1
    columns = decode(encode(frames).payload)
    assert columns["span_lane"].max() == 255
    assert columns["smp_lanes"].tolist() == [256]
