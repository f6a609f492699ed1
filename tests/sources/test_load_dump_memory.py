"""What ``load_dump`` may take in the caller's process (sources/loading.py, dumps/torch_tensors.py).

A legacy dump names storages by size and torch allocates them at that size before
it reads their data: storages declaring more than the file holds (a tiny file may
still declare 1 MiB) are refused before they are allocated. And the caller loads a
file only after its worker's check, and only while what that check took at its
peak fits in a share of the memory available here. The tests declare large
storages and fake a small machine; none allocates more than a few MiB.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from slime_trace_widget import load_dump, load_dumps
from slime_trace_widget.sources import loading
from slime_trace_widget.sources.dumps.errors import DumpError
from slime_trace_widget.sources.dumps.files import load_dump_bytes, save_dump
from slime_trace_widget.sources.dumps.pool import new_job, run_jobs
from tests.support.hostile_pickles import (
    BINPERSID,
    MARK,
    NEWFALSE,
    TUPLE,
    dump_stream,
    op_call,
    op_global,
    op_text,
    op_value,
    write_legacy,
)

#: Elements of the int32 storage the legacy dumps declare and never supply: 64 MiB
#: (refused before it is allocated; the old loader took it, in the worker and here).
_DECLARED = 1 << 24


def _legacy_unfilled(path: Path, numel: int = _DECLARED,
                     storage_type: bytes = op_global("torch", "IntStorage")) -> Path:
    """A legacy dump (under 2 KB) whose second sample's ``metadata["extra"]`` is a tensor
    over an int32 storage (``storage_type``) of ``numel`` elements that the file never
    supplies."""
    pid = (MARK + op_text("storage") + storage_type + op_text("0")
           + op_text("cpu") + op_value(numel) + op_value(None) + TUPLE + BINPERSID)
    tensor = op_call(op_global("torch._utils", "_rebuild_tensor_v2"), pid, op_value(0),
                     op_value((numel,)), op_value((1,)), NEWFALSE,
                     op_call(op_global("collections", "OrderedDict")))
    write_legacy(path, dump_stream(tensor, "metadata"))
    return path


def test_a_legacy_storage_larger_than_the_file_is_refused_before_it_is_allocated(
        tmp_path: Path) -> None:
    path = _legacy_unfilled(tmp_path / "rollout_0.pt")
    assert path.stat().st_size < 4096
    with pytest.raises(DumpError) as raised:
        load_dump_bytes(str(path), path.read_bytes())  # here, in this process
    message = str(raised.value)
    assert str(path) in message and "legacy storages declare 64.0 MiB" in message
    assert "\n" not in message
    with pytest.raises(DumpError, match="legacy storages declare"):
        load_dumps([path, _legacy_unfilled(tmp_path / "rollout_1.pt")])


def test_a_legacy_storage_the_file_could_fill_still_loads_as_zeros(tmp_path: Path) -> None:
    """Declared within the file's size but never supplied: zeros, as before."""
    path = _legacy_unfilled(tmp_path / "rollout_0.pt", numel=16)
    tensor = load_dump_bytes(str(path), path.read_bytes()).samples[1]["metadata"]["extra"]
    assert tensor.dtype == torch.int32 and tensor.tolist() == [0] * 16


def test_a_legacy_storage_named_by_no_class_is_torch_s_to_refuse(tmp_path: Path) -> None:
    """A storage type that is no class (a list here) is not sized by the bound; torch's
    own check refuses it, as for any id the bound does not know."""
    path = _legacy_unfilled(tmp_path / "rollout_0.pt", storage_type=op_value([1]))
    with pytest.raises(DumpError) as raised:
        load_dump_bytes(str(path), path.read_bytes())
    assert str(path) in str(raised.value) and "unhashable" not in str(raised.value)


def test_genuine_legacy_dumps_load_as_they_did(tmp_path: Path) -> None:
    path = tmp_path / "rollout_3.pt"
    tensors = {"a": torch.arange(5000, dtype=torch.float64), "b": torch.ones(3, 4)}
    tensors["view"] = tensors["a"][10:20]  # a view of the same storage
    torch.save({"rollout_id": 3, "samples": [{"index": 0, **tensors}]}, path,
               _use_new_zipfile_serialization=False)
    loaded = load_dump(path)
    assert torch.equal(loaded.samples[0]["a"], tensors["a"])
    assert torch.equal(loaded.samples[0]["view"], tensors["a"][10:20])


def _dump_with_tensor(path: Path, size: int) -> Path:
    save_dump(path, [{"index": 0, "tensor": torch.ones(size // 4, dtype=torch.float32)}],
              rollout_id=1)
    return path


def test_the_check_job_reports_what_its_load_took(tmp_path: Path) -> None:
    path = _dump_with_tensor(tmp_path / "rollout_1.pt", 4 << 20)
    job = new_job(str(path), "check", None, None, None)
    run_jobs([job], 1, None)
    assert job.verdict is not None and "ok" in job.verdict, job.verdict
    # the file's bytes and the tensor's storage, at least
    assert job.verdict["peak_bytes"] >= 8 << 20


def test_the_caller_refuses_a_load_its_worker_found_too_large_for_its_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's load of a 4 MiB tensor took 8 MiB or more: with 8 MiB available
    here (half of it may be taken), the caller refuses the file, by name, before
    it loads a byte of it."""
    path = _dump_with_tensor(tmp_path / "rollout_1.pt", 4 << 20)
    monkeypatch.setattr(loading, "available_memory", lambda: 8 << 20)

    def never(*args: object) -> None:
        raise AssertionError("the caller loaded the file")

    monkeypatch.setattr(loading, "load_dump_bytes", never)
    for load in (load_dump, load_dumps):
        with pytest.raises(DumpError) as raised:
            load(path)
        message = str(raised.value)
        assert message.startswith(f"{path}: refused: loading it took ")
        assert "more than 50% of the 8.0 MiB of memory available" in message


def test_the_caller_loads_what_fits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _dump_with_tensor(tmp_path / "rollout_1.pt", 4 << 20)
    monkeypatch.setattr(loading, "available_memory", lambda: 1 << 30)
    loaded = load_dump(path)
    assert loaded.samples[0]["tensor"].shape == (1 << 20,)
    monkeypatch.setattr(loading, "available_memory", lambda: None)  # nothing says: loads
    assert load_dumps([path])[0].samples[0]["tensor"].shape == (1 << 20,)
