"""An export's own fields (``slime.span_id``, ``slime.state``...) beside a record's
attributes, neither hiding the other: the exporters name their fields apart from the
attributes, but nothing stops a recorder from setting an attribute of the same name."""

from __future__ import annotations

from typing import Any

from ..tables.attr_columns import ATTR_PREFIX

__all__ = ["beside_attributes"]


def beside_attributes(attributes: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    """``attributes`` with the export's ``own`` fields added. An attribute whose key an
    own field takes is kept under ``attr.<key>`` (as the frames' columns name it; more
    ``attr.`` until the key is free), so each field and each attribute is in the record."""
    merged = dict(attributes)
    for key in own:
        if key in merged:
            moved = ATTR_PREFIX + key
            while moved in merged or moved in own:
                moved = ATTR_PREFIX + moved
            merged[moved] = merged.pop(key)
    merged.update(own)
    return merged
