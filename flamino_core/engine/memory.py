"""Memory: what the requested outputs will take, and what this process can still take.

``Engine.run`` returns every sequence's outputs together, so it checks them against the memory
available now (``available_memory``: Linux MemAvailable within a cgroup v2 limit) before its
first pass (``check_outputs_fit``). Pure Python, no model.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from flamino_core.model.config import MAX_RESIDUES
from flamino_core.wording import byte_size


def output_bytes(
    lengths: Sequence[int],
    *,
    windowed: bool,
    per_residue_floats: int,
    attention_maps: int = 0,
    contacts: bool = False,
) -> list[int]:
    """Bytes of the outputs ``Engine.run`` returns for each sequence (and merges them in).

    Args:
      lengths: residues per sequence, as analysed.
      windowed: sequences over ``MAX_RESIDUES`` are merged from windows.
      per_residue_floats: float32 values per residue (hidden sizes of the layers kept, logits).
      attention_maps: (L + 2, L + 2) attention maps kept per sequence (layers x heads).
      contacts: an (L, L) contact map per sequence.
    """
    sizes = []
    for length in lengths:
        size = 4 * length * per_residue_floats + 4 * attention_maps * (length + 2) ** 2
        if contacts:
            merged = windowed and length > MAX_RESIDUES
            size += (4 + (1 if merged else 0)) * length**2  # float32 map (+ uint8 pair counts)
        sizes.append(size)
    return sizes


def available_memory() -> int | None:
    """Bytes of memory this process can still take (Linux: MemAvailable, within a cgroup limit)."""
    available = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return None
    try:  # a container's limit (cgroup v2) can be far below the machine's memory
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            used = int(Path("/sys/fs/cgroup/memory.current").read_text())
            room = int(limit) - used
            available = room if available is None else min(available, room)
    except (OSError, ValueError):
        pass
    return available


def check_outputs_fit(config, lengths: Sequence[int], *, windowed: bool, repr_layers: Sequence[int], logits: bool,
                      attention_layers: Sequence[int], contacts: bool) -> None:
    """Refuse, before any forward pass, outputs that cannot fit in the memory available now.

    The outputs of all sequences are returned together, so they must fit at once; the model's
    own working memory comes on top, so passing this check does not promise the run fits, but
    failing it means the run would run out of memory after all its work. Only (L, L) outputs
    (contacts, attention maps) of long sequences come near the limit.

    Args: the model's ``ModelConfig``, residues per sequence as analysed, and ``Engine.run``'s
    output options. Raises: ValueError saying what would fit instead.
    """
    per_residue = len(repr_layers) * config.embed_dim + (config.vocab_size if logits else 0)
    maps = len(attention_layers) * config.attention_heads
    sizes = output_bytes(lengths, windowed=windowed, per_residue_floats=per_residue, attention_maps=maps,
                         contacts=contacts)
    available = available_memory()
    if available is None or sum(sizes) <= available:
        return
    if contacts or attention_layers:
        what = " and ".join(name for name, asked in (("contacts", contacts), ("attention maps", maps)) if asked)
        lean = output_bytes(lengths, windowed=windowed, per_residue_floats=per_residue)
        advice = (f"without the {what} they need {byte_size(sum(lean))}: leave them out, or analyse "
                  f"only the first {MAX_RESIDUES} residues of long sequences (--long truncate)")
    else:
        advice = "analyse fewer or shorter sequences at a time"
    raise ValueError(
        f"the requested outputs need about {byte_size(sum(sizes))} of memory (the longest "
        f"sequence has {max(lengths):,} residues), more than the {byte_size(available)} "
        f"available now; {advice}"
    )
