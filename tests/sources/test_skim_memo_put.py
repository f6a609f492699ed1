"""A cut token list that the pickle memoises again, then fetches elsewhere (sources/dumps/skim.py).

The skim cuts a list's body and swaps in a marker; the cut holds only when no
other object can hold the cut list. Hand-written pickles memoise a cut list a
second time (after its body, or after a push and a POP that leave it on top of
the stack again) and fetch it into a sample's metadata: the result must be the
plain read's, never the marker.
"""

from __future__ import annotations

import pickle
import struct
import zipfile
from pathlib import Path

import pytest

from slime_trace_widget.sources.dumps import files
from slime_trace_widget.sources.dumps.files import load_dump_file
from slime_trace_widget.sources.dumps.skim import SKIPPED_KEYS, drop_markers, skim_pickle

_SAMPLES = 120
_FETCHED = 60  # the sample whose token list is memoised again
_LENGTH = 300


def _text(value: str) -> bytes:
    encoded = value.encode()
    return b"X" + struct.pack("<I", len(encoded)) + encoded


def _int(value: int) -> bytes:
    return b"J" + struct.pack("<i", value)


def _pickle(after_body: bytes, fetch: bytes) -> bytes:
    """A protocol 2 dump pickle without memo, written by hand: ``after_body`` follows the
    body of sample 60's token list, and the last sample's metadata holds ``fetch``
    under ``toks``."""
    parts = [b"\x80\x02}(" + _text("rollout_id") + b"K\x07" + _text("samples") + b"]("]
    for index in range(_SAMPLES):
        tokens = range(1000 * index, 1000 * index + _LENGTH)
        sample = (b"}(" + _text("index") + _int(index) + _text("tokens") + b"](" +
                  b"".join(map(_int, tokens)) + b"e")
        if index == _FETCHED:
            sample += after_body
        metadata = b"}(" + _text("toks") + fetch + b"u" if index == _SAMPLES - 1 else b"}"
        parts.append(sample + _text("metadata") + metadata + b"u")
    return b"".join(parts) + b"eu."


#: (what follows the body, the GET of it): a BINPUT right after the body, a LONG_BINPUT
#: there, and a BINPUT after a push and a POP that bring the list back on top.
_ALIASES = {
    "binput_after_body": (b"q\x03", b"h\x03"),
    "long_binput_after_body": (b"r" + struct.pack("<I", 70000), b"j" + struct.pack("<I", 70000)),
    "binput_after_push_pop": (b"K\x01" + b"0" + b"q\x03", b"h\x03"),
}


def _without_cut(samples: list) -> list:
    return [{key: value for key, value in sample.items() if key not in SKIPPED_KEYS}
            for sample in samples]


@pytest.mark.parametrize("alias", sorted(_ALIASES))
def test_a_cut_list_memoised_again_never_shows_its_marker(alias: str) -> None:
    data = _pickle(*_ALIASES[alias])
    plain = pickle.loads(data)
    fetched = plain["samples"][-1]["metadata"]["toks"]
    assert fetched == list(range(1000 * _FETCHED, 1000 * _FETCHED + _LENGTH))
    skimmed = skim_pickle(data)
    assert skimmed is not None and skimmed.cuts > _SAMPLES // 2  # the skim did cut
    read = pickle.loads(skimmed.data)
    if drop_markers(read, skimmed):
        assert _without_cut(read["samples"]) == _without_cut(plain["samples"])
    else:
        assert alias == "binput_after_push_pop"  # counted: the cut list had two holders


def test_a_list_memoised_again_right_after_its_body_is_left_in() -> None:
    """The walk sees the PUT after the body and does not cut that list: the others
    stay cut, and the cut holds."""
    data = _pickle(*_ALIASES["binput_after_body"])
    skimmed = skim_pickle(data)
    assert skimmed is not None
    read = pickle.loads(skimmed.data)
    assert drop_markers(read, skimmed)
    samples = read["samples"]
    assert samples[_FETCHED]["tokens"] == samples[-1]["metadata"]["toks"]
    assert "tokens" not in samples[_FETCHED + 1]


def test_a_cut_list_held_twice_is_refused_by_its_reference_count() -> None:
    """Nothing in the opcodes right after the body gives it away (a push and a POP, then
    the PUT): the reference count of the cut list does."""
    data = _pickle(*_ALIASES["binput_after_push_pop"])
    skimmed = skim_pickle(data)
    assert skimmed is not None
    read = pickle.loads(skimmed.data)
    assert read["samples"][-1]["metadata"]["toks"] == [skimmed.marker]
    assert not drop_markers(read, skimmed)
    assert read["samples"][_FETCHED]["tokens"] == [skimmed.marker]  # left untouched


def test_a_sample_listed_twice_does_not_count_its_cut_twice() -> None:
    """Every cut must be its own list: a sample fetched twice into the samples holds one."""
    data = _pickle(b"", b"N")
    skimmed = skim_pickle(data)
    assert skimmed is not None
    read = pickle.loads(skimmed.data)
    samples = read["samples"]
    cut = next(index for index, sample in enumerate(samples) if "tokens" in sample
               and sample["tokens"] == [skimmed.marker])
    samples.append(samples[cut])  # as a GET of the sample dict would
    skimmed.cuts += 1             # and a second cut hidden where no key looks
    assert not drop_markers(read, skimmed)


@pytest.mark.parametrize("pipelined", [False, True])
@pytest.mark.parametrize("alias", sorted(_ALIASES))
def test_frames_reads_of_a_memoised_cut_equal_the_plain_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, alias: str, pipelined: bool) -> None:
    """Through the loader, skimmed here or in a fork: the frames read gives the fetched
    list as the plain read does."""
    monkeypatch.setattr(files, "SKIM_MIN_BYTES", 0)
    path = tmp_path / "rollout_7.pt"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", _pickle(*_ALIASES[alias]))
        archive.writestr("archive/byteorder", b"little")
        archive.writestr("archive/version", b"3\n")
    plain = load_dump_file(str(path), "plain")
    frames = load_dump_file(str(path), "frames", pipelined=pipelined)
    wanted = list(range(1000 * _FETCHED, 1000 * _FETCHED + _LENGTH))
    assert plain.samples[-1]["metadata"]["toks"] == wanted
    assert frames.samples[-1]["metadata"]["toks"] == wanted
    assert _without_cut(frames.samples) == _without_cut(plain.samples)
