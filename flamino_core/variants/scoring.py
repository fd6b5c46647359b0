"""Scores for a list of variants (``notation.Variant``), the way ProteinGym scores ESM-2.

All scores are natural-log likelihood ratios with the softmax over the full 33-token vocabulary,
as ProteinGym's ``proteingym/baselines/esm/compute_fitness.py`` (``label_row``) computes them:

* ``masked-marginals`` (default): sum over the mutated positions of log p(mt) - log p(wt), each
  position masked in its own pass. Only the distinct mutated positions get a pass (K passes for
  K positions, never one per residue), then every variant is a sum of looked-up differences.
* ``wt-marginals``: the same sum from one unmasked pass (fast, approximate).
* ``joint-masked``: all positions of a multi-mutant masked in one pass, the differences read from
  that pass; ``non_additivity`` = joint - additive (masked-marginals). A single substitution's
  joint pass is its masked-marginal pass, so singles cost nothing extra and have 0 there.
* ``pll``: pseudo-log-likelihood of the mutant minus that of the wild type, where
  PLL(x) = sum_i log p(x_i | x with i masked): L passes per distinct mutant, plus L for the wild
  type. Slow; hosted servers refuse it above ``PLL_HOSTED_MAX_PASSES`` (see ``pll_size_problem``).
  It and the other ``sequence`` strategies of ``options.STRATEGIES`` (``wt-pll-approx``, the
  ``-per-residue`` forms) score indels, stops and frameshifts too (``sequence_scores``); the
  substitution strategies refuse a variant with ``edits``.

Every masked pass goes through the result store: one position's (``passes.masked_log_probs``), and
joint-masked's sets of positions masked in one row (``passes.joint_masked_log_probs``). What runs
is counted before it runs by ``variant_passes`` (hosted limits, the app's estimate). Every
difference and PLL is ``scores``' one definition (``substitution_scores``,
``pseudo_log_likelihood``).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from flamino_core.progress import ProgressFn
from flamino_core.variants import substitution_maps as scores
from flamino_core.alphabet import STANDARD_AMINO_ACIDS
from flamino_core.model.config import MAX_RESIDUES
from flamino_core.options import (
    DEFAULT_VARIANT_STRATEGY, PLL_HOSTED_MAX_PASSES, STRATEGIES, Strategy, scoring_strategies,
)
from flamino_core.store.passes import joint_masked_log_probs, masked_log_probs
from flamino_core.variants.notation import INDEL, Variant, VariantIssue
from flamino_core.variants.variant import SUBSTITUTION
from flamino_core.variants.sequence_scores import PassCounter, normalisation, pass_plan, score_sequences
from flamino_core.variants.variant_passes import joint_sets, planned_passes, variant_passes, windows_of
from flamino_core.wording import with_article

OK = "ok"
# Said in ``VariantScores.notes`` for an untrained model (front ends that already say so skip it).
RANDOM_WEIGHTS_NOTE = "the model has random weights (a test model): these scores are not biology"
_COLUMN = {aa: j for j, aa in enumerate(STANDARD_AMINO_ACIDS)}  # a substitution's column in a score table


@dataclasses.dataclass
class VariantScores:
    """Scores of a mutation list, one table row per input entry, in input order.

    ``table`` columns: ``record_id``, ``mutant`` (as written), ``score`` (NaN when skipped),
    ``non_additivity`` (joint-masked only), ``status`` (``ok`` or why it was skipped), and for
    display ``variant`` (ProteinGym spelling, user numbering), ``positions`` (tuple, user
    numbering), ``n_mutations``, ``label``, ``order``. ``output_columns(strategy)`` picks the
    columns a CSV download holds.
    """

    table: pd.DataFrame
    strategy: str
    passes: int  # model rows the score takes (masked or unmasked passes; stored ones included)
    notes: list[str]  # how long sequences were handled, random weights ...

    @property
    def n_scored(self) -> int:
        return int((self.table["status"] == OK).sum())

    @property
    def n_skipped(self) -> int:
        return len(self.table) - self.n_scored


def output_columns(strategy: str) -> list[str]:
    """The columns of the scored CSV: ``record_id,mutant,score[,non_additivity],status``, and
    for a sequence strategy (``Strategy.whole_sequences``) ``normalisation`` at the end."""
    declared = declared_strategy(strategy)
    return (["record_id", "mutant", "score"] + (["non_additivity"] if declared.joint else []) + ["status"]
            + (["normalisation"] if declared.whole_sequences else []))


def declared_strategy(strategy: str) -> Strategy:
    """The declaration (``options.STRATEGIES``) of a strategy for the user's variants, or a
    ValueError listing them."""
    if strategy not in scoring_strategies():
        raise ValueError(f"unknown strategy {strategy!r}: choose one of {', '.join(scoring_strategies())}")
    return STRATEGIES[strategy]


def pll_passes(length: int, n_variants: int) -> int:
    """Masked passes ``pll`` needs: the wild type and each distinct mutant, L each."""
    return length * (n_variants + 1)


def pll_size_problem(length: int, n_variants: int, max_passes: int = PLL_HOSTED_MAX_PASSES) -> str | None:
    """Why a hosted server refuses this ``pll`` request, or None when it is small enough."""
    needed = pll_passes(length, n_variants)
    if needed <= max_passes:
        return None
    return (f"pll needs {needed:,} masked passes here ({length:,} residues x {n_variants + 1:,} sequences: the "
            f"wild type and each mutant); this server runs at most {max_passes:,}. Use masked-marginals "
            "(one pass per mutated position), fewer variants, or run flamino locally")


def passes_problem(sequence: str, variants: Sequence[Variant], strategy: str, max_passes: int) -> str | None:
    """Why a hosted server refuses this scoring (more than ``max_passes`` passes), or None."""
    exact_pll = declared_strategy(strategy).exact_pll
    if exact_pll and not any(v.edits for v in variants) and len(sequence) <= MAX_RESIDUES:  # no windows
        return pll_size_problem(len(sequence), len(set(v.apply(sequence) for v in variants)), max_passes)
    if declared_strategy(strategy).whole_sequences:  # planned up to the limit only: a refused list builds little
        plan = pass_plan(sequence, variants, strategy, limit=max_passes)
        needed, more = plan.total, "at least " if plan.over_limit else ""
    else:
        needed, more = planned_passes(sequence, variants, strategy), ""
    if needed <= max_passes and not more:
        return None
    return (f"{strategy} needs {more}{needed:,} passes here; this server runs at most {max_passes:,} for one "
            "request. Use masked-marginals (one pass per mutated position), fewer variants, or run flamino locally")


def score_variants(
    engine,
    sequence: str,
    variants: Sequence[Variant],
    strategy: str = DEFAULT_VARIANT_STRATEGY,
    *,
    issues: Iterable[VariantIssue] = (),
    record_id: str = "",
    progress: ProgressFn | None = None,
    cancelled: Callable[[], bool] | None = None,
    store=None,
    structure: str | None = None,
) -> VariantScores:
    """Score ``variants`` of ``sequence`` and merge them with the skipped entries in input order.

    Masked passes come from ``passes.masked_log_probs`` (the result store): a position masked
    before for this model, by any page or command, is read, not run again; pll's mutants are
    stored like any sequence, so an interrupted pll resumes.

    Args:
      engine: a loaded ``Engine``.
      sequence: the wild-type sequence the variants were checked against.
      variants: from ``notation.parse_mutations`` / ``parse_variant``.
      strategy: one of ``options.scoring_strategies()`` (a substitution strategy refuses variants with
        ``edits``, each named in its status).
      issues: the entries that could not be read (their ``order`` places them in the table;
        issues about the whole input, order -1, are left out).
      record_id: written in every row.
      progress: called with (passes done, passes total) when more than one pass runs; stored
        passes count as done.
      cancelled: polled between chunks of masked passes; True stops with ``passes.Cancelled``
        (what finished is stored).
      store: the ``result_store.ResultStore`` (default: the process's).
      structure: a structure-aware model's 3Di letters, one per residue (``three_di``): its
        masked passes mask a residue's amino acid and keep its letter, and are stored under the
        letters too. Read by the masked strategies only (masked-marginals, joint-masked).

    Returns:
      ``VariantScores``.
    """
    declared = declared_strategy(strategy)
    variants, issues = _substitutions_only(variants, issues, strategy)
    longest = len(sequence) + max([0] + [v.growth for v in variants if v.edits])  # counted, not built
    notes = _notes(engine, longest, strategy, record_id)
    masked = dict(store=store, cancelled=cancelled, **_structure_of(engine, sequence, structure, strategy))
    if not variants:
        passes, results = 0, {}
    elif declared.whole_sequences:
        _, results = score_sequences(engine, sequence, variants, strategy, progress, masked)
        # The plan's count says one unmasked pass per run; a long wild type read whole for a stop
        # runs one per window (``variant_passes``: what the engine runs).
        passes = variant_passes(sequence, variants, strategy).planned
    elif not declared.masked:
        passes, results = _wt_marginal_scores(engine, sequence, variants, declared)
    else:
        passes, results = _masked_scores(engine, sequence, variants, declared, progress, masked)
    table = _table(variants, issues, results, strategy, record_id)
    return VariantScores(table, strategy, passes, notes)


def _structure_of(engine, sequence: str, structure: str | None, strategy: str) -> dict:
    """``{"structure": letters}`` for the masked passes, or {} without; a structure the model or
    the strategy cannot read is refused in one sentence."""
    if structure is None:
        return {}
    if not engine.family.structure_aware:
        raise ValueError(f"{engine.family.title} reads sequences only: a structure is read by structure-aware "
                         "models (SaProt)")
    if not STRATEGIES[strategy].reads_structure:
        raise ValueError(f"{strategy} does not read the structure; with one, score masked-marginals or joint-masked")
    if len(structure) != len(sequence):
        raise ValueError(f"{len(structure)} structure letters for a sequence of {len(sequence)} residues")
    return {"structure": structure}


# variant order -> (score, non_additivity, status); each strategy's function returns (passes, this).
_Results = dict[int, tuple[float, float, str]]


def _indel_refused(variant: Variant, strategy: str) -> str:
    return (f"{variant.text!r}: {with_article(variant.kind)}; {strategy} scores substitutions only "
            "(the strategies pll and wt-pll-approx score it)")


def _substitutions_only(variants, issues, strategy: str) -> tuple[list[Variant], list[VariantIssue]]:
    """Under a substitution strategy, variants with ``edits`` (indels, stops) become issues."""
    variants, issues = list(variants), list(issues)
    if STRATEGIES[strategy].whole_sequences:
        return variants, issues
    refused = [VariantIssue(v.order, v.text, INDEL, _indel_refused(v, strategy), v.label)
               for v in variants if v.edits]
    return [v for v in variants if not v.edits], issues + refused


def _wt_marginal_scores(engine, sequence: str, variants: list[Variant], declared: Strategy) -> tuple[int, _Results]:
    """Every variant's sum of the map ``declared`` reads (wt-marginals: differences), from one
    unmasked pass per window."""
    table = scores.substitution_map(engine, sequence, declared.map_name).substitutions  # (L, 20)
    rows = {i: i for i in range(len(sequence))}
    results = {v.order: (_sum_scores(table, rows, v), np.nan, OK) for v in variants}
    return windows_of(len(sequence)), results


def _masked_scores(engine, sequence: str, variants: list[Variant], declared: Strategy, progress,
                   masked: dict) -> tuple[int, _Results]:
    """masked-marginals: a masked pass per distinct mutated position; joint-masked adds a pass
    per multi-mutant position set (``_joint``)."""
    indices = sorted({i for v in variants for i in v.indices})
    sets = joint_sets(variants) if declared.joint else []
    passes = len(indices) + len(sets)
    counter = PassCounter(passes, progress)
    log_probs = masked_log_probs(engine, sequence, indices, progress=counter.stage(len(indices)), **masked)
    table = scores.from_log_probs(log_probs, sequence, declared.map_name, positions=indices).substitutions  # (K, 20)
    row_of = {index: row for row, index in enumerate(indices)}
    results = {}
    for v in variants:
        results[v.order] = (_sum_scores(table, row_of, v), 0.0 if declared.joint else np.nan, OK)
    if declared.joint:
        _joint(engine, sequence, variants, sets, counter, results, masked)
    return passes, results


def _joint(engine, sequence: str, variants: list[Variant], sets: list[tuple], counter: PassCounter,
           results: dict, masked: dict) -> None:
    """The joint-masked scores of the multi-mutants: one pass per position set (a set masks several
    positions in one row, which no single-position pass holds), through the result store
    (``passes.joint_masked_log_probs``: a set masked before is read, not run again)."""
    passes = joint_masked_log_probs(engine, sequence, sets, progress=counter.stage(len(sets)), **masked)
    joint = {key: scores.from_log_probs(log_probs, sequence, positions=key).substitutions
             for key, log_probs in zip(sets, passes)}
    for v in variants:
        if len(v.indices) < 2:
            continue
        key = tuple(sorted(v.indices))
        if key not in joint:
            span = key[-1] - key[0] + 1
            results[v.order] = (np.nan, np.nan, f"{v.text}: its positions span {span:,} residues, more than "
                                f"one {MAX_RESIDUES:,}-residue window; joint masking needs them in one "
                                "window (masked-marginals scores it)")
            continue
        score = _sum_scores(joint[key], {index: row for row, index in enumerate(key)}, v)
        results[v.order] = (score, score - results[v.order][0], OK)


def _sum_scores(table: np.ndarray, row_of: dict[int, int], variant: Variant) -> float:
    """sum_k score(wt_k -> mt_k), read from a (rows, 20) ``scores.substitution_scores`` table
    whose row ``row_of[i]`` holds position i, summed in float64."""
    return float(sum(float(table[row_of[s.index], _COLUMN[s.mt]]) for s in variant.substitutions))


def _notes(engine, length: int, strategy: str, record_id: str) -> list[str]:
    """The random-weights note; for a sequence (or, under a sequence strategy, a mutant) longer
    than the model's window, how its scores were windowed."""
    notes = []
    if getattr(engine, "is_random", False):
        notes.append(RANDOM_WEIGHTS_NOTE)
    if length > MAX_RESIDUES:
        name = f"{record_id}: " if record_id else ""
        declared = STRATEGIES[strategy]
        if declared.whole_sequences:
            how = _SEQUENCE_WINDOWS[declared.masked]
        elif declared.joint:
            how = ("each position was masked in ProteinGym's 1,024-token window of it, each multi-mutant in that "
                   "window of the middle of its span; multi-mutants spanning more are not scored")
        elif declared.masked:
            how = ("each mutated position was masked in ProteinGym's 1,024-token window of it "
                   "(its get_optimal_window: centred, clamped to the ends; only the end windows hold "
                   "<cls>/<eos>), so the scores are ProteinGym's")
        else:
            how = ("log-probabilities come from overlapping 1,022-residue windows (step 511), each with <cls>/<eos>, "
                   "averaged where they overlap (not ProteinGym's: see docs/variants.md)")
        notes.append(f"{name}{length:,} residues is longer than ESM-2's training length (1,022): {how}")
    return notes


_SEQUENCE_WINDOWS = {
    masked: "each variant's PLL ratio compares one window of the wild type holding the edit (of the overlapping "
            "1,022-residue windows, step 511, the one with the most residues around it; shortened by an insertion's "
            "gain) with the same window of the mutant, each window scored whole ("
            + ("a masked pass per residue" if masked else "one unmasked pass") + "); stops read the whole wild "
            "type's " + ("masked passes in ProteinGym's window of each lost residue" if masked else
                         "overlapping windows, averaged") + " (docs/variants.md)"
    for masked in (True, False)
}


def _table(variants, issues, results, strategy: str, record_id: str) -> pd.DataFrame:
    rows = []
    declared = STRATEGIES[strategy]
    sequence_strategy = declared.whole_sequences
    for v in variants:
        score, non_additivity, status = results[v.order]
        rows.append((v.order, v.text, score, non_additivity, status, normalisation(strategy, v) if sequence_strategy
                     else "", v.mutant, v.positions, v.n_changes, v.kind, v.label))
    for issue in issues:
        if issue.order >= 0:
            rows.append((issue.order, issue.text, np.nan, np.nan, issue.message, "", "", (), 0, "", issue.label))
    columns = ["order", "mutant", "score", "non_additivity", "status", "normalisation", "variant", "positions",
               "n_mutations", "kind", "label"]
    table = pd.DataFrame(rows, columns=columns).sort_values("order", kind="stable").reset_index(drop=True)
    if not sequence_strategy:
        table = table.drop(columns="normalisation")
    table.insert(0, "record_id", record_id)
    table["score"] = table["score"].astype(float)
    if not declared.joint:
        table = table.drop(columns="non_additivity")
    else:
        table["non_additivity"] = table["non_additivity"].astype(float)
    return table


def _touches(positions: tuple, kind: str, low: float, high: float) -> bool:
    """Whether a variant touches ``low..high``: a substitution's positions, an indel's span (its
    positions are the ends of its ranges, ``Edit.indices``: a range is kept when it covers the
    filter's positions though neither end is inside)."""
    if not positions:
        return False
    if kind in (SUBSTITUTION, f"multi-{SUBSTITUTION}"):
        return any(low <= p <= high for p in positions)
    return min(positions) <= high and low <= max(positions)


# What the tables of scores can be filtered to (the app's "predicted effect" choice).
EFFECTS = ("all", "below", "above")  # any score / score < 0 / score >= 0


def filter_scored(
    table: pd.DataFrame, first: int | None = None, last: int | None = None, effect: str = "all"
) -> pd.DataFrame:
    """The scored rows of ``table`` with a mutated position in ``first..last`` and the chosen effect.

    Args:
      table: a table with ``status``, ``score`` and ``positions`` (tuples in the user's
        numbering), as ``VariantScores.table``.
      first, last: the position range (inclusive; None: open); a multi-mutant is kept when any
        of its positions is in it.
      effect: one of ``EFFECTS``: ``below`` keeps scores below 0 (the model prefers the wild
        type), ``above`` scores of 0 or more.

    Returns:
      The kept rows (skipped entries, whose status is not ``ok``, are never kept).
    """
    if effect not in EFFECTS:
        raise ValueError(f"unknown effect filter {effect!r}: choose one of {', '.join(EFFECTS)}")
    low = -np.inf if first is None else first
    high = np.inf if last is None else last
    kinds = table["kind"] if "kind" in table else [SUBSTITUTION] * len(table)
    in_range = [_touches(positions, kind, low, high) for positions, kind in zip(table["positions"], kinds)]
    keep = (table["status"] == OK).to_numpy() & np.array(in_range, dtype=bool)
    if effect == "below":
        keep = keep & (table["score"] < 0).to_numpy()
    elif effect == "above":
        keep = keep & (table["score"] >= 0).to_numpy()
    return table[keep]
