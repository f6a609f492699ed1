"""A whole training run as one Parquet dataset: convert its dumps (local worker
pool or Ray), open it by rollout, follow trends across rollouts.

``convert`` writes and updates the dataset (see ``layout`` for the files,
``manifest`` for what a rerun skips), ``open_dataset`` reads back the rollouts
asked for as :class:`TraceFrames`, and ``rollout_trends`` summarises every dump
in DuckDB without loading any of them into pandas.
"""

from .convert import ConvertReport, convert
from .layout import dump_kind
from .manifest import Manifest
from .reading import open_dataset

__all__ = ["ConvertReport", "Manifest", "convert", "dump_kind", "open_dataset"]
