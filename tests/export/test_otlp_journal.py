"""The journal of a dump's OTLP requests, read back as another run would read it:
taken, refused and unanswered requests, a record cut short by a crash, a foreign,
damaged or borrowed file, and two exports of one journal at once."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from slime_trace_widget.export.otlp_journal import MAGIC, SpanJournal

#: The identity hash of a journal named by no identity.
IDENTITY = hashlib.blake2b(b"", digest_size=16).digest()
#: The bytes of one ``S`` record of five ids and of a ``T`` record.
SENDING_FIVE, TAKEN = 1 + 4 + 4 + 5 * 8 + 4, 1 + 4


def ids(*numbers: int) -> list[bytes]:
    return [number.to_bytes(8, "little") for number in numbers]


def known(journal: SpanJournal, span_ids: list[bytes]) -> tuple[list[bool], list[bool]]:
    confirmed, uncertain = journal.known(span_ids)
    return confirmed.tolist(), uncertain.tolist()


def test_taken_refused_and_unanswered_requests_read_back(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "dump.spans"
    journal = SpanJournal(path)
    journal.sending(ids(1, 2))
    journal.taken()
    journal.sending(ids(3, 4))
    journal.not_taken()
    journal.sending(ids(5))  # no answer recorded: the process stopped
    journal.close()

    again = SpanJournal(path)
    assert known(again, ids(1, 2, 3, 4, 5, 6)) == (
        [True, True, False, False, False, False], [False, False, False, False, True, False])
    again.sending(ids(6))  # a later run: 5 stays uncertain
    again.taken()
    again.close()
    assert known(SpanJournal(path), ids(5, 6)) == ([False, True], [True, False])


def test_a_record_cut_by_a_crash_is_dropped_and_the_next_appends_read(tmp_path: Path
                                                                      ) -> None:
    path = tmp_path / "dump.spans"
    journal = SpanJournal(path)
    journal.sending(ids(1))
    journal.taken()
    journal.sending(ids(2, 3))
    journal.close()
    path.write_bytes(path.read_bytes()[:-5])  # cut inside the last record's ids

    cut = SpanJournal(path)
    assert known(cut, ids(1, 2, 3)) == ([True, False, False], [False, False, False])
    cut.sending(ids(2, 3))
    cut.taken()
    cut.close()
    assert known(SpanJournal(path), ids(1, 2, 3)) == ([True] * 3, [False] * 3)


def test_an_empty_journal_knows_nothing(tmp_path: Path) -> None:
    journal = SpanJournal(tmp_path / "absent.spans")
    confirmed, uncertain = journal.known(ids(7, 8))
    assert not np.any(confirmed) and not np.any(uncertain)
    assert not (tmp_path / "absent.spans").exists()  # made by the first request only


@pytest.mark.parametrize("raw", [b"something else", MAGIC + IDENTITY + b"X"],
                         ids=["foreign", "unknown-record"])
def test_a_foreign_or_damaged_file_is_refused_naming_it(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "dump.spans"
    path.write_bytes(raw)
    with pytest.raises(ValueError, match=str(path)):
        SpanJournal(path)


def three_taken(path: Path) -> bytes:
    """A journal at ``path`` of three requests of five spans each, all taken; its bytes."""
    journal = SpanJournal(path)
    for first in (10, 20, 30):
        journal.sending(ids(*range(first, first + 5)))
        journal.taken()
    journal.close()
    return path.read_bytes()


@pytest.mark.parametrize("offset", [
    1,                      # the first request's count
    3,                      # its count's top bytes: its end past the end of the file
    SENDING_FIVE,           # its T record turned N
    SENDING_FIVE + 2,       # the T record's CRC
    SENDING_FIVE + TAKEN + 9 + 3,  # a span id of the second request
], ids=["count", "count-top-byte", "taken-kind", "taken-crc", "a-span-id"])
def test_a_byte_flipped_in_the_middle_is_damage_not_a_cut(tmp_path: Path, offset: int
                                                          ) -> None:
    """Any single byte flipped before the last record is a one-line error naming the
    file: never read as a record cut short (which would drop the records after it),
    nor read back as other spans or answers."""
    path = tmp_path / "dump.spans"
    raw = bytearray(three_taken(path))
    raw[len(MAGIC) + len(IDENTITY) + offset] ^= 0x40 if offset == 3 else 0x01
    path.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=f"{path}: damaged at byte"):
        SpanJournal(path)


def test_a_tail_of_zero_bytes_is_dropped_as_a_cut(tmp_path: Path) -> None:
    """A power cut can leave a file's last blocks zero: read as a cut record, not damage."""
    path = tmp_path / "dump.spans"
    whole = three_taken(path)
    path.write_bytes(whole[:-TAKEN] + bytes(64))  # the last T record lost to zeros
    journal = SpanJournal(path)
    assert known(journal, ids(10, 30)) == ([True, False], [False, True])
    journal.sending(ids(40))
    journal.taken()
    journal.close()
    assert known(SpanJournal(path), ids(10, 30, 40)) == ([True, False, True],
                                                         [False, True, False])


@pytest.mark.parametrize("zeroed", [3, 40, SENDING_FIVE - 1], ids=["ids-crc", "ids", "head"])
def test_a_record_zeroed_from_inside_by_a_power_cut_is_dropped_as_a_cut(
        tmp_path: Path, zeroed: int) -> None:
    """A power cut while an ``S`` record was written (before its sync: the request never
    went out) can leave the file at its new size with the record's last ``zeroed`` bytes
    zero: that record is dropped, its spans sent by the next run, the rest read back."""
    path = tmp_path / "dump.spans"
    whole = three_taken(path)
    journal = SpanJournal(path)
    journal.sending(ids(*range(40, 45)))
    journal.close()
    raw = path.read_bytes()
    assert len(raw) == len(whole) + SENDING_FIVE
    path.write_bytes(raw[:-zeroed] + bytes(zeroed))
    cut = SpanJournal(path)
    assert known(cut, ids(10, 30, 40, 44)) == ([True, True, False, False], [False] * 4)
    cut.sending(ids(40))
    cut.taken()
    cut.close()
    after = path.read_bytes()  # the cut record gone, the new ones after the whole ones
    assert after.startswith(whole) and len(after) == len(whole) + 1 + 4 + 4 + 8 + 4 + TAKEN
    assert known(SpanJournal(path), ids(30, 40, 41)) == ([True, True, False], [False] * 3)


def test_a_journal_of_another_identity_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "dump.spans"
    journal = SpanJournal(path, "otlp:http://a/v1/traces\nrollout_0:abc")
    journal.sending(ids(1))
    journal.taken()
    journal.close()
    assert known(SpanJournal(path, "otlp:http://a/v1/traces\nrollout_0:abc"), ids(1)) == (
        [True], [False])
    with pytest.raises(ValueError, match=f"{path}: a journal of another endpoint or dump"):
        SpanJournal(path, "otlp:http://b/v1/traces\nrollout_0:abc")


def test_a_second_export_of_one_journal_is_refused_while_one_runs(tmp_path: Path) -> None:
    """Two exports at once (here two objects, as in two processes) would send every
    span twice and cut each other's records: the second is refused at once, naming
    the file, and the first's records are kept whole."""
    path = tmp_path / "dump.spans"
    first, second = SpanJournal(path), SpanJournal(path)
    first.sending(ids(1))
    first.taken()
    with pytest.raises(ValueError, match=f"{path}: another export"):
        second.sending(ids(2))
    first.sending(ids(3))
    first.taken()
    first.close()
    second.begin()  # the first is done: the second reads its records under the lock
    assert known(second, ids(1, 2, 3)) == ([True, False, True], [False] * 3)
    second.close()


def test_one_journal_serves_exports_in_turn(tmp_path: Path) -> None:
    """Begun again after a close, a journal reads what the export before it wrote."""
    path = tmp_path / "dump.spans"
    journal = SpanJournal(path)
    journal.begin()
    journal.sending(ids(1))
    journal.taken()
    journal.close()
    journal.begin()
    assert known(journal, ids(1, 2)) == ([True, False], [False, False])
    journal.sending(ids(2))
    journal.taken()
    journal.close()
    assert known(SpanJournal(path), ids(1, 2)) == ([True, True], [False, False])
