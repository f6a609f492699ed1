"""The scraper: each engine's ``/metrics`` polled on a steady tick into the load store.

``slime-trace-viewer collect DIR --scrape [NAME=]URL`` starts one thread per target.
Each asks its URL for the Prometheus text format every ``interval`` seconds, parses the
answer (:mod:`.prometheus`, bounded) and hands the samples to the load store's one
writer (group commit: one fsync for the scrapes that arrive together). A scrape's time
is the collector's clock halfway between sending the request and receiving the
answer's headers (the engine writes its answer before it sends the headers).

Nothing a target does stops the others or the collector. A scrape that fails is
counted by kind (``refused``, ``timeout``, ``connection``, ``http <status>``,
``encoding``, ``unparseable``, ``write``) and tried again: at the next tick after one
failure, then after twice as long each time, up to :data:`MAX_BACKOFF` seconds, and
on the tick again once one succeeds. An answer over the byte limit is read no further
than the limit, kept up to its last whole line and counted (``cut_off``), as are the
lines and series the parser skipped and the answers without a kept series
(``no_series``: an engine started without ``--enable-metrics`` answers so, or one whose
names lack the ``sglang:`` prefix). Only ``http`` and ``https`` URLs are taken;
redirects are not followed and proxies from the environment are not used.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...whole_files import write_whole
from .group_commit import Busy, GroupWriter
from .load_store import LoadStore, scrape_table
from .prometheus import DEFAULT_PREFIXES, MAX_BODY_BYTES, MAX_SERIES, parse_exposition

DEFAULT_INTERVAL = 1.0
#: Seconds a scrape may take, from sending to the last byte read (a read that waits
#: longer is given up at this much; a body still arriving is given up at its next read).
DEFAULT_TIMEOUT = 5.0
#: Longest wait between the tries of a target that keeps failing.
MAX_BACKOFF = 30.0
#: Samples waiting for the writer beyond which a scrape is dropped (counted as ``write``).
MAX_PENDING_ROWS = 2_000_000
#: The collector's account of its targets, rewritten as it goes (in the collector folder).
STATUS_FILE = "scrape-status.json"
ACCEPT = "text/plain;version=0.0.4;q=1.0, */*;q=0.1"  # not OpenMetrics: its writers may rename
_MAX_NAME = 200


def backoff(interval: float, failures: int) -> float:
    """Seconds to the next scrape of a target after ``failures`` failures in a row: the
    interval, doubled per failure up to :data:`MAX_BACKOFF` (never below the interval)."""
    if not failures:
        return interval
    return min(interval * 2 ** min(failures - 1, 30), max(MAX_BACKOFF, interval))


@dataclass(frozen=True)
class Target:
    """An engine to scrape: the name its rows carry, and its metrics URL."""

    name: str
    url: str


def parse_target(text: str) -> Target:
    """``[NAME=]URL`` as a target (ValueError with the reason when it is not one).

    The URL must be ``http`` or ``https`` with a host and no credentials; without a path
    (or with ``/``) it gets ``/metrics``. The name defaults to the URL's ``host:port``."""
    head, named, rest = text.partition("=")
    name, url = (head, rest.strip()) if named and "://" not in head else ("", text.strip())
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"{text!r}: only http:// and https:// URLs are scraped")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise ValueError(f"{text!r}: {exc}") from None
    if not parts.hostname:
        raise ValueError(f"{text!r}: the URL has no host")
    if parts.username is not None or parts.password is not None:
        raise ValueError("a scrape URL carries no credentials (they would be printed and "
                         "kept in the status file)")
    if parts.path in ("", "/"):
        url = urllib.parse.urlunsplit(parts._replace(path="/metrics"))
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    name = name.strip() or f"{host}:{port}"
    if len(name) > _MAX_NAME or not name.isprintable():
        raise ValueError(f"{text!r}: a target name is printable and at most {_MAX_NAME} "
                         "characters")
    return Target(name, url)


@dataclass
class TargetStats:
    """What happened to one target: scrapes kept, samples kept, failures by kind, and
    what the parser skipped (by the reasons of :mod:`.prometheus`)."""

    url: str
    scrapes: int = 0
    samples: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    last_error: str = ""
    last_scrape: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"url": self.url, "scrapes": self.scrapes, "samples": self.samples,
                "failures": dict(self.failures), "skipped": dict(self.skipped),
                "last_error": self.last_error, "last_scrape": self.last_scrape}

    def summary(self) -> str:
        failed = sum(self.failures.values())
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.failures.items()))
        cut = ", ".join(f"{k} {v}" for k, v in sorted(self.skipped.items()))
        return (f"{self.scrapes} scrape(s) kept ({self.samples} samples), {failed} failed"
                + (f" ({kinds})" if kinds else "") + (f"; skipped: {cut}" if cut else ""))


class _Failed(Exception):
    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # the 3xx answer itself is the result: a failure, counted


class Scraper:
    """Scrapes ``targets`` every ``interval`` seconds into the load store at ``directory``
    from :meth:`start` to :meth:`stop`."""

    def __init__(self, directory: str | Path, targets: list[Target],
                 interval: float = DEFAULT_INTERVAL, timeout: float = DEFAULT_TIMEOUT,
                 max_bytes: int = MAX_BODY_BYTES, max_series: int = MAX_SERIES,
                 prefixes: tuple[str, ...] | None = DEFAULT_PREFIXES) -> None:
        names = [target.name for target in targets]
        if len(set(names)) != len(names):
            raise ValueError(f"two scrape targets share a name: {sorted(names)}")
        if not interval > 0:
            raise ValueError("the scrape interval is a number of seconds above 0")
        self.directory = Path(directory)
        self.targets = list(targets)
        self.interval, self.timeout = float(interval), float(timeout)
        self.max_bytes, self.max_series, self.prefixes = max_bytes, max_series, prefixes
        self.stats = {target.name: TargetStats(target.url) for target in targets}
        self._label_caches: dict[str, dict[str, str]] = {t.name: {} for t in targets}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._writer: GroupWriter | None = None
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                                   _NoRedirects())

    def start(self) -> Scraper:
        self._writer = GroupWriter(LoadStore(self.directory), MAX_PENDING_ROWS,
                                   "engine-load-writer")
        for target in self.targets:
            thread = threading.Thread(target=self._run, args=(target,), daemon=True,
                                      name=f"scrape {target.name}")
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        """Stop scraping, write what is waiting, finish the files, write the status."""
        self._stop.set()
        for thread in self._threads:
            thread.join(self.timeout + 5)
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self.write_status()

    def status(self) -> dict[str, Any]:
        """Per target name, its :class:`TargetStats` as plain data."""
        return {"interval": self.interval,
                "targets": {name: stats.as_dict() for name, stats in self.stats.items()}}

    def write_status(self) -> None:
        """Rewrite :data:`STATUS_FILE` in the collector folder (whole or not at all)."""
        with contextlib.suppress(OSError):  # a status is a courtesy: the next one may land
            write_whole(self.directory / STATUS_FILE,
                        json.dumps(self.status(), indent=1, sort_keys=True))

    # ------------------------------------------------------------------ one target

    def _run(self, target: Target) -> None:
        stats = self.stats[target.name]
        next_at = time.monotonic()
        failures = 0
        while not self._stop.is_set():
            wait = next_at - time.monotonic()
            if wait > 0 and self._stop.wait(wait):
                break
            try:
                self._scrape(target, stats)
            except _Failed as failure:
                failures += 1
                stats.failures[failure.kind] += 1
                stats.last_error = f"{failure.kind}: {str(failure)[:300]}"
            except Exception as exc:  # never let one target's surprise end its thread
                failures += 1
                stats.failures["error"] += 1
                stats.last_error = f"error: {type(exc).__name__}: {str(exc)[:300]}"
            else:
                failures = 0
            delay = backoff(self.interval, failures)
            next_at += delay
            now = time.monotonic()
            if next_at < now:  # a slow scrape: the ticks it overran are not made up
                next_at += ((now - next_at) // self.interval + 1) * self.interval

    def _scrape(self, target: Target, stats: TargetStats) -> None:
        body, ts_ns = self._fetch(target)
        scrape = parse_exposition(body, prefixes=self.prefixes, max_bytes=self.max_bytes,
                                  max_series=self.max_series,
                                  cache=self._label_caches[target.name])
        stats.skipped.update(scrape.skipped)
        if not len(scrape) and scrape.skipped["bad_lines"]:
            raise _Failed("unparseable", "no line of the answer is a Prometheus sample")
        if not len(scrape):
            stats.skipped["no_series"] += 1  # an answer without a series of the prefixes
        if len(scrape):
            assert self._writer is not None
            try:
                self._writer.submit_table(scrape_table(target.name, scrape, ts_ns))
            except Busy as exc:
                raise _Failed("write", str(exc)) from None
        stats.scrapes += 1
        stats.samples += len(scrape)
        stats.last_scrape = ts_ns / 1e9

    def _fetch(self, target: Target) -> tuple[bytes, int]:
        """The answer's body (at most one byte over the limit) and the scrape's time."""
        request = urllib.request.Request(target.url, headers={
            "Accept": ACCEPT, "Accept-Encoding": "identity",
            "User-Agent": "slime-trace-viewer-scraper"})
        started, sent = time.monotonic(), time.time_ns()
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                answered = time.time_ns()
                encoding = (response.headers.get("Content-Encoding") or "identity").strip()
                if encoding.lower() != "identity":
                    raise _Failed("encoding", f"the answer is {encoding}-encoded")
                body = self._read(response, started + self.timeout)
        except _Failed:
            raise
        except urllib.error.HTTPError as exc:
            exc.close()
            raise _Failed(f"http {exc.code}", f"{target.url} answered {exc.code}") from None
        except TimeoutError as exc:
            raise _Failed("timeout", f"{target.url}: {exc}") from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, ConnectionRefusedError):
                raise _Failed("refused", f"{target.url}: {reason}") from None
            if isinstance(reason, TimeoutError):
                raise _Failed("timeout", f"{target.url}: {reason}") from None
            raise _Failed("connection", f"{target.url}: {reason}") from None
        except (OSError, http.client.HTTPException, ValueError) as exc:
            raise _Failed("connection", f"{target.url}: {type(exc).__name__}: {exc}") from None
        return body, (sent + answered) // 2

    def _read(self, response: Any, deadline: float) -> bytes:
        """The body, at most one byte over the limit, or :class:`_Failed` (``timeout``)
        once the scrape has taken longer than the timeout (checked at each read)."""
        parts: list[bytes] = []
        size = 0
        while size <= self.max_bytes:
            part = response.read1(min(1 << 16, self.max_bytes + 1 - size))
            if not part:
                break
            parts.append(part)
            size += len(part)
            if time.monotonic() > deadline:
                raise _Failed("timeout", f"the answer took over {self.timeout:g} s")
        return b"".join(parts)
