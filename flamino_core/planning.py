"""How sequences become padded token rows, and rows become per-sequence outputs again.

Pure NumPy, no model: length buckets, long sequences cut into windows, batches planned
within a token budget, rows packed (filler rows included), outputs cut out of the padded
rows, windows merged back into whole sequences, and the memory the requested outputs will
take checked before any forward pass. ``engine.Engine`` runs the jitted model on these rows.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from .alphabet import CLS_IDX, EOS_IDX, MASK_IDX, PAD_IDX, batch_encode
from .config import MAX_RESIDUES

# Token lengths (residues + <cls> + <eos>) that inputs are padded up to: every multiple of 16.
# Finer buckets mean more shapes to compile (about a second each, once, and kept by the
# persistent compilation cache) but at most 15 padding tokens per row: with the earlier coarse
# buckets (..., 256, 384, ...) a 300-residue protein paid for 27% padding in every pass.
BUCKET_STEP = 16
LENGTH_BUCKETS = tuple(range(BUCKET_STEP, 1024 + 1, BUCKET_STEP))
WINDOW_STEP = MAX_RESIDUES // 2  # windows overlap by half their length


def bucket_length(tokens: int) -> int:
    """The padded token length for a row of ``tokens`` tokens."""
    if tokens <= LENGTH_BUCKETS[-1]:
        return max(BUCKET_STEP, -(-tokens // BUCKET_STEP) * BUCKET_STEP)
    return -(-tokens // 256) * 256  # --long full beyond the training length


def pow2_at_most(n: int) -> int:
    """The largest power of two <= n (1 for n < 2)."""
    return 1 << (max(1, n).bit_length() - 1)


def pow2_at_least(n: int) -> int:
    """The smallest power of two >= n (1 for n < 2)."""
    return 1 << (max(1, n) - 1).bit_length()


# --- windows -------------------------------------------------------------------------------
def window_starts(length: int, window: int = MAX_RESIDUES, step: int = WINDOW_STEP) -> list[int]:
    """Start offsets of overlapping windows covering ``length`` residues (last one flush right)."""
    if length <= window:
        return [0]
    starts = list(range(0, length - window, step))
    return starts + [length - window]


@dataclasses.dataclass(frozen=True)
class Window:
    """The residues of one sequence that one row of a batch holds."""

    sequence: int  # index of its sequence
    start: int  # offset of its first residue in that sequence
    residues: str


def windows(sequences: Sequence[str], windowed: bool) -> list[Window]:
    """One window per sequence, or overlapping windows of ``MAX_RESIDUES`` for long ones."""
    out = []
    for index, seq in enumerate(sequences):
        starts = window_starts(len(seq)) if windowed else [0]
        width = MAX_RESIDUES if windowed else len(seq)
        out += [Window(index, start, seq[start:start + width]) for start in starts]
    return out


# --- batches -------------------------------------------------------------------------------
def plan_batches(lengths: Sequence[int], max_rows: Callable[[int], int]) -> list[tuple[list[int], int]]:
    """Batches of rows and their padded width; ``max_rows(width)`` is the most rows a batch may hold.

    Sorted by length and filled greedily, as transformers users batch by hand, so a batch
    is padded to its longest row's bucket. A batch holds at most a power of two rows (the
    most ``max_rows`` allows at its width), and one that ends up with fewer is split into
    power-of-two pieces (13 rows -> 8 + 4 + 1) rather than padded with filler rows, so
    few shapes are compiled.
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[tuple[list[int], int]] = []
    current: list[int] = []
    width = 0
    for i in order:
        wider = bucket_length(lengths[i] + 2)
        if current and len(current) + 1 > pow2_at_most(max_rows(wider)):
            batches += _split_pow2(current, width)
            current = []
        current.append(i)
        width = wider
    if current:
        batches += _split_pow2(current, width)
    return batches


def _split_pow2(rows: list[int], width: int) -> list[tuple[list[int], int]]:
    """Rows in power-of-two pieces, largest first (13 rows -> 8 + 4 + 1): no filler rows."""
    pieces, start = [], 0
    for bit in reversed(range(len(rows).bit_length())):
        if len(rows) >> bit & 1:
            pieces.append((rows[start:start + (1 << bit)], width))
            start += 1 << bit
    return pieces


def _filler_rows(rows: int, width: int) -> np.ndarray:
    # Filler rows are a minimal real sequence (<cls><eos>), never all-padding: an all-pad
    # row would divide by zero in token dropout.
    tokens = np.full((rows, width), PAD_IDX, np.int32)
    tokens[:, 0], tokens[:, 1] = CLS_IDX, EOS_IDX
    return tokens


def pack_rows(residues: Sequence[str], width: int) -> np.ndarray:
    """(power of two >= len(residues), width) tokens: the sequences, then filler rows."""
    tokens = _filler_rows(pow2_at_least(len(residues)), width)
    tokens[: len(residues)] = batch_encode(residues, pad_to=width)
    return tokens


# Masked passes over a sequence longer than ESM-2's 1,024 tokens use ProteinGym's windows
# (``get_optimal_window`` in proteingym/utils/scoring_utils.py, github.com/OATML-Markslab/ProteinGym
# at bb68524; its compute_fitness.py slices the *tokenized* sequence with it): 1,024 tokens cut out
# of <cls> r1 ... rL <eos>, centred on the masked token and clamped to the ends. Only the first
# window keeps <cls> and only the last keeps <eos>; an interior one is 1,024 residues and no special
# token, like ESM-2's training crops of long sequences. Long proteins then score as in ProteinGym
# (docs/variants.md). Changing this changes stored masked results: it is part of Engine.fingerprint.
MASKED_WINDOW_TOKENS = MAX_RESIDUES + 2
MASKED_WINDOWS = f"proteingym-optimal-window-{MASKED_WINDOW_TOKENS}"


def masked_window(token: int, n_tokens: int, width: int = MASKED_WINDOW_TOKENS) -> tuple[int, int]:
    """Token span ``[start, end)`` of the row that masks token ``token`` (residue i is token i + 1)
    of a tokenized sequence of ``n_tokens``: all of it when it fits, else ProteinGym's window."""
    half = width // 2
    if n_tokens <= width:
        return 0, n_tokens
    if token < half:
        return 0, width
    if token >= n_tokens - half:
        return n_tokens - width, n_tokens
    return token - half, token + half


def pack_masked_rows(sequence_tokens: np.ndarray, positions: Sequence[int], width: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows for a masked scan: row r is ``masked_window`` of ``positions[r]``, masked there.

    Args:
      sequence_tokens: ``alphabet.encode`` of the whole sequence (with ``<cls>``/``<eos>``).
      positions: 0-based residue positions, one row each.
      width: padded token width (at least the window's: the sequence's tokens, or 1,024).

    Returns:
      tokens (power of two >= len(positions), width) with filler rows after the real ones, and
      the token index of each row's mask (1 for filler rows).
    """
    tokens = _filler_rows(pow2_at_least(len(positions)), width)
    mask_at = np.ones(len(tokens), np.int32)
    for r, p in enumerate(positions):
        start, end = masked_window(p + 1, len(sequence_tokens))
        tokens[r, : end - start] = sequence_tokens[start:end]
        tokens[r, p + 1 - start] = MASK_IDX
        mask_at[r] = p + 1 - start
    return tokens, mask_at


def joint_window_start(positions: Sequence[int], length: int, window: int) -> int:
    """Start of the ``window``-residue window that holds every position of a set, centred on the
    middle of its span (the Attention page's window of a long record's shown range).

    Raises:
      ValueError: a position outside the sequence, or a span wider than one window.
    """
    if len(positions) == 0:
        raise ValueError("each set of positions to mask needs at least one position")
    low, high = min(positions), max(positions)
    if low < 0 or high >= length:
        raise ValueError(f"position {(low if low < 0 else high) + 1} is outside the sequence (1..{length})")
    if high - low >= window:
        raise ValueError(f"positions {low + 1} and {high + 1} do not fit one {window}-residue window")
    centred = (low + high) // 2 - window // 2
    return min(max(centred, high - window + 1, 0), low, length - window)


def joint_window(positions: Sequence[int], n_tokens: int, width: int = MASKED_WINDOW_TOKENS) -> tuple[int, int]:
    """Token span of the row that masks a whole set of residue positions at once (the variants'
    joint-masked strategy): ``masked_window`` of the middle of the set's span, moved just enough
    to hold every position.

    Raises:
      ValueError: a position outside the sequence, or a span wider than one window.
    """
    if len(positions) == 0:
        raise ValueError("each set of positions to mask needs at least one position")
    low, high = min(positions) + 1, max(positions) + 1  # token indices
    if low < 1 or high > n_tokens - 2:
        raise ValueError(f"position {(low if low < 1 else high)} is outside the sequence (1..{n_tokens - 2})")
    if n_tokens <= width:
        return 0, n_tokens
    if high - low >= width:
        raise ValueError(f"positions {low} and {high} do not fit one {width}-token window")
    start, _ = masked_window((low + high) // 2, n_tokens, width)
    start = min(max(start, high - width + 1), low)
    return start, start + width


def pack_jointly_masked_rows(
    sequence_tokens: np.ndarray, position_sets: Sequence[Sequence[int]], width: int
) -> tuple[np.ndarray, list[int]]:
    """Rows that each mask a whole set of positions at once (one row per set, ``joint_window``).

    Returns:
      tokens (power of two >= len(position_sets), width) with filler rows after the real ones,
      and each row's first token's index in the tokenized sequence (residue i sits at row index
      i + 1 - start).
    """
    tokens = _filler_rows(pow2_at_least(len(position_sets)), width)
    starts = []
    for r, positions in enumerate(position_sets):
        start, end = joint_window(positions, len(sequence_tokens))
        tokens[r, : end - start] = sequence_tokens[start:end]
        tokens[r, np.asarray(positions) + 1 - start] = MASK_IDX
        starts.append(start)
    return tokens, starts


def unpack_rows(out: dict, lengths: Sequence[int]) -> list[dict]:
    """Per-row outputs of one batch with padding and special tokens cut away (views, no copies).

    ``out`` holds the model's batch outputs as NumPy arrays; row i holds ``lengths[i]`` residues.
    """
    results = []
    for row, length in enumerate(lengths):
        item = {"representations": {k: v[row, 1:length + 1] for k, v in out["representations"].items()}}
        if "logits" in out:
            item["logits"] = out["logits"][row, 1:length + 1]
        if "attentions" in out:
            item["attentions"] = out["attentions"][row, :, :, : length + 2, : length + 2]
        if "contacts" in out:
            item["contacts"] = out["contacts"][row, :length, :length]
        results.append(item)
    return results


# --- merging windows -------------------------------------------------------------------------
class WindowMerge:
    """Per-sequence outputs, put together from their windows as the batches finish.

    A window's per-residue outputs are added into its sequence's running sums and then
    dropped, so a long sequence costs O(L x D) memory and O(windows x window x D) time,
    never a full-length array per window. Where windows overlap the outputs are averaged;
    contacts are averaged over the windows that hold both residues, and a pair that no
    window holds is NaN: not predicted (the model never saw the two residues together, so 0
    would be a prediction it did not make). With windows of ``MAX_RESIDUES`` and a step of
    ``WINDOW_STEP``, every pair at most ``WINDOW_STEP`` positions apart is covered, pairs
    ``MAX_RESIDUES`` or more apart never are. (L, L) arrays exist only when the windows carry
    contacts.
    """

    def __init__(self, sequences: Sequence[str], windows: Sequence[Window]):
        self._lengths = [len(s) for s in sequences]
        self._pending = [0] * len(sequences)
        for w in windows:
            self._pending[w.sequence] += 1
        self._windows = list(windows)
        self._sums: list[dict | None] = [None] * len(sequences)

    def add(self, window_index: int, output: dict) -> None:
        """Take the outputs of one window (``unpack_rows`` of its batch row)."""
        w = self._windows[window_index]
        self._pending[w.sequence] -= 1
        if self._sums[w.sequence] is None and self._pending[w.sequence] == 0:  # a single window
            self._sums[w.sequence] = output
            return
        sums = self._sums[w.sequence]
        if sums is None:
            sums = self._sums[w.sequence] = _zeros_like_merged(output, self._lengths[w.sequence])
        span = slice(w.start, w.start + len(w.residues))
        sums["coverage"][span] += 1
        for layer, values in output["representations"].items():
            sums["representations"][layer][span] += values
        if "logits" in output:
            sums["logits"][span] += output["logits"]
        if "contacts" in output:
            sums["contacts"][span, span] += output["contacts"]
            sums["pair_coverage"][span, span] += 1
        if self._pending[w.sequence] == 0:
            _average(sums)

    def result(self, sequence: int) -> dict:
        """The merged outputs of one sequence (all its windows added)."""
        if self._pending[sequence]:
            raise ValueError(f"sequence {sequence} still misses {self._pending[sequence]} window(s)")
        return self._sums[sequence]


def _zeros_like_merged(output: dict, length: int) -> dict:
    def zeros(values: np.ndarray) -> np.ndarray:
        return np.zeros((length,) + values.shape[1:], np.float32)

    sums = {
        "coverage": np.zeros((length, 1), np.float32),
        "representations": {layer: zeros(v) for layer, v in output["representations"].items()},
    }
    if "logits" in output:
        sums["logits"] = zeros(output["logits"])
    if "contacts" in output:
        sums["contacts"] = np.zeros((length, length), np.float32)
        sums["pair_coverage"] = np.zeros((length, length), np.uint8)  # at most 3 windows hold a pair
    return sums


def _average(sums: dict) -> None:
    coverage = sums.pop("coverage")
    for values in sums["representations"].values():
        values /= coverage
    if "logits" in sums:
        sums["logits"] /= coverage
    if "contacts" in sums:
        pairs = sums.pop("pair_coverage")
        contacts = sums["contacts"]
        for first in range(0, len(contacts), 1024):  # row blocks: no (L, L) temporary
            block = slice(first, first + 1024)
            covered = pairs[block] > 0
            np.divide(contacts[block], pairs[block], out=contacts[block], where=covered)
            contacts[block][~covered] = np.nan  # no window held both residues: not predicted


# --- memory ------------------------------------------------------------------------------------
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


def gigabytes(size: int) -> str:
    """A size in bytes for people: ``126 MB``, ``562.9 GB``."""
    return f"{size / 1e9:,.1f} GB" if size >= 1e9 else f"{size / 1e6:,.0f} MB"
