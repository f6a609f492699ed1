"""The command's subcommands: what ``--help`` lists, and ``view`` when none is named."""

from __future__ import annotations

import subprocess
import sys

import pytest

from slime_trace_widget.cli.command import DEFAULT, SUBCOMMANDS, parser, with_subcommand

NAMES = [module.NAME for module in SUBCOMMANDS]


def help_text(*argv: str) -> str:
    """``python -m slime_trace_widget ARGV``'s output, which must exit 0."""
    done = subprocess.run([sys.executable, "-m", "slime_trace_widget", *argv],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_help_lists_every_subcommand_with_its_summary() -> None:
    text = help_text("--help")
    assert text.startswith("usage: slime-trace-viewer ")
    assert {"view", "convert", "collect", "live", "demo"} <= set(NAMES)
    for module in SUBCOMMANDS:
        line = next(line for line in text.splitlines() if line.split()[:1] == [module.NAME])
        assert module.SUMMARY.split()[0] in line, (module.NAME, line)
    assert "'slime-trace-viewer rollout_0.pt' is" in " ".join(text.split())


@pytest.mark.parametrize(("name", "options"), [
    ("view", ["--demo", "--follow", "--port", "--out-dir", "--rebuild", "--no-serve",
              "--perfetto", "--parquet", "--engine-traces", "--otlp", "--pattern"]),
    ("convert", ["--out", "--engine", "--workers", "--otlp", "--log-trends"]),
    ("collect", ["--http", "--grpc", "--no-grpc", "--scrape", "--scrape-interval"]),
    ("live", ["--rollout", "--stall-after", "--host", "--port"]),
    ("demo", ["--samples", "--seed", "--rollout-id", "--live", "--speed"]),
])
def test_each_subcommand_has_its_help(name: str, options: list[str]) -> None:
    text = help_text(name, "--help")
    assert text.startswith(f"usage: slime-trace-viewer {name} ")
    for option in options:
        assert f" {option}" in text, option


def test_a_dump_without_a_subcommand_is_viewed() -> None:
    assert DEFAULT == "view"
    for argv in (["rollout_0.pt"], ["--demo"], ["--follow", "debug/", "--port", "8000"], []):
        assert with_subcommand(argv) == ["view", *argv]
        args = parser().parse_args(with_subcommand(argv))
        assert args.subcommand == "view"
    args = parser().parse_args(with_subcommand(["rollout_0.pt", "--port", "8000", "--demo"]))
    assert (args.dumps, args.port, args.demo) == (["rollout_0.pt"], 8000, True)


def test_a_named_subcommand_is_that_one() -> None:
    for name in NAMES:
        assert with_subcommand([name, "x"]) == [name, "x"]
    args = parser().parse_args(with_subcommand(["convert", "a.pt", "--out", "ds"]))
    assert (args.subcommand, args.dumps, args.out) == ("convert", ["a.pt"], "ds")
    args = parser().parse_args(with_subcommand(["view", "convert"]))  # a dump named so
    assert (args.subcommand, args.dumps) == ("view", ["convert"])


def test_convert_offers_the_engines_conversion_runs() -> None:
    from slime_trace_widget.sources.dataset import conversion

    for engine in conversion.ENGINES:
        args = parser().parse_args(["convert", "a.pt", "--out", "ds", "--engine", engine])
        assert args.engine == engine
    with pytest.raises(SystemExit):
        parser().parse_args(["convert", "a.pt", "--out", "ds", "--engine", "dask"])
    assert parser().parse_args(["convert", "a.pt", "--out", "ds"]).engine == conversion.ENGINES[0]


def test_a_bad_option_fails_with_the_subcommands_usage() -> None:
    done = subprocess.run([sys.executable, "-m", "slime_trace_widget", "collect", "d",
                           "--http", "nohost"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr.startswith("usage: slime-trace-viewer collect ")
    assert "'nohost' is not HOST:PORT" in done.stderr
