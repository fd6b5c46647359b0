"""Scores of whole mutated sequences, of any length: the strategies of
``sequence`` strategies of ``options.STRATEGIES`` for substitutions, indels, stops and frameshifts alike.

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

Long sequences (``scored_pair``): when the wild type or the mutant is longer than the model's
``MAX_RESIDUES``, both are cut to one window that holds the edit, the same flanks in each
(``windows.edit_window``, chosen on the wild type), and each window is scored as a sequence of
its own; a wild-type window is shared by every variant it holds. A truncation reads the whole
wild type's passes at the residues it loses (ProteinGym's window of each masked one).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from flamino_core.progress import ProgressFn
from flamino_core.variants import substitution_maps as scores
from flamino_core.analysis.outputs import log_softmax
from flamino_core.model.config import MAX_RESIDUES
from flamino_core.options import strategy_of
from flamino_core.engine.windows import edit_window
from flamino_core.store.passes import masked_log_probs, record_outputs
from flamino_core.variants.variant import Variant

OK = "ok"
NORMALISATIONS = {False: "sum", True: "per-residue"}
TRUNCATION_SCORE = "min-llr"  # a stop's score: the normalisation column says so


@dataclasses.dataclass(frozen=True)
class Pair:
    """The two sequences whose PLLs a variant's score subtracts: the whole wild type and mutant,
    or (``window``: the wild type's residues ``[start, end)``) one window of each holding the
    edit, with the same flanks."""

    wild: str
    mutant: str
    window: tuple[int, int] | None = None


def scored_pair(sequence: str, variant: Variant, width: int = MAX_RESIDUES) -> Pair | str:
    """What ``variant`` (not a truncation) of ``sequence`` is scored on: the whole sequences when
    both fit the model, else the wild type's ``windows.edit_window`` of the edit and the mutant's
    same flanks (``mutant[start:end + growth]``: every edit lies inside the window, so the residues
    before it and after it are the wild type's). A string: why it cannot be scored."""
    change = variant.growth if variant.edits else 0  # counted before any sequence is built
    if max(len(sequence), len(sequence) + change) <= width:
        return Pair(sequence, variant.apply(sequence))
    indices = variant.indices
    try:
        start, end = edit_window(len(sequence), min(indices), max(indices), max(change, 0), width)
    except ValueError as err:
        return f"{variant.text}: {err}; its sequences cannot be scored in one window"
    return Pair(sequence[start:end], variant.apply(sequence)[start:end + change], (start, end))


@dataclasses.dataclass(frozen=True)
class PassPlan:
    """The passes a sequence strategy runs for one wild type and its variants, known before
    anything runs: the wild type's (its whole, or the windows of it the variants are scored in,
    each shared by every variant it holds) and the distinct mutants'."""

    strategy: str
    masked: bool
    wild_type: int  # passes of the wild type (or its windows, or its residues stops lose)
    mutants: tuple[str, ...]  # distinct mutated sequences (or windows of them) with passes of their own
    mutant_passes: int
    wild_types: tuple[str, ...] = ()  # the wild type, or its windows, whose PLLs are subtracted
    lost_from: int | None = None  # the first residue a truncation loses, read from the whole wild type
    whole: str = ""  # the wild type
    over_limit: bool = False  # planning stopped past its limit: ``total`` is a lower bound

    @property
    def total(self) -> int:
        return self.wild_type + self.mutant_passes

    @property
    def runs(self) -> tuple[tuple[str, int], ...]:
        """(sequence, first position) of every sequence that runs: each of its positions from
        the first (all, unmasked); the whole wild type from ``lost_from`` when only stops read it."""
        extra = self.lost_from is not None and self.whole not in self.wild_types
        return (tuple((w, 0) for w in self.wild_types) + (((self.whole, self.lost_from),) if extra else ())
                + tuple((m, 0) for m in self.mutants))

    def describe(self, n_variants: int) -> str:
        """One line for the user before the work starts."""
        unit = "masked passes" if self.masked else "unmasked passes"
        if self.over_limit:
            return f"{self.strategy}: more than {self.total:,} {unit}"
        if not self.total:
            return f"{self.strategy}: nothing to run"
        windows = [w for w in self.wild_types if w != self.whole]
        lost = "the residues stops and frameshifts lose" if self.masked else "the whole, for stops and frameshifts"
        if not windows and self.wild_types:
            shared = f"run once, shared by all {n_variants:,} variants"
        elif windows:
            shared = (f"{len(windows):,} window{'s' if len(windows) > 1 else ''} of at most {MAX_RESIDUES:,} residues "
                      "holding the edits, each run once and shared by the variants it holds")
            shared += f"; and {lost}" if self.lost_from is not None and self.whole not in self.wild_types else ""
        else:
            shared = lost
        return (f"{self.strategy}: {self.total:,} {unit}: {self.wild_type:,} of the wild type ({shared}) + "
                f"{self.mutant_passes:,} for {len(self.mutants):,} distinct mutated sequences (stops and frameshifts "
                "read the wild type's)")


def pass_plan(sequence: str, variants: Sequence[Variant], strategy: str, limit: int | None = None) -> PassPlan:
    """What ``score_sequences`` will run for ``variants`` of ``sequence`` under ``strategy``
    (stored passes included: the store may hold some of them already). With ``limit``, planning
    stops as soon as more than ``limit`` passes are counted (``over_limit``; a server's bound):
    a refused list builds no more than the sequences of its first ``limit`` passes."""
    declared = strategy_of(strategy, "sequence")
    wild, mutants, counted = {}, {}, 0
    for v in variants:
        pair = scored_pair(sequence, v) if v.truncation is None else None
        if not isinstance(pair, Pair):
            continue
        for found, s in ((wild, pair.wild), (mutants, pair.mutant)):
            if s not in found:
                found[s] = None
                counted += len(s) if declared.masked else 1
        if limit is not None and counted > limit:
            return PassPlan(strategy, declared.masked, counted, (), 0, whole=sequence, over_limit=True)
    wild_types = tuple(wild)
    distinct = tuple(m for m in mutants if m not in wild)
    cuts = [v.truncation.start for v in variants if v.truncation is not None]
    plan = PassPlan(strategy, declared.masked, 0, distinct, 0, wild_types, min(cuts) if cuts else None, sequence)
    runs = plan.runs
    if declared.masked:
        wild_passes = sum(len(s) - first for s, first in runs[:len(runs) - len(distinct)])
        plan = dataclasses.replace(plan, wild_type=wild_passes, mutant_passes=sum(len(m) for m in distinct))
    else:
        plan = dataclasses.replace(plan, wild_type=len(runs) - len(distinct), mutant_passes=len(distinct))
    return dataclasses.replace(plan, over_limit=limit is not None and plan.total > limit)


def score_sequences(engine, sequence: str, variants: Sequence[Variant], strategy: str,
                    progress: ProgressFn | None = None, masked: dict | None = None) -> tuple[int, dict]:
    """Each variant's score under a sequence strategy.

    Args:
      engine: a loaded ``Engine``.
      sequence: the wild type.
      variants: checked against it (``indels.parse_mutations``).
      strategy: a ``sequence`` strategy of ``options.STRATEGIES``.
      progress: (passes done, passes) over the whole plan, stored passes counted as done.
      masked: ``store`` and ``cancelled`` for ``passes.masked_log_probs`` / ``record_outputs``.

    Returns:
      ``(passes, {variant order: (score, nan, status)})`` as ``scoring``'s other strategies.
    """
    declared = strategy_of(strategy, "sequence")
    plan = pass_plan(sequence, variants, strategy)
    counter = PassCounter(plan.total, progress)
    run = _masked_log_probs if declared.masked else _unmasked_log_probs
    log_probs = run(engine, plan.runs, counter, masked or {})
    plls = {s: scores.pseudo_log_likelihood(log_probs[s][1], s) / (len(s) if declared.per_residue else 1)
            for s in plan.wild_types + plan.mutants}
    results = {}
    for v in variants:
        cut = v.truncation
        if cut is not None:
            first, rows = log_probs[sequence]
            llr = scores.substitution_scores(rows[cut.start - first:], sequence[cut.start:])  # 0 at the wt's own
            results[v.order] = (float(llr.min()), np.nan, OK)
            continue
        pair = scored_pair(sequence, v)
        if isinstance(pair, str):
            results[v.order] = (np.nan, np.nan, pair)
        else:
            results[v.order] = (plls[pair.mutant] - plls[pair.wild], np.nan, OK)
    return plan.total, results


def normalisation(strategy: str, variant: Variant) -> str:
    """What the score of ``variant`` is, for the CSV's ``normalisation`` column: ``sum`` or
    ``per-residue`` (the PLL difference), ``min-llr`` for a stop or frameshift."""
    if variant.truncation is not None:
        return TRUNCATION_SCORE
    return NORMALISATIONS[strategy_of(strategy, "sequence").per_residue]


def _masked_log_probs(engine, runs, counter: "PassCounter", masked: dict) -> dict[str, tuple[int, np.ndarray]]:
    """{sequence: (first, (L - first, vocab) log p(. | x with i masked) of its residues from the
    first)}, from the store."""
    return {s: (first, masked_log_probs(engine, s, range(first, len(s)), progress=counter.stage(len(s) - first),
                                        **masked))
            for s, first in runs}


def _unmasked_log_probs(engine, runs, counter: "PassCounter", masked: dict) -> dict[str, tuple[int, np.ndarray]]:
    """{sequence: (0, (L, vocab) log-softmax of one unmasked pass)} (its windows when long), from
    the store's record outputs, in float64 over the full vocabulary."""
    kept = {key: masked[key] for key in ("store", "cancelled") if key in masked}
    sequences = [s for s, _ in runs]
    outputs = record_outputs(engine, sequences, logits=True, progress=counter.stage(len(sequences)), **kept)
    return {s: (0, log_softmax(out.logits.astype(np.float64))) for s, out in zip(sequences, outputs)}


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
