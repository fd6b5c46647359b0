"""The page's estimate and the work done come from one rule (issue 49): the pass count the
Variant effects page shows before a score (``jobs_panel.cost_of`` of the score's plan,
``variants/score_plan.py``, from the core's ``variant_passes``) equals the passes the engine then
runs, counted where the engine builds the rows the network reads (every window of an unmasked
pass, every masked row), on ``random:tiny``.

The two cases where the page and the core once disagreed: wt-marginals over a sequence of two
windows (the page said 1), and a joint-masked multi-mutant wider than one window (the page
counted its pass; the engine never runs it, the variant is not scored). The joint passes go
through the result store like every masked pass: scored again, nothing runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from app_pages._ui.server import jobs_panel
from flamino_core.numbering import Numbering
from flamino_core.alphabet import STANDARD_AMINO_ACIDS
from flamino_core.model.config import MAX_RESIDUES
from flamino_core.engine import planner
from flamino_core.engine.engine import Engine
from flamino_core.variants import indels
from flamino_core.variants.score_plan import list_plan
from flamino_core.variants.scoring import score_variants
from flamino_core.variants.variant_passes import planned_passes
from flamino_core.weights.loading import load_weights

# Longer than one window (MAX_RESIDUES = 1,022) and shorter than one and a half: windows start at
# 0 and at LENGTH - 1,022, so an unmasked pass is two windows.
LENGTH = 1_100


@pytest.fixture(scope="module")
def engine():
    return Engine(load_weights("random:tiny"))


@pytest.fixture
def rows_run(monkeypatch) -> list[int]:
    """Counts each window the engine hands the network: a packed row's windows (``Engine.run``)
    and each masked row (``compute_masked``, ``compute_joint_masked``; filler rows are not asked
    for, so not counted)."""
    counted = [0]
    pack, masked_rows = planner.pack, planner.masked_rows

    def counting_pack(batch, *args, **kwargs):
        counted[0] += sum(len(row.items) for row in batch.rows)
        return pack(batch, *args, **kwargs)

    def counting_masked_rows(sequence_tokens, spans, *args, **kwargs):
        counted[0] += len(spans)
        return masked_rows(sequence_tokens, spans, *args, **kwargs)

    monkeypatch.setattr(planner, "pack", counting_pack)
    monkeypatch.setattr(planner, "masked_rows", counting_masked_rows)
    return counted


def shown_cost(engine, sequence, variants, strategy) -> jobs_panel.Cost:
    """What the page shows before a score: its plan's cost (``jobs_panel.follow_plan`` asks the same)."""
    return jobs_panel.cost_of(list_plan(engine, sequence, variants, strategy, record_id=""), engine)


def _sequence() -> str:
    rng = np.random.default_rng(49)
    return "".join(rng.choice(list(STANDARD_AMINO_ACIDS), LENGTH))


def _mutant(sequence: str, position: int) -> str:
    """A substitution at 1-based ``position`` to another amino acid."""
    wt = sequence[position - 1]
    return f"{wt}{position}{'A' if wt != 'A' else 'G'}"


def _variants(sequence: str):
    m = lambda p: _mutant(sequence, p)  # noqa: E731
    text = ", ".join([m(5), m(600), m(1095),
                      f"{m(5)}:{m(30)}",  # a multi-mutant within one window: a joint pass
                      f"{m(5)}:{m(1090)}",  # spans 1,086 residues: wider than a window, not scored
                      f"p.{sequence[49]}50del",  # an indel: a substitution strategy scores none
                      f"p.{sequence[999]}1000*"])  # a stop: wt-pll-approx reads the whole wild type's windows
    variants, issues = indels.parse_mutations(text, sequence, Numbering(1))
    assert not issues and len(variants) == 7
    assert 1090 - 5 >= MAX_RESIDUES  # the wide one is wider than a window
    return variants


@pytest.mark.parametrize("strategy", ["wt-marginals", "joint-masked", "wt-pll-approx"])
def test_the_pages_pass_count_is_the_passes_the_engine_runs(engine, rows_run, strategy):
    sequence = _sequence()
    variants = _variants(sequence)
    shown = shown_cost(engine, sequence, variants, strategy)
    rows_run[0] = 0
    scored = score_variants(engine, sequence, variants, strategy)
    assert shown.passes == rows_run[0] > 0, shown.describe()
    assert scored.passes == planned_passes(sequence, variants, strategy) == rows_run[0]  # nothing was stored
    if strategy == "wt-marginals":
        assert rows_run[0] == 2  # the two windows of LENGTH residues
    if strategy == "joint-masked":
        wide = scored.table[scored.table["mutant"].str.contains(":") & scored.table["score"].isna()]
        assert len(wide) == 1 and "window" in wide["status"].iloc[0]  # the wide set was not run
        # Again: every pass is stored now, the joint sets' too (passes.joint_masked_log_probs), so
        # the page says none and none runs; the scores read back are the ones computed.
        again = shown_cost(engine, sequence, variants, strategy)
        rows_run[0] = 0
        rescored = score_variants(engine, sequence, variants, strategy)
        assert again.passes == rows_run[0] == 0, again.describe()
        pd.testing.assert_frame_equal(rescored.table, scored.table)


@pytest.mark.parametrize("strategy", ["wt-marginals", "joint-masked"])
def test_a_fits_plan_counts_the_zero_shot_passes_the_engine_runs(engine, rows_run, strategy):
    """``flamino fit`` / the Predict page say the augmented features' passes before the work
    (``features.missing_passes``); they are the passes ``zero_shot_scores`` then runs."""
    from flamino_core.predictors import features

    sequence = _sequence()
    variants = [v for v in _variants(sequence) if not v.edits]  # a fit's table: substitutions
    inputs = features.Inputs([v.apply(sequence) for v in variants], variants, sequence)
    to_run, planned, unit = features.missing_passes(features.spec_for("augmented", zero_shot=strategy), inputs, engine)
    rows_run[0] = 0
    features.zero_shot_scores(engine, sequence, variants, strategy)
    assert to_run == planned == rows_run[0] > 0, unit
