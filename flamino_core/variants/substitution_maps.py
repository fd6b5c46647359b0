"""Variant-effect scores from the masked language model (Meier et al. 2021 definitions).

``substitution_map`` is the one entry point the command line, batch jobs and the app use for
the scores of every single substitution: an engine, a sequence and a strategy name
(``options.STRATEGIES``) in, ``SequenceScores`` out. Masked strategies get their passes from
``passes.masked_log_probs`` (the result store: a position masked once is never masked again for
the same model). The other functions are its pieces, each defined here once: the mt - wt
difference (``substitution_scores``), the pseudo-log-likelihood (``pseudo_log_likelihood``) and
the pseudo-perplexity; the log-softmax is ``analysis.log_softmax``.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Callable, Iterator, Sequence

import numpy as np

from flamino_core.progress import ProgressFn
from flamino_core.alphabet import AA_TO_IDX, STANDARD_AA_TOKEN_IDS, STANDARD_AMINO_ACIDS
from flamino_core.analysis.outputs import log_softmax
from flamino_core.inputs.numbering import Numbering
from flamino_core import options
from flamino_core.options import Strategy


@dataclasses.dataclass(frozen=True)
class SequenceScores:
    """What a strategy says about the residues it scored.

    ``sequence`` holds the scored residues, row ``r`` of ``substitutions`` is residue
    ``positions[r]`` (0-based) of the sequence given: the whole sequence by default, the first
    1022 residues for wt-marginals under ``long="truncate"``.
    """

    sequence: str
    strategy: str
    substitutions: np.ndarray  # (n, 20) log p(mt) - log p(wt), columns in STANDARD_AMINO_ACIDS order
    pppl: float | None  # pseudo-perplexity of the scored residues: from the masked strategies only
    positions: np.ndarray  # (n,) 0-based indices of the scored residues


def strategy_of(name: str) -> Strategy:
    """The ``options.STRATEGIES`` declaration of the map strategy ``name``, or a ValueError listing
    the choices."""
    return options.strategy_of(name, "map")


def substitution_map(
    engine,
    sequence: str,
    strategy: str,
    *,
    positions: Sequence[int] | None = None,
    long: str = "window",
    store=None,
    progress: ProgressFn | None = None,
    cancelled: Callable[[], bool] | None = None,
    unmasked=None,
) -> SequenceScores:
    """Score every single substitution at ``positions`` of ``sequence`` by ``strategy``.

    Args:
      engine: an ``engine.Engine``.
      sequence: a validated protein sequence.
      strategy: a name in ``options.STRATEGIES``: ``masked-marginals`` (one masked pass per
        position: the substitution scores and the pseudo-perplexity), ``pppl`` (the same
        passes) or ``wt-marginals`` (one unmasked pass: substitution scores only, the fast
        approximation).
      positions: 0-based residues to score (default: all). Masked strategies run only these
        (and only those not in the store); an unmasked one runs the whole sequence once.
      long: sequences over 1022 residues, for the unmasked pass (see ``Engine.run``); masked
        passes always use ProteinGym's 1,024-token window of the masked position
        (``windows.masked_window``).
      store: the ``result_store.ResultStore`` for masked passes (default: the process's).
      progress: called with (positions done, positions) for the masked passes.
      cancelled: polled between chunks of masked passes (``passes.Cancelled`` stops them,
        what finished is stored).
      unmasked: this sequence's ``SequenceOutput`` with logits, if the caller has it already
        (a batch job embeds and scores in the same pass); an unmasked strategy then runs
        nothing.

    Returns:
      ``SequenceScores``.
    """
    declared = strategy_of(strategy)
    if declared.masked:
        from flamino_core.store.passes import masked_log_probs

        positions = np.arange(len(sequence)) if positions is None else np.asarray(positions, dtype=np.int64)
        log_probs = masked_log_probs(engine, sequence, positions, store=store, progress=progress, cancelled=cancelled)
    else:
        if unmasked is None:
            (unmasked,) = engine.run([sequence], repr_layers=(), logits=True, long=long)
        analysed = len(unmasked.sequence)  # long="truncate": the first 1022 residues
        positions = np.arange(analysed) if positions is None else np.asarray(positions, dtype=np.int64)
        if len(positions) and not (0 <= positions.min() and positions.max() < analysed):
            raise ValueError(f"positions must lie in 1..{analysed} (the residues analysed)")
        log_probs = log_softmax(np.asarray(unmasked.logits)[positions].astype(np.float64)).astype(np.float32)
    return from_log_probs(log_probs, sequence, strategy, positions)


def from_log_probs(log_probs: np.ndarray, sequence: str, strategy: str = "masked-marginals",
                   positions: Sequence[int] | None = None) -> SequenceScores:
    """``SequenceScores`` from (n, vocab) log-probabilities at ``positions`` of ``sequence``
    (default: every position): masked passes for a masked strategy, an unmasked pass's
    log-softmax otherwise."""
    declared = strategy_of(strategy)
    positions = np.arange(len(sequence)) if positions is None else np.asarray(positions, dtype=np.int64)
    scored = "".join(sequence[p] for p in positions)
    reduce = _reducer(declared)
    substitutions, pppl = reduce(log_probs, scored)
    return SequenceScores(scored, strategy, substitutions, pppl, positions)


def _reducer(declared: Strategy):
    if declared.reduce is None:
        if declared.masked:
            return lambda log_probs, residues: (substitution_scores(log_probs, residues),
                                                pseudo_perplexity(log_probs, residues))
        return lambda log_probs, residues: (substitution_scores(log_probs, residues), None)
    if callable(declared.reduce):
        return declared.reduce
    module, _, name = str(declared.reduce).partition(":")
    return getattr(importlib.import_module(module), name)


def uses_unmasked_logits(strategy: str) -> bool:
    """True if ``strategy`` scores from an unmasked pass's logits (which ``substitution_map`` can reuse)."""
    return not strategy_of(strategy).masked


def wt_token_ids(sequence: str) -> np.ndarray:
    return np.array([AA_TO_IDX[aa] for aa in sequence], dtype=np.int32)


def substitution_scores(log_probs: np.ndarray, sequence: str) -> np.ndarray:
    """(L, 20) ``log p(mt) - log p(wt)`` from per-position log-probabilities (L, vocab): the one
    definition of a substitution's score (every strategy, every variant sum reads it).

    Columns follow ``STANDARD_AMINO_ACIDS`` (alphabetical one-letter order). Softmax is over the
    full 33-token vocabulary, as fair-esm's variant-prediction example does.
    """
    wt = log_probs[np.arange(len(sequence)), wt_token_ids(sequence)]
    return log_probs[:, STANDARD_AA_TOKEN_IDS] - wt[:, None]


def pseudo_log_likelihoods(masked_log_probs: np.ndarray, sequence: str) -> np.ndarray:
    """log p(x_i | x with i masked) for each position i: (L,)."""
    return masked_log_probs[np.arange(len(sequence)), wt_token_ids(sequence)]


def pseudo_log_likelihood(masked_log_probs: np.ndarray, sequence: str) -> float:
    """PLL(x) = sum_i log p(x_i | x with i masked), summed in float64."""
    return float(pseudo_log_likelihoods(masked_log_probs, sequence).astype(np.float64).sum())


def pseudo_perplexity(masked_log_probs: np.ndarray, sequence: str) -> float:
    """exp(-PLL / L), over residue positions only (no <cls> off-by-one)."""
    return float(np.exp(-pseudo_log_likelihood(masked_log_probs, sequence) / len(sequence)))


def score_rows(record_id: str, sequence: str, scores: np.ndarray,
               numbering: Numbering = Numbering()) -> Iterator[tuple]:
    """CSV rows ``record_id, position, wt, mt, score`` for every position and mt; positions are
    numbered in ``numbering`` (the sequence's, from 1 by default)."""
    for i, (number, wt) in enumerate(zip(numbering.numbers(len(sequence)), sequence)):
        for j, mt in enumerate(STANDARD_AMINO_ACIDS):
            yield record_id, number, wt, mt, float(scores[i, j])
