"""The live store read back: only the files and row groups a rollout or window can be in,
a tail that reads each row once across rolls and write-ahead files cut mid-batch."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc

from slime_trace_widget.sources.live.read import Tail, select, store_files, store_folder
from slime_trace_widget.sources.live.store import COLUMNS, LAYOUT, LiveStore

SECOND = 10**9
T0 = 1_767_225_600 * SECOND


def records(rollout: int, first_seq: int, count: int, sender: str = "h:1:0") -> pa.Table:
    """``count`` span starts of one trace, a second apart from the rollout's start."""
    columns: dict[str, list] = {name: [] for name in COLUMNS}
    for n in range(count):
        ts = T0 + rollout * 3600 * SECOND + n * SECOND
        body = {"type": "span_start", "name": "step", "ts": ts / SECOND,
                "trace_id": f"{rollout:032x}", "span_id": f"{n:016x}"}
        row = {"sender": sender, "seq": first_seq + n, "record": "span_start", "ts_ns": ts,
               "trace_id": f"{rollout:032x}", "span_id": f"{n:016x}", "sample_id": "0",
               "group_id": "0", "attempt": 0, "rollout_id": rollout,
               "body": json.dumps(body), "dropped": None, "queued": None, "service": "s",
               "received_ns": ts}
        for name in COLUMNS:
            columns[name].append(row[name])
    return LAYOUT.rows(columns)


def write_rollouts(folder: Path, rollouts: int, per_rollout: int) -> None:
    """One finished file per rollout (a roll after each)."""
    store = LiveStore(folder)
    seq = 1
    for rollout in range(rollouts):
        store.append(records(rollout, seq, per_rollout))
        seq += per_rollout
        store.roll()
    store.close()


def write_wal(path: Path, *tables: pa.Table) -> None:
    """A write-ahead file as a collector writes it: an Arrow stream, a batch per write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, LAYOUT.schema) as out:
        for table in tables:
            out.write_table(table)


def test_the_latest_rollout_reads_only_its_own_file(tmp_path: Path) -> None:
    write_rollouts(tmp_path, 20, 50)
    files = store_files(store_folder(tmp_path))
    assert len(files) == 20 and all(store_file.finished for store_file in files)
    latest = select(tmp_path)
    assert latest.rollout == 19
    assert set(latest.read["rollout_id"].to_pylist()) == {19}  # no other file was read
    assert len(latest.rows) == 50
    old = select(tmp_path, rollout=4)
    assert set(old.read["rollout_id"].to_pylist()) == {4} and len(old.rows) == 50
    window = select(tmp_path, rollout=4, low_ns=T0 + 4 * 3600 * SECOND + 10 * SECOND,
                    high_ns=T0 + 4 * 3600 * SECOND + 19 * SECOND)
    assert window.rows["seq"].to_pylist() == list(range(4 * 50 + 11, 4 * 50 + 21))


def test_without_rollout_ids_the_latest_is_everything(tmp_path: Path) -> None:
    store = LiveStore(tmp_path)
    table = records(0, 1, 30)
    store.append(table.set_column(COLUMNS.index("rollout_id"), "rollout_id",
                                  pa.array([-1] * 30, pa.int64())))
    store.close()
    selection = select(tmp_path)
    assert selection.rollout == -1 and len(selection.rows) == 30


def test_a_tail_reads_each_row_once_across_rolls(tmp_path: Path) -> None:
    store = LiveStore(tmp_path, roll_rows=10**9, roll_seconds=10**9)
    tail = Tail(tmp_path)
    store.append(records(0, 1, 5))
    assert tail.read()["seq"].to_pylist() == [1, 2, 3, 4, 5]
    store.append(records(0, 6, 3))
    store.roll()  # the WAL it was reading is now a finished file
    store.append(records(0, 9, 2))
    assert tail.read()["seq"].to_pylist() == [6, 7, 8, 9, 10]
    assert len(tail.read()) == 0
    store.close()
    assert len(tail.read()) == 0
    tail_from_start = Tail(tmp_path)
    assert tail_from_start.read()["seq"].to_pylist() == list(range(1, 11))


def test_a_tail_skips_a_batch_being_written(tmp_path: Path) -> None:
    wal = tmp_path / "live" / "wal-000001.arrows"
    write_wal(wal, records(0, 1, 4), records(0, 5, 4))
    whole = wal.read_bytes()
    wal.write_bytes(whole[:-40])  # the second batch half written
    tail = Tail(tmp_path)
    assert tail.read()["seq"].to_pylist() == [1, 2, 3, 4]
    wal.write_bytes(whole)  # its write completes
    assert tail.read()["seq"].to_pylist() == [5, 6, 7, 8]
    assert len(tail.read()) == 0
