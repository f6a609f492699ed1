"""The progress bar of a load: bytes of dumps done, shown where someone is watching."""

from __future__ import annotations

import sys
from typing import Any


class _NoBar:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *_: object) -> None:
        return None


def progress_bar(sizes: list[int], progress: bool | None) -> Any:
    """A tqdm bar counting the bytes of the dumps loaded (a notebook bar in Jupyter).

    By default it shows for loads that take a while, in a terminal or a kernel;
    a missing or broken stderr never costs the load.
    """
    total = sum(sizes)
    if progress is None:
        isatty = getattr(sys.stderr, "isatty", None)
        watched = bool(isatty and isatty()) or "ipykernel" in sys.modules
        progress = watched and (len(sizes) > 3 or total > 30e6)
    if not progress:
        return _NoBar()
    return _Progress(total, len(sizes))


class _QuietStream:
    """stderr for the bar: a missing, closed or broken stderr never costs the load."""

    def __init__(self) -> None:
        self._stream: Any = sys.stderr

    def write(self, text: str) -> None:
        try:
            self._stream.write(text)
        except (AttributeError, OSError, ValueError):
            self._stream = None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except (AttributeError, OSError, ValueError):
            self._stream = None

    def isatty(self) -> bool:
        try:
            return bool(self._stream.isatty())
        except (AttributeError, OSError, ValueError):
            return False

    def fileno(self) -> int:
        return self._stream.fileno()


class _Progress:
    """tqdm counting bytes, with the dumps done so far beside it."""

    def __init__(self, total: int, dumps: int) -> None:
        from tqdm.auto import tqdm

        self._dumps, self._done = dumps, 0
        self._bar = tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024,
                         desc="loading", postfix=f"0/{dumps} dumps", file=_QuietStream(),
                         dynamic_ncols=True)

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *_: object) -> None:
        self._bar.close()

    def update(self, size: int) -> None:
        self._done += 1
        self._bar.set_postfix_str(f"{self._done}/{self._dumps} dumps", refresh=False)
        self._bar.update(size)
