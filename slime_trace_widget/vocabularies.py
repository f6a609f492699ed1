"""The names the frames and the payload share, read from ``vocabularies.json``.

Each list is category names in code order: the frames' categoricals take their
categories from it and the payload's codes index it, and the renderer imports the same
file, so a name is written once for the builder, the answers, the encoder and the
decoder (stdlib only: the dump worker imports it). The engine phases' priority is one
order for the answers' partition and the renderer's panel and band. Beside the lists,
the real PD spans' name prefix, the virtual PD lanes' name suffixes and each load
track's unit and combine rule, which the builder and the renderer both apply; and the
critical path's tolerance for one instant, which the answers and the renderer share.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["CLIP_REASONS", "ENGINE_PHASE_PRIORITY", "EVENT_KINDS", "FATES", "INSTANT_EVENT",
           "LINK_KINDS", "LOAD_TRACKS", "LOAD_TRACK_COMBINE", "LOAD_TRACK_UNITS",
           "PD_LANE_SUFFIXES", "PD_SPAN_PREFIX", "SAME_INSTANT_SECONDS", "UNMATCHED_END"]

_VOCABULARIES: dict[str, Any] = json.loads(
    (Path(__file__).parent / "vocabularies.json").read_text(encoding="utf-8"))

#: What an event row is: an instant event, or a span end without its start.
EVENT_KINDS: list[str] = list(_VOCABULARIES["event_kinds"])
#: The event kinds by what they mean, in the file's order (their payload codes).
INSTANT_EVENT, UNMATCHED_END = EVENT_KINDS
#: Why an open span's drawn end is where it is (``span_geometry``), in order of precedence.
CLIP_REASONS: list[str] = list(_VOCABULARIES["clip_reasons"])
#: The kinds of link between spans and events (``answers.links``).
LINK_KINDS: list[str] = list(_VOCABULARIES["link_kinds"])
#: What became of each sample (``answers.ledger``), in the order its rules decide.
FATES: tuple[str, ...] = tuple(_VOCABULARIES["fates"])
#: The engines' load tracks (``frames.engine_load``), in the order they are drawn.
LOAD_TRACKS: tuple[str, ...] = tuple(_VOCABULARIES["load_tracks"])
#: What a virtual PD span's name ends with, by its phase (``[P]``/``[D]`` lanes); the
#: renderer tells a virtual span's phase by it.
PD_LANE_SUFFIXES: dict[str, str] = dict(_VOCABULARIES["pd_lane_suffixes"])
#: What the name of every real PD span and of the PD summary event begins with
#: (``schema`` names them from it); the renderer tells a real PD span by it.
PD_SPAN_PREFIX: str = _VOCABULARIES["pd_span_prefix"]
#: Each load track's unit (``ratio``: a share of 1, drawn as a percentage).
LOAD_TRACK_UNITS: dict[str, str] = dict(_VOCABULARIES["load_track_units"])
#: How the series of one load track add up, across an engine's scheduler groups (the
#: ranks of one group count once) and across engines: ``sum``, or ``max`` (the fullest).
LOAD_TRACK_COMBINE: dict[str, str] = dict(_VOCABULARIES["load_track_combine"])
#: Where engine slices of several phases overlap, the phase an instant counts in (the
#: first of these; ``answers.engine``'s partition) and the one the renderer's engine band
#: shows on top; ``other`` last.
ENGINE_PHASE_PRIORITY: tuple[str, ...] = tuple(_VOCABULARIES["engine_phase_priority"])
#: Two times closer than this are one instant where the critical path asks what finished
#: before what (``answers.critical`` and the renderer's walk): timestamps slime takes of
#: one moment differ by microseconds, and the payload's float32 item times round.
SAME_INSTANT_SECONDS: float = float(_VOCABULARIES["same_instant_seconds"])
