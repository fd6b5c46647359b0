"""Scores of whole mutated sequences, of any length: the strategies of
``options.SEQUENCE_STRATEGIES`` for substitutions, indels, stops and frameshifts alike.

* ``pll``: PLL(mutant) - PLL(wild type), PLL(x) = sum_i log p(x_i | x with i masked), one masked
  pass per residue of each sequence through the result store (``passes.masked_log_probs``):
  ProteinGym's indel score for masked models. The wild type's L passes are run (or read) once and
  shared by every variant of it; a mutant's passes are its own (the store keys a pass by the
  whole sequence and the masked position: no pass is reused for a different input).
* ``wt-pll-approx``: the same difference with PLL approximated from one unmasked pass per
  sequence, sum_i log p(x_i | x): ESM Variants' PLLR (Brandes et al. 2023, ``get_PLLR`` in
  github.com/ntranoslab/esm-variants). Its unmasked passes come from ``passes.record_outputs``.
* ``-per-residue``: each PLL divided by its sequence's length before the difference (ESM
  Variants' ``weighted=True``: ``np.mean`` in place of ``np.sum``).

Stops and frameshifts (``Variant.truncation``) are scored as ESM Variants scores stop-gains
(``get_minLLR``): the lowest log-likelihood ratio log p(a) - log p(wt) over every amino acid a
(the wild type's own, 0, included) at every lost residue, from the wild type's passes (masked
under ``pll``, the unmasked pass under ``wt-pll-approx``), so a truncation costs no pass of its
own; the lost region starts at the stop's own residue (the paper's definition; see
docs/variants.md). That score is not divided by a length under ``-per-residue``.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import numpy as np

from flamino_core.variants import substitution_maps as scores
from flamino_core.analysis.outputs import log_softmax
from flamino_core.options import SEQUENCE_STRATEGIES
from flamino_core.store.passes import masked_log_probs, record_outputs
from flamino_core.variants.variant import Variant

ProgressFn = Callable[[int, int], None]
OK = "ok"
NORMALISATIONS = {False: "sum", True: "per-residue"}
TRUNCATION_SCORE = "min-llr"  # a stop's score: the normalisation column says so


@dataclasses.dataclass(frozen=True)
class PassPlan:
    """The passes a sequence strategy runs for one wild type and its variants, known before
    anything runs: the wild type's (shared by every variant) and the distinct mutants'."""

    strategy: str
    masked: bool
    wild_type: int  # passes of the wild type: its length (masked), or 1 (unmasked)
    mutants: tuple[str, ...]  # distinct mutated sequences that need passes of their own
    mutant_passes: int

    @property
    def total(self) -> int:
        return self.wild_type + self.mutant_passes

    def describe(self, n_variants: int) -> str:
        """One line for the user before the work starts."""
        unit = "masked passes" if self.masked else "unmasked passes"
        if not self.total:
            return f"{self.strategy}: nothing to run"
        return (f"{self.strategy}: {self.total:,} {unit}: {self.wild_type:,} of the wild type (run once, shared by "
                f"all {n_variants:,} variants) + {self.mutant_passes:,} for {len(self.mutants):,} distinct mutated "
                "sequences (stops and frameshifts read the wild type's)")


def pass_plan(sequence: str, variants: Sequence[Variant], strategy: str) -> PassPlan:
    """What ``score_sequences`` will run for ``variants`` of ``sequence`` under ``strategy``
    (stored passes included: the store may hold some of them already)."""
    declared = SEQUENCE_STRATEGIES[strategy]
    mutants = tuple(dict.fromkeys(v.apply(sequence) for v in variants if v.truncation is None))
    mutants = tuple(m for m in mutants if m != sequence)
    if declared.masked:
        wild_type, mutant_passes = (len(sequence) if variants else 0), sum(len(m) for m in mutants)
    else:
        wild_type, mutant_passes = (1 if variants else 0), len(mutants)
    return PassPlan(strategy, declared.masked, wild_type, mutants, mutant_passes)


def score_sequences(engine, sequence: str, variants: Sequence[Variant], strategy: str,
                    progress: ProgressFn | None = None, masked: dict | None = None) -> tuple[int, dict]:
    """Each variant's score under a sequence strategy.

    Args:
      engine: a loaded ``Engine``.
      sequence: the wild type.
      variants: checked against it (``indels.parse_mutations``).
      strategy: a name in ``options.SEQUENCE_STRATEGIES``.
      progress: (passes done, passes) over the whole plan, stored passes counted as done.
      masked: ``store`` and ``cancelled`` for ``passes.masked_log_probs`` / ``record_outputs``.

    Returns:
      ``(passes, {variant order: (score, nan, status)})`` as ``scoring``'s other strategies.
    """
    declared = SEQUENCE_STRATEGIES[strategy]
    plan = pass_plan(sequence, variants, strategy)
    counter = PassCounter(plan.total, progress)
    run = _masked_log_probs if declared.masked else _unmasked_log_probs
    log_probs = run(engine, [sequence, *plan.mutants], counter, masked or {})
    plls = {s: scores.pseudo_log_likelihood(lp, s) / (len(s) if declared.per_residue else 1)
            for s, lp in log_probs.items()}
    llr = scores.substitution_scores(log_probs[sequence], sequence)  # (L, 20), 0 at the wild type's own
    results = {}
    for v in variants:
        cut = v.truncation
        if cut is not None:
            results[v.order] = (float(llr[cut.start:].min()), np.nan, OK)
        else:
            results[v.order] = (plls[v.apply(sequence)] - plls[sequence], np.nan, OK)
    return plan.total, results


def normalisation(strategy: str, variant: Variant) -> str:
    """What the score of ``variant`` is, for the CSV's ``normalisation`` column: ``sum`` or
    ``per-residue`` (the PLL difference), ``min-llr`` for a stop or frameshift."""
    if variant.truncation is not None:
        return TRUNCATION_SCORE
    return NORMALISATIONS[SEQUENCE_STRATEGIES[strategy].per_residue]


def _masked_log_probs(engine, sequences: list[str], counter: "PassCounter", masked: dict) -> dict[str, np.ndarray]:
    """(L, vocab) log p(. | x with i masked) of every residue of each sequence, from the store."""
    return {s: masked_log_probs(engine, s, progress=counter.stage(len(s)), **masked) for s in sequences}


def _unmasked_log_probs(engine, sequences: list[str], counter: "PassCounter", masked: dict) -> dict[str, np.ndarray]:
    """(L, vocab) log-softmax of one unmasked pass of each sequence (its windows when long),
    from the store's record outputs, in float64 over the full vocabulary."""
    kept = {key: masked[key] for key in ("store", "cancelled") if key in masked}
    outputs = record_outputs(engine, sequences, logits=True, progress=counter.stage(len(sequences)), **kept)
    return {s: log_softmax(out.logits.astype(np.float64)) for s, out in zip(sequences, outputs)}


class PassCounter:
    """Turns each stage's (done, of) into (passes done, passes) over the whole score."""

    def __init__(self, total: int, progress: ProgressFn | None):
        self.total, self.progress, self.done = total, progress, 0

    def stage(self, passes: int) -> ProgressFn | None:
        """A stage of ``passes`` reporting (passes done, passes)."""
        start = self.done
        self.done += passes
        if self.progress is None or self.total <= 1:
            return None
        return lambda done, _: self.progress(start + done, self.total)

    def stage_batches(self, passes: int) -> ProgressFn | None:
        """A stage of ``passes`` reporting the engine's (batches done, batches)."""
        start = self.done
        self.done += passes
        if self.progress is None or self.total <= 1:
            return None
        return lambda batch, batches: self.progress(start + round(passes * batch / max(batches, 1)), self.total)
