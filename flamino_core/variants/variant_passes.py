"""The model passes a variant score runs, known before it runs: the one rule behind what a hosted
server checks against its limit (``VariantPasses.planned``), what the app's estimate shows
(``VariantPasses.to_run``: the planned passes less the masked ones the result store holds) and
what ``scoring.score_variants`` runs.

What the engine runs for each strategy (``scoring``, ``sequence_scores``):

* ``masked-marginals`` (a masked ``variant`` strategy): a masked pass per distinct mutated
  position, through the result store.
* ``joint-masked`` (``Strategy.joint``): those, and one pass per distinct position set of a multi-mutant that fits in
  one window (``joint_sets``; a wider set is not scored, so it costs nothing), through the
  result store too (``passes.joint_masked_log_probs``): a set stored is not run again.
* ``wt-marginals`` (an unmasked one): one unmasked pass per window of the sequence (one when it fits the model's
  ``MAX_RESIDUES``; ``windows.window_starts`` otherwise), stored nowhere.
* the sequence strategies: ``sequence_scores.pass_plan``'s runs: every residue of each run masked
  (stored ones skipped), or one unmasked pass per window of each run (a run that fits is one).

Substitution strategies score no variant with ``edits`` (``scoring`` lists them as not scored),
so their passes are not counted.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

from flamino_core.model.config import MAX_RESIDUES
from flamino_core.options import STRATEGIES
from flamino_core.engine.windows import window_starts
from flamino_core.variants.sequence_scores import pass_plan
from flamino_core.variants.variant import Variant

# A sequence's masked positions the result store holds (0-based); ``nothing_held``: a plan alone.
Held = Callable[[str], set[int]]
# Among a sequence's joint position sets, those whose joint pass the store holds.
HeldSets = Callable[[str, Sequence[tuple[int, ...]]], set[tuple[int, ...]]]


def nothing_held(sequence: str) -> set[int]:
    return set()


def no_sets_held(sequence: str, position_sets: Sequence[tuple[int, ...]]) -> set[tuple[int, ...]]:
    return set()


@dataclasses.dataclass(frozen=True)
class VariantPasses:
    """The passes a score of variants runs.

    ``masked``: masked passes (a masked position, or a joint set, each) or unmasked ones (a window
    each). ``runs``: (sequence length, passes over it still to run) of each sequence that runs;
    for unmasked passes the length is the whole sequence's, which the engine cuts into that many
    windows. ``planned``: every pass, stored ones included. ``how``: which passes, in words.
    """

    masked: bool
    runs: tuple[tuple[int, int], ...]
    planned: int
    how: str

    @property
    def to_run(self) -> int:
        """The passes the engine still runs (the store's masked passes left out)."""
        return sum(n for _, n in self.runs)


def windows_of(length: int) -> int:
    """Unmasked passes over a sequence of ``length`` residues: one per window."""
    return len(window_starts(length))


def joint_sets(variants: Sequence[Variant]) -> list[tuple[int, ...]]:
    """The distinct position sets joint-masked masks together (those within one window)."""
    sets = dict.fromkeys(tuple(sorted(v.indices)) for v in variants if len(v.indices) > 1)
    return [s for s in sets if s[-1] - s[0] < MAX_RESIDUES]


def variant_passes(sequence: str, variants: Sequence[Variant], strategy: str,
                   held: Held = nothing_held, held_sets: HeldSets = no_sets_held) -> VariantPasses:
    """The passes ``scoring.score_variants`` runs for ``variants`` of ``sequence`` by ``strategy``,
    given the masked positions and the joint sets the store holds (``held``, ``held_sets``;
    default: none)."""
    declared = STRATEGIES[strategy]
    if declared.whole_sequences:
        return _sequence_passes(sequence, variants, strategy, held)
    variants = [v for v in variants if not v.edits]
    if not declared.masked:  # wt-marginals
        runs = ((len(sequence), windows_of(len(sequence))),) if variants else ()
        how = "one for the whole sequence" if windows_of(len(sequence)) == 1 else (
            f"one per window of {MAX_RESIDUES:,} residues, overlapping by half")
        return VariantPasses(False, runs, sum(n for _, n in runs), how)
    positions = {i for v in variants for i in v.indices}
    sets = joint_sets(variants) if declared.joint else []
    how = "one per mutated position" + (", and one per multi-mutant" if declared.joint else "")
    sets_to_run = len(set(sets) - held_sets(sequence, sets)) if sets else 0
    runs = ((len(sequence), len(positions - held(sequence)) + sets_to_run),) if variants else ()
    return VariantPasses(True, runs, len(positions) + len(sets), how)


def _sequence_passes(sequence: str, variants: Sequence[Variant], strategy: str, held: Held) -> VariantPasses:
    """A sequence strategy's runs (``sequence_scores.pass_plan``): each run's residues the store
    does not hold, or its windows (the unmasked passes' stored outputs are not looked up here)."""
    plan = pass_plan(sequence, variants, strategy)
    if not plan.masked:
        runs = tuple((len(s), windows_of(len(s))) for s, _ in plan.runs)
        return VariantPasses(False, runs, sum(n for _, n in runs),
                             "one per distinct sequence: the wild type (or its windows) and each mutant")
    runs = tuple((len(s), len(set(range(first, len(s))) - held(s))) for s, first in plan.runs)
    to_run = sum(n for _, n in runs)
    # The plan counts every pass; what is stored is said here, so the two counts agree.
    stored = (f"; the other {plan.total - to_run:,} of the plan's {plan.total:,} are stored"
              if plan.total > to_run else "")
    return VariantPasses(True, runs, plan.total,
                         f"every residue of the wild type (or its windows) and of each distinct mutant, once{stored}")


def planned_passes(sequence: str, variants: Sequence[Variant], strategy: str) -> int:
    """Every pass ``score_variants`` runs for these variants, stored ones included (what a hosted
    server checks against its limit)."""
    return variant_passes(sequence, variants, strategy).planned


def held_sets_in_store(engine, store=None, structure: str | None = None) -> HeldSets:
    """The joint sets the result store holds for ``engine`` (and ``structure``), keyed as
    ``passes.joint_masked_log_probs`` keys them."""
    from flamino_core.store.passes import held_joint_sets, model_key

    model = model_key(engine, structure)
    return lambda sequence, position_sets: held_joint_sets(model, sequence, position_sets, store)


def held_in_store(engine, store=None, structure: str | None = None) -> Held:
    """The masked positions the result store holds for ``engine`` (and ``structure``, for a
    structure-aware model), keyed as ``passes.masked_log_probs`` keys them."""
    from flamino_core.store.passes import model_key
    from flamino_core.store.result_store import default_store

    store = default_store() if store is None else store
    model = model_key(engine, structure)
    return lambda sequence: store.held_positions(model, sequence)
