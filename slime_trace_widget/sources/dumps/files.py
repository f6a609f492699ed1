"""Dump files: check what a file is, unpickle it safely in this process, unpack, save.

This is what a worker process runs (see :mod:`.worker`); :mod:`.pool` decides
where it runs. ``mode="plain"`` reads torch's zip layout itself and gives
tensors as numpy arrays (no torch import: the frames path); ``mode="torch"``
goes through ``torch.load`` and gives real tensors (``load_dump``). Legacy
(non-zip) files always go through torch. Tar files (torch's pre-0.4 format)
and TorchScript archives are refused: torch would extract or run them.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import numbers
import os
import pickle
import tarfile
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ...values import bounded_int, short_text
from ...whole_files import replaced
from .allowlist import RefusedState, check_dtypes
from .errors import DumpError, one_line
from .paths import PathLike, dump_kind, rollout_number
from .placeholders import object_record, sample_records
from .skim import drop_markers, skim_stored_file, worth_skimming
from .skim_stream import unpickle_skimmed
from .unpickler import LoadSession, TensorSupport

__all__ = ["LoadedDump", "load_dump_bytes", "load_dump_file", "load_trusted", "read_header",
           "save_dump"]

ZIP_MAGIC = b"PK\x03\x04"
#: What unpickling raises on bytes no pickler wrote: a file damaged or cut short, said
#: so in the message before the unpickler's own words (a missing memo index, say).
_DAMAGED_PICKLE = (pickle.UnpicklingError, EOFError, UnicodeDecodeError)
#: Pickles smaller than this are read whole in ``mode="frames"``: cutting their token
#: lists would save less than walking them costs.
SKIM_MIN_BYTES = 16 << 20
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


@dataclass
class LoadedDump:
    """One dump file read into plain sample records, with what had to be skipped.

    ``warnings`` counts, by kind: ``unsafe_global_blocked`` (globals replaced by
    placeholders, listed in ``blocked_globals``), ``placeholder_sample_object`` /
    ``object_sample_converted`` (samples that were objects, now dicts),
    ``sample_not_a_dict`` (items skipped), ``tensor_state_dropped`` /
    ``tensor_hooks_dropped`` / ``tensor_subclass_dropped`` (tensor extras not restored),
    ``module_id_ignored`` (legacy module ids answered without torch's source check).
    ``kind`` is ``eval`` for an evaluation dump (by its path, as the run dataset's
    ``dump_kind`` tells: :func:`.paths.dump_kind`), else ``list`` for a bare list of
    samples or ``rollout``.
    """

    path: str
    rollout_id: int | None
    samples: list[dict]
    warnings: Counter[str] = field(default_factory=Counter)
    kind: str = "rollout"
    blocked_globals: list[str] = field(default_factory=list)
    trusted: bool = False

    @property
    def name(self) -> str:
        """The file name without its directory, for labels and messages."""
        return os.path.basename(self.path)



def read_header(path: str) -> bytes:
    """First bytes of the file after checking it is a readable, non-empty regular file."""
    if not os.path.exists(path):
        raise DumpError(f"{path}: no such file")
    if os.path.isdir(path):
        raise DumpError(f"{path}: is a directory, not a dump file")
    if not os.path.isfile(path):
        raise DumpError(f"{path}: not a regular file")
    try:
        with open(path, "rb") as handle:
            header = handle.read(8)
    except OSError as exc:
        raise DumpError(f"{path}: cannot be read ({one_line(exc.strerror or exc)})") from exc
    if not header:
        raise DumpError(f"{path}: not a torch dump (zero-byte file)")
    return header


def _zip_names(path: str, source: Any) -> list[str]:
    """Member names of a zip dump; a clear error for a truncated or damaged archive."""
    try:
        with zipfile.ZipFile(source) as archive:
            return archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        problem = f"corrupt or truncated torch zip archive ({one_line(exc)})"
        raise DumpError(f"{path}: {problem}") from exc


def _is_torchscript(names: list[str]) -> bool:
    """torch.load hands TorchScript archives to torch.jit.load, which runs their code."""
    return any(name.rsplit("/", 1)[-1] == "constants.pkl" for name in names)


def _is_tar(data: bytes) -> bool:
    """Whether torch.load would read the bytes as its pre-0.4 tar format.

    torch tries that format first for every file that is not a zip, the way
    this does, and extracts members into a temporary folder before unpickling:
    a member that is a symlink makes it open any file on the machine (a FIFO
    or ``/dev/stdin`` never returns). slime never wrote that format.
    """
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:"):
            return True
    except (tarfile.TarError, OSError, ValueError):
        return False


def _load_failure(path: str, header: bytes, exc: BaseException) -> DumpError:
    """A DumpError saying which kind of file torch choked on and why."""
    detail = one_line(f"{type(exc).__name__}: {exc}")
    if isinstance(exc, MemoryError):
        detail = "MemoryError: it asks for more memory than a file of its size could need"
    if header.startswith(ZIP_MAGIC):
        problem = "cannot load torch zip archive"
    elif header.startswith(b"\x80"):
        problem = "cannot load legacy torch file"
    else:
        return DumpError(f"{path}: not a torch dump (unrecognised content) ({detail})")
    if isinstance(exc, RefusedState):
        problem += ": it holds pickled state the loader refuses"
    elif isinstance(exc, _DAMAGED_PICKLE):
        problem += ": its pickled data is damaged or cut short"
    return DumpError(f"{path}: {problem} ({detail})")


def _read_all(path: str) -> bytes:
    """The whole file, with a clear error when it cannot be read."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise DumpError(f"{path}: cannot be read ({one_line(exc.strerror or exc)})") from exc


def _rollout_id_from_name(path: str) -> int | None:
    """The id the path names (``rollout_7.pt``, ``eval_3.pt``, ``eval_3/data.pt``: see
    :func:`.paths.rollout_number`), if any."""
    number = rollout_number(path)
    return None if number is None else _rollout_id(number)


def _rollout_id(value: Any) -> int | None:
    """``value`` as a rollout id if it fits the int64 column ids are kept in, else None."""
    return bounded_int(value, _INT64_MIN, _INT64_MAX)


def _unpack(obj: Any, path: str) -> tuple[list, int | None, str]:
    """Split the top-level object into (samples, rollout id, kind) for the known layouts."""
    is_eval = dump_kind(path) == "eval"  # the run dataset's kind, so the two agree
    if isinstance(obj, list):
        return obj, _rollout_id_from_name(path), "eval" if is_eval else "list"
    if not isinstance(obj, dict):
        raise DumpError(f"{path}: top-level object is a {type(obj).__name__}, "
                        "expected a dict with 'samples' or a list of samples")
    if "samples" not in obj:
        keys = one_line(", ".join(repr(short_text(k, 60)) for k in itertools.islice(obj, 8)))
        raise DumpError(f"{path}: top-level dict has no 'samples' key (keys: {keys})")
    samples = obj["samples"]
    if not isinstance(samples, list):
        raise DumpError(f"{path}: 'samples' is a {type(samples).__name__}, expected a list")
    rollout_id = obj.get("rollout_id")
    if isinstance(rollout_id, numbers.Integral) and _rollout_id(rollout_id) is not None:
        rollout_id = int(rollout_id)
    else:
        rollout_id = _rollout_id_from_name(path)
    return samples, rollout_id, "eval" if is_eval else "rollout"


def load_dump_bytes(name: str, data: bytes, mode: str = "torch") -> LoadedDump:
    """The safe load of a dump's bytes in this process, with no CPU or memory guard.

    ``name`` is the file name used in messages and for the rollout id. ``mode``
    is ``"torch"`` (real tensors) or ``"plain"`` (numpy arrays, no torch import,
    zip files only; a legacy file is read through torch all the same).
    """
    return _safe_load(name, None, data, mode)


def load_dump_file(path: str, mode: str = "plain", name: str | None = None,
                   pipelined: bool = False) -> LoadedDump:
    """:func:`load_dump_bytes` of the file at ``path``, named ``name`` (default: the path)
    in messages and on the result; a zip read in plain mode is never held whole.
    ``mode="frames"`` is plain mode for flattening: the sample fields of
    :data:`.skim.SKIPPED_KEYS` may be missing, cut before they were built, by a forked
    process while this one unpickles when ``pipelined`` (for a spare core)."""
    return _safe_load(path if name is None else name, path, None, mode, pipelined)


def _safe_load(name: str, path: str | None, data: bytes | None, mode: str,
               pipelined: bool = False) -> LoadedDump:
    """The restricted load of ``data``, or of the file at ``path`` when ``data`` is None."""
    header = data[:8] if data is not None else read_header(path)
    try:
        obj, session = _load_restricted(name, path, data, header, mode, pipelined)
    except DumpError:
        raise
    except Exception as exc:
        raise _load_failure(name, header, exc) from exc
    return _loaded(name, obj, session)


def load_trusted(path: str) -> LoadedDump:
    """Plain ``torch.load``, which runs any code the file holds: for files you made."""
    from .torch_tensors import torch_load_trusted

    header = read_header(path)
    if header.startswith(ZIP_MAGIC):
        _zip_names(path, path)  # a damaged archive gets the same clear message as a safe load
    try:
        obj = torch_load_trusted(path)
    except Exception as exc:
        raise _load_failure(path, header, exc) from exc
    return _loaded(path, obj, None)


def _load_restricted(name: str, path: str | None, data: bytes | None, header: bytes,
                     mode: str, pipelined: bool) -> tuple[Any, LoadSession]:
    """Unpickle a file (``data`` None) or its bytes with the restricted unpickler;
    ``name`` is what messages call it."""
    plain_zip = None
    source: Any = path if data is None else io.BytesIO(data)
    if header.startswith(ZIP_MAGIC):
        names = _zip_names(name, source)
        if _is_torchscript(names):
            raise DumpError(f"{name}: is a TorchScript archive, not a rollout dump (refused)")
        pickles = [n for n in names if n.rsplit("/", 1)[-1] == "data.pkl" and n.count("/") == 1]
        if mode in ("plain", "frames"):
            if len(pickles) != 1:
                raise DumpError(f"{name}: a torch zip archive needs one <name>/data.pkl "
                                f"record, this one has {len(pickles)}")
            plain_zip = pickles[0]
    elif _is_tar(data := _read_all(path) if data is None else data):
        raise DumpError(f"{name}: is a tar archive (torch's pre-0.4 format), not a rollout dump "
                        "(refused)")
    if plain_zip is None:
        from .torch_tensors import TORCH_TENSORS, torch_load

        return _checked_load(name, TORCH_TENSORS, lambda session: torch_load(
            session, _read_all(path) if data is None else data))
    from .plain_tensors import PLAIN_TENSORS, plain_zip_load

    if mode == "frames":
        read = _skim_read(name, source, plain_zip, pipelined)
        if read is not None:
            return read
    return _checked_load(name, PLAIN_TENSORS, lambda session: plain_zip_load(
        session, zipfile.ZipFile(source), plain_zip))


def _skim_read(name: str, source: Any, pickle_name: str,
               pipelined: bool) -> tuple[Any, LoadSession] | None:
    """The read of a dump file whose token lists were cut first (see :mod:`.skim`),
    skimmed in a forked process while this one unpickles when ``pipelined``; None to
    read the dump whole: bytes in memory, a small or compressed pickle, or one the
    skim cannot follow."""
    from .plain_tensors import PLAIN_TENSORS, plain_zip_load

    if not isinstance(source, str):
        return None
    pipelined = pipelined and hasattr(os, "fork")
    with zipfile.ZipFile(source) as archive:
        info = archive.getinfo(pickle_name)
        if info.file_size < SKIM_MIN_BYTES or info.compress_type != zipfile.ZIP_STORED:
            return None
    if not worth_skimming(source, info):  # no walk, and no fork, for a skim that cannot pay
        return None
    skimmed = None
    if not pipelined:
        checked = skim_stored_file(source, info)
        if checked is None or not checked[1]:  # nothing cut, or the CRC did not hold
            return None
        skimmed = checked[0]

    def unpickle(stream: Any) -> tuple[Any, LoadSession]:
        return _checked_load(name, PLAIN_TENSORS, lambda session: plain_zip_load(
            session, zipfile.ZipFile(source), pickle_name, stream))

    with contextlib.suppress(Exception):  # the plain read that follows says what is wrong
        if skimmed is not None:
            obj, session = unpickle(io.BytesIO(skimmed.data))
        else:
            streamed = unpickle_skimmed(source, info, unpickle)
            if streamed is None:
                return None
            (obj, session), skimmed = streamed
        if drop_markers(obj, skimmed):
            return obj, session
    return None


def _checked_load(name: str, tensors: TensorSupport,
                  load: Callable[[LoadSession], Any]) -> tuple[Any, LoadSession]:
    """Run ``load`` in a new session; refuse what modified a class or made a bad dtype."""
    session = LoadSession(tensors)
    try:
        obj = load(session)
    finally:
        session.modified_classes = session.guard.restore()
    check_dtypes(session.dtypes)
    if session.modified_classes:
        touched = ", ".join(session.modified_classes)
        raise DumpError(f"{name}: refused: the file tried to modify {touched} (undone)")
    return obj, session


def _loaded(name: str, obj: Any, session: LoadSession | None) -> LoadedDump:
    """The LoadedDump for what was unpickled: samples unpacked and made plain dicts."""
    samples, rollout_id, kind = _unpack(obj, name)
    try:
        records, counts = sample_records(samples)
    except Exception as exc:
        raise DumpError(f"{name}: could not read samples ({one_line(exc)})") from exc
    warnings = counts if session is None else session.warnings + counts
    return LoadedDump(path=name, rollout_id=rollout_id, samples=records, warnings=warnings,
                      kind=kind, blocked_globals=[] if session is None else list(session.blocked),
                      trusted=session is None)


def _record_for_save(index: int, sample: Any) -> dict:
    """A sample as slime saves it: dicts as they are, objects via their fields."""
    if isinstance(sample, dict):
        return sample
    if getattr(sample, "__dict__", None) is not None:
        return object_record(sample)
    raise TypeError(f"sample {index} is a {type(sample).__name__}, not a dict or an object")


def save_dump(path: PathLike, samples: Iterable[Any], *, rollout_id: int | None = None) -> str:
    """Write samples in slime's format, ``{"rollout_id": id, "samples": [dict, ...]}``.

    The file is written next to its destination and renamed into place, so a
    crash never leaves a half-written dump under the final name. Returns the path.
    """
    target = os.fspath(path)
    records = [_record_for_save(i, sample) for i, sample in enumerate(samples)]
    import torch

    # Through a file Python opened: a folder that cannot be written, or a full disk,
    # is an OSError, where torch's own opening of a path raises a RuntimeError.
    with replaced(target) as temporary, open(temporary, "wb") as handle:
        torch.save({"rollout_id": rollout_id, "samples": records}, handle)
    return target

