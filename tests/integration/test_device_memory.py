"""Accelerator planning checked on the CPU: the weights' bytes, the token budget, the refusal of a
model that cannot fit, bf16 weights where only they fit, the retry in smaller batches after an
out-of-memory, and fp32 products traced at float32 precision on an accelerator.

The figures of a real chip are in tests/parity/test_accelerator_parity.py (skipped without one) and
docs/accelerators.md; here the device is described by numbers (a TPU v5e reports 15.75 GiB).
"""

from __future__ import annotations

import re

import jax
import numpy as np
import pytest
from flax import nnx

from flamino_core import Engine, load_weights
from flamino_core.model.config import ModelConfig
from flamino_core.model.precision import use_bf16_matmuls
from flamino_core.model.stack import Capture
from flamino_core.engine import device_memory, hardware
from flamino_core.weights.loading import config_network
from flamino_core.model.model_id import ModelId

V5E = device_memory.DeviceMemory("TPU v5 lite", int(15.75 * 2**30), 0)  # what JAX reports on one v5e chip


def state_bytes(model) -> int:
    return sum(leaf.nbytes for leaf in jax.tree.leaves(nnx.state(model)))  # what is put on the device


@pytest.mark.parametrize("family", ["esm2", "esm1b", "esmc", "saprot"])
def test_weights_bytes_are_the_bytes_of_the_built_model(family):
    """Counted from the abstract shapes and leaf names, checked against the arrays of a built
    network, in fp32 and after the accelerator's bf16 kernels, with the block stack's dense layers
    giving bf16 outputs as the fast mode on a device has them (an independent count)."""
    config = ModelConfig.tiny(family)
    model = config_network(config)(config, nnx.Rngs(0))
    assert device_memory.weights_bytes(config, "fp32") == state_bytes(model)
    use_bf16_matmuls(model, store_bf16=True, round_outputs=True)
    assert device_memory.weights_bytes(config, "bf16") == state_bytes(model)


def test_a_bf16_output_layer_rounds_once_after_fp32_accumulation_and_bias():
    """``Bf16Linear`` against NumPy: operands rounded to bf16 (ml_dtypes), the product and the
    bias summed in float64, the sum rounded to bf16 once. fp32 accumulation of 64 products of
    bf16 values differs from float64's by ~1e-6 relative, far under a bf16 step (2^-8 = 3.9e-3
    relative), so at most one step apart where the sum falls near a rounding boundary; a missing
    rounding of an operand (~4e-3 relative each) or a second rounding after the bias would show
    as many elements off by a step or more. Weights drawn at scale 1 so every element matters."""
    import ml_dtypes

    from flamino_core.model.precision import Bf16Linear

    rng = np.random.default_rng(7)
    x, kernel, bias = rng.normal(size=(3, 5, 64)), rng.normal(size=(64, 48)), rng.normal(size=48)
    layer = Bf16Linear(jax.numpy.asarray(kernel, jax.numpy.float32), jax.numpy.asarray(bias, jax.numpy.float32))
    got = np.asarray(layer(jax.numpy.asarray(x, jax.numpy.float32)))
    assert got.dtype == ml_dtypes.bfloat16
    bf16 = lambda a: a.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)  # noqa: E731
    want = (bf16(x) @ bf16(kernel) + bias.astype(np.float32)).astype(np.float32).astype(ml_dtypes.bfloat16)
    step = np.abs(want.astype(np.float64)) * 2.0 ** -7  # one bf16 step (8 bits of mantissa, 7 stored)
    off = np.abs(got.astype(np.float64) - want.astype(np.float64))
    assert (off <= step + 1e-30).all()
    assert (off == 0).mean() > 0.99  # near a boundary only: 1 in 128 elements at most expected


def test_published_sizes_give_the_published_parameter_counts():
    """ESM-2's paper: 650M, 3B (2.8 billion) and 15B (15.1 billion) parameters."""
    counts = {name: device_memory.weights_bytes(ModelConfig.preset(name), "fp32") / 4
              for name in ("esm2_t33_650M_UR50D", "esm2_t36_3B_UR50D", "esm2_t48_15B_UR50D")}
    assert 0.64e9 < counts["esm2_t33_650M_UR50D"] < 0.66e9
    assert 2.8e9 < counts["esm2_t36_3B_UR50D"] < 2.9e9
    assert 15.0e9 < counts["esm2_t48_15B_UR50D"] < 15.2e9


def test_3b_fits_a_16_gib_chip_in_fp32_and_15b_is_refused_with_the_bytes():
    three_b, fifteen_b = ModelConfig.preset("esm2_t36_3B_UR50D"), ModelConfig.preset("esm2_t48_15B_UR50D")
    assert device_memory.fitting_precision(three_b, "fp32", False, V5E) == ("fp32", "")
    budget, why = device_memory.planned_token_budget(three_b, "fp32", V5E)
    # One full-width row at least, and every pass within half of what the weights leave.
    assert device_memory.MIN_TOKEN_BUDGET <= budget
    assert budget * device_memory.bytes_per_token(three_b) <= 0.5 * (V5E.capacity - device_memory.weights_bytes(three_b, "fp32"))
    assert "weights 10.6 GiB" in why  # 11,356,027,144 bytes of fp32 weights / 2^30, in binary units as every size
    with pytest.raises(device_memory.ModelTooLargeError, match=r"needs 57\.\d GiB .* 15\.8 GiB free"):  # v5e: 15.75 GiB
        device_memory.fitting_precision(fifteen_b, "fp32", False, V5E)


def test_bf16_weights_only_where_fp32_cannot_fit_and_fp32_was_not_asked_by_name():
    three_b = ModelConfig.preset("esm2_t36_3B_UR50D")
    small = device_memory.DeviceMemory("a 12 GB chip", 12 * 10**9, 0)
    precision, why = device_memory.fitting_precision(three_b, "fp32", False, small)
    assert precision == "bf16" and "fp32 needs" in why and "11.2 GiB free" in why  # 12e9 bytes / 2^30
    with pytest.raises(device_memory.ModelTooLargeError, match="in fp32"):
        device_memory.fitting_precision(three_b, "fp32", True, small)


def test_budgets_shrink_with_the_model_and_the_memory_in_use():
    def budget(name, memory=V5E):
        return device_memory.planned_token_budget(ModelConfig.preset(name), "fp32", memory)[0]

    sizes = [budget(n) for n in ("esm2_t6_8M_UR50D", "esm2_t33_650M_UR50D", "esm2_t36_3B_UR50D")]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] > sizes[-1]
    busy = device_memory.DeviceMemory(V5E.device, V5E.capacity, 8 * 10**9)  # another engine's weights
    assert budget("esm2_t33_650M_UR50D", busy) < sizes[1]


def test_an_out_of_memory_runs_again_in_smaller_batches_with_the_same_numbers(real_sequences, monkeypatch):
    sequences = [s for s in sorted(real_sequences.values(), key=len) if 300 <= len(s) <= 500][:8]  # several 1,024-token rows
    reference = Engine(load_weights("random:tiny"), token_budget=8192).run(sequences)
    engine = Engine(load_weights("random:tiny"), token_budget=8192)
    forward, calls = engine._forward, []

    def device_with_little_memory(state, tokens, *rest, **kwargs):
        calls.append(tokens.size)
        if tokens.size > 1024:  # XLA's own words when an allocation fails on a chip
            raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate")
        return forward(state, tokens, *rest, **kwargs)

    monkeypatch.setattr(engine, "_forward", device_with_little_memory)
    results = engine.run(sequences)
    assert engine.token_budget <= 1024 < max(calls)
    for ours, ref in zip(results, reference):  # the same rows cut differently: summation order only
        np.testing.assert_allclose(ours.logits, ref.logits, atol=1e-5)
    monkeypatch.setattr(engine, "token_budget", device_memory.MIN_TOKEN_BUDGET)
    monkeypatch.setattr(engine, "_forward", lambda *a, **k: (_ for _ in ()).throw(
        jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory")))
    with pytest.raises(MemoryError, match="ran out of memory even for one"):
        engine.run(sequences[:1])


def dot_precisions(engine, tokens) -> list[str]:
    text = engine._forward.lower(engine.state, tokens, capture=Capture()).as_text()
    return re.findall(r"stablehlo\.dot_general.*?precision = \[(\w+), \w+\]", text)


def test_fp32_on_an_accelerator_traces_every_product_at_float32_precision(monkeypatch):
    """The bug this replaces: on a TPU nothing set the precision, every product ran as one bf16
    pass and the logits were 6.7e-2 off HF's. With the platform said to be a TPU (the trace is
    the same on this CPU), every dot of the pass carries HIGHEST; the opt-in bf16 mode does not."""
    tokens = jax.numpy.asarray(np.array([[0, 5, 6, 7, 2]], np.int32))
    tpu = hardware.Hardware("tpu", "TPU v5 lite", (), True, "TPU multiplies bf16 natively")
    monkeypatch.delenv(hardware.PRECISION_ENV, raising=False)
    monkeypatch.delenv(hardware.MATMUL_PRECISION_ENV, raising=False)
    if jax.default_backend() == "cpu":
        assert Engine(load_weights("random:tiny")).backend.matmul_precision is None  # fp32 already
    with monkeypatch.context() as on_tpu:
        on_tpu.setattr(hardware, "detect", lambda: tpu)
        exact = Engine(load_weights("random:tiny"))
        fast = Engine(load_weights("random:tiny"), precision="bf16")
    assert exact.backend.matmul_precision == "highest" and "float32 arithmetic" in exact.backend.describe()
    precisions = dot_precisions(exact, tokens)
    assert precisions and set(precisions) == {"HIGHEST"}
    assert "HIGHEST" not in dot_precisions(fast, tokens) and "opt-in fast mode" in fast.backend.describe()


def long_row(tokens: int, heads: int, head_dim: int, abstract: bool = False):
    """attend()'s arguments for one row of one sequence ``tokens`` long (real data, or shapes)."""
    from flamino_core.model.attention import Positions, Spans

    shape = (1, tokens, heads, head_dim)
    if abstract:
        q = k = v = jax.ShapeDtypeStruct(shape, np.float32)
    else:
        q, k, v = (np.random.default_rng(seed).normal(size=shape).astype(np.float32) for seed in (1, 2, 3))
    positions = Positions(np.arange(tokens, dtype=np.int32)[None], np.arange(tokens, dtype=np.int32)[None])
    spans = Spans(np.zeros((1, tokens), np.int32), np.full((1, tokens), tokens, np.int32), shared=True)
    angles = np.arange(tokens)[:, None] / 10000 ** (np.arange(head_dim // 2) / (head_dim // 2))
    return q, k, v, positions, spans, (np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32))


def test_long_rows_on_an_accelerator_hold_a_few_heads_scores_not_all():
    """--long full on a TPU/GPU (dot-product-attention): past LONG_ROW_TOKENS, attention runs a few
    heads at a time (ESM-2 650M's 20 heads over 10,240 tokens: all at once is 8.4 GB a layer), and
    gives jax.nn.dot_product_attention's numbers."""
    from flamino_core.model import attention

    impl = attention.AttentionImpl("dot-product-attention")
    q, k, v, positions, spans, table = long_row(attention.LONG_ROW_TOKENS + 64, 2, 16)
    with jax.default_matmul_precision("highest"):  # fp32 products, as the engine traces fp32 mode on a TPU/GPU
        ours = attention.attend(q, k, v, positions, spans, impl, table=table, scale=0.25)
        theirs = attention._dot_product(q, k, v, positions, spans, table, 0.25, impl)
    np.testing.assert_allclose(ours, theirs, atol=1e-5)  # fp32 softmax sums over 2,112 keys in another order
    q, k, v, positions, spans, table = long_row(10240, 20, 64, abstract=True)
    lowered = jax.jit(lambda q, k, v: attention.attend(q, k, v, positions, spans, impl, table=table, scale=0.125))
    text = lowered.lower(q, k, v).as_text()
    assert "20x10240x10240" not in text and "x10240x10240xf32" in text  # scores, but not every head's at once


def test_esmfold_on_an_accelerator_folds_with_float32_products(monkeypatch):
    """ESMFold's fold is its own jitted program (the engine's stem pass traced inside it,
    ``engine/fold.py``): the same bug would return on a TPU unless the trunk is traced at float32
    precision too and the stem's engine chose it. With the platform said to be a TPU, the fold the
    app and the CLI run (``structure.folding.fold``) is traced with HIGHEST on every dot of the
    stem, the trunk and the structure module; on this CPU as the CPU runs it. A model per platform:
    its stem's engine is built with it, on the platform it finds (one per process in real life)."""
    from flamino_core.model.esmfold import predict
    from flamino_core.structure import folding
    from flamino_core.weights.esmfold import load_fold_model

    traced, jitted = [], predict._forward

    def lowered_dots(graphdef, state, aatype, mask, passes, chunk_size, matmul_precision=None, stem=None):
        text = jitted.lower(graphdef, state, aatype, mask, passes, chunk_size, matmul_precision, stem).as_text()
        traced.append(re.findall(r"stablehlo\.dot_general.*?precision = \[(\w+), \w+\]", text))
        raise StopIteration  # the trace is what is checked: no fold is run

    tpu = hardware.Hardware("tpu", "TPU v5 lite", (), True, "TPU multiplies bf16 natively")
    monkeypatch.delenv(hardware.MATMUL_PRECISION_ENV, raising=False)
    monkeypatch.setattr(predict, "_forward", lowered_dots)
    for platform in ("tpu", "cpu"):
        with monkeypatch.context() as on_platform:
            if platform == "tpu":
                on_platform.setattr(hardware, "detect", lambda: tpu)
            with pytest.raises(StopIteration):
                folding.fold(load_fold_model(ModelId.parse("random:esmfold-tiny"))[0], "MKTAYIAKQRQISFVKSHF",
                             passes=1)
    on_tpu, on_cpu = traced
    assert len(on_tpu) > 20 and set(on_tpu) == {"HIGHEST"}  # every product of the fold
    if jax.default_backend() == "cpu":
        assert "HIGHEST" not in on_cpu  # the CPU's float32 products are float32 already
