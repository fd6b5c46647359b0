"""``Engine.run``'s arguments checked before any pass: the long-sequence policy, the layers
asked for, and what the model's family cannot do, each refused in one sentence."""

from __future__ import annotations

from typing import Sequence

from flamino_core.model.config import MAX_RESIDUES
from flamino_core.model.families import FAMILIES
from flamino_core.options import LONG_POLICIES


def refuse_unsupported(family, used: Sequence[str], contacts: bool, long: str) -> None:
    """What this family cannot do, refused in one sentence: contacts without a contact head,
    one pass beyond the positions a learned table holds."""
    if contacts and not family.contact_head:
        with_head = " and ".join(f.title for f in FAMILIES.values() if f.contact_head)
        raise ValueError(f"{family.title} has no contact head (contacts come from {with_head}); "
                         "its attention maps are available")
    limit = family.position_limit
    if long == "full" and limit is not None and any(len(s) > limit for s in used):
        raise ValueError(f"{family.title} has learned positions for {limit:,} residues: a longer "
                         "sequence runs in windows (long='window') or truncated, not in one pass")


def checked_run(engine, sequences, repr_layers, attention_layers, long, contacts=False):
    """``engine.run``'s arguments checked: (sequences as analysed, repr layers, attention layers)."""
    if long not in LONG_POLICIES:
        raise ValueError(f"long must be one of {LONG_POLICIES}, not {long!r}")
    n = engine.config.num_layers
    repr_layers = tuple(sorted(set(engine.normalize_layers(repr_layers)) | {n}))
    if any(a == 0 or a < -n for a in attention_layers):
        raise ValueError(f"attention layers are numbered 1..{n} (or -1 for the last); layer 0 is the embedding")
    attention_layers = engine.normalize_layers(attention_layers)
    used = [s[:MAX_RESIDUES] if long == "truncate" else s for s in sequences]
    refuse_unsupported(engine.family, used, contacts, long)
    if long == "window" and attention_layers and any(len(s) > MAX_RESIDUES for s in used):
        raise ValueError(
            "attention maps of sequences longer than 1022 residues cannot be stitched from "
            "windows; choose long='truncate' or long='full' for them"
        )
    return used, repr_layers, attention_layers
