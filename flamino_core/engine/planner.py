"""How sequences become token rows, and rows become per-sequence outputs again: one planner.

Pure NumPy, no model. A row holds one or more sequences end to end, each ``<cls> ... <eos>`` as
if it were alone, then right padding; a plain row is simply a row of one sequence. ``plan``
puts sequences into rows (several per row when packing) and rows into batches within a token
budget; ``pack`` writes a batch's tokens (and segment ids when a row holds several sequences,
which the model turns into positions and key spans: ``segments.layout``); ``unpack`` cuts each
sequence's outputs back out. Masked passes (one masked window per row) have their own rows
here too. ``engine.Engine`` runs the jitted model on these rows; windows of long sequences are
``windows``'s, the memory check ``memory``'s.
"""

from __future__ import annotations

import bisect
import dataclasses
from typing import Callable, Iterator, Sequence

import numpy as np

from flamino_core.alphabet import CLS_IDX, EOS_IDX, MASK_IDX, PAD_IDX, encode
from flamino_core.model.config import MAX_RESIDUES

# Token lengths (residues + <cls> + <eos>) that rows of one sequence are padded up to: every
# multiple of 16. Finer buckets mean more shapes to compile (about a second each, once, and
# kept by the persistent compilation cache) but at most 15 padding tokens per row: with the
# earlier coarse buckets (..., 256, 384, ...) a 300-residue protein paid for 27% padding.
BUCKET_STEP = 16
LENGTH_BUCKETS = tuple(range(BUCKET_STEP, 1024 + 1, BUCKET_STEP))
# The widest packed row: the widest bucket (a 1022-residue window), so packed batches reuse the
# shapes unpacked ones compile, and an 8192-token batch holds 8 such rows. Wider rows would cost
# no more attention (each sequence attends only to its own keys) but would add shapes.
PACKED_ROW_TOKENS = LENGTH_BUCKETS[-1]
# Packed rows are padded to a multiple of this (coarser than the 16-token buckets of single
# sequences): a row's fill depends on every sequence in it, so with fine buckets slightly
# different inputs would often need a new compiled width. Almost every packed row is nearly
# full (1024 wide); the step only pads the part-filled rows at the end of a run.
PACKED_WIDTH_STEP = 128


def bucket_length(tokens: int) -> int:
    """The padded token length for a row of one sequence of ``tokens`` tokens."""
    if tokens <= LENGTH_BUCKETS[-1]:
        return max(BUCKET_STEP, -(-tokens // BUCKET_STEP) * BUCKET_STEP)
    return -(-tokens // 256) * 256  # --long full beyond the training length


def packed_width(tokens: int) -> int:
    """The padded width of a packed row of ``tokens`` tokens (a multiple of ``PACKED_WIDTH_STEP``)."""
    if tokens > PACKED_ROW_TOKENS:  # one sequence beyond the training length (--long full)
        return bucket_length(tokens)
    return -(-tokens // PACKED_WIDTH_STEP) * PACKED_WIDTH_STEP


def pow2_at_most(n: int) -> int:
    """The largest power of two <= n (1 for n < 2)."""
    return 1 << (max(1, n).bit_length() - 1)


def pow2_at_least(n: int) -> int:
    """The smallest power of two >= n (1 for n < 2)."""
    return 1 << (max(1, n) - 1).bit_length()


# --- plan ------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Row:
    """The sequences one row holds, in order, and the token offset of each one's ``<cls>``."""

    items: tuple[int, ...]  # indices into the planned lengths
    offsets: tuple[int, ...]
    tokens: int  # tokens used, specials included (the rest of the row is padding)


@dataclasses.dataclass(frozen=True)
class Batch:
    """Rows run in one forward pass (a power of two of them), padded to ``width`` tokens."""

    rows: tuple[Row, ...]
    width: int

    @property
    def shared(self) -> bool:
        """Some row holds several sequences (the pass needs segment ids)."""
        return any(len(row.items) > 1 for row in self.rows)


def plan(lengths: Sequence[int], max_rows: Callable[[int], int], pack: bool = False,
         capacity: int = PACKED_ROW_TOKENS) -> list[Batch]:
    """Rows and batches for sequences of ``lengths`` residues.

    Args:
      lengths: residues per sequence.
      max_rows: the most rows a batch of this width may hold (the token budget).
      pack: put several sequences per row (best-fit, rows of up to ``capacity`` tokens, widths
        in steps of ``PACKED_WIDTH_STEP``); otherwise, or for a single sequence, one sequence
        per row padded to its length bucket.
      capacity: the most tokens a packed row holds (a longer sequence gets a row of its own).

    Returns:
      Batches, widest rows first. Each holds a power of two rows, as many as ``max_rows``
      allows at its width, and is padded only to its own widest row; what is left at the end
      is split into power-of-two pieces (13 rows -> 8 + 4 + 1), so few shapes are compiled and
      no filler rows are run. Every sequence appears once.
    """
    pack = pack and len(lengths) > 1
    rows = _best_fit_rows(lengths, capacity) if pack else [Row((i,), (0,), n + 2) for i, n in enumerate(lengths)]
    width_of = packed_width if pack else bucket_length
    order = sorted(rows, key=lambda row: (-row.tokens, row.items[0]))
    batches = []
    while order:
        width = width_of(order[0].tokens)
        size = min(pow2_at_most(max_rows(width)), pow2_at_most(len(order)))
        batches.append(Batch(tuple(order[:size]), width))
        order = order[size:]
    return batches


def _best_fit_rows(lengths: Sequence[int], capacity: int) -> list[Row]:
    """Rows of at most ``capacity`` tokens holding sequences of ``lengths`` residues.

    Best-fit decreasing: longest first, each into the row it fills most tightly (a new row
    when none has room). A sequence longer than ``capacity`` gets a row of its own. Deterministic
    (ties go to the earlier row).
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
        rows.append(Row(tuple(items), tuple(offsets), total))
    return rows


# --- pack and unpack -------------------------------------------------------------------------------
def pack(batch: Batch, residues: Sequence[str], encode: Callable[[str], np.ndarray] = encode,
         ) -> tuple[np.ndarray, np.ndarray | None]:
    """(rows, width) token ids of a batch, and its segment ids (None when no row holds two).
    ``encode``: a sequence's token ids (the model family's, ``Family.encode``); the engine hands
    its windows already encoded (``residues`` their token ids) with the identity.

    Segment ids are 0, 1, ... for the sequences of a row in order; padding belongs to the last
    one, so ids never decrease (``segments.layout``). Token arrays are small: int32, at most the
    token budget per batch.
    """
    tokens = np.full((len(batch.rows), batch.width), PAD_IDX, np.int32)
    segments = np.zeros((len(batch.rows), batch.width), np.int32)
    for r, row in enumerate(batch.rows):
        if row.tokens > batch.width:
            raise ValueError(f"a row of {row.tokens} tokens does not fit {batch.width}")
        for segment, (item, offset) in enumerate(zip(row.items, row.offsets)):
            ids = encode(residues[item])
            tokens[r, offset:offset + len(ids)] = ids
            segments[r, offset:] = segment
    return tokens, (segments if batch.shared else None)


def unpack(out, batch: Batch, lengths: Sequence[int]) -> Iterator[tuple[int, dict]]:
    """(item, outputs) for every sequence of a batch, padding and special tokens cut away.

    ``out`` holds the model's batch outputs as NumPy arrays (``stack.ModelOutput`` after
    ``jax.device_get``, or a dict of the same names; attention maps and contacts come only from
    rows of one sequence); ``lengths`` are residues per item. Views, no copies.
    """
    logits, attentions, contacts = out.get("logits"), out.get("attentions"), out.get("contacts")
    for r, row in enumerate(batch.rows):
        for item, offset in zip(row.items, row.offsets):
            length = lengths[item]
            span = slice(offset + 1, offset + 1 + length)
            outputs = {"representations": {k: v[r, span] for k, v in out.get("representations").items()}}
            if logits is not None:
                outputs["logits"] = logits[r, span]
            if attentions is not None:  # with <cls> and <eos>
                outputs["attentions"] = attentions[r, :, :, offset:offset + length + 2, offset:offset + length + 2]
            if contacts is not None:  # the contact head drops <cls>: residue i at i
                outputs["contacts"] = contacts[r, offset:offset + length, offset:offset + length]
            yield item, outputs


# --- masked rows -----------------------------------------------------------------------------------
def masked_width(length: int) -> int:
    """Padded width of the masked passes over a sequence of ``length`` residues (one window a row)."""
    return bucket_length(min(length, MAX_RESIDUES) + 2)


def _filler_rows(rows: int, width: int) -> np.ndarray:
    # Filler rows are a minimal real sequence (<cls><eos>), never all-padding: an all-pad
    # row would divide by zero in token dropout.
    tokens = np.full((rows, width), PAD_IDX, np.int32)
    tokens[:, 0], tokens[:, 1] = CLS_IDX, EOS_IDX
    return tokens


def masked_rows(sequence_tokens: np.ndarray, spans: Sequence[tuple[int, int]], masked: Sequence[Sequence[int]],
                width: int, mask_ids: np.ndarray | None = None) -> np.ndarray:
    """Rows for masked passes: row r is the tokens ``spans[r]`` of the tokenized sequence, with
    the tokens ``masked[r]`` (indices in the whole tokenized sequence) masked.

    Args:
      sequence_tokens: ``alphabet.encode`` of the whole sequence (with ``<cls>``/``<eos>``).
      spans: each row's token span [start, end) (``windows.masked_window``, ``windows.joint_window``).
      masked: each row's masked tokens (residue i is token i + 1).
      width: padded token width (at least every span's length).
      mask_ids: per token of the whole sequence, what masks it (``Family.mask_ids``, SaProt's
        ``#`` + 3Di letter); None: ``<mask>``.

    Returns:
      tokens (power of two >= len(spans), width), filler rows after the real ones.
    """
    tokens = _filler_rows(pow2_at_least(len(spans)), width)
    for r, ((start, end), at) in enumerate(zip(spans, masked)):
        tokens[r, :end - start] = sequence_tokens[start:end]
        at = np.asarray(at)
        tokens[r, at - start] = MASK_IDX if mask_ids is None else mask_ids[at]
    return tokens


# --- what a plan compiles --------------------------------------------------------------------------
def masked_batch_rows(positions: int, max_rows: int) -> list[int]:
    """Rows of each masked pass of one ``Engine.compute_masked`` call over ``positions``
    positions: full passes of ``max_rows``, the last one's the next power of two (``masked_rows``'
    filler rows after the real ones)."""
    full, rest = divmod(positions, max_rows)
    return [max_rows] * full + ([pow2_at_least(rest)] if rest else [])


def shape_key(kind: str, shape: tuple[int, int], shared: bool = False, capture=None) -> str:
    """What one compiled call is, as a key: the pass (``forward``, ``masked``), its (rows, width),
    whether rows share (segment ids) and what a forward keeps (``stack.Capture``). The engine
    notes each key it ran (``Engine.compiled_shapes``); a job's cost counts the keys it lacks."""
    rows, width = shape
    return f"{kind} {rows}x{width}{' shared' if shared else ''}{'' if capture is None else f' {capture}'}"
