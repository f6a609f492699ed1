"""The journal of a dump's OTLP requests, read back as another run would read it:
taken, refused and unanswered requests, a record cut short by a crash, a foreign file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from slime_trace_widget.export.otlp_journal import SpanJournal


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


@pytest.mark.parametrize("raw", [b"something else", b"STW-OTLP-SPANS-1\nX"],
                         ids=["foreign", "unknown-record"])
def test_a_foreign_or_damaged_file_is_refused_naming_it(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "dump.spans"
    path.write_bytes(raw)
    with pytest.raises(ValueError, match=str(path)):
        SpanJournal(path)
