"""Passes through the result store: the numbers are the engine's own, each position is masked
once per model whoever asks, a cancelled scan keeps its finished chunks and resumes, and one
unmasked pass per record serves every page that needs per-record outputs."""

from __future__ import annotations

import numpy as np
import pytest

from flamino_core import Engine, load_weights

from flamino_core.store import passes
from flamino_core.analysis.outputs import amino_acid_probabilities, entropy
from flamino_core.store.result_store import ResultStore


@pytest.fixture(scope="module")
def engine():
    return Engine(load_weights("random:tiny:1"))


class Counting:
    """The engine with its masked positions and unmasked sequences counted as they are sent."""

    def __init__(self, engine):
        self.engine, self.masked, self.unmasked = engine, [], []
        self.config, self.fingerprint = engine.config, engine.fingerprint

    def compute_masked(self, sequence, positions, progress=None):
        self.masked.extend(positions)
        return self.engine.compute_masked(sequence, positions, progress=progress)

    def run(self, sequences, **options):
        self.unmasked.extend(sequences)
        return self.engine.run(sequences, **options)


@pytest.fixture
def store(tmp_path):
    return ResultStore(tmp_path / "results.sqlite")


def test_masked_passes_equal_the_engine_and_run_each_position_once(engine, store, real_sequences):
    sequence = real_sequences["HBB_HUMAN"]
    counting = Counting(engine)
    some = [5, 0, 77, 5]  # a repeat comes back twice, computed once
    first = passes.masked_log_probs(counting, sequence, some, store=store)
    # The reference: the engine itself, no store. Same rows (batching differs: rounding only).
    np.testing.assert_allclose(first, engine.compute_masked(sequence, some), atol=1e-5)
    assert sorted(counting.masked) == [0, 5, 77]
    whole = passes.masked_log_probs(counting, sequence, store=store)
    assert sorted(counting.masked) == sorted([0, 5, 77] + [p for p in range(len(sequence)) if p not in (0, 5, 77)])
    np.testing.assert_allclose(whole, engine.compute_masked(sequence), atol=1e-5)
    again = passes.masked_log_probs(counting, sequence, store=store)
    assert len(counting.masked) == len(sequence)  # nothing more ran
    np.testing.assert_array_equal(again, whole)


def test_another_model_is_not_served_this_models_passes(store, real_sequences):
    sequence = real_sequences["HBB_HUMAN"][:40]
    one, other = Engine(load_weights("random:tiny:1")), Engine(load_weights("random:tiny:2"))
    assert one.fingerprint != other.fingerprint
    assert Engine(load_weights("random:tiny:1")).fingerprint == one.fingerprint  # same weights, same key
    passes.masked_log_probs(one, sequence, store=store)
    counting = Counting(other)
    got = passes.masked_log_probs(counting, sequence, store=store)
    assert len(counting.masked) == len(sequence)
    np.testing.assert_allclose(got, other.compute_masked(sequence), atol=1e-5)


def test_a_cancelled_scan_keeps_finished_chunks_and_resumes_from_them(engine, store, real_sequences):
    sequence = real_sequences["HBB_HUMAN"]
    counting = Counting(engine)
    calls = []

    def cancelled():
        calls.append(1)
        return len(calls) > 2  # two chunks run, then stop

    with pytest.raises(passes.Cancelled):
        passes.masked_log_probs(counting, sequence, store=store, chunk=32, cancelled=cancelled)
    assert counting.masked == list(range(64))
    assert sorted(store.held_positions(passes.model_key(engine), sequence)) == list(range(64))
    reported = []
    passes.masked_log_probs(counting, sequence, store=store, chunk=32, progress=lambda d, t: reported.append((d, t)))
    assert counting.masked == list(range(len(sequence)))  # resumed at 64, nothing twice
    assert reported[0] == (64, len(sequence)) and reported[-1] == (len(sequence), len(sequence))


def test_one_unmasked_pass_per_record_gives_every_layers_mean_and_the_entropy(engine, store, real_sequences):
    sequences = [real_sequences["HBB_HUMAN"], "MKTAYIAKQRQISFVKSHFSRQ", real_sequences["HBB_HUMAN"]]
    counting = Counting(engine)
    arrived = []
    outs = passes.record_outputs(counting, sequences, store=store, on_record=lambda i, o: arrived.append(i))
    assert counting.unmasked == sequences[:2]  # the repeat ran once
    assert sorted(arrived) == [0, 1, 2]
    n = engine.config.num_layers
    reference = engine.run(sequences[:2], repr_layers=tuple(range(n + 1)), logits=True)
    for out, ref in zip(outs, reference):
        assert sorted(out.means) == list(range(n + 1))
        for layer in range(n + 1):
            np.testing.assert_allclose(out.means[layer], ref.representations[layer].mean(axis=0), atol=1e-5)
        expected = entropy(amino_acid_probabilities(ref.logits))
        np.testing.assert_allclose(out.entropy, expected, atol=1e-5)
        assert out.logits is None
    # A second page asking for the same records (another layer's means, the entropy) runs nothing.
    again = passes.record_outputs(counting, sequences, store=store)
    assert counting.unmasked == sequences[:2]
    np.testing.assert_array_equal(again[1].means[1], outs[1].means[1])
    # Logits were not stored: asking for them runs that record's pass once more, then never.
    with_logits = passes.record_outputs(counting, sequences[1:2], store=store, logits=True)
    np.testing.assert_allclose(with_logits[0].logits, reference[1].logits, atol=1e-5)
    passes.record_outputs(counting, sequences[1:2], store=store, logits=True)
    assert counting.unmasked == sequences[:2] + sequences[1:2]


def test_records_arrive_in_groups_and_a_cancel_keeps_the_finished_groups(engine, store, monkeypatch):
    rng = np.random.default_rng(3)
    sequences = ["".join(rng.choice(list("ACDEFGHIKLMNPQRSTVWY"), size=600)) for _ in range(4)]
    monkeypatch.setattr(passes, "_group_residues", lambda engine: 1200)  # two records a group
    counting = Counting(engine)
    polls = []
    with pytest.raises(passes.Cancelled):
        passes.record_outputs(counting, sequences, store=store, cancelled=lambda: polls.append(1) or len(polls) > 1)
    assert counting.unmasked == sequences[:2]
    done = []
    passes.record_outputs(counting, sequences, store=store, progress=lambda d, t: done.append(d))
    assert counting.unmasked == sequences  # only the last two ran
    assert done[0] == 2 and done[-1] == 4 and done == sorted(done)  # (within the group: its batches)


def test_a_groups_records_count_done_as_its_batches_finish(engine, store):
    """Issue 50 row 3: a Predict fit's 200 records were one group, and its progress said "0 of 200"
    for the 13 s the group took. The group's batches report as they finish: its records count
    done in proportion, and the group's end says the exact count."""
    rng = np.random.default_rng(5)
    sequences = ["".join(rng.choice(list("ACDEFGHIKLMNPQRSTVWY"), size=n)) for n in range(30, 630, 30)]
    assert len(passes.record_groups(engine, sequences)) == 1  # one Engine.run call
    done = []
    passes.record_outputs(engine, sequences, store=store, progress=lambda d, t: done.append((d, t)))
    assert done[0] == (0, 20) and done[-1] == (20, 20)
    assert any(0 < d < 20 for d, _ in done), done  # counted while the group runs, not 0 until its end
    assert [d for d, _ in done] == sorted(d for d, _ in done)
