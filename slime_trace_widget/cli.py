"""``slime-trace-viewer``: dumps to an offline HTML timeline, served on localhost.

Compatible with the workflow of slime's ``tools/trace_timeline_viewer.py``:
``slime-trace-viewer rollout_0.pt`` writes ``rollout_0.trace_timeline_cache.stw``
(the page's data block: payload and attributes, plain data, no pickle) and
``rollout_0.trace_timeline_viewer.html`` beside the dump (or in
``--out-dir``), then serves that page, and nothing else of its folder, on
127.0.0.1. Files are written with the user's umask. A cache newer than every
input dump, built from the same files by the same version, is reused, so a
second run skips loading and flattening (``--rebuild`` forces them). Several
dumps or a glob make one combined view.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import functools
import http.server
import ipaddress
import json
import os
import secrets
import signal
import sys
import threading
import urllib.parse
import warnings
from collections.abc import Sequence
from http import HTTPStatus
from pathlib import Path
from typing import Any, BinaryIO

from ._version import __version__
from .sources.dumps.errors import DumpError
from .sources.dumps.paths import expand_paths
from .view.page.htmlpage import BLOCKS_FORMAT, Blocks, page, read_cache

CACHE_SUFFIX = ".trace_timeline_cache.stw"
HTML_SUFFIX = ".trace_timeline_viewer.html"
#: What a followed page polls: ``{"version": n, "dumps": k}``, rewritten on each change.
FOLLOW_STATE = "follow.json"
#: Seconds the server loop waits in ``select``: a Ctrl-C that the OS hands to another
#: thread (a request, the loader's readers, the poller) is only seen when it returns.
POLL_INTERVAL = 0.1


class CliError(Exception):
    """A problem to report in one line (no traceback) with a non-zero exit."""


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv[:1] in (["convert"], ["collect"]) else None
    parser = {"convert": _convert_parser, "collect": _collect_parser}.get(command or "", _parser)
    args = parser().parse_args(argv[1:] if command else argv)
    try:
        if command == "collect":
            return _collect(args)
        return _convert(args) if command == "convert" else _run(args)
    except (CliError, DumpError) as exc:
        print(f"slime-trace-viewer: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def console() -> None:
    """The command itself: :func:`main`, then an exit that does not free what the run
    built. Every file is written and closed and every exit handler has run by then
    (the loader's helpers are stopped); only the interpreter's teardown, which walks
    each frame, table and page string the run held, is skipped: 0.07 s of a 62 MB
    dump's 3 s first run."""
    code = main()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a reader gone, a stream closed
            stream.flush()
    os._exit(code)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="slime-trace-viewer",
        description="Turn slime rollout dumps into an offline HTML timeline and serve it.")
    parser.add_argument("dumps", nargs="*", help="dump files or globs (rollout_*.pt)")
    parser.add_argument("--demo", action="store_true",
                        help="simulate a rollout, write demo_rollout.pt and open it")
    parser.add_argument("--demo-samples", type=int, default=256)
    parser.add_argument("--out-dir", help="where to write the cache and page "
                                          "(default: beside the first dump)")
    parser.add_argument("--rebuild", action="store_true", help="ignore an existing cache")
    parser.add_argument("--no-serve", action="store_true", help="only write the files")
    parser.add_argument("--host", default="127.0.0.1",
                        help="interface to serve on (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=9999)
    parser.add_argument("--perfetto", action="store_true",
                        help="also write <name>.perfetto.json for ui.perfetto.dev")
    parser.add_argument("--parquet", action="store_true",
                        help="also write a <name>.parquet/ folder (hive layout)")
    parser.add_argument("--trusted", action="store_true",
                        help="unpickle with torch's full unpickler (runs code from the file)")
    parser.add_argument("--engine-traces", metavar="DIR",
                        help="join the engines' request traces kept by "
                             "'slime-trace-viewer collect DIR'")
    _otlp_arguments(parser)
    parser.add_argument("--follow", metavar="DIR",
                        help="serve DIR's dumps and add each new one as slime writes it")
    parser.add_argument("--pattern", default="*.pt", help="dump files to follow (*.pt)")
    parser.add_argument("--interval", type=float, help="seconds between looks (5)")
    return parser


def _convert_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="slime-trace-viewer convert",
        description="Convert a run's dumps into one Parquet dataset, partitioned by rollout "
                    "id; a rerun converts only new or changed dumps.")
    parser.add_argument("dumps", nargs="+", help="dump files or globs (debug/rollout_*.pt)")
    parser.add_argument("--out", required=True, help="the dataset's folder")
    parser.add_argument("--engine", choices=("local", "ray"), default="local",
                        help="local worker processes (default) or Ray tasks")
    parser.add_argument("--address", help="Ray cluster address (default: a local Ray)")
    parser.add_argument("--workers", type=int, help="dumps at once (default: one per core)")
    parser.add_argument("--engine-traces", metavar="DIR",
                        help="join the engines' request traces kept by "
                             "'slime-trace-viewer collect DIR'")
    _otlp_arguments(parser, " (the dumps converted by this run)")
    parser.add_argument("--log-trends", metavar="TARGET",
                        help="log each new rollout's trends to tensorboard:LOGDIR, "
                             "mlflow:TRACKING_URI[#EXPERIMENT] or wandb:PROJECT")
    parser.add_argument("--log-snapshots", action="store_true",
                        help="with --log-trends wandb:PROJECT, each new rollout's HTML "
                             "snapshot as an artifact of the run")
    return parser


def _otlp_arguments(parser: argparse.ArgumentParser, which: str = "") -> None:
    parser.add_argument("--otlp", metavar="ENDPOINT",
                        help="also send the traces to an OpenTelemetry backend" + which +
                             ", e.g. http://127.0.0.1:6006/v1/traces (Phoenix)")
    parser.add_argument("--otlp-protocol", choices=("http/protobuf", "grpc"),
                        default="http/protobuf", help="OTLP transport (default http/protobuf;"
                                                      " grpc takes HOST:PORT)")
    parser.add_argument("--otlp-header", action="append", default=[], metavar="KEY=VALUE",
                        type=_header, help="a header for every request (repeatable)")
    parser.add_argument("--service-name", default="slime-rollout",
                        help="the service the traces are from (default slime-rollout)")


def _header(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key.strip(), value


def send_otlp(frames: Any, args: argparse.Namespace) -> None:
    """``--otlp``: send ``frames`` and print the report, or fail in one line."""
    try:
        from .export.otlp import to_otlp
        from .export.otlp_transport import OtlpExportError
    except ImportError as exc:
        raise CliError("--otlp needs the otel extra: "
                       "pip install 'slime-trace-widget[otel]'") from exc
    try:
        report = to_otlp(frames, args.otlp, protocol=args.otlp_protocol,
                         headers=dict(args.otlp_header), service_name=args.service_name)
    except OtlpExportError as exc:
        raise CliError(str(exc)) from exc
    print(report.summary())


def _convert(args: argparse.Namespace) -> int:
    from .sources.dataset import convert

    with warnings.catch_warnings():  # failures are listed below, one line each
        warnings.simplefilter("ignore", RuntimeWarning)
        report = convert(args.dumps, args.out, engine=args.engine, address=args.address,
                         workers=args.workers, engine_traces=args.engine_traces)
    for path, reason in report.failed:
        print(f"failed {path}: {reason}", file=sys.stderr)
    for path in report.in_progress:
        print(f"later {path}: still being written")
    print(f"{args.out}: {report.summary()}")
    if args.otlp:
        _send_dataset(args)
    if args.log_trends:
        _log_dataset_trends(args)
    return 1 if report.failed else 0


def _send_dataset(args: argparse.Namespace) -> None:
    """``convert --otlp``: the dataset's dumps not sent to that endpoint yet."""
    try:
        from .export.otlp_transport import OtlpExportError
        from .export.run_exports import send_new_dumps
    except ImportError as exc:
        raise CliError("--otlp needs the otel extra: "
                       "pip install 'slime-trace-widget[otel]'") from exc
    try:
        reports = send_new_dumps(args.out, args.otlp, protocol=args.otlp_protocol,
                                 headers=dict(args.otlp_header),
                                 service_name=args.service_name)
    except OtlpExportError as exc:
        raise CliError(str(exc)) from exc
    spans = sum(report.spans for report in reports)
    print(f"sent {len(reports)} dump(s), {spans} spans, to {args.otlp}"
          + ("" if reports else " (every dump was sent before)"))


def _log_dataset_trends(args: argparse.Namespace) -> None:
    """``convert --log-trends``: the rollouts the target has not logged yet."""
    from .export.run_exports import log_new_trends
    from .export.trend_backends import MissingBackend

    try:
        report = log_new_trends(args.out, args.log_trends, snapshots=args.log_snapshots)
    except (MissingBackend, ValueError) as exc:
        raise CliError(str(exc)) from exc
    print(report.summary())


def _collect_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="slime-trace-viewer collect",
        description="Receive the engines' own request traces (SGLang --enable-trace "
                    "--otlp-traces-endpoint) over OTLP and keep them in DIR, for "
                    "--engine-traces DIR; with --scrape, poll the engines' Prometheus "
                    "metrics (SGLang --enable-metrics) into DIR too. Ctrl-C or SIGTERM "
                    "writes what is waiting and exits.")
    parser.add_argument("dir", help="the collector's folder")
    parser.add_argument("--http", type=_address, default=("127.0.0.1", 4318),
                        metavar="HOST:PORT", help="OTLP/HTTP (default 127.0.0.1:4318)")
    parser.add_argument("--grpc", type=_address, default=("127.0.0.1", 4317),
                        metavar="HOST:PORT", help="OTLP/gRPC (default 127.0.0.1:4317)")
    parser.add_argument("--no-grpc", action="store_true", help="OTLP/HTTP only")
    parser.add_argument("--scrape", action="append", type=_scrape_target, default=[],
                        metavar="[NAME=]URL",
                        help="an engine's metrics URL to poll (http or https; /metrics when "
                             "the URL has no path); repeat for each engine. NAME (default "
                             "HOST:PORT) names its rows; a NAME equal to an engine host of "
                             "the trace join's engine_skew shifts them by that host's skew "
                             "(docs/engine-load.md)")
    parser.add_argument("--scrape-interval", type=_seconds, default=1.0, metavar="SECONDS",
                        help="seconds between two scrapes of an engine (default 1)")
    return parser


def _scrape_target(text: str) -> Any:
    from .sources.engine.scrape import parse_target

    try:
        return parse_target(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < 86_400:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return value


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    return host, int(port)


def _collect(args: argparse.Namespace) -> int:
    from .sources.engine.receiver import collect

    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    names = [target.name for target in args.scrape]
    if len(set(names)) != len(names):
        raise CliError(f"--scrape: two targets are named alike ({', '.join(sorted(names))}); "
                       "name them with NAME=URL")
    try:
        collector = collect(args.dir, args.http, None if args.no_grpc else args.grpc,
                            lambda line: print(line, flush=True), stop,
                            targets=args.scrape, scrape_interval=args.scrape_interval)
    except OSError as exc:
        raise CliError(f"cannot receive OTLP: {exc.strerror or exc}") from exc
    print(f"stopped: {collector.accepted_spans} span(s) kept in {args.dir}", flush=True)
    return 0


def _run(args: argparse.Namespace) -> int:
    if args.follow:
        return _follow(args)
    if args.demo:
        inputs = [_demo_dump(Path(args.out_dir or "."), args.demo_samples)]
    elif args.dumps:
        inputs = [Path(p) for p in expand_paths(args.dumps)]
    else:
        raise CliError("give a dump (rollout_0.pt), a glob, or --demo")
    for path in inputs:
        if not path.is_file():
            raise CliError(f"{path}: no such file")
    out_dir = Path(args.out_dir) if args.out_dir else inputs[0].parent
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = _stem(inputs)
    cache = out_dir / f"{stem}{CACHE_SUFFIX}"
    html_path = out_dir / f"{stem}{HTML_SUFFIX}"

    frames = None
    source = _source_note(inputs, args.engine_traces)
    blocks = None if args.rebuild else _fresh_cache(cache, inputs, source)
    if blocks is None:
        frames = _load(inputs, args.trusted, args.engine_traces)
        from .view.page.snapshot import data_blocks
        from .view.payload import encode

        view = encode(frames)
        blocks = data_blocks(frames, view, source=source)
        _atomic_write(cache, blocks.to_bytes())
        print(f"built {cache.name} from {len(inputs)} dump(s): {len(frames.samples)} samples, "
              f"{len(view.span_index)} spans drawn")
    else:
        print(f"reusing {cache.name} (newer than its dumps; --rebuild to rebuild)")
    title = blocks.header()["payload"]["meta"]["title"]
    _atomic_write(html_path, page(blocks, title).encode())
    print(f"wrote {html_path}")
    if args.perfetto or args.parquet or args.otlp:
        frames = frames or _load(inputs, args.trusted, args.engine_traces)
        _exports(frames, out_dir, stem, args)
    if args.no_serve:
        return 0
    serve(out_dir, [html_path.name], args.host, args.port)
    return 0


def _follow(args: argparse.Namespace) -> int:
    """Serve a page of a run's dumps that grows as slime writes new ones: only new
    dumps load; the page sees ``follow.json`` change and offers the update."""
    from .frames.flatten import build_frames
    from .frames.model import combine_frames
    from .sources.follow import POLL_SECONDS, DumpWatcher, Poller
    from .view.page.snapshot import data_blocks
    from .view.payload import encode

    folder = Path(args.follow)
    if not folder.is_dir():
        raise CliError(f"{folder}: not a folder")
    if args.no_serve or args.dumps or args.demo:
        raise CliError("--follow serves one folder's dumps: no dump paths, --demo or --no-serve")
    out_dir = Path(args.out_dir) if args.out_dir else folder
    out_dir.mkdir(parents=True, exist_ok=True)
    html_path = out_dir / f"{folder.resolve().name}{HTML_SUFFIX}"
    watcher = DumpWatcher(folder, args.pattern)
    shown = {"frames": build_frames([]), "version": 0}

    def publish(new: list[str]) -> None:
        if new:
            added = _load([Path(p) for p in new], args.trusted)
            shown["frames"] = (combine_frames([shown["frames"], added])
                               if len(shown["frames"].samples) else added)
            print(f"added {len(new)} dump(s), {len(shown['frames'].paths)} in all", flush=True)
        shown["version"] += 1
        follow = {"state": FOLLOW_STATE, "version": shown["version"]}
        frames = shown["frames"]
        blocks = data_blocks(frames, encode(frames, title=f"{folder.name} (following)"),
                             source={"follow": follow})
        _atomic_write(html_path, page(blocks, blocks.header()["payload"]["meta"]["title"],
                                      follow=True).encode())
        _atomic_write(out_dir / FOLLOW_STATE, json.dumps(
            {"version": shown["version"], "dumps": len(frames.paths)}).encode())

    stopping = threading.Event()

    def look() -> None:
        new = watcher.new_dumps()
        if new and not stopping.is_set():  # after Ctrl-C, no dump starts loading
            publish(new)

    publish(watcher.new_dumps())
    poller = Poller(look,
                    lambda exc: print(f"slime-trace-viewer: {exc}", file=sys.stderr, flush=True),
                    POLL_SECONDS if args.interval is None else args.interval)
    try:
        serve(out_dir, [html_path.name, FOLLOW_STATE], args.host, args.port)
    finally:
        stopping.set()
        poller.stop(wait=False)  # a dump still loading dies with the process; writes are atomic
    return 0


def _demo_dump(folder: Path, samples: int) -> Path:
    from .demo import write_demo_dump

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "demo_rollout.pt"
    if not path.exists():
        write_demo_dump(path, n_samples=samples, seed=0)
        print(f"wrote demo dump {path} ({samples} samples)")
    return path


def _stem(inputs: list[Path]) -> str:
    first = inputs[0].name.removesuffix(".pt")
    return first if len(inputs) == 1 else f"{first}+{len(inputs) - 1}"


def _source_note(inputs: list[Path], engine_traces: str | None = None) -> dict:
    """What a cache was built from: version and blocks' layout, every input's path, size
    and mtime, and the files of the engine-trace folder (a collector adds files as
    spans arrive)."""
    note: dict = {"version": __version__, "blocks_format": BLOCKS_FORMAT,
                  "inputs": [[str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns]
                             for p in inputs]}
    if engine_traces is not None:
        root = Path(engine_traces)
        files = sorted(root.rglob("*")) if root.is_dir() else [root]
        note["engine_traces"] = [[str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns]
                                 for f in files if f.is_file()]
    return note


def _fresh_cache(cache: Path, inputs: list[Path], source: dict) -> Blocks | None:
    """The cached blocks when newer than every input and built from the same inputs."""
    if not cache.exists() or any(cache.stat().st_mtime_ns <= p.stat().st_mtime_ns
                                 for p in inputs):
        return None
    try:
        blocks = read_cache(cache)
        return blocks if blocks.header().get("source") == source else None
    except (OSError, ValueError, EOFError):
        return None


def _load(inputs: list[Path], trusted: bool, engine_traces: str | None = None):
    from .sources.loading import load_frames

    if engine_traces is not None and not Path(engine_traces).exists():
        raise CliError(f"{engine_traces}: no such engine-trace folder or file")
    return load_frames([str(p) for p in inputs], trusted=trusted, engine_traces=engine_traces)


def _exports(frames, out_dir: Path, stem: str, args: argparse.Namespace) -> None:
    from .export.parquet import to_parquet
    from .export.perfetto import export_perfetto

    if args.perfetto:
        print(f"wrote {export_perfetto(frames, out_dir / f'{stem}.perfetto.json')}")
    if args.parquet:
        try:
            print(f"wrote {to_parquet(frames, out_dir / f'{stem}.parquet')}")
        except ImportError as exc:
            # pyarrow is a dependency, but a build may lack Parquet (conda-forge's
            # pyarrow-core): pandas then explains over five lines; one is enough.
            raise CliError("--parquet needs pyarrow with Parquet support: "
                           "pip install pyarrow (or conda's pyarrow, not pyarrow-core)") from exc
    if args.otlp:
        send_otlp(frames, args)


def _atomic_write(path: Path, data: bytes) -> None:
    """Write via a temp file and rename, so a crash never leaves half a page or cache.

    The temp file is opened with mode 0666 for the umask to trim, as any tool's output
    (``tempfile.mkstemp`` would make every page and cache 0600 whatever the umask).
    """
    temp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    handle = os.open(temp, flags, 0o666)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


class _PageHandler(http.server.SimpleHTTPRequestHandler):
    """The files the CLI wrote into a folder, by exact name, and nothing else of it.

    A dump's folder also holds the ``.pt`` dumps (prompts, responses), the cache and
    whatever else lies there, so anything not in ``served`` is a 404, as is a served
    name that resolves out of the folder (a symlink put in its place): no listing, no
    hidden files, no ``..``. ``/`` redirects to the page (``served[0]``).
    """

    def __init__(self, *args: Any, served: Sequence[str], **kwargs: Any) -> None:
        self.served = tuple(served)  # before the base class handles the request
        super().__init__(*args, **kwargs)

    def send_head(self) -> BinaryIO | None:
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        if path == "/":
            self.send_response(HTTPStatus.FOUND)
            self.send_header("Location", "/" + urllib.parse.quote(self.served[0]))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        name = path[1:]
        root = Path(self.directory).resolve()
        if name not in self.served or (root / name).resolve().parent != root:
            self.send_error(HTTPStatus.NOT_FOUND, "Not served")
            return None
        # The files are rewritten in place (a followed run's page) and dates have whole
        # seconds: a page rewritten within the second the browser saw would be answered
        # "304 Not Modified", and an update would reload the old page. Always the file.
        del self.headers["If-Modified-Since"]
        return super().send_head()

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, format: str, *args: object) -> None:
        sys.stderr.write(f"{self.address_string()} {format % args}\n")


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # a burst of page loads should queue, not be refused


def make_server(folder: Path, served: Sequence[str], host: str,
                port: int) -> http.server.ThreadingHTTPServer:
    """A threaded server of the files ``served`` in ``folder``, the page first (port 0
    picks a free one)."""
    handler = functools.partial(_PageHandler, directory=str(folder), served=served)
    try:
        return _Server((host, port), handler)
    except OSError as exc:
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc


def _audience(host: str, port: int) -> str:
    """Who can open a server on ``host``, in words for the start-up line."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:  # a host name
        return ("this machine only (localhost)" if host == "localhost"
                else f"anyone who can reach {host}:{port}")
    if address.is_loopback:
        return f"this machine only ({host})"
    if address.is_unspecified:
        return f"anyone who can reach this machine on port {port} ({host}: every interface)"
    return f"anyone who can reach {host}:{port}"


def serve(folder: Path, served: Sequence[str], host: str, port: int) -> None:
    """Serve the files ``served`` (the page first) from ``folder`` until Ctrl-C, saying
    what is served, to whom, and the page's URL."""
    server = make_server(folder, served, host, port)
    port = server.server_address[1]
    shown_host = host if host not in ("0.0.0.0", "::") else "127.0.0.1"
    url = f"http://{shown_host}:{port}/{urllib.parse.quote(served[0])}"
    try:  # from the start-up line on, Ctrl-C is the normal way to stop
        print(f"serving {' and '.join(served)} to {_audience(host, port)} at {url}"
              "  (Ctrl-C to stop)", flush=True)
        server.serve_forever(poll_interval=POLL_INTERVAL)
    except KeyboardInterrupt:
        print("stopped", flush=True)
    finally:
        server.server_close()


if __name__ == "__main__":
    console()
