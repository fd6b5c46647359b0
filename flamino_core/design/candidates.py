"""What the next round may propose: the candidate pool, within the user's constraints.

* every single substitution the constraints allow (``variants.suggest.candidates``, the function
  ``flamino suggest`` starts from: positions kept, positions explored, amino acids avoided), or
  the rows of a candidate table the campaign was given (a library already built, or, in a
  retrospective benchmark, the assay's variants);
* **multi-mutants from the singles that measured well**: the best measured singles at distinct
  positions (``COMBINE_TOP``, only those above the wild type's value, or the median of what was
  measured when the wild type was not measured), joined into every multi-mutant of two up to
  ``max_mutations`` (``suggest.combinations``), each with its **additive** prediction: the
  reference plus each single's measured gain over it;
* nothing measured before, nothing over ``max_mutations``, no duplicate.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from flamino_core.inputs.numbering import Numbering
from flamino_core.predictors.suggest import Constraints, candidates, combinations
from flamino_core.variants.notation import Variant, parse_variant

COMBINE_TOP = 6  # measured singles joined: 6 make 15 doubles and 20 triples
DEFAULT_MAX_MUTATIONS = 3
SINGLE, MULTI, GIVEN = "single", "multi-mutant", "candidate"


@dataclasses.dataclass
class Measured:
    """The campaign's measurements so far, one entry per measured row: each variant (of the
    wild type), its sequence, its value, and the round it was measured in."""

    variants: list[Variant]
    sequences: list[str]
    values: np.ndarray
    rounds: np.ndarray

    def __len__(self) -> int:
        return len(self.values)

    def reference(self, wild_type: str) -> float | None:
        """The wild type's own measured value (the mean of its rows), or None when not measured."""
        rows = [v for v, s in zip(self.values, self.sequences) if s == wild_type]
        return float(np.mean(rows)) if rows else None


@dataclasses.dataclass
class Pool:
    """The candidates of a round: each one's variant, sequence, kind (``single``, ``multi-mutant``
    or ``candidate``: a row of the campaign's table), the measured singles it was built from and
    its additive prediction (multi-mutants only; NaN otherwise)."""

    variants: list[Variant]
    sequences: list[str]
    kinds: list[str]
    parents: list[str]
    additive: np.ndarray

    def __len__(self) -> int:
        return len(self.variants)


def allowed(variant: Variant, constraints: Constraints, max_mutations: int) -> bool:
    """The variant changes no kept position, nothing outside the explored ones, introduces no
    avoided amino acid and has at most ``max_mutations`` substitutions."""
    subs = variant.substitutions
    return 0 < len(subs) <= max_mutations and all(constraints.allows(s.index, s.mt) for s in subs)


def good_singles(measured: Measured, wild_type: str, constraints: Constraints, top: int = COMBINE_TOP
                 ) -> tuple[list[Variant], dict[str, float], float]:
    """(the best measured singles at distinct positions, best first; each one's measured value
    (the mean of its repeats); the reference they improve on)."""
    reference = measured.reference(wild_type)
    if reference is None:
        reference = float(np.median(measured.values)) if len(measured) else 0.0
    by_mutant: dict[str, list[float]] = {}
    single_of: dict[str, Variant] = {}
    for variant, value in zip(measured.variants, measured.values):
        if len(variant.substitutions) == 1 and constraints.allows(variant.indices[0], variant.substitutions[0].mt):
            by_mutant.setdefault(variant.mutant, []).append(float(value))
            single_of[variant.mutant] = variant
    means = {mutant: float(np.mean(values)) for mutant, values in by_mutant.items()}
    ranked = sorted((m for m in means if means[m] > reference), key=lambda m: (-means[m], m))
    chosen, positions = [], set()
    for mutant in ranked:
        index = single_of[mutant].indices[0]
        if index not in positions:
            chosen.append(single_of[mutant])
            positions.add(index)
        if len(chosen) == top:
            break
    return chosen, means, reference


def build_pool(wild_type: str, numbering: Numbering, measured: Measured, constraints: Constraints = Constraints(),
               max_mutations: int = DEFAULT_MAX_MUTATIONS, given: list[Variant] | None = None,
               combine_top: int = COMBINE_TOP) -> Pool:
    """The candidates of the next round (see the module's docstring).

    Args:
      wild_type, numbering: the campaign's wild type and its residue numbering.
      measured: what was measured so far (never proposed again).
      constraints: positions kept or explored, amino acids avoided (``suggest.Constraints``).
      max_mutations: substitutions per variant at most.
      given: the campaign's candidate table (None: every allowed single substitution).
      combine_top: measured singles joined into multi-mutants (0 or 1: none).
    """
    seen = set(measured.sequences) | {wild_type}
    variants, kinds, parents, additive = [], [], [], []

    def add(variant: Variant, kind: str, parent: str = "", value: float = float("nan")) -> None:
        sequence = variant.apply(wild_type)
        if sequence not in seen and allowed(variant, constraints, max_mutations):
            seen.add(sequence)
            variants.append(variant)
            kinds.append(kind)
            parents.append(parent)
            additive.append(value)

    pool = given if given is not None else candidates(wild_type, numbering, constraints)
    multis = _multi_mutants(wild_type, numbering, measured, constraints, max_mutations, combine_top)
    allowed_given = {v.apply(wild_type) for v in given} if given is not None else None
    for variant, parent, value in multis:
        if allowed_given is None or variant.apply(wild_type) in allowed_given:
            add(variant, MULTI, parent, value)
    for variant in pool:
        add(variant, SINGLE if given is None else GIVEN)
    sequences = [v.apply(wild_type) for v in variants]
    return Pool(variants, sequences, kinds, parents, np.array(additive, dtype=np.float64))


def _multi_mutants(wild_type: str, numbering: Numbering, measured: Measured, constraints: Constraints,
                   max_mutations: int, combine_top: int) -> list[tuple[Variant, str, float]]:
    """Every multi-mutant of 2 to ``max_mutations`` of the good singles, with the singles it
    joins and its additive prediction."""
    if combine_top < 2 or max_mutations < 2 or not len(measured):
        return []
    singles, means, reference = good_singles(measured, wild_type, constraints, combine_top)
    out = []
    for variant in combinations(singles, wild_type, numbering, len(singles)):
        if len(variant.substitutions) > max_mutations:
            continue
        names = [f"{s.wt}{numbering.number(s.index)}{s.mt}" for s in variant.substitutions]
        gain = sum(means[name] - reference for name in names)
        out.append((variant, " + ".join(names), reference + gain))
    return out


def read_given(mutants: list[str], wild_type: str, numbering: Numbering) -> tuple[list[Variant], list[str]]:
    """A candidate table's ``mutant`` column as variants of the wild type (and the problems of
    the rows that are not: line numbers as in the file, header = line 1)."""
    variants, problems = [], []
    for row, text in enumerate(mutants):
        parsed = parse_variant(str(text).strip(), wild_type, numbering, row)
        if isinstance(parsed, Variant) and parsed.substitutions:
            variants.append(parsed)
        else:
            problems.append(f"line {row + 2}: {getattr(parsed, 'message', 'not a substitution')}")
    return variants, problems
