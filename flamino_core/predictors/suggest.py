"""Mutations worth trying: the substitutions the model finds more likely than the wild type.

Following Hie et al. 2023 (Nature Biotechnology 42, 275, "Efficient evolution of human
antibodies from general protein language models"): a substitution is proposed when its
wt-marginal log-ratio, log p(mt | wild type) - log p(wt | wild type) from one unmasked pass, is
above a threshold (default 0: more likely than the wild type) under *every* chosen model (their
consensus over model sizes), within the user's constraints (positions kept fixed or the only
ones explored, amino acids never introduced, e.g. no C, no P).

Proposals are ranked by their mean wt-marginal log-ratio over the models (singles), and each is
scored under every strategy of ``flamino variants`` by each model, by the same function
(``variants.scoring.score_variants``), so a proposal's numbers are the ones ``flamino variants``
gives the same mutant. The first ``combine`` proposals at distinct positions are then joined
into multi-mutants (every subset of two or more), scored jointly masked and by pll;
``non_additivity`` (joint - additive) at or beyond ``NON_ADDITIVE_NATS`` is flagged: the model
thinks those substitutions interact. A fitted predictor (``predictors.saved``) adds its prediction.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from flamino_core.progress import StageProgress
from flamino_core.alphabet import STANDARD_AMINO_ACIDS
from flamino_core.inputs.numbering import Numbering
from flamino_core.options import STRATEGIES, VARIANT_STRATEGIES
from flamino_core.variants.notation import Variant, parse_variant

DEFAULT_THRESHOLD = 0.0
DEFAULT_TOP = 20
DEFAULT_COMBINE = 3  # 3 proposals make 4 multi-mutants (3 doubles, 1 triple)
MAX_COMBINE = 6  # 57 multi-mutants; pll costs L passes each
NON_ADDITIVE_NATS = 1.0  # |joint - additive| from here: a factor e in likelihood
SELECTION = "wt-marginals"


class SuggestError(ValueError):
    """Constraints that cannot be read or leave nothing to propose (the message says why)."""


@dataclasses.dataclass(frozen=True)
class Constraints:
    """What may change: 0-based indices kept fixed, the only indices explored (None: all), amino
    acids never introduced."""

    keep: frozenset[int] = frozenset()
    explore: frozenset[int] | None = None
    avoid: frozenset[str] = frozenset()

    def allows(self, index: int, mt: str) -> bool:
        in_scope = self.explore is None or index in self.explore
        return in_scope and index not in self.keep and mt not in self.avoid


def parse_positions(text: str, length: int, numbering: Numbering = Numbering()) -> frozenset[int]:
    """``1-20,45`` (in the record's ``numbering``) as 0-based indices.

    Raises:
      SuggestError: unreadable, or a position outside the sequence.
    """
    indices: set[int] = set()
    last = numbering.last(length)
    for part in filter(None, (p.strip() for p in re.split(r"[,\s]+", text or ""))):
        match = re.fullmatch(r"(-?\d{1,9})(?:\s*[-–]\s*(-?\d{1,9}))?", part)
        if not match:
            raise SuggestError(f"{part!r} is not a position or a range (write e.g. 1-20,45)")
        low = int(match[1])
        high = int(match[2]) if match[2] is not None else low
        if low > high:
            raise SuggestError(f"{part!r}: the range runs backwards")
        if low < numbering.first or high > last:
            raise SuggestError(f"{part!r} is outside the sequence ({numbering.first}-{last})")
        indices.update(range(numbering.index(low), numbering.index(high) + 1))
    return frozenset(indices)


def parse_amino_acids(text: str) -> frozenset[str]:
    """``C,P`` (or ``CP``) as a set of one-letter codes.

    Raises:
      SuggestError: a letter that is not one of the 20 standard amino acids.
    """
    letters = [c for c in (text or "").upper() if not c.isspace() and c not in ",;"]
    bad = sorted({c for c in letters if c not in STANDARD_AMINO_ACIDS})
    if bad:
        raise SuggestError(f"{', '.join(bad)}: not among the 20 standard amino acids ({STANDARD_AMINO_ACIDS})")
    return frozenset(letters)


def candidates(sequence: str, numbering: Numbering = Numbering(),
               constraints: Constraints = Constraints()) -> list[Variant]:
    """Every single substitution the constraints allow, position by position."""
    found = []
    for index, wt in enumerate(sequence):
        for mt in STANDARD_AMINO_ACIDS:
            if mt != wt and wt in STANDARD_AMINO_ACIDS and constraints.allows(index, mt):
                found.append(parse_variant(f"{wt}{numbering.number(index)}{mt}", sequence, numbering, len(found)))
    return found


def combinations(singles: Sequence[Variant], sequence: str, numbering: Numbering, size: int) -> list[Variant]:
    """Every multi-mutant of two or more of the first ``size`` singles at distinct positions."""
    chosen, seen = [], set()
    for v in singles:
        if v.indices[0] not in seen:
            chosen.append(v)
            seen.add(v.indices[0])
        if len(chosen) == size:
            break
    chosen.sort(key=lambda v: v.indices[0])
    combos = []
    for k in range(2, len(chosen) + 1):
        for group in itertools.combinations(chosen, k):
            combos.append(parse_variant(":".join(v.mutant for v in group), sequence, numbering, len(combos)))
    return combos


@dataclasses.dataclass
class Suggestions:
    """The proposals of one record: ``table`` (docs/predict.md lists its columns)."""

    table: pd.DataFrame
    models: list[str]
    strategies: list[str]
    n_candidates: int  # single substitutions the constraints allow
    n_passing: int  # of those, above the threshold under every model
    notes: list[str]


def score_column(strategy: str, model: str, models: Sequence[str]) -> str:
    """The table's column of ``strategy`` by ``model``: the strategy alone when one model ran."""
    return strategy if len(models) == 1 else f"{strategy} ({model})"


def suggest(
    engines: Sequence[tuple[str, object]],
    sequence: str,
    *,
    numbering: Numbering = Numbering(),
    record_id: str = "",
    constraints: Constraints = Constraints(),
    threshold: float = DEFAULT_THRESHOLD,
    top: int = DEFAULT_TOP,
    combine: int = DEFAULT_COMBINE,
    strategies: Sequence[str] = VARIANT_STRATEGIES,
    predictor=None,
    predictor_engine=None,
    progress: StageProgress | None = None,
    notify: Callable[[str], None] | None = None,
    store=None,
    cancelled: Callable[[], bool] | None = None,
) -> Suggestions:
    """Propose substitutions of ``sequence`` and score them.

    Args:
      engines: ``(model identifier, Engine)`` for every model that must agree.
      sequence: the wild type.
      numbering: its residue numbering (mutants are written in it).
      record_id: written in every row.
      constraints: positions kept / explored, amino acids avoided.
      threshold: a proposal's wt-marginal log-ratio must exceed it under every model.
      top: proposals kept (best first).
      combine: the first this many proposals at distinct positions are combined (0: none).
      strategies: the ``flamino variants`` strategies every proposal is scored by.
      predictor: a fitted ``predictors.saved.Predictor``, whose prediction is added.
      predictor_engine: the model its features need (embedding, augmented).
      progress: a (done, total) callback for a named stage.
      notify: told what the scoring will cost before it runs.
      store: the ``result_store.ResultStore`` every masked pass is read from and kept in
        (default: the process's), as ``flamino variants`` uses it.
      cancelled: polled between chunks of passes; True stops with ``passes.Cancelled``.
    """
    strategies, models = _checked_choices(engines, combine, strategies)
    stage = progress or (lambda name: None)
    pool = _candidate_pool(sequence, numbering, constraints)
    passes = dict(store=store, cancelled=cancelled)
    singles, n_passing = _ranked_singles(engines, sequence, pool, threshold, top, passes)
    combos = combinations(singles, sequence, numbering, combine) if combine >= 2 else []
    proposals = singles + [dataclasses.replace(v, order=len(singles) + n) for n, v in enumerate(combos)]
    notes = _notes(engines)
    if not proposals:
        return Suggestions(_table(record_id, [], [], models, {}, None, None), models, list(strategies),
                           len(pool), n_passing, notes)
    if notify:
        notify(_cost_message(sequence, singles, combos, strategies))
    columns = _score_columns(engines, sequence, proposals, strategies, models, stage, passes)
    own = np.mean([columns[score_column(SELECTION, model, models)] for model in models], axis=0)
    prediction = _predictions(predictor, predictor_engine, sequence, proposals, stage, **passes) if predictor else None
    table = _table(record_id, singles, combos, models, columns, own, prediction)
    return Suggestions(table, models, list(strategies), len(pool), n_passing, notes)


def _checked_choices(engines, combine: int, strategies: Sequence[str]) -> tuple[Sequence[str], list[str]]:
    """(the strategies to score by, SELECTION included; the model names), or a SuggestError."""
    if not engines:
        raise SuggestError("no model given")
    if not 0 <= combine <= MAX_COMBINE:
        raise SuggestError(f"combine {combine}: choose 0-{MAX_COMBINE} proposals to combine")
    unknown = [s for s in strategies if s not in VARIANT_STRATEGIES]
    if unknown:
        raise SuggestError(f"unknown strategy {unknown[0]!r}: choose among {', '.join(VARIANT_STRATEGIES)}")
    if SELECTION not in strategies:  # the score proposals are chosen and ranked by is always shown
        strategies = [SELECTION, *strategies]
    models = list(dict.fromkeys(name for name, _ in engines))
    if len(models) < len(engines):
        raise SuggestError("the same model is given twice")
    return strategies, models


def _candidate_pool(sequence: str, numbering: Numbering, constraints: Constraints) -> list[Variant]:
    """``candidates``, or a SuggestError when the constraints leave none."""
    pool = candidates(sequence, numbering, constraints)
    if not pool:
        raise SuggestError("the constraints leave no substitution to propose (every position kept, or every "
                           "amino acid avoided)")
    return pool


def _notes(engines) -> list[str]:
    notes = []
    if any(getattr(engine, "is_random", False) for _, engine in engines):
        notes.append("a model has random weights (a test model): these proposals are not biology")
    return notes


def _ranked_singles(engines, sequence: str, pool: list[Variant], threshold: float, top: int,
                    passes: dict) -> tuple[list[Variant], int]:
    """(the ``top`` candidates above ``threshold`` under every model, best mean SELECTION score
    first and renumbered from 0; how many passed the threshold)."""
    from flamino_core.variants.scoring import score_variants

    selection = np.stack([score_variants(engine, sequence, pool, SELECTION, **passes).table["score"]
                          .to_numpy(np.float64) for _, engine in engines])  # (models, candidates)
    passing = np.flatnonzero((selection > threshold).all(axis=0))
    consensus = selection.mean(axis=0)
    ranked = sorted(passing, key=lambda c: (-consensus[c], c))[:max(top, 0)]
    return [dataclasses.replace(pool[c], order=n) for n, c in enumerate(ranked)], len(passing)


def _cost_message(sequence: str, singles: list[Variant], combos: list[Variant], strategies: Sequence[str]) -> str:
    """What scoring the proposals will cost per model, said before it runs (``variant_passes``:
    what ``score_variants`` runs, stored passes included)."""
    from flamino_core.variants.variant_passes import variant_passes

    proposals = singles + combos
    costs = []
    for strategy in strategies:
        needed = variant_passes(sequence, proposals, strategy)
        kind = "masked pass" if needed.masked else "pass"
        costs.append(f"{strategy} {needed.planned:,} {kind}{'es' if needed.planned != 1 else ''}")
    return f"{len(singles):,} proposals and {len(combos):,} combinations to score, per model: " + ", ".join(costs)


def _score_columns(engines, sequence: str, proposals: list[Variant], strategies: Sequence[str],
                   models: list[str], stage, passes: dict) -> dict[str, np.ndarray]:
    """Table column -> every proposal's score under each strategy by each model (and
    joint-masked's non_additivity), as ``flamino variants`` scores them."""
    from flamino_core.variants.scoring import score_variants

    columns: dict[str, np.ndarray] = {}
    for model, engine in engines:
        for strategy in strategies:
            label = score_column(strategy, model, models)
            result = score_variants(engine, sequence, proposals, strategy, progress=stage(f"{model}: {strategy}"),
                                    **passes)
            columns[label] = result.table["score"].to_numpy(np.float64)
            if STRATEGIES[strategy].joint:
                non_additivity = result.table["non_additivity"].to_numpy(np.float64)
                columns[score_column("non_additivity", model, models)] = non_additivity
    return columns


def _predictions(predictor, engine, sequence: str, proposals: list[Variant], stage, *, store=None,
                 cancelled=None) -> pd.DataFrame:
    from flamino_core.predictors.apply import predict
    from flamino_core.predictors.features import Inputs

    if predictor.spec.kind != "embedding" and predictor.wild_type not in (None, sequence):
        raise SuggestError(f"the predictor was fitted on mutants of another wild type; its {predictor.spec.kind} "
                           "features describe only those")
    inputs = Inputs([v.apply(sequence) for v in proposals], list(proposals), sequence)
    result = predict(predictor, inputs, engine, store=store, progress=stage("predictor"), cancelled=cancelled)
    frame = pd.DataFrame({"prediction": result.values})
    if result.probabilities is not None:
        for j, label in enumerate(predictor.model.classes):
            frame[f"probability_{label}"] = result.probabilities[:, j]
    return frame


def _table(record_id, singles, combos, models, columns, consensus, prediction) -> pd.DataFrame:
    proposals = list(singles) + list(combos)
    table = pd.DataFrame({
        "record_id": record_id,
        "kind": ["single"] * len(singles) + ["combination"] * len(combos),
        "rank": 0,
        "mutant": [v.mutant for v in proposals],
        "n_mutations": [len(v.substitutions) for v in proposals],
        "consensus": consensus if consensus is not None else np.zeros(0),
    })
    for name, values in columns.items():
        table[name] = values
    joint = [score_column("joint-masked", m, models) for m in models]
    non_additivity = [score_column("non_additivity", m, models) for m in models]
    if all(c in table for c in non_additivity):
        beyond = (table[non_additivity].abs() >= NON_ADDITIVE_NATS).any(axis=1)
        table["non_additive"] = beyond & (table["n_mutations"] > 1)
    if prediction is not None:
        for name in prediction.columns:
            table[name] = prediction[name].to_numpy()
    # Singles keep their order (best consensus first); combinations by their mean joint score
    # when it was computed (it sees the interaction), else by the additive consensus.
    key = table[joint].mean(axis=1) if all(c in table for c in joint) else table["consensus"]
    n = len(singles)
    order = list(range(n)) + sorted(range(n, len(table)), key=lambda r: (-key.iloc[r], r))
    table = table.iloc[order].reset_index(drop=True)
    table["rank"] = list(range(1, n + 1)) + list(range(1, len(table) - n + 1))
    return table
