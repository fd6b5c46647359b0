"""Long sequences as overlapping windows, and the windows' outputs merged back (pure NumPy).

ESM-2 was trained on at most ``MAX_RESIDUES`` residues. Longer sequences run as windows of that
length overlapping by half (``windows``) and their outputs are averaged where they overlap
(``WindowMerge``); a masked pass uses ProteinGym's token window of its position
(``masked_window``), a jointly masked set the window of its span's middle (``joint_window``), an
indel scored as a whole sequence the window of the wild type that holds it (``edit_window``).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from flamino_core.model.config import MAX_RESIDUES

WINDOW_STEP = MAX_RESIDUES // 2  # windows overlap by half their length


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


# --- masked passes ----------------------------------------------------------------------------------
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


# --- the window of an edit (indels and other changes scored as whole sequences) ----------------------
def edit_window(length: int, low: int, high: int, growth: int = 0, width: int = MAX_RESIDUES) -> tuple[int, int]:
    """Wild-type residues ``[start, end)`` of the window that scores an edit touching residues
    ``low..high`` (0-based, inclusive) of a sequence of ``length`` residues, when the wild type or
    its mutant is longer than ``width``. The mutant's window is the same flanks with the edit
    applied, ``growth`` residues longer (an insertion's net gain; 0 otherwise), so the wild
    type's window holds ``size = width - growth`` residues and both fit the model.

    Of the overlapping windows of ``size`` residues that ``window_starts`` lays over the wild type
    (step ``size // 2``: with ``growth`` 0, the windows of every unmasked pass), the one holding
    the edit with the most residues on its shorter side; the earlier one on a tie. Variants in one
    region so share their wild-type window and its passes. An edit no such window holds (wider
    than half a window) gets a window centred on it, clamped to the ends.

    Raises:
      ValueError: the edit (with its growth) is wider than one window.
    """
    size = min(length, width - growth)
    low, high = max(low, 0), min(high, length - 1)
    if high - low + 1 > size:
        raise ValueError(f"the edit spans {high - low + 1 + growth:,} residues, more than one {width:,}-residue "
                         "window holds")
    starts = window_starts(length, size, max(size // 2, 1))
    holding = [(min(low - s, s + size - 1 - high), -s) for s in starts if s <= low and high < s + size]
    if holding:
        start = -max(holding)[1]
    else:
        start = min(max((low + high) // 2 - size // 2, 0), length - size)
        start = min(max(start, high - size + 1), low)
    return start, start + size


def residue_window_start(positions: Sequence[int], length: int, window: int) -> int:
    """Start of the ``window``-residue window that holds every position of a set, centred on the
    middle of its span (the Attention page's window of a long record, run whole with its maps).

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


# --- merging windows --------------------------------------------------------------------------------
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
        """Take the outputs of one window (``planner.unpack`` of its batch)."""
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
