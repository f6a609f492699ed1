"""What became of each sample, and each rollout's ledger, as the payload carries them.

The rules are :mod:`..answers.ledger`'s and :mod:`..answers.tail`'s; this module only
lays their answers out for the renderer (``docs/payload.md``, "Fates and the ledger"):

* ``smp_fate``: each payload sample's fate as a code into the contract's ``fates``
  (``fate_none`` where a sample has none);
* ``meta.ledger``: per rollout shown (a dump of the payload, an index in
  ``meta.rollouts``), its samples and sample-seconds by fate and their shares
  (``signal_ledger(frames, by="dump")``), when 50/90/99% of its samples had finished
  and its step (``tail_price``'s figures, seconds from its first start), the
  90%-finished instant as epoch seconds, and the seconds its rows are drawn shifted by
  (``smp_offset``; not 0 with ``align="rollout"``), so the renderer puts the instant
  over the rows it concerns.

Figures are per dump: a rollout id written by two dumps (a train and an eval dump of
one step) gets a bar and a marker for each, each over its own samples. For a dump that
is the only one of its rollout id they are ``signal_ledger(frames)``'s and
``tail_price(frames)``'s rows of that id. The ledger covers all of a dump's samples,
also those a ``show()`` filter leaves out of the rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..answers.ledger import sample_fates, signal_ledger
from ..answers.tail import FINISHED_COLUMNS, tail_of, unit_table
from ..frames.model import TraceFrames
from ..vocabularies import FATES
from .contract import FATE_NONE


def fate_codes(frames: TraceFrames) -> np.ndarray:
    """Each sample's fate (``answers.ledger.sample_fates``) as a contract code, in
    ``frames.samples`` order; :data:`FATE_NONE` where it has none."""
    if not len(frames.samples):
        return np.zeros(0, dtype=np.int64)
    fates = sample_fates(frames)
    codes = pd.Categorical(fates.astype(object), categories=FATES).codes.astype(np.int64)
    return np.where(codes < 0, FATE_NONE, codes)


def ledger_meta(frames: TraceFrames, rows: np.ndarray, offsets: np.ndarray
                ) -> dict[str, list] | None:
    """``meta.ledger`` for the dumps that have a sample among ``rows`` (the payload's
    samples, ``offsets`` their drawing offsets); None without samples."""
    if not len(rows):
        return None
    dumps = frames.samples["dump"].to_numpy(dtype=np.int64)[rows]
    shown, first = np.unique(dumps, return_index=True)
    ledger = signal_ledger(frames, by="dump").reindex(shown)
    tail = _tail_by_dump(frames).reindex(shown)
    start = _first_start_by_dump(frames).reindex(shown).to_numpy(dtype=np.float64)
    finished_90 = tail["finished_90"].to_numpy(dtype=np.float64)

    def per_fate(prefix: str, kind: type) -> list[list]:
        table = ledger[[f"{prefix}_{fate}" for fate in FATES]].to_numpy(dtype=np.float64)
        return [[_number(value, kind) for value in row] for row in table]

    return {
        "rollout": [int(dump) for dump in shown],
        "samples": per_fate("samples", int),
        "seconds": per_fate("seconds", float),
        "shares": per_fate("share", float),
        **{column: _numbers(tail[column]) for column in (*FINISHED_COLUMNS, "step_s")},
        "finished_90_at": _numbers(start + finished_90),
        "offset": _numbers(np.asarray(offsets, dtype=np.float64)[first]),
    }


def _tail_by_dump(frames: TraceFrames) -> pd.DataFrame:
    """``tail_price``'s figures with each dump taken as its own rollout."""
    table = unit_table(frames)
    table["rollout_id"] = frames.samples["dump"].to_numpy(dtype=np.int64)
    return tail_of(table)


def _first_start_by_dump(frames: TraceFrames) -> pd.Series:
    """Each dump's first start as ``tail_price`` counts it: over samples with a start and an end."""
    samples = frames.samples
    timed = np.isfinite(samples["start"].to_numpy(dtype=np.float64)) & np.isfinite(
        samples["end"].to_numpy(dtype=np.float64))
    return samples["start"][timed].groupby(samples["dump"][timed].to_numpy()).min()


def _number(value: Any, kind: type) -> Any:
    """A finite number as ``kind``, else None (JSON has no NaN)."""
    number = float(value)
    return kind(number) if np.isfinite(number) else None


def _numbers(values: Any) -> list:
    return [_number(value, float) for value in np.asarray(values, dtype=np.float64)]
