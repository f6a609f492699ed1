"""A fingerprint of what a simulated rollout recorded, for comparing two runs of a seed.

Trace and span ids are random (uuid4 hex, as in slime), so each is replaced by the order
of its first appearance; everything else (times, names, attributes, sample fields) counts
exactly, floats by their ``repr``.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

RANDOM_ID = re.compile(r"[0-9a-f]{32}")


def canonical(value: Any, ids: dict[str, int]) -> Any:
    """``value`` with every random id named by its first appearance (``id0``, ``id1``...)."""
    if isinstance(value, dict):
        return {key: canonical(item, ids) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(item, ids) for item in value]
    if isinstance(value, str) and RANDOM_ID.fullmatch(value):
        return f"id{ids.setdefault(value, len(ids))}"
    return value


def digest(samples: list[dict]) -> str:
    """sha256 of the samples as canonical JSON: equal exactly when the runs are."""
    text = json.dumps(canonical(samples, {}), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()
