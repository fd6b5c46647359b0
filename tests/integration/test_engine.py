"""The jitted backend: batch/padding invariance, compilation count, long sequences, capture."""

from __future__ import annotations

import numpy as np
import pytest

from flamino_core import Engine, load_weights

from flamino_core.model import fused_attention

from flamino_core.engine import hardware, memory, planner
from flamino_core.engine.engine import TRACE_COUNTS
from flamino_core.options import DEFAULT_TOKEN_BUDGET
from flamino_core.engine.planner import LENGTH_BUCKETS, bucket_length
from flamino_core.engine.windows import window_starts


@pytest.fixture(scope="module")
def engine():
    return Engine(load_weights("random:tiny:1"))


def random_protein(rng, length):
    return "".join(rng.choice(list("ACDEFGHIKLMNPQRSTVWY"), size=length))


def test_results_do_not_depend_on_the_batch(engine, real_sequences):
    rng = np.random.default_rng(0)
    target = real_sequences["HBB_HUMAN"]
    (alone,) = engine.run([target], repr_layers=(0, 1, 2), attention_layers=(1, 2), contacts=True)
    others = [random_protein(rng, n) for n in (140, 150, 5, 190)]
    crowded = engine.run(others[:2] + [target] + others[2:], repr_layers=(0, 1, 2), attention_layers=(1, 2),
                         contacts=True)[2]
    for layer in (0, 1, 2):
        np.testing.assert_allclose(crowded.representations[layer], alone.representations[layer], atol=1e-5)
    np.testing.assert_allclose(crowded.logits, alone.logits, atol=1e-5)
    np.testing.assert_allclose(crowded.attentions, alone.attentions, atol=1e-6)
    np.testing.assert_allclose(crowded.contacts, alone.contacts, atol=1e-6)


def test_output_order_and_shapes(engine):
    seqs = ["MKV" * 30, "A", "W" * 7]
    results = engine.run(seqs, repr_layers=(0, -1), attention_layers=(-1,))
    for seq, res in zip(seqs, results):
        L = len(seq)
        assert res.sequence == seq
        assert res.final.shape == (L, 32) and res.representations[0].shape == (L, 32)
        assert res.logits.shape == (L, 33)
        assert res.attentions.shape == (1, 4, L + 2, L + 2)
        assert res.mean.shape == (32,)
        # Attention rows are distributions over the real tokens.
        np.testing.assert_allclose(res.attentions.sum(-1), 1.0, atol=1e-5)


def test_nothing_is_captured_unless_asked(engine):
    (res,) = engine.run(["MKVLA"])
    assert res.attentions is None and res.contacts is None
    assert set(res.representations) == {2}


def test_compilations_bounded_by_buckets(engine):
    rng = np.random.default_rng(1)
    lengths = [10, 20, 25, 70, 100, 120, 200, 250, 300]
    engine.run([random_protein(rng, n) for n in lengths])  # warm-up
    before = sum(TRACE_COUNTS.values())
    # New lengths inside the same buckets, one at a time and all together: no new compilation.
    for n in [11, 21, 71, 101, 121, 201, 301]:
        engine.run([random_protein(rng, n)])
    assert sum(TRACE_COUNTS.values()) - before <= len({bucket_length(n + 2) for n in lengths})
    before = sum(TRACE_COUNTS.values())
    for n in [12, 22, 72, 102, 122, 202, 302]:
        engine.run([random_protein(rng, n)])
    assert sum(TRACE_COUNTS.values()) == before, "recompiled for lengths inside known buckets"


def test_masked_scan_compiles_once_per_shape(engine):
    rng = np.random.default_rng(2)
    engine.compute_masked(random_protein(rng, 40))
    before = TRACE_COUNTS["masked"]
    engine.compute_masked(random_protein(rng, 41))
    engine.compute_masked(random_protein(rng, 45))
    assert TRACE_COUNTS["masked"] == before


def test_window_starts_cover_with_overlap():
    assert window_starts(1022) == [0]
    starts = window_starts(2500)
    assert starts[0] == 0 and starts[-1] == 2500 - 1022
    assert all(b - a <= 511 for a, b in zip(starts, starts[1:]))


def test_long_sequences_windowed_truncated_full(engine):
    rng = np.random.default_rng(3)
    seq = random_protein(rng, 1500)
    (windowed,) = engine.run([seq], contacts=True)
    assert windowed.final.shape == (1500, 32) and windowed.contacts.shape == (1500, 1500)
    # Independent check: run each window as its own sequence and average where they overlap.
    starts = window_starts(1500)
    windows = engine.run([seq[s : s + 1022] for s in starts])
    total, count = np.zeros((1500, 32)), np.zeros((1500, 1))
    for s, w in zip(starts, windows):
        total[s : s + 1022] += w.final
        count[s : s + 1022] += 1
    np.testing.assert_allclose(windowed.final, total / count, atol=1e-5)
    (truncated,) = engine.run([seq], long="truncate")
    assert truncated.sequence == seq[:1022] and truncated.final.shape == (1022, 32)
    (full,) = engine.run([seq], long="full")
    assert full.final.shape == (1500, 32)
    with pytest.raises(ValueError, match="truncate"):
        engine.run([seq], attention_layers=(1,))


def test_masked_log_probs_are_one_pass_per_position(engine):
    """Row i equals an ordinary forward pass with position i masked (computed independently)."""
    from flamino_core.alphabet import MASK_IDX, batch_encode
    import jax.numpy as jnp
    from flamino_core.weights.convert import params_to_model
    from flamino_core.variants.substitution_maps import log_softmax

    seq = "MKTAYIAKQRQISFVKSHFSRQ"
    ours = engine.compute_masked(seq, positions=[0, 5, 21])
    model = params_to_model(load_weights("random:tiny:1").params, engine.config)  # the fixture's weights
    for row, p in enumerate([0, 5, 21]):
        tokens = batch_encode([seq])
        tokens[0, p + 1] = MASK_IDX
        logits = np.asarray(model(jnp.asarray(tokens))["logits"])[0, p + 1]
        np.testing.assert_allclose(ours[row], log_softmax(logits), atol=1e-5)


def test_bad_layers_are_refused(engine):
    with pytest.raises(ValueError, match="layers 0..2"):
        engine.run(["MKV"], repr_layers=(5,))


def test_attention_layer_zero_is_refused(engine):
    with pytest.raises(ValueError, match="layer 0"):
        engine.run(["MKV"], attention_layers=(0,))


def test_batch_plan_pads_little_and_uses_power_of_two_rows():
    """Every row once, in a batch whose width is its bucket or a later one, power-of-two row
    counts (no filler rows), within the token budget, and little padding on a realistic mix."""
    rng = np.random.default_rng(4)
    lengths = [int(n) for n in np.clip(rng.lognormal(np.log(300), 0.6, size=200), 30, 1000)]
    budget = DEFAULT_TOKEN_BUDGET
    plan = [([i for row in batch.rows for i in row.items], batch.width)
            for batch in planner.plan(lengths, lambda width: budget // width)]
    seen = sorted(i for rows, _ in plan for i in rows)
    assert seen == list(range(len(lengths)))
    for rows, width in plan:
        assert len(rows) & (len(rows) - 1) == 0, f"{len(rows)} rows is not a power of two"
        assert all(bucket_length(lengths[i] + 2) <= width for i in rows)
        assert len(rows) == 1 or len(rows) * width <= budget
    padded = sum(len(rows) * width for rows, width in plan)
    # Reference: batching as transformers users do it by hand (sorted, filled greedily up to the
    # same token budget, each batch padded to its longest row): 9% padding on this mix.
    greedy: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        if greedy and (len(greedy[-1]) + 1) * (lengths[i] + 2) <= budget:
            greedy[-1].append(i)
        else:
            greedy.append([i])
    greedy_padded = sum(len(rows) * (max(lengths[i] for i in rows) + 2) for rows in greedy)
    # Buckets add at most 15 tokens a row (about 2.5% here); allow that and no more.
    assert padded <= greedy_padded + 8 * len(lengths), (padded, greedy_padded)


def test_buckets_pad_at_most_one_step_and_are_few():
    for tokens in range(1, 1025):
        assert 0 <= bucket_length(tokens) - tokens < 16
    # Every row up to the training length lands in one of the 64 known shapes.
    assert {bucket_length(tokens) for tokens in range(1, 1025)} == set(LENGTH_BUCKETS)
    assert len(LENGTH_BUCKETS) == 64


def test_contacts_that_cannot_fit_are_refused_before_any_forward_pass(engine, monkeypatch):
    rng = np.random.default_rng(5)
    # Contacts merged from windows: 5000^2 x (4 + 1) bytes = 125 MB; with the final layer and
    # the logits (5000 x (32 + 33) float32 = 1.3 MB), 126 MB: 120 MiB, said in binary units like every size
    # (50 MB available: 48 MiB; 1.3 MB without the contacts: 1.24 MiB).
    seq = random_protein(rng, 5000)
    monkeypatch.setattr(memory, "available_memory", lambda: 50_000_000)
    forward = engine._forward
    monkeypatch.setattr(engine, "_forward", lambda *a, **k: pytest.fail("a forward pass ran before the check"))
    with pytest.raises(ValueError, match=r"120 MiB of memory.*5,000 residues.*48 MiB available.*without the "
                                         r"contacts they need 1\.24 MiB.*--long truncate"):
        engine.run([seq], contacts=True)
    monkeypatch.setattr(engine, "_forward", forward)
    (out,) = engine.run([seq])  # the same sequence without contacts fits
    assert out.final.shape == (5000, 32) and out.contacts is None


# --- packed rows (several sequences per row, plain forward passes) --------------------------------
KERNEL_BUILT = fused_attention.status().available
PACKING_PATHS = [pytest.param("fused", marks=pytest.mark.skipif(not KERNEL_BUILT, reason="fused kernel not built")),
                 "xla"]


def _recording(engine):
    """Wrap the engine's jitted forward to record, per call, the batch shape and whether it was packed."""
    calls = []
    forward = engine._forward

    def record(state, tokens, segments=None, **options):
        calls.append((tuple(tokens.shape), segments is not None))
        return forward(state, tokens, segments, **options)

    engine._forward = record
    return calls


@pytest.mark.parametrize("attention", PACKING_PATHS)
def test_packed_rows_give_each_sequence_what_it_gets_alone(attention, real_sequences):
    """Packed (several sequences a row, block-diagonal attention) against unpacked (one a row)
    on the same weights and path: every sequence's hidden states and logits agree to float
    summation order. A long sequence's windows are packed with the others and merged back."""
    weights = load_weights("random:tiny:1")
    rng = np.random.default_rng(6)
    seqs = list(real_sequences.values()) + [random_protein(rng, n) for n in (1, 2, 5, 31, 120, 600, 1500)]
    packed_engine = Engine(weights, attention=attention, packing="on")
    calls = _recording(packed_engine)
    packed = packed_engine.run(seqs, repr_layers=(0, 1, 2))
    assert any(shared for _, shared in calls), "nothing was packed"
    assert len(calls) < len(seqs)
    alone = Engine(weights, attention=attention, packing="off").run(seqs, repr_layers=(0, 1, 2))
    for seq, ours, ref in zip(seqs, packed, alone):
        assert ours.sequence == seq and ours.final.shape == (len(seq), 32)
        # Up to 3 windows averaged, values O(1): fp32 rounding of a different summation order
        # is ~1e-6; a token attending across sequences or a position off by one moves ~1e-1.
        for layer in (0, 1, 2):
            np.testing.assert_allclose(ours.representations[layer], ref.representations[layer], atol=1e-5)
        np.testing.assert_allclose(ours.logits, ref.logits, atol=1e-5)


def test_packing_is_on_with_the_kernel_and_never_for_maps(monkeypatch):
    monkeypatch.delenv("FLAMINO_PACKING", raising=False)
    monkeypatch.delenv("FLAMINO_ATTENTION", raising=False)
    weights = load_weights("random:tiny:1")
    auto = Engine(weights)
    assert auto.backend.packing == (auto.attention_path == "fused")
    assert ("packed" in auto.backend.describe()) == auto.backend.packing
    assert not Engine(weights, attention="xla").backend.packing
    assert not Engine(weights, packing="off").backend.packing
    with pytest.raises(ValueError, match="packing"):
        Engine(weights, packing="sometimes")
    engine = Engine(weights, attention="xla", packing="on")
    calls = _recording(engine)
    seqs = ["MKV" * 20, "ACDE", "W" * 50]
    engine.run(seqs, attention_layers=(1,))
    engine.run(seqs, contacts=True)
    engine.run(seqs[:1])  # one sequence: its own row
    assert calls and not any(shared for _, shared in calls)
    engine.run(seqs)
    assert calls[-1] == ((1, 128), True)  # all three in one row of 64 + 6 + 56 = 126 tokens


def test_packed_runs_do_not_recompile_for_slightly_different_lengths():
    """A realistic mix, then every sequence one residue shorter (as the benchmark's check does):
    packed rows of a multiple of 128 tokens keep the same batch shapes."""
    rng = np.random.default_rng(8)
    lengths = [int(n) for n in np.clip(rng.lognormal(np.log(300), 0.6, size=40), 30, 1000)]
    seqs = [random_protein(rng, n) for n in lengths]
    engine = Engine(load_weights("random:tiny:1"), attention="xla", packing="on")
    engine.run(seqs)
    before = TRACE_COUNTS["forward"]
    engine.run([s[:-1] for s in seqs])
    assert TRACE_COUNTS["forward"] == before


# --- compiled functions shared between engines -----------------------------------------------------
def test_engines_of_one_architecture_share_compiled_functions(monkeypatch):
    """A second engine on another checkpoint of the same shape compiles nothing for shapes the
    first ran, and still computes with its own weights (they are an argument, not baked in);
    a different attention implementation or precision gets functions of its own."""
    seqs = ["MKTAYIAKQRQISFVKSHFSRQ", "ACDEFGHIKLMNPQRSTVWY" * 4]
    first = Engine(load_weights("random:tiny:31"), attention="xla", packing="off")
    (ref,) = first.run(seqs[:1])
    first.run(seqs)
    first.compute_masked(seqs[0])
    before = dict(TRACE_COUNTS)
    other_weights = load_weights("random:tiny:32")
    second = Engine(other_weights, attention="xla", packing="off")
    (out,) = second.run(seqs[:1])
    second.run(seqs)
    second.compute_masked(seqs[0])
    assert dict(TRACE_COUNTS) == before, "a second engine of the same shape compiled again"
    assert second._forward is first._forward
    assert np.abs(out.logits - ref.logits).max() > 1e-2  # its own weights
    # Independent check of the second engine's numbers: the model built from its weights.
    import jax.numpy as jnp

    from flamino_core.alphabet import batch_encode
    from flamino_core.weights.convert import params_to_model

    model = params_to_model(other_weights.params, other_weights.config)
    expected = np.asarray(model(jnp.asarray(batch_encode(seqs[:1])))["logits"])[0, 1:-1]
    np.testing.assert_allclose(out.logits, expected, atol=1e-5)
    assert Engine(other_weights, attention="dot-product-attention")._forward is not first._forward
    # bf16 is refused on a CPU without bf16 arithmetic (a CI machine may be one): this checks the
    # compiled functions' key, not bf16's speed, so it runs emulated there (hardware.EMULATED_BF16_ENV).
    monkeypatch.setenv(hardware.EMULATED_BF16_ENV, "1")
    assert Engine(other_weights, attention="xla", precision="bf16")._forward is not first._forward


def test_the_attention_implementation_is_a_value_not_a_model_attribute():
    """Engines on different attention paths hold the same model graph: the path is passed to
    each call (``Backend.implementation``), never stored on the modules."""
    weights = load_weights("random:tiny:1")
    paths = ["xla", "dot-product-attention"] + (["fused"] if KERNEL_BUILT else [])
    engines = [Engine(weights, attention=path) for path in paths]
    assert all(e.graphdef == engines[0].graphdef for e in engines)
    assert [e.backend.implementation.path for e in engines] == paths


def test_token_rows_reach_the_device_without_a_compilation():
    """``to_device`` moves a batch's host arrays without compiling anything (``jnp.asarray``
    compiles ``lax.stage`` once per shape under JAX 0.10: 10-30 ms of every start). A jitted
    function of a new shape, compiled in the same capture, shows that compilations are seen."""
    import logging

    import jax

    from flamino_core.engine.engine import to_device

    class Compilations(logging.Handler):
        def __init__(self):
            super().__init__()
            self.names = []

        def emit(self, record):
            message = record.getMessage()
            if message.startswith("Compiling "):
                self.names.append(message.split()[1])

    seen = Compilations()
    logging.getLogger("jax").addHandler(seen)
    try:
        with jax.log_compiles(True):
            rows = to_device(np.arange(3 * 13).reshape(3, 13))  # int64 on the host
            jax.jit(lambda x: x + 1)(np.zeros((3, 17), np.int32))
    finally:
        logging.getLogger("jax").removeHandler(seen)
    assert seen.names == ["jit(<lambda>)"]
    assert rows.dtype == np.int32  # canonicalized as jnp.asarray does (x64 off)
    np.testing.assert_array_equal(np.asarray(rows), np.arange(3 * 13).reshape(3, 13))


def test_batches_dispatched_ahead_give_the_same_outputs_and_progress(real_sequences):
    """An accelerator dispatches the next batch before fetching the last (``batches_ahead`` 2):
    the outputs must be exactly those of one batch at a time (the same compiled calls on the
    same rows, only fetched later), every sequence in its place, and progress still counts the
    batches in order, up to all of them."""
    import dataclasses

    proteins = list(real_sequences.values())[:24]
    engine = Engine(load_weights("random:tiny"), token_budget=2048)
    one_at_a_time, reports = engine.run(proteins), []
    engine.backend = dataclasses.replace(engine.backend, batches_ahead=2)
    ahead = engine.run(proteins, progress=lambda done, total: reports.append((done, total)))
    total = reports[-1][1]
    assert total > 2 and reports == [(done, total) for done in range(1, total + 1)]
    for single, early in zip(one_at_a_time, ahead, strict=True):
        assert single.sequence == early.sequence
        np.testing.assert_array_equal(single.logits, early.logits)
        np.testing.assert_array_equal(single.final, early.final)
