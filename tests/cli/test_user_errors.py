"""A user's mistake on the command line is one line on stderr and a non-zero exit, never
a traceback, a silent no-op or a busy loop: bad option values are refused while parsing
(argparse's usage error, exit 2), bad files and folders before any work starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from slime_trace_widget.cli import main
from slime_trace_widget.cli.command import parser, with_subcommand


def parse_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The error line argparse prints for ``argv``, which it must refuse with exit 2."""
    with pytest.raises(SystemExit) as stopped:
        parser().parse_args(with_subcommand(argv))
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


def one_line_failure(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one stderr line of ``main(argv)``, which must fail with a non-zero code."""
    code = main(argv)
    err = capsys.readouterr().err
    assert code != 0, err
    assert "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith("slime-trace-viewer: ")
    return line


@pytest.mark.parametrize("argv", [
    ["rollout_0.pt", "--port", "70000"],
    ["--follow", ".", "--port", "70000"],
    ["rollout_0.pt", "--port", "-1"],
    ["live", ".", "--port", "70000"],
])
def test_a_port_out_of_range_is_a_usage_error(argv: list[str], capsys) -> None:
    assert "--port" in parse_error(argv, capsys)


@pytest.mark.parametrize("value", ["0", "-3", "two"])
def test_convert_takes_a_positive_number_of_workers(value: str, capsys) -> None:
    assert "--workers" in parse_error(["convert", "a.pt", "--out", "ds", "--workers", value],
                                      capsys)


@pytest.mark.parametrize("argv", [
    ["--follow", ".", "--interval", "0"],
    ["--follow", ".", "--interval", "-1"],
    ["--follow", ".", "--interval", "nan"],
    ["collect", ".", "--scrape-interval", "0.0000001"],
])
def test_an_interval_that_would_spin_is_a_usage_error(argv: list[str], capsys) -> None:
    assert "interval" in parse_error(argv, capsys)


@pytest.mark.parametrize("value", ["0", "-5"])
def test_the_demo_takes_at_least_one_sample(value: str, capsys) -> None:
    assert "--demo-samples" in parse_error(["--demo", "--demo-samples", value], capsys)


@pytest.mark.parametrize("pattern", ["/tmp/*.pt", ""])
def test_a_follow_pattern_outside_the_folder_is_a_usage_error(pattern: str, capsys) -> None:
    assert "--pattern" in parse_error(["--follow", ".", "--pattern", pattern], capsys)
    assert "--pattern" in parse_error(["live", ".", "--dumps", ".", "--pattern", pattern],
                                      capsys)


def test_good_values_are_taken(capsys) -> None:
    args = parser().parse_args(with_subcommand(
        ["--follow", ".", "--port", "0", "--interval", "0.5", "--pattern", "run*/*.pt"]))
    assert (args.port, args.interval, args.pattern) == (0, 0.5, "run*/*.pt")
    assert parser().parse_args(["convert", "a.pt", "--out", "d", "--workers", "2"]).workers == 2


def test_view_out_dir_that_is_a_file(dump: Path, tmp_path: Path, capsys) -> None:
    a_file = tmp_path / "taken"
    a_file.write_text("")
    line = one_line_failure([str(dump), "--no-serve", "--out-dir", str(a_file)], capsys)
    assert str(a_file) in line and "--out-dir" in line


def test_follow_out_dir_that_is_a_file(dump: Path, tmp_path: Path, capsys) -> None:
    a_file = tmp_path / "taken"
    a_file.write_text("")
    line = one_line_failure(["--follow", str(tmp_path), "--out-dir", str(a_file)], capsys)
    assert str(a_file) in line and "--out-dir" in line


@pytest.mark.parametrize("taken", ["rollout_0.trace_timeline_cache.stw",
                                   "rollout_0.trace_timeline_viewer.html"])
def test_view_output_that_cannot_be_written_is_one_line(dump: Path, taken: str, capsys) -> None:
    """A folder where the cache or the page goes (as a read-only or full folder would)."""
    (dump.parent / taken).mkdir()
    line = one_line_failure([str(dump), "--no-serve", "--rebuild"], capsys)
    assert f"{dump.parent / taken}: cannot be written" in line


def test_follow_output_that_cannot_be_written_is_one_line(dump: Path, capsys) -> None:
    page = dump.parent / f"{dump.parent.name}.trace_timeline_viewer.html"
    page.mkdir()
    line = one_line_failure(["--follow", str(dump.parent), "--port", "0"], capsys)
    assert f"{page}: cannot be written" in line


def test_a_demo_dump_that_cannot_be_written_is_one_line(tmp_path: Path, capsys) -> None:
    (tmp_path / "demo_rollout.pt").mkdir()
    line = one_line_failure(["--demo", "--demo-samples", "4", "--no-serve",
                             "--out-dir", str(tmp_path)], capsys)
    assert f"{tmp_path / 'demo_rollout.pt'}: could not write the dump" in line


@pytest.mark.parametrize("argv", [["rollout_0.pt", "--host", ""], ["live", ".", "--host", " "]])
def test_an_empty_host_is_a_usage_error(argv: list[str], capsys) -> None:
    """A socket takes "" as every interface; the start-up line could say neither to whom
    nor where, so 0.0.0.0 must be said."""
    assert "--host" in parse_error(argv, capsys)


def test_convert_a_missing_dump(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "nope.pt"
    line = one_line_failure(["convert", str(missing), "--out", str(tmp_path / "ds")], capsys)
    assert str(missing) in line
    assert not (tmp_path / "ds").exists()


def test_convert_a_folder_as_a_dump(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "d"
    folder.mkdir()
    line = one_line_failure(["convert", str(folder), "--out", str(tmp_path / "ds")], capsys)
    assert str(folder) in line and "still being written" not in line


@pytest.mark.parametrize("subcommand", [["view"], ["convert"]])
def test_view_and_convert_name_a_bad_dump_alike(subcommand: list[str], dump: Path,
                                                tmp_path: Path, capsys) -> None:
    """Both check their dumps with one function: the same line for the same mistake."""
    folder, missing = tmp_path / "d", tmp_path / "nope.pt"
    folder.mkdir()
    rest = ["--out", str(tmp_path / "ds")] if subcommand == ["convert"] else ["--no-serve"]
    line = one_line_failure([*subcommand, str(dump), str(folder), *rest], capsys)
    assert line == (f"slime-trace-viewer: {folder}: a folder, not a dump "
                    f"(give its dumps: '{folder}/*.pt')")
    line = one_line_failure([*subcommand, str(missing), *rest], capsys)
    assert line == f"slime-trace-viewer: {missing}: no such file"


def test_convert_out_that_is_a_file(dump: Path, tmp_path: Path, capsys) -> None:
    a_file = tmp_path / "taken"
    a_file.write_text("")
    line = one_line_failure(["convert", str(dump), "--out", str(a_file)], capsys)
    assert str(a_file) in line and "--out" in line


def test_convert_missing_engine_traces(dump: Path, tmp_path: Path, capsys) -> None:
    missing = tmp_path / "nonexist"
    line = one_line_failure(["convert", str(dump), "--out", str(tmp_path / "ds"),
                             "--engine-traces", str(missing)], capsys)
    assert str(missing) in line
    assert not (tmp_path / "ds").exists()


@pytest.mark.parametrize("subcommand", [["view"], ["convert"]])
def test_engine_traces_that_are_no_store_are_refused_in_one_line(
        subcommand: list[str], dump: Path, tmp_path: Path, capsys) -> None:
    """A text file or a folder without a store is refused before any dump is read: it
    was read as a store holding nothing, with three raw warnings, and every generation
    span counted as missing its request."""
    text, bare = tmp_path / "text.pt", tmp_path / "bare"
    text.write_text("hello this is text\n")
    bare.mkdir()
    (bare / "notes.txt").write_text("no store here\n")  # an empty folder may get one
    rest = ["--out", str(tmp_path / "ds")] if subcommand == ["convert"] else [
        "--no-serve", "--out-dir", str(tmp_path / "page")]
    line = one_line_failure([*subcommand, str(dump), "--engine-traces", str(text), *rest],
                            capsys)
    assert line == (f"slime-trace-viewer: --engine-traces {text}: not an engine-trace file "
                    "(a collector folder's Parquet or write-ahead Arrow file)")
    line = one_line_failure([*subcommand, str(dump), "--engine-traces", str(bare), *rest],
                            capsys)
    assert line == (f"slime-trace-viewer: --engine-traces {bare}: not a collector folder "
                    "(no engine_spans/ or engine_load/ in it)")
    assert not (tmp_path / "ds").exists() and not (tmp_path / "page").exists()


def test_a_taken_grpc_port_is_one_line(tmp_path: Path, capsys) -> None:
    """4317 is where Phoenix or an OpenTelemetry Collector listens: grpc raised its own
    RuntimeError through the command (a traceback, exit 1)."""
    import signal
    import socket

    handlers = [signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = one_line_failure(["collect", str(tmp_path / "c"), "--http", "127.0.0.1:0",
                                 "--grpc", f"127.0.0.1:{port}"], capsys)
    assert line == (f"slime-trace-viewer: cannot receive OTLP: cannot listen on 127.0.0.1:"
                    f"{port} for OTLP/gRPC (the port is taken, or the address is not this "
                    "machine's)")
    # run in this process, the command leaves its Ctrl-C and SIGTERM handlers behind it
    assert [signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)] == handlers


@pytest.mark.parametrize("trends", [[], ["--log-trends", "tensorboard:tb"]])
def test_log_snapshots_without_wandb_trends_is_refused(tmp_path: Path, trends: list[str],
                                                       capsys) -> None:
    """Snapshots go to a W&B run only: without one they were silently not logged."""
    from slime_trace_widget.demo import write_demo_dump

    dump = write_demo_dump(tmp_path / "rollout_0.pt", n_samples=2)
    line = one_line_failure(["convert", str(dump), "--out", str(tmp_path / "ds"),
                             "--log-snapshots", *trends], capsys)
    assert line == ("slime-trace-viewer: --log-snapshots adds each rollout's snapshot to a "
                    "W&B run: give --log-trends wandb:PROJECT too")
    assert not (tmp_path / "ds").exists()


def test_a_folder_another_collector_writes_to_is_one_line(tmp_path: Path, capsys) -> None:
    """A second ``collect`` on one folder: the store's refusal went through the command as
    a RuntimeError (a traceback, exit 1)."""
    from slime_trace_widget.file_locks import locked_file

    spans = tmp_path / "c" / "engine_spans"
    spans.mkdir(parents=True)
    with locked_file(spans / ".lock"):  # what the first collector holds for its life
        line = one_line_failure(["collect", str(tmp_path / "c"), "--http", "127.0.0.1:0",
                                 "--no-grpc"], capsys)
    assert line == (f"slime-trace-viewer: engine traces {spans}: another collector is "
                    "writing to this folder (one collector per folder)")
