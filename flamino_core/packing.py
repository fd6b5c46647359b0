"""Several sequences in one row: which share a row, the row's tokens, and where each one sits.

Pure NumPy, no model. A row padded to its own 16-token bucket still carries the padding of
every batch it shares with longer rows; packing short sequences end to end into rows of up to
``PACKED_ROW_TOKENS`` tokens leaves almost none. Each sequence keeps its own ``<cls> ... <eos>``;
the per-token segment ids ``pack_rows`` returns tell the model (``segments.PackedRows``) where
each one starts, so it restarts rotary positions, keeps attention within each sequence and
rescales token dropout per sequence: a sequence gets the numbers it would get alone.
``engine.Engine.run`` packs when its attention path computes only each sequence's own keys
(the fused kernel) and no attention maps are asked for.
"""

from __future__ import annotations

import bisect
import dataclasses
from typing import Callable, Sequence

import numpy as np

from .alphabet import PAD_IDX, encode
from .planning import LENGTH_BUCKETS, bucket_length, pow2_at_most

# The widest packed row: the widest bucket (a 1022-residue window), so packed batches reuse the
# shapes unpacked ones compile, and an 8192-token batch holds 8 such rows. Wider rows would cost
# no more attention (each sequence attends only to its own keys) but would add shapes.
PACKED_ROW_TOKENS = LENGTH_BUCKETS[-1]
# Packed rows are padded to a multiple of this (coarser than the 16-token buckets of single
# sequences): a row's fill depends on every sequence in it, so with fine buckets slightly
# different inputs would often need a new compiled width. Almost every packed row is nearly
# full (1024 wide); the step only pads the part-filled rows at the end of a run.
PACKED_WIDTH_STEP = 128


@dataclasses.dataclass(frozen=True)
class PackedRow:
    """The sequences one row holds, in order, and the token offset of each one's ``<cls>``."""

    items: tuple[int, ...]  # indices into the planned lengths
    offsets: tuple[int, ...]
    tokens: int  # tokens used, specials included (the rest of the row is padding)


def plan_rows(lengths: Sequence[int], capacity: int = PACKED_ROW_TOKENS) -> list[PackedRow]:
    """Rows of at most ``capacity`` tokens holding sequences of ``lengths`` residues.

    Best-fit decreasing: longest first, each into the row it fills most tightly (a new row
    when none has room). A sequence longer than ``capacity`` gets a row of its own. Deterministic
    (ties go to the earlier row); every index appears once.
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    contents: list[list[int]] = []
    used: list[int] = []
    room: list[tuple[int, int]] = []  # (free tokens, row), sorted
    for i in order:
        tokens = lengths[i] + 2
        at = bisect.bisect_left(room, (tokens, -1))
        if at < len(room):
            free, row = room.pop(at)
            if free > tokens:
                bisect.insort(room, (free - tokens, row))
        else:
            row = len(contents)
            contents.append([])
            used.append(0)
            if capacity > tokens:
                bisect.insort(room, (capacity - tokens, row))
        contents[row].append(i)
        used[row] += tokens
    rows = []
    for items, total in zip(contents, used):
        offsets = np.cumsum([0] + [lengths[i] + 2 for i in items[:-1]]).tolist()
        rows.append(PackedRow(tuple(items), tuple(offsets), total))
    return rows


def packed_width(tokens: int) -> int:
    """The padded width of a packed row of ``tokens`` tokens (a multiple of ``PACKED_WIDTH_STEP``)."""
    if tokens > PACKED_ROW_TOKENS:  # one sequence beyond the training length (--long full)
        return bucket_length(tokens)
    return -(-tokens // PACKED_WIDTH_STEP) * PACKED_WIDTH_STEP


def plan_batches(rows: Sequence[PackedRow], max_rows: Callable[[int], int]) -> list[tuple[list[int], int]]:
    """Batches of packed rows (indices into ``rows``) and their padded width.

    Fullest rows first, each batch as many rows as ``max_rows(width)`` allows (a power of two);
    what is left is split into power-of-two pieces, each padded only to its own longest row
    (``packed_width``): the part-filled row that packing leaves at the end runs at its own small
    width instead of being padded to a full row.
    """
    order = sorted(range(len(rows)), key=lambda i: (-rows[i].tokens, i))
    batches: list[tuple[list[int], int]] = []
    while order:
        width = packed_width(rows[order[0]].tokens)
        size = min(pow2_at_most(max_rows(width)), pow2_at_most(len(order)))
        piece, order = order[:size], order[size:]
        batches.append((piece, width))
    return batches


def pack_rows(rows: Sequence[PackedRow], residues: Sequence[str], width: int) -> tuple[np.ndarray, np.ndarray]:
    """(len(rows), width) token ids and segment ids for packed rows.

    Args:
      rows: from ``plan_rows``; each must fit in ``width`` tokens.
      residues: the sequences ``rows`` index into.
      width: padded row width.

    Returns:
      tokens (padding after the last sequence of a row) and segment ids (0, 1, ... for the
      sequences of a row in order; padding belongs to the last one, so ids never decrease and
      padding queries attend to real keys, never to none).
    """
    tokens = np.full((len(rows), width), PAD_IDX, np.int32)
    segments = np.zeros((len(rows), width), np.int32)
    for r, row in enumerate(rows):
        if row.tokens > width:
            raise ValueError(f"a packed row of {row.tokens} tokens does not fit {width}")
        for segment, (item, offset) in enumerate(zip(row.items, row.offsets)):
            ids = encode(residues[item])
            tokens[r, offset:offset + len(ids)] = ids
            segments[r, offset:] = segment
    return tokens, segments


def unpack_rows(out: dict, rows: Sequence[PackedRow], lengths: Sequence[int]) -> list[tuple[int, dict]]:
    """(item, outputs) for every sequence of a batch of packed rows, special tokens cut away.

    ``out`` holds the model's batch outputs as NumPy arrays (representations and logits; packed
    rows carry no attention maps); ``lengths`` are residues per item. Views, no copies.
    """
    results = []
    for r, row in enumerate(rows):
        for item, offset in zip(row.items, row.offsets):
            span = slice(offset + 1, offset + 1 + lengths[item])
            outputs = {"representations": {k: v[r, span] for k, v in out["representations"].items()}}
            if "logits" in out:
                outputs["logits"] = out["logits"][r, span]
            results.append((item, outputs))
    return results
