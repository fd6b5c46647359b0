"""The core's plans of model work (``flamino_core/jobs/plan.py``, ``variants/score_plan.py``), on
``random:tiny`` without the app: what a plan says is still needed is what its ``run`` then hands
the network, counted where the engine builds the rows it reads (every packed window of an
unmasked pass, every masked row); a first chunk alone runs one chunk and the plan then needs the
rest; after the run it needs nothing (the store holds it). Values are checked against the engine
called directly (independent passes, no store); masked rows may be batched differently there, so
those compare within 1e-5 (float32 log-probabilities of order 1-10, summation order only)."""

from __future__ import annotations

import numpy as np
import pytest

from flamino_core.numbering import Numbering
from flamino_core.alphabet import STANDARD_AMINO_ACIDS, encode
from flamino_core.jobs.plan import MEASURE_POSITIONS, MaskedScan, MaskedSet, SetOutputs, stored_outputs
from flamino_core.engine.engine import Engine
from flamino_core.store.passes import CHUNK
from flamino_core.variants import indels
from flamino_core.variants.score_plan import list_plan
from flamino_core.variants.scoring import score_variants
from flamino_core.variants.substitution_maps import pseudo_perplexity
from flamino_core.weights.loading import load_weights
from test_variant_passes import rows_run  # noqa: F401  (the fixture counting the rows the network is handed)

MODEL = "random:tiny"


@pytest.fixture(scope="module")
def engine():
    return Engine(load_weights(MODEL))


class Job:
    """What a plan's run reports to: its progress, its value, never cancelled."""

    def __init__(self):
        self.value, self.reports = None, []

    def progress(self, done, total, work=None):
        self.reports.append((done, total))
        self.work = work

    def cancelled(self) -> bool:
        return False


def protein(length: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    return "".join(rng.choice(list(STANDARD_AMINO_ACIDS), length))


def run_counted(plan, engine, rows_run, first_only=False):
    rows_run[0] = 0
    job = Job()
    value = plan.run(job, engine, first_only=first_only)
    return value, job, rows_run[0]


def test_a_scans_plan_needs_what_its_run_runs_and_reads_back_the_engines_passes(engine, rows_run):
    sequence, positions = protein(150, 1), tuple(range(10, 140))  # 130 positions: more than one chunk
    plan = MaskedScan(engine, sequence, positions)
    assert plan.unit == "positions" and plan.stored() is None
    assert plan.needed().masked and plan.needed().passes == 130

    value, job, ran = run_counted(plan, engine, rows_run, first_only=True)  # measures the rate
    assert value is None and ran == CHUNK and job.reports[-1] == (CHUNK, 130)
    left = plan.needed().passes
    assert left == 130 - CHUNK
    value, job, ran = run_counted(plan, engine, rows_run)
    assert ran == left and job.reports[-1] == (130, 130)
    assert plan.needed().passes == 0
    np.testing.assert_array_equal(plan.stored(), value)
    np.testing.assert_allclose(value, engine.compute_masked(sequence, list(positions)), atol=1e-5)
    # A hosted server's estimate counts every position, stored or not (it tells no one what others ran).
    assert MaskedScan(engine, sequence, positions, private=True).needed().passes == 130


def test_a_sets_outputs_plan_runs_each_distinct_record_once_the_first_alone(engine, rows_run):
    sequences = (protein(40, 2), protein(60, 3), protein(30, 4), protein(40, 2))  # one repeated
    plan = SetOutputs(engine, MODEL, sequences, chunk_residues=50)
    assert plan.unit == "records"
    assert not plan.needed().masked and plan.needed().passes == 3

    held, job, ran = run_counted(plan, engine, rows_run, first_only=True)
    assert ran == 1 and list(held) == [sequences[0]] and job.reports[-1] == (1, 3)
    assert plan.needed().passes == 2
    held, job, ran = run_counted(plan, engine, rows_run)
    assert ran == 2 and job.reports[-1] == (3, 3) and set(held) == set(sequences[1:3])  # this run's own
    assert plan.needed().passes == 0
    entropies = stored_outputs(engine, sequences, "entropy")  # what the pages read: every record's
    layer = engine.config.num_layers
    for sequence in set(sequences):
        (direct,) = engine.run([sequence], repr_layers=(layer,), logits=True)
        # The engine's own pass here is a different batch (one record, other layers kept): 1e-5.
        np.testing.assert_allclose(stored_outputs(engine, [sequence], f"mean/{layer}")[sequence],
                                   direct.representations[layer].mean(axis=0), atol=1e-5)
        assert entropies[sequence].shape == (len(sequence),)


def test_a_sets_outputs_plan_weighs_its_records_by_their_work(engine, rows_run):
    """A set's job reports the work done beside the records (its rate is then per MFLOP): a
    40-residue record first, then a 300-residue one, are not two equal units. The work of a
    record's pass is its row's matmul MFLOP (``row_work``'s count, written out here: 2W(4D^2 +
    2DF) + 4W^2 D per layer and the LM head at every token) plus its per-token cost."""
    from flamino_core.jobs import pass_cost

    short, long = protein(40, 5), protein(300, 6)
    plan = SetOutputs(engine, MODEL, (short, long), chunk_residues=50)
    _, job, _ = run_counted(plan, engine, rows_run, first_only=True)
    config = engine.config
    d, f, v, n = config.embed_dim, config.ffn_dim, config.vocab_size, config.num_layers

    def by_hand(width):
        matmul = (n * (2 * width * (4 * d * d + 2 * d * f) + 4 * width * width * d) + width * 2 * d * (d + v)) / 1e6
        return matmul + pass_cost.TOKEN_LAYER_MFLOP["unmasked"] * width * n

    done, total = job.work
    assert done == pytest.approx(by_hand(42)) and total == pytest.approx(by_hand(42) + by_hand(302))
    assert done / total < 0.25  # the short record: far less than half the set's work


def test_a_masked_sets_plan_gives_each_records_pseudo_perplexity(engine, rows_run):
    sequences = (protein(30, 5), protein(45, 6))
    plan = MaskedSet(engine, MODEL, sequences, pseudo_perplexity)
    assert plan.needed().passes == 75

    values, job, ran = run_counted(plan, engine, rows_run, first_only=True)
    assert ran == MEASURE_POSITIONS and values == {}
    assert plan.needed().passes == 75 - MEASURE_POSITIONS
    values, job, ran = run_counted(plan, engine, rows_run)
    assert ran == 75 - MEASURE_POSITIONS and job.reports[-1] == (75, 75)
    assert plan.needed().passes == 0
    for sequence in sequences:
        # exp(-mean log p(x_i | x with i masked)), from the engine's own passes and ESM's token ids
        # (encode: <cls> + residues + <eos>). rel 1e-5: the passes here are batched differently.
        log_probs = engine.compute_masked(sequence, list(range(len(sequence)))).astype(np.float64)
        ids = encode(sequence)[1:-1]
        expected = float(np.exp(-np.mean(log_probs[np.arange(len(sequence)), ids])))
        assert values[sequence] == pytest.approx(expected, rel=1e-5)


def test_a_chunked_score_plan_keeps_each_chunk_and_runs_what_it_said(engine, rows_run):
    sequence = protein(40, 7)
    text = ", ".join(f"{sequence[i]}{i + 1}{'A' if sequence[i] != 'A' else 'G'}" for i in (2, 9, 17, 25, 33))
    variants, _ = indels.parse_mutations(text, sequence, Numbering(1))
    plan = list_plan(engine, sequence, variants, "pll", record_id="r", chunk_rows=2)
    assert plan.chunks == [(0, 1), (1, 3), (3, 5)] and plan.unit == "variants"
    said = plan.needed().passes
    assert said == 40 * 6  # the wild type's and five distinct mutants' residues, none stored

    partial, job, ran = run_counted(plan, engine, rows_run, first_only=True)
    assert len(partial["partial"]) == 1 and len(partial["partial"][0]) == 1 and job.reports == [(0, 5), (1, 5)]
    left = plan.needed().passes
    assert ran == said - left == 80  # the first row: the wild type and one mutant
    scored, job, ran = run_counted(plan, engine, rows_run)
    assert ran == left and plan.needed().passes == 0
    assert [len(t) for t in job.value["partial"]] == [1, 2, 2]  # the rows as they arrived
    direct = score_variants(engine, sequence, variants, "pll", record_id="r")  # from the store: the same table
    assert scored.table.equals(direct.table)
    # Without chunk_rows (the command line) the plan is one call and counts the same passes.
    assert list_plan(engine, sequence, variants, "pll", record_id="r").chunks == [(0, 5)]
