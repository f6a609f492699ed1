"""Token lists cut from the pickle before unpickling (sources/dumps/skim.py).

The property throughout: a skimmed read gives what the plain read gives, minus
the cut fields, or it is not used; and the walk never fails on any input.
"""

from __future__ import annotations

import io
import pickle
import random
import zipfile
from pathlib import Path

import pytest

from slime_trace_widget.demo import make_demo_samples
from slime_trace_widget.frames import build_frames
from slime_trace_widget.sources.dumps import DumpError, files, skim
from slime_trace_widget.sources.dumps.files import load_dump_file, save_dump
from slime_trace_widget.sources.dumps.skim import (
    SKIPPED_KEYS,
    drop_markers,
    skim_pickle,
    skim_stored_file,
    worth_skimming,
)
from slime_trace_widget.sources.dumps.skim_stream import unpickle_skimmed
from slime_trace_widget.sources.dumps.worker import read_for_frames
from slime_trace_widget.tables.samples import READ_FIELDS
from tests.sources.test_wire import FIXTURES, assert_same_frames
from tests.support.demo_shapes import sized_demo_samples


def _samples(count: int = 120) -> list[dict]:
    return [{"index": i, "prompt": f"prompt {i}", "tokens": list(range(i, i + 300)),
             "rollout_log_probs": [-0.25 * (k % 7) for k in range(200)],
             "loss_mask": [1] * 200 + [0] * 50, "response_length": 200,
             "trace": {"trace_id": f"t{i}", "events": [{"name": "generate", "ts": 1.5 + i}]},
             "metadata": {"source": "math", "lengths": [3, 4]}} for i in range(count)]


def _without_cut(samples: list) -> list:
    return [{key: value for key, value in sample.items() if key not in SKIPPED_KEYS}
            for sample in samples]


def _read(data: bytes) -> tuple[list, bool]:
    """Samples of a protocol 2 pickle read through the skim, and whether the cut held."""
    skimmed = skim_pickle(data)
    assert skimmed is not None
    obj = pickle.loads(skimmed.data)
    return obj["samples"], drop_markers(obj, skimmed)


def test_number_lists_under_the_keys_are_cut_and_the_rest_is_unchanged() -> None:
    samples = _samples()
    data = pickle.dumps({"rollout_id": 3, "samples": samples}, protocol=2)
    skimmed = skim_pickle(data)
    assert skimmed is not None and skimmed.cuts > 200  # three lists a sample, the first few kept
    assert len(skimmed.data) < len(data) / 3
    read, held = _read(data)
    assert held
    assert _without_cut(read) == _without_cut(samples)
    kept = [sample for sample in read if "tokens" in sample]
    assert all(sample["tokens"] == samples[sample["index"]]["tokens"] for sample in kept)


def test_a_number_list_outside_a_sample_field_makes_the_cut_fail() -> None:
    samples = _samples()
    samples[90]["metadata"]["tokens"] = list(range(100))  # same key, one level down
    _, held = _read(pickle.dumps({"samples": samples}, protocol=2))
    assert not held


def test_a_cut_list_fetched_elsewhere_makes_the_cut_fail() -> None:
    samples = _samples()
    samples[90]["metadata"]["copy"] = samples[90]["tokens"]  # pickled as a GET of the list
    _, held = _read(pickle.dumps({"samples": samples}, protocol=2))
    assert not held
    samples = _samples()
    first = list(range(500, 800))
    samples[90] = {"metadata": {"first": first},
                   **{key: value for key, value in samples[90].items() if key != "metadata"}}
    samples[90]["tokens"] = first  # the GET comes under the key: nothing to cut there
    read, held = _read(pickle.dumps({"samples": samples}, protocol=2))
    assert held and read[90]["tokens"] == first


def test_opcodes_the_walk_does_not_follow_give_the_plain_read() -> None:
    samples = _samples(40)
    assert skim_pickle(pickle.dumps({"samples": samples}, protocol=4)) is None  # MEMOIZE
    data = pickle.dumps({"samples": samples}, protocol=2)
    with_dup = data[:-1] + b"2" + b"0" + data[-1:]  # DUP, POP before the STOP
    assert pickle.loads(with_dup) == pickle.loads(data)
    assert skim_pickle(with_dup) is None
    assert skim_pickle(pickle.dumps({"samples": _without_cut(samples)}, protocol=2)) is None


def _short_lists(count: int, prompt_chars: int) -> list[dict]:
    """Samples whose lists under the keys are too short to be worth cutting."""
    return [{**sample, "tokens": [1, 2, 3], "loss_mask": [1], "rollout_log_probs": [],
             "prompt": "p" * prompt_chars} for sample in _samples(count)]


def _traced_short_lists() -> list[dict]:
    """400 samples of :func:`_short_lists` carrying demo traces, as a dump's are."""
    samples = _short_lists(400, 2000)
    for sample, demo in zip(samples, make_demo_samples(400, seed=3), strict=False):
        sample["trace"] = demo["trace"]
    return samples


def _streamed(data: bytes) -> tuple[object, bytes]:
    """skim_pickle's result and the bytes it sent, when sending them as it walks."""
    pieces: list[bytes] = []
    result = skim_pickle(data, emit=lambda piece: pieces.append(bytes(piece)))
    return result, b"".join(pieces)


def test_a_stream_with_nothing_cut_goes_on_as_it_is_where_the_walk_stops() -> None:
    """Where the walk gives up before cutting anything (its probe finds lists too short
    to pay, or an opcode it does not follow), a reader unpickling the stream gets the
    rest of the file's own bytes, instead of failing and reading it all again."""
    data = pickle.dumps({"samples": _short_lists(400, 2000)}, protocol=2)
    assert skim_pickle(data) is None  # collected: not worth a copy
    result, sent = _streamed(data)
    assert result is not None and result.cuts == 0 and not result.fetched
    assert sent == data
    samples = _samples(40)
    with_dup = pickle.dumps({"samples": samples}, protocol=2)
    with_dup = with_dup[:-1] + b"2" + b"0" + with_dup[-1:]  # DUP, POP after the cuts
    result, _ = _streamed(with_dup)
    assert result is None  # lists were cut before it: the plain read
    dup_first = b"\x80\x02N20" + pickle.dumps({"samples": samples}, protocol=2)[2:]
    assert pickle.loads(dup_first) == {"samples": samples}
    result, sent = _streamed(dup_first)  # DUP before any cut: the stream goes on
    assert result is not None and result.cuts == 0 and sent == dup_first


def test_lists_worth_a_cut_are_left_until_the_probe_judges_the_whole_worth_it() -> None:
    """Token lists long enough to cut, in samples of long text: the probe judges the
    lists too small a share to pay. Had it cut the first ones before judging, its
    reader would have had to start over on the plain read (0.06 s of a 62 MB dump);
    having cut nothing, the stream goes on as the file's own bytes."""
    samples = [{**sample, "tokens": list(range(200)), "prompt": "p" * 20000}
               for sample in _samples(400)]
    data = pickle.dumps({"samples": samples}, protocol=2)
    result, sent = _streamed(data)
    assert result is not None and result.cuts == 0 and sent == data
    worth_it = pickle.dumps({"samples": _samples(400)}, protocol=2)
    result, sent = _streamed(worth_it)
    assert result is not None and 0 < result.cuts < 3 * 400  # all but the probe's
    assert len(sent) < len(worth_it) / 2


def test_a_stream_sends_bytes_while_it_walks_not_only_at_cuts() -> None:
    """A reader waits for the stream: bytes go on at least every megabyte walked (the
    probe of a pickle of 17 MB walks a megabyte before it gives up)."""
    data = pickle.dumps({"samples": _short_lists(3500, 5000)}, protocol=2)
    assert len(data) > 17 << 20
    pieces: list[int] = []
    result = skim_pickle(data, emit=lambda piece: pieces.append(len(piece)))
    assert result is not None and result.cuts == 0
    assert len(pieces) >= 2 and pieces[0] < len(data) and sum(pieces) == len(data)


def test_a_key_inside_a_string_is_text_not_a_key() -> None:
    """A string whose bytes spell an opcode, a key and a list (a pattern search would cut it)."""
    samples = _samples()
    spoof = b"X\x06\x00\x00\x00tokens]r\x00\x01\x00\x00(" + b"K\x01" * 40 + b"e"
    samples[100]["prompt"] = spoof.decode("latin-1")
    read, held = _read(pickle.dumps({"samples": samples}, protocol=2))
    assert held and read[100]["prompt"] == samples[100]["prompt"]


def test_any_cut_of_the_stream_is_walked_without_error() -> None:
    data = pickle.dumps({"samples": _samples(70)}, protocol=2)
    for end in range(0, len(data), 97):
        result = skim_pickle(data[:end])
        assert result is None or len(result.data) <= end


def _dump_bytes(samples: list, tmp_path: Path) -> bytes:
    path = tmp_path / "dump.pt"
    save_dump(path, samples, rollout_id=2)
    return path.read_bytes()


def _rezipped(archive_bytes: bytes, pickle_bytes: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(archive_bytes)) as source, \
            zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as target:
        for info in source.infolist():
            body = pickle_bytes if info.filename.endswith("/data.pkl") else source.read(info)
            target.writestr(info.filename, body)
    return out.getvalue()


def _outcome(path: Path, mode: str, pipelined: bool = False) -> str:
    try:
        loaded = load_dump_file(str(path), mode, pipelined=pipelined)
    except DumpError as exc:
        return f"DumpError {str(exc)[:60]}"
    return repr((loaded.rollout_id, _without_cut(loaded.samples), loaded.warnings))


def _damaged(pickle_bytes: bytes, rng: random.Random) -> bytes:
    """``pickle_bytes`` with one to three bytes flipped, cut, inserted or deleted."""
    damaged = bytearray(pickle_bytes)
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(damaged))
        action = rng.choice(("flip", "cut", "insert", "delete"))
        if action == "flip":
            damaged[at] = rng.randrange(256)
        elif action == "cut":
            del damaged[at:]
        elif action == "insert":
            damaged[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 6)))
        else:
            del damaged[at:at + rng.randint(1, 6)]
    return bytes(damaged)


@pytest.mark.parametrize(("pipelined", "inputs"), [(False, 250), (True, 80)])
def test_damaged_pickles_read_the_same_skimmed_or_plain(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pipelined: bool, inputs: int) -> None:
    """Bytes flipped, cut, inserted and deleted in a token dump's pickle: the frames
    read (skimmed here, or in a fork and unpickled from a pipe) and the plain read
    agree on every input, and the skim held on a tenth of them or more."""
    monkeypatch.setattr(files, "SKIM_MIN_BYTES", 0)
    held = []
    real_drop = files.drop_markers
    monkeypatch.setattr(files, "drop_markers",
                        lambda obj, skimmed: held.append(real_drop(obj, skimmed)) or held[-1])
    archive = _dump_bytes(_samples(60), tmp_path)
    with zipfile.ZipFile(io.BytesIO(archive)) as opened:
        pickle_bytes = opened.read(next(n for n in opened.namelist() if n.endswith("data.pkl")))
    rng = random.Random(11)
    path = tmp_path / "rollout_2.pt"
    for _ in range(inputs):
        path.write_bytes(_rezipped(archive, _damaged(pickle_bytes, rng)))
        assert _outcome(path, "frames", pipelined) == _outcome(path, "plain")
    assert held.count(True) >= inputs // 10


def test_frames_read_skimmed_equal_the_plain_ones(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A demo dump with token lists, and every fixture: the same frames, table by table."""
    monkeypatch.setattr(files, "SKIM_MIN_BYTES", 0)
    path = tmp_path / "rollout_4.pt"
    save_dump(path, sized_demo_samples(60, seed=5, token_lists=True, pd_share=1.0), rollout_id=4)
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(next(n for n in archive.namelist() if n.endswith("data.pkl")))
    checked = skim_stored_file(str(path), info)
    assert checked is not None and checked[1] and checked[0].cuts > 50
    for dump in [path, *sorted(p for p in FIXTURES.glob("*.pt") if "corrupt" not in p.name)]:
        plain = load_dump_file(str(dump), "plain")
        for pipelined in (False, True):
            frames = load_dump_file(str(dump), "frames", pipelined=pipelined)
            # repr: NaN values compare unequal to themselves
            assert repr(_without_cut(frames.samples)) == repr(_without_cut(plain.samples)), \
                dump.name
            assert_same_frames(build_frames(frames), build_frames(plain))
            if dump == path:  # the cut held there
                assert sum("tokens" not in sample for sample in frames.samples) > 50


def test_a_dump_whose_lists_are_too_short_to_cut_streams_on_to_the_plain_result(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pipelined read of a dump the walk gives up on keeps unpickling the stream
    (nothing cut, the file's own bytes) and gives the plain read's frames. Long
    number lists under another key make the count before the walk think it may pay."""
    monkeypatch.setattr(files, "SKIM_MIN_BYTES", 0)
    path = tmp_path / "rollout_2.pt"
    samples = [{**sample, "reward_history": list(range(8000))}
               for sample in _traced_short_lists()]
    save_dump(path, samples, rollout_id=2)
    streamed: list = []
    real = files.unpickle_skimmed

    def watched(*args: object) -> object:
        streamed.append(real(*args))  # type: ignore[arg-type]
        return streamed[-1]

    monkeypatch.setattr(files, "unpickle_skimmed", watched)
    frames = load_dump_file(str(path), "frames", pipelined=True)
    assert len(streamed) == 1 and streamed[0] is not None and streamed[0][1].cuts == 0
    plain = load_dump_file(str(path), "plain")
    assert repr(_without_cut(frames.samples)) == repr(_without_cut(plain.samples))
    assert_same_frames(build_frames(frames), build_frames(plain))


def test_the_count_before_the_walk_counts_number_lists_from_above() -> None:
    """Long token lists may pay; short ones beside text full of ``]`` do not; number lists
    under any other key, or spelled inside text, count too (the walk then judges)."""
    def may_pay(samples: list) -> bool:
        data = pickle.dumps({"samples": samples}, protocol=2)
        return skim._lists_may_pay(data, 0, len(data))

    assert may_pay(_samples(400))
    brackets = "[[1], [2, 3]] " * 150
    assert not may_pay([{**sample, "prompt": brackets} for sample in _short_lists(400, 10)])
    assert may_pay([{**sample, "scores": list(range(3000))} for sample in _short_lists(400, 10)])
    spelled = (b"](" + b"K\x01" * 900 + b"e").decode("latin-1")
    assert may_pay([{**sample, "prompt": spelled} for sample in _short_lists(400, 10)])


def test_a_dump_whose_lists_are_too_short_to_pay_is_neither_walked_nor_forked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Samples with the keys but a few tokens each, beside long text and spans: the count
    before the walk finds too few list bytes where the walk would probe, so neither
    read walks (the walk would give up after its probe) and the pipelined one does
    not fork; both give the plain read's samples."""
    monkeypatch.setattr(files, "SKIM_MIN_BYTES", 0)
    path = tmp_path / "rollout_2.pt"
    save_dump(path, _traced_short_lists(), rollout_id=2)
    walks: list[str] = []
    real_walk, real_stream = files.skim_stored_file, files.unpickle_skimmed
    monkeypatch.setattr(files, "skim_stored_file",
                        lambda *args: walks.append("walk") or real_walk(*args))
    monkeypatch.setattr(files, "unpickle_skimmed",
                        lambda *args: walks.append("fork") or real_stream(*args))
    plain = load_dump_file(str(path), "plain")
    for pipelined in (False, True):
        frames = load_dump_file(str(path), "frames", pipelined=pipelined)
        assert repr(_without_cut(frames.samples)) == repr(_without_cut(plain.samples))
    assert walks == []
    with_lists = tmp_path / "rollout_3.pt"  # long token lists: walked and cut, as before
    save_dump(with_lists, _samples(400), rollout_id=3)
    frames = load_dump_file(str(with_lists), "frames")
    assert walks == ["walk"] and all("tokens" not in sample for sample in frames.samples[-50:])


def test_the_skim_streams_through_a_pipe_of_a_megabyte(tmp_path: Path) -> None:
    """With Linux's 64 KiB pipe the skim and the reader took turns every 64 KiB (a
    612 MB dump's read: 3.1-3.2 s, against 2.5-2.9 s through 1 MiB)."""
    fcntl = pytest.importorskip("fcntl")
    if not hasattr(fcntl, "F_GETPIPE_SZ"):
        pytest.skip("pipe sizes are Linux's")
    path = tmp_path / "rollout_1.pt"
    save_dump(path, _samples(60), rollout_id=1)
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(next(n for n in archive.namelist() if n.endswith("data.pkl")))
    sizes = []

    def unpickle(stream: io.BufferedReader) -> object:
        sizes.append(fcntl.fcntl(stream.fileno(), fcntl.F_GETPIPE_SZ))
        return pickle.load(stream)

    streamed = unpickle_skimmed(str(path), info, unpickle)
    assert streamed is not None and streamed[1].cuts > 0
    assert sizes == [1 << 20]


def test_a_dump_without_the_keys_where_the_walk_probes_is_not_skimmed(tmp_path: Path) -> None:
    """No fork and no walk for a file without token lists: its plain read starts at once."""
    plain, listed = tmp_path / "rollout_1.pt", tmp_path / "rollout_2.pt"
    save_dump(plain, _without_cut(_samples(60)), rollout_id=1)
    save_dump(listed, _samples(60), rollout_id=2)
    verdicts = []
    for path in (plain, listed):
        with zipfile.ZipFile(path) as archive:
            info = archive.getinfo(next(n for n in archive.namelist() if n.endswith("data.pkl")))
        verdicts.append(worth_skimming(str(path), info))
    assert verdicts == [False, True]


def test_small_pickles_are_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "rollout_1.pt"
    save_dump(path, _samples(60), rollout_id=1)
    assert path.stat().st_size < files.SKIM_MIN_BYTES
    assert all("tokens" in sample for sample in load_dump_file(str(path), "frames").samples)


def test_a_member_whose_crc_fails_is_refused_as_by_the_plain_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "SKIM_MIN_BYTES", 0)
    path = tmp_path / "rollout_1.pt"
    save_dump(path, _samples(80), rollout_id=1)
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(next(n for n in archive.namelist() if n.endswith("data.pkl")))
    middle = info.header_offset + 30 + len(info.filename) + info.file_size // 2
    at = raw.index(b"K", middle)  # a number in a token list: the pickle still reads
    raw[at + 1] ^= 1
    path.write_bytes(bytes(raw))
    with pytest.raises(DumpError, match="CRC") as plain:
        load_dump_file(str(path), "plain")
    for pipelined in (False, True):
        with pytest.raises(DumpError) as frames:
            load_dump_file(str(path), "frames", pipelined=pipelined)
        assert str(frames.value) == str(plain.value)


def test_a_frames_job_reads_only_the_fields_flattening_reads(tmp_path: Path) -> None:
    """``read_for_frames``: what the worker flattens, and what a benchmark of its
    flatten reads: token lists and other unread fields gone, the frames unchanged."""
    path = tmp_path / "rollout_1.pt"
    samples = _samples(60)
    for sample in samples:
        sample["extra_payload"] = {"images": [b"\x00" * 64]}
    save_dump(path, samples, rollout_id=1)
    read = read_for_frames(str(path), pipelined=True)
    assert read.samples and all(set(sample) <= READ_FIELDS for sample in read.samples)
    assert not any("tokens" in sample or "extra_payload" in sample for sample in read.samples)
    assert_same_frames(build_frames(read), build_frames(load_dump_file(str(path), "plain")))
