"""Leave the token lists of a dump's pickle out before it is unpickled: exactly, by opcodes.

slime's ``Sample.to_dict()`` keeps the token ids, log-probs and loss mask of every
sample; in a dump with long responses they are most of the file, and unpickling
them builds hundreds of MB of Python numbers that flattening never reads. This
walks the pickle opcode by opcode (a possessive regular expression that follows
the opcode grammar from a known opcode start, so it runs in C and can never
mistake bytes inside a string for an opcode; Python steps in only at opcodes it
has to look at) and cuts the body of each list of plain numbers that follows one
of :data:`SKIPPED_KEYS`. The restricted unpickler then reads the rest as usual
and still decides every class and every object that is built.

A cut list keeps one item, a random marker string unique to this load. The cut
is kept only if, after unpickling, every marker sits under its key in a sample
dict and nothing else holds the list: no memo ``GET`` (the list memoised again
after its body, say), tuple or other container it passed through on the stack.
That is counted, not inferred from the opcodes: once the unpickler and its memo
are gone, CPython's reference count of each marked list must be the one its
sample dict holds. Otherwise (and for any opcode this does not follow) the
caller reads the file the plain way, so the result is never different from it.
A list the pickle memoises again right after its body is left in, not cut.
"""

from __future__ import annotations

import concurrent.futures
import mmap
import re
import secrets
import struct
import sys
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

__all__ = ["SKIPPED_KEYS", "Skimmed", "drop_markers", "skim_pickle", "skim_stored_file",
           "worth_skimming"]

#: Sample fields of plain-number lists that flattening never reads (see
#: ``frames.samples.READ_FIELDS``); slime's Sample names them so.
SKIPPED_KEYS = ("tokens", "rollout_log_probs", "loss_mask", "teacher_log_probs",
                "rollout_top_p_token_ids", "rollout_top_p_token_offsets")
#: A body shorter than this is left in: cutting it saves nothing.
_MIN_CUT = 64
#: The walk gives up when, past the first sixteenth of the pickle (at most this many
#: bytes), the lists under the keys make less than ``_MIN_SHARE`` of what it walked:
#: the walk pays for itself only when it saves unpickling a large enough share of
#: the bytes it walks (``benchmarks/bench_skim.py`` prints the walk's time and the
#: bytes it keeps).
_PROBE_BYTES = 8 << 20
_MIN_SHARE = 0.3
#: The count before the walk (:func:`_lists_may_pay`) goes this far at a time.
_COUNT_WINDOW = 1 << 20
#: When streaming, kept bytes go on at least this often, cut or not.
_STREAM_PIECE = 1 << 20
#: Lists memoised below this index are left in: a one-byte ``BINGET`` of them
#: could not be told from text cheaply (see :func:`_long_get_words`).
_MIN_CUT_MEMO = 256

_STOP, _EMPTY_LIST, _BINPUT, _LONG_BINPUT, _MEMOIZE = 0x2E, 0x5D, 0x71, 0x72, 0x94
_BINGET, _LONG_BINGET = 0x68, 0x6A
_SHORT_BINUNICODE = 0x8C
#: Opcodes with a little-endian length before their payload: opcode -> length bytes.
_SIZED = {0x58: 4, 0x42: 4, 0x54: 4, 0x8B: 4, 0x8D: 8, 0x8E: 8, 0x96: 8, 0x55: 1}
#: Sized opcodes whose payload becomes a str (so may be a key): BINUNICODE,
#: BINUNICODE8, BINSTRING, SHORT_BINSTRING.
_TEXT_SIZED = frozenset({0x58, 0x8D, 0x54, 0x55})


def _counted(widths: range, width: int = 1) -> bytes:
    """Alternatives for a little-endian length of ``width`` bytes (below 256) followed by
    that many bytes."""
    return b"(?:" + b"|".join(
        re.escape(n.to_bytes(width, "little")) + (b".{%d}" % n if n else b"") for n in widths)\
        + b")"


#: Numbers a cut list may hold: BININT1, BININT2, BININT, BINFLOAT, LONG1 up to 8 bytes.
_NUMBER = b"K.|M..|J....|G.{8}|\\x8a" + _counted(range(9))


@cache
def _body() -> re.Pattern[bytes]:
    """A list's body as the pickler writes it: batches of MARK, items, APPENDS, or item +
    APPEND. Compiled on first use, as the walker is: a helper that never skims does
    not compile them at its start."""
    return re.compile(b"(?:\\((?:" + _NUMBER + b")*+e|(?:" + _NUMBER + b")a)*+", re.S)


@cache
def _number_list() -> re.Pattern[bytes]:
    """A list of numbers where it is created: EMPTY_LIST, its PUT if any, and the body
    :func:`_body` matches (group 1; empty after a ``]`` of text)."""
    return re.compile(b"\\](?:q.|r....)?(" + _body().pattern + b")", re.S)


#: Opcodes without an argument that cannot copy a reference: MARK, POP, POP_MARK,
#: NONE, REDUCE, BUILD, EMPTY_DICT, APPENDS, EMPTY_LIST, SETITEM, SETITEMS,
#: EMPTY_TUPLE, BINPERSID, APPEND, LIST, DICT, TUPLE, OBJ, NEWOBJ, TUPLE1-3,
#: NEWTRUE, NEWFALSE, EMPTY_SET, ADDITEMS, FROZENSET, NEWOBJ_EX, STACK_GLOBAL.
#: Left out, so they end the walk: DUP, MEMOIZE and the out-of-band buffers.
_PLAIN_OPCODES = b"[(01NRb}e\\]su)Qaldto\\x81\\x85-\\x89\\x8f-\\x93]"
_FIXED = b"K.|M..|J....|G.{8}|q.|r....|\\x80.|\\x95.{8}|c[^\\n]*\\n[^\\n]*\\n"


@cache
def _walker(keys: tuple[str, ...]) -> re.Pattern[bytes]:
    """The opcodes the walk runs through in C: all it follows except the keys' strings
    and GETs followed by a new list (a key's string may be the GET), where Python looks."""
    short_keys = b"|".join(re.escape(len(key.encode()).to_bytes(1, "little") + key.encode())
                           for key in keys)
    keys_4 = b"|".join(re.escape(len(key.encode()).to_bytes(4, "little") + key.encode())
                       for key in keys)
    alternatives = [_PLAIN_OPCODES, _FIXED, b"h.(?!\\])", b"j....(?!\\])",
                    b"X(?!" + keys_4 + b")" + _counted(range(256), 4),
                    b"\\x8c(?!" + short_keys + b")" + _counted(range(256)),
                    b"B" + _counted(range(256), 4), b"C" + _counted(range(256)),
                    b"\\x8a" + _counted(range(256))]
    return re.compile(b"(?:" + b"|".join(alternatives) + b")*+", re.S)


_KEY_TEXTS = frozenset(key.encode() for key in SKIPPED_KEYS)
#: A key's opcode that starts inside the probe ends at most this far past it.
_LONGEST_KEY_OPCODE = 5 + max(map(len, _KEY_TEXTS))


@dataclass
class Skimmed:
    """What a skim cut, and what checking the unpickled result needs."""

    marker: str
    cuts: int
    #: Whether a LONG_BINGET in the kept bytes might fetch a cut list.
    fetched: bool
    #: The kept bytes, when they were collected rather than sent on as they came.
    data: bytes = b""


def skim_pickle(data: Any, start: int = 0, end: int | None = None,
                emit: Callable[[Any], Any] | None = None) -> Skimmed | None:
    """The pickle in ``data[start:end]`` (bytes or an mmap, not copied) with the bodies
    of the number lists under :data:`SKIPPED_KEYS` cut. The kept bytes go to ``emit`` piece by
    piece as the walk goes (each piece a memoryview valid during the call), or are
    collected into ``Skimmed.data``. None when the walk met an opcode it does not
    follow or gave up (then read the pickle the plain way), and when collecting
    found nothing to cut."""
    size = len(data) if end is None else end
    if not _keys_in_probe(data, start, size):
        return None
    collected: list[Any] = []
    with memoryview(data) as view:
        skimmed = _walk(data, view, start, size, emit or collected.append,
                        streaming=emit is not None)
        if skimmed is None or emit is not None:
            return skimmed
        if not skimmed.cuts:
            return None
        skimmed.data = b"".join(collected)
        collected.clear()  # the pieces are views of ``data``: gone before it may close
    return skimmed


def _walk(data: Any, view: memoryview, start: int, size: int,
          emit: Callable[[Any], Any], streaming: bool) -> Skimmed | None:
    """:func:`skim_pickle`'s walk, kept bytes sent to ``emit``; ``streaming``: a reader
    unpickles them as they come (see :mod:`.skim_stream`)."""
    marker = secrets.token_hex(16)
    cut_in = b"\x8c" + bytes([len(marker)]) + marker.encode() + b"a"
    key_memos: set[int] = set()
    gets: list[np.ndarray] = []  # what each LONG_BINGET of the kept bytes might fetch
    memos: list[int] = []
    cuts = 0
    kept_from = at = start
    listed = 0  # bytes of list bodies met, cut or not
    # Nothing is cut before the probe has judged that cutting pays: a walk that gives
    # up then has cut nothing, and a reader of the stream goes on rather than start
    # over.
    judged = False
    probe = _probe_bytes(start, size)
    walker = _walker(SKIPPED_KEYS)

    def keep(stop: int) -> None:
        piece = view[kept_from:stop]
        gets.append(_long_get_words(piece))
        emit(piece)

    def give_up() -> Skimmed | None:
        """None: read the pickle the plain way. But while nothing is cut yet, a reader
        unpickling the stream gets the rest of the file's own bytes, uncut, and goes
        on instead of starting over, so the probe's bytes are never read twice; its
        result is then the plain read's."""
        if cuts or not streaming:
            return None
        emit(view[kept_from:size])
        return Skimmed(marker, 0, False)

    while True:
        if streaming and at - kept_from >= _STREAM_PIECE:  # the reader waits for bytes
            keep(at)
            kept_from = at
        at = walker.match(data, at, size).end()
        if at >= size:
            return None  # no STOP
        opcode = data[at]
        if opcode == _STOP:
            break
        if at + 1 >= size:
            return None  # cut off
        if opcode == _SHORT_BINUNICODE:  # a key: the walker runs through other strings
            at += 2 + data[at + 1]
        elif opcode in (_BINGET, _LONG_BINGET):  # a GET before a new list
            memo = data[at + 1] if opcode == _BINGET else int.from_bytes(data[at + 1:at + 5],
                                                                          "little")
            at += 2 if opcode == _BINGET else 5
            if at > size:
                return None
            if memo not in key_memos:
                continue
        elif opcode in _SIZED:
            width = _SIZED[opcode]
            payload = at + 1 + width
            after = payload + int.from_bytes(data[at + 1:payload], "little")
            if after > size:
                return None
            at = after
            if not (opcode in _TEXT_SIZED and data[payload:after] in _KEY_TEXTS):
                continue
        else:
            return give_up()  # DUP, MEMOIZE, a protocol 0 opcode...: not followed
        memo = None if opcode in (_BINGET, _LONG_BINGET) else _put_index(data, at, size)
        if at > size:
            return None
        if memo is not None:
            key_memos.add(memo)
            at += 2 if data[at] == _BINPUT else 5
        body = _list_body(data, at, size)
        if body is not None:
            body_start, at, memo = body
            listed += at - body_start
            # A PUT after the body memoises the list a second time, where a GET
            # could fetch it from anywhere: such a list is left in.
            if judged and at - body_start >= _MIN_CUT and (memo is None
                                                          or memo >= _MIN_CUT_MEMO) \
                    and (at >= size or data[at] not in _PUTS):
                keep(body_start)
                emit(cut_in)
                kept_from = at
                cuts += 1
                if memo is not None:
                    memos.append(memo)
        if at - start >= probe:
            if listed < _MIN_SHARE * (at - start):
                return give_up()  # the lists are too small a part of this pickle to pay
            judged = True
    keep(at + 1)
    return _skimmed(marker, cuts, gets, memos)


def _skimmed(marker: str, cuts: int, gets: list[np.ndarray], memos: list[int]) -> Skimmed:
    """What a walk cut, and whether a LONG_BINGET it kept (``gets``) might fetch one of
    the cut lists (``memos``)."""
    fetched = bool(memos) and bool(np.isin(np.concatenate(gets),
                                           np.asarray(memos, dtype=np.uint32)).any())
    return Skimmed(marker, cuts, fetched)


def _probe_bytes(start: int, size: int) -> int:
    """How far the walk goes before it judges whether cutting pays."""
    return min((size - start) // 16, _PROBE_BYTES)


def _keys_in_probe(data: Any, start: int, size: int) -> bool:
    """Whether a key of :data:`SKIPPED_KEYS` is written where the walk probes. When none
    is, the walk would give up at the first key it met (in any file slime writes: its
    samples all have the same fields), so the plain read starts at once. Only the
    probe is searched, never the whole pickle."""
    stop = min(size, start + _probe_bytes(start, size) + _LONGEST_KEY_OPCODE)
    return any(data.find(key, start, stop) >= 0 for key in _KEY_TEXTS)


def _lists_may_pay(data: Any, start: int, size: int) -> bool:
    """Whether the number lists where the walk probes may make :data:`_MIN_SHARE` of it,
    counted without walking: every EMPTY_LIST byte there, inside text or not and
    under any key, with the number body after it (as the walk would match it).

    A dump whose samples have the keys but short lists (a few tokens each, beside
    long text and spans) would be walked for nothing: the walk's probe gives up, in
    a process that then reads the file the plain way. This count is a small part
    of the walk's cost: it runs in C and in one pass: each match starts at a ``]``
    and goes on past its body, which may be empty, so no byte is matched twice
    however the probe was crafted. It goes a megabyte at a time and stops once the
    share is reached (a list across two windows counts in part).
    """
    stop = start + _probe_bytes(start, size)
    wanted = _MIN_SHARE * (stop - start)
    listed = 0
    for window in range(start, stop, _COUNT_WINDOW):
        found = _number_list().findall(data, window, min(window + _COUNT_WINDOW, stop))
        listed += sum(map(len, found))
        if listed >= wanted:
            return True
    return False


def worth_skimming(path: str, info: zipfile.ZipInfo) -> bool:
    """Whether skimming the stored member ``info`` of the zip file at ``path`` may pay:
    False for a file without token lists where the walk probes (:func:`_keys_in_probe`)
    or whose number lists there are too small a share (:func:`_lists_may_pay`)."""
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0,
                                               access=mmap.ACCESS_READ) as mapped:
        start = _member_start(mapped, info)
        if start is None:
            return False
        end = start + info.file_size
        return _keys_in_probe(mapped, start, end) and _lists_may_pay(mapped, start, end)


def skim_stored_file(path: str, info: zipfile.ZipInfo, emit: Callable[[Any], Any] | None = None
                     ) -> tuple[Skimmed, bool] | None:
    """:func:`skim_pickle` of the member ``info`` of the zip file at ``path``, stored
    uncompressed (torch never compresses), through an mmap, and whether its CRC holds."""
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0,
                                               access=mmap.ACCESS_READ) as mapped:
        return _skim_stored(mapped, info, emit)


def _skim_stored(data: Any, info: zipfile.ZipInfo, emit: Callable[[Any], Any] | None
                 ) -> tuple[Skimmed, bool] | None:
    """:func:`skim_pickle` of the stored member ``info`` inside the archive's bytes, and
    whether its CRC holds."""
    start = _member_start(data, info)
    if start is None:
        return None
    end = start + info.file_size
    # zlib lets go of the GIL for the checksum: it runs on another core meanwhile.
    with memoryview(data) as whole, whole[start:end] as member, \
            concurrent.futures.ThreadPoolExecutor(1) as pool:
        checksum = pool.submit(zlib.crc32, member)
        skimmed = skim_pickle(data, start, end, emit=emit)
        return None if skimmed is None else (skimmed, checksum.result() == info.CRC)


def _member_start(data: Any, info: zipfile.ZipInfo) -> int | None:
    """Where the bytes of the stored member ``info`` begin in the archive's bytes; None
    when its local header is not where the directory says or the member overruns."""
    header = info.header_offset
    if data[header:header + 4] != b"PK\x03\x04":
        return None
    name_length, extra_length = struct.unpack("<HH", data[header + 26:header + 30])
    start = header + 30 + name_length + extra_length
    return start if start + info.file_size <= len(data) else None


#: Opcodes that memoise the object on top of the stack.
_PUTS = frozenset({_BINPUT, _LONG_BINPUT, _MEMOIZE})


def _put_index(data: Any, at: int, end: int) -> int | None:
    """The memo index a BINPUT or LONG_BINPUT at ``at`` stores to, else None."""
    if at + 1 < end and data[at] == _BINPUT:
        return data[at + 1]
    if at + 4 < end and data[at] == _LONG_BINPUT:
        return int.from_bytes(data[at + 1:at + 5], "little")
    return None


def _list_body(data: Any, at: int, end: int) -> tuple[int, int, int | None] | None:
    """(body start, body end, memo index) of a list of numbers created at ``at``, or
    None when no list starts there."""
    if at >= end or data[at] != _EMPTY_LIST:
        return None
    start = at + 1
    memo = _put_index(data, start, end)
    if memo is not None:
        start += 2 if data[start] == _BINPUT else 5
    return start, _body().match(data, start, end).end(), memo


def _long_get_words(piece: Any) -> np.ndarray:
    """The index after every ``j`` (LONG_BINGET) byte of ``piece``, inside a string or
    not: a false alarm only costs the plain read. A real GET never spans two pieces:
    each ends where an opcode does."""
    raw = np.frombuffer(piece, dtype=np.uint8)
    starts = np.flatnonzero(raw[:-4] == _LONG_BINGET)
    return (raw[starts + 1].astype(np.uint32) | raw[starts + 2].astype(np.uint32) << 8
            | raw[starts + 3].astype(np.uint32) << 16 | raw[starts + 4].astype(np.uint32) << 24)


def _references(holder: dict, key: str) -> int:
    """CPython's reference count of ``holder[key]``, taken the same way for every value."""
    return sys.getrefcount(holder[key])


#: :func:`_references` of a value that only its dict holds.
_SOLE_REFERENCE = _references({"value": [None]}, "value")


def drop_markers(obj: Any, skimmed: Skimmed) -> bool:
    """Remove the cut lists from the samples of an unpickled dump; False (and the
    samples untouched) unless every cut is found under its key in a sample dict,
    each a list of its own that nothing else holds.

    Call it once the unpickler is gone: its memo holds every list it memoised. A
    cut list that the pickle memoised again, fetched into a span's attributes or
    passed through a tuple on its way has more references than its sample's, and
    the plain read is then the only right one.
    """
    if skimmed.fetched:
        return False
    samples = obj.get("samples") if type(obj) is dict else obj
    if type(samples) is not list:
        return False
    found = _marked(samples, skimmed.marker)
    if len(found) != skimmed.cuts or len({id(sample[key]) for sample, key in found}) != len(found):
        return False
    if any(_references(sample, key) != _SOLE_REFERENCE for sample, key in found):
        return False
    for sample, key in found:
        del sample[key]
    return True


def _marked(samples: list, marker: str) -> list[tuple[dict, str]]:
    """(sample, key) of every list that holds just ``marker`` under a key of
    :data:`SKIPPED_KEYS` in a sample dict (no reference to one outlives the call)."""
    found: list[tuple[dict, str]] = []
    for sample in samples:
        if type(sample) is dict:
            for key in SKIPPED_KEYS:
                value = sample.get(key)
                if (type(value) is list and len(value) == 1 and type(value[0]) is str
                        and value[0] == marker):
                    found.append((sample, key))
    return found
