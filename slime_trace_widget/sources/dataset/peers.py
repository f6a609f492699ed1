"""The rewards a partial read of a dump leaves out but its fates still need.

A sample's fate depends on its group: whether the rewards of all its members in the
dump vary, and on the whole dump when its groups differ in size (slime then normalises
over the whole batch, ``answers.ledger``). When a dataset read keeps only some of a
dump's samples (a ``where`` filter, some of its rollout ids), the samples it leaves out
still count: their rewards go with the frames as ``TraceFrames.group_peers``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["left_out_peers"]


def left_out_peers(samples: pa.Table, kept_rows: np.ndarray, dump: int = 0) -> pd.DataFrame:
    """The rows of ``samples`` (a dump's samples table, every row of it) that are not in
    ``kept_rows``, as ``frames.model.PEER_COLUMNS``: ``group_index`` (Int64), ``status``
    and ``reward`` as stored, ``reward_text`` the stored JSON text of a dict reward where
    ``reward`` is missing (as the fate rules compare it)."""
    rows = samples.column("row").to_numpy()
    wanted = ~np.isin(rows, kept_rows)
    group = samples.column("group_index").filter(pa.array(wanted))
    reward = samples.column("reward").to_numpy(zero_copy_only=False).astype(np.float64)[wanted]
    detail = samples.column("reward_detail").filter(pa.array(wanted))
    text = np.array(detail.to_pylist(), dtype=object)
    text[~np.isnan(reward)] = None
    status = samples.column("status").filter(pa.array(wanted)).cast(pa.string())
    return pd.DataFrame({"dump": np.full(len(reward), dump, dtype=np.int64),
                         "group_index": pd.arrays.IntegerArray(
                             pc.fill_null(group, 0).to_numpy().astype(np.int64),
                             group.is_null().to_numpy(zero_copy_only=False)),
                         "status": np.array(status.to_pylist(), dtype=object),
                         "reward": reward, "reward_text": text})
