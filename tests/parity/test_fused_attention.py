"""The fused CPU attention kernel against attention written out in float64 NumPy here, and
every implementation of ``attention.attend`` (one contract) against the same reference, at
every preset head dimension; the attention-path choice, the fallback when the kernel is
missing, and the opt-in bf16 matmuls."""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from flamino_core.model import fused_attention

from flamino_core.engine import hardware
from flamino_core.model.attention import AttentionImpl, Positions, Spans, attend
from flamino_core.model.config import PRESETS, ESM2Config
from flamino_core.model.rotary import RotaryEmbedding

KERNEL = fused_attention.status()
needs_kernel = pytest.mark.skipif(not KERNEL.available, reason=f"fused kernel {KERNEL.reason}")
# Every instruction-set variant this CPU can run ("wide16-on-avx2" is the AVX-512 variant's
# code built for AVX2, so its arithmetic is tested on CPUs without AVX-512).
VARIANTS = sorted(KERNEL.variants) if KERNEL.available else ["none"]
# Head dimensions of the six presets (16, 24, 32, 64, 64, 128) and of the tiny test model (8).
HEAD_DIMS = sorted({ESM2Config.preset(name).head_dim for name in PRESETS} | {ESM2Config.tiny().head_dim})

# Tolerance against float64: the kernel works in fp32 (eps 6e-8 per rounding). Scores are sums
# of hd <= 128 products of O(1) values, the softmax sums up to ~600 weights, its exp is within
# 2 ulp: the worst error measured over these cases is 1.2e-6 (outputs are O(1)), 5.6e-6 in the
# packed rows below (at padding queries of positions up to 429, whose fp32 rotary angles are
# rounded most; real queries of the same rows 1.2-3.7e-6). 1e-5 leaves ~2x for summation order and
# is 10x under the model's 1e-4 parity bound; a modelling error
# (rotary halves swapped, the scale applied after rotary to k too, a position off by one, a
# padded key counted) moves outputs by 1e-2 or more.
ATOL = 1e-5


def reference_attention(q, k, v, inv_freq, q_positions, key_bias, scale, k_positions=None, allowed=None):
    """softmax(rot(q * scale) rot(k)^T + bias) v in float64, written out independently:
    rotary as x * cos + rotate_half(x) * sin with rotate_half(x) = [-x2, x1] (HF/fair-esm).
    ``allowed`` (B, Tq, Tk): which keys each query may see (packed rows); default all."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    half = q.shape[-1] // 2

    def rotary(x, positions):  # x (..., hd), positions broadcast to x.shape[:-1]
        angles = np.asarray(positions, np.float64)[..., None] * np.asarray(inv_freq, np.float64)
        cos = np.concatenate([np.cos(angles)] * 2, -1)
        sin = np.concatenate([np.sin(angles)] * 2, -1)
        rotated_half = np.concatenate([-x[..., half:], x[..., :half]], -1)
        return x * cos + rotated_half * sin

    batch, q_len, heads, _ = q.shape
    k_len = k.shape[1]
    qr = rotary(q * scale, np.asarray(q_positions)[:, :, None])
    k_positions = np.arange(k_len)[None] if k_positions is None else np.asarray(k_positions)
    kr = rotary(k, k_positions[:, :, None])
    scores = np.einsum("bqhd,bkhd->bhqk", qr, kr) + np.asarray(key_bias, np.float64)[:, None, None, :]
    if allowed is not None:
        scores = np.where(np.asarray(allowed)[:, None], scores, -np.inf)
    with np.errstate(invalid="ignore"):
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        probs = weights / weights.sum(-1, keepdims=True)
    return np.einsum("bhqk,bkhd->bqhd", probs, v)


def random_case(seed, batch, q_len, k_len, heads, head_dim, lengths=None):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(batch, q_len, heads, head_dim)).astype(np.float32)
    k = rng.normal(size=(batch, k_len, heads, head_dim)).astype(np.float32)
    v = rng.normal(size=(batch, k_len, heads, head_dim)).astype(np.float32)
    if lengths is None:  # right padding as the engine makes it: the first row full
        lengths = np.concatenate([[k_len], rng.integers(1, k_len + 1, size=batch - 1)])
    bias = np.where(np.arange(k_len)[None] < np.asarray(lengths)[:, None], 0.0, -np.inf).astype(np.float32)
    inv_freq = RotaryEmbedding(head_dim, 10000.0).inv_freq[...]
    return q, k, v, bias, np.asarray(inv_freq)


def run_kernel(q, k, v, bias, inv_freq, q_positions, variant, monkeypatch, **packed):
    monkeypatch.setenv(fused_attention.VARIANT_ENV, variant)
    table = np.arange(k.shape[1])[:, None] * inv_freq
    cos, sin = jnp.cos(jnp.asarray(table, jnp.float32)), jnp.sin(jnp.asarray(table, jnp.float32))
    out = fused_attention.fused_attention(q, k, v, cos, sin, jnp.asarray(q_positions), bias, q.shape[-1] ** -0.5,
                                          **{name: jnp.asarray(a) for name, a in packed.items()})
    return np.asarray(out)


def assert_close(ours, ref, what):
    worst = float(np.nanmax(np.abs(ours - ref)))
    assert np.array_equal(np.isnan(ours), np.isnan(ref)), f"{what}: NaN pattern differs"
    assert worst <= ATOL, f"{what}: max abs error {worst:.2e} > {ATOL}"


@needs_kernel
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("tokens", [1, 7, 37, 193, 301])
def test_kernel_matches_reference(monkeypatch, variant, head_dim, tokens):
    """Full passes (queries at 0..T-1) with right padding, lengths odd and even, below and
    above 192 tokens and over two key blocks (256); heads as the presets have (20) for small
    head dims, fewer for large ones to keep the test quick. Three key blocks (530 tokens) are
    the packed-row test's width below, at every head dimension: here they took 38 of this
    grid's 57 s in the suite (2026-12-06) for a loop the 301-token case already runs twice."""
    heads = 20 if head_dim <= 32 else 4
    q, k, v, bias, inv_freq = random_case(tokens * 1000 + head_dim, 3, tokens, tokens, heads, head_dim)
    positions = np.broadcast_to(np.arange(tokens), (3, tokens))
    ours = run_kernel(q, k, v, bias, inv_freq, positions, variant, monkeypatch)
    ref = reference_attention(q, k, v, inv_freq, positions, bias, head_dim**-0.5)
    assert_close(ours, ref, f"{variant}, hd={head_dim}, T={tokens}")


@needs_kernel
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
def test_kernel_matches_pure_jax_attention(monkeypatch, head_dim):
    """The pure-JAX implementation (transposes, rotary, heads mapped over beyond 192 tokens)
    and the kernel agree on a padded batch of 300 tokens."""
    tokens, heads = 300, 20
    q, k, v, bias, inv_freq = random_case(head_dim, 4, tokens, tokens, heads, head_dim)
    positions = np.broadcast_to(np.arange(tokens), (4, tokens))
    ours = run_kernel(q, k, v, bias, inv_freq, positions, "auto", monkeypatch)
    pure = run_attend("xla", q, k, v, inv_freq, positions, positions, *spans_of_padding(bias, tokens))
    assert_close(ours, pure, f"kernel vs pure JAX, hd={head_dim}")


def spans_of_padding(bias, q_len):
    """Spans of right-padded rows: every query sees the row's real keys (shared by the row)."""
    real = np.isfinite(bias).sum(axis=1)
    return np.zeros((len(bias), q_len), np.int32), np.repeat(real[:, None], q_len, axis=1), True


def run_attend(path, q, k, v, inv_freq, q_positions, k_positions, start, stop, shared, probabilities=False):
    """``attention.attend`` with one implementation, as the model calls it."""
    table_len = k.shape[1]
    angles = jnp.arange(table_len, dtype=jnp.float32)[:, None] * jnp.asarray(inv_freq)
    spans = Spans(jnp.asarray(start, jnp.int32), jnp.asarray(stop, jnp.int32), shared=shared)
    positions = Positions(jnp.asarray(q_positions, jnp.int32), jnp.asarray(k_positions, jnp.int32))
    out = attend(jnp.asarray(q), jnp.asarray(k), jnp.asarray(v), positions, spans, AttentionImpl(path),
                 table=(jnp.cos(angles), jnp.sin(angles)), scale=q.shape[-1] ** -0.5, probabilities=probabilities)
    return tuple(np.asarray(a) for a in out) if probabilities else np.asarray(out)


@needs_kernel
@pytest.mark.parametrize("variant", VARIANTS)
def test_kernel_queries_at_positions_and_masks_anywhere(monkeypatch, variant):
    """What the masked scan's last layer asks: one query per row at its own position, keys
    over the whole row; also keys masked in the middle (any additive bias works, not only right
    padding) and a row with every key masked (NaN, as a softmax over only -inf is in JAX)."""
    tokens, heads, head_dim = 301, 20, 32
    q, k, v, bias, inv_freq = random_case(5, 4, 1, tokens, heads, head_dim, lengths=[tokens, 200, 57, 0])
    bias[0, 100:140] = -np.inf
    positions = np.array([[0], [150], [56], [3]])
    ours = run_kernel(q, k, v, bias, inv_freq, positions, variant, monkeypatch)
    ref = reference_attention(q, k, v, inv_freq, positions, bias, head_dim**-0.5)
    assert np.isnan(ours[3]).all()
    assert_close(ours, ref, f"{variant}, one query per row")


# Packed rows (width 530): segment lengths per row, then padding. Segments shorter than a tile
# (1 and 7 tokens), one across the first key block's end (256), one filling a whole row, and
# spans that start and end off tile boundaries (AVX2 tiles are 16 keys, AVX-512 32).
PACKED_ROWS = [[1, 7, 300, 222], [530], [33, 129, 250], [5] * 20 + [17]]


def packed_layout(segment_lengths, width):
    """Segment ids, positions and key spans of packed rows, written out per token here."""
    batch = len(segment_lengths)
    segments = np.zeros((batch, width), np.int32)
    positions = np.zeros((batch, width), np.int32)
    starts = np.zeros((batch, width), np.int32)
    stops = np.zeros((batch, width), np.int32)
    bias = np.full((batch, width), -np.inf, np.float32)
    for b, lengths in enumerate(segment_lengths):
        offset = 0
        for segment, length in enumerate(lengths):
            last = segment == len(lengths) - 1
            stop = width if last else offset + length  # padding goes with the last segment
            segments[b, offset:stop] = segment
            positions[b, offset:stop] = np.arange(stop - offset)
            starts[b, offset:stop], stops[b, offset:stop] = offset, stop
            bias[b, offset:offset + length] = 0.0
            offset += length
    return segments, positions, starts, stops, bias


@needs_kernel
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
def test_kernel_keeps_each_sequence_of_a_packed_row_to_itself(monkeypatch, variant, head_dim):
    """Several sequences per row: each query sees only the keys of its own segment (a
    block-diagonal mask in the float64 reference), rotary positions restart at 0 in every
    segment for queries and keys, padding queries attend to the last segment."""
    width, heads = 530, (8 if head_dim <= 32 else 2)
    segments, positions, starts, stops, bias = packed_layout(PACKED_ROWS, width)
    q, k, v, _, inv_freq = random_case(head_dim, len(PACKED_ROWS), width, width, heads, head_dim)
    ours = run_kernel(q, k, v, bias, inv_freq, positions, variant, monkeypatch,
                      k_positions=positions, key_start=starts, key_stop=stops)
    allowed = segments[:, :, None] == segments[:, None, :]
    ref = reference_attention(q, k, v, inv_freq, positions, bias, head_dim**-0.5, positions, allowed)
    assert_close(ours, ref, f"{variant}, hd={head_dim}, packed rows")
    # The same numbers as each sequence alone in a row of its own (positions 0.., no spans).
    b, offset, length = 0, 8, 300
    alone = run_kernel(q[b:b + 1, offset:offset + length], k[b:b + 1, offset:offset + length],
                       v[b:b + 1, offset:offset + length], bias[b:b + 1, offset:offset + length], inv_freq,
                       np.arange(length)[None], variant, monkeypatch)
    assert_close(ours[b:b + 1, offset:offset + length], alone, f"{variant}, hd={head_dim}, packed vs alone")


# Every implementation of the one contract, and capture (probabilities) through the same call.
IMPLEMENTATIONS = [pytest.param("fused", marks=needs_kernel), "xla", "dot-product-attention"]


@pytest.mark.parametrize("path", IMPLEMENTATIONS)
@pytest.mark.parametrize("width", [150, 530])
def test_every_implementation_keeps_each_sequence_of_a_packed_row_to_itself(path, width):
    """Packed rows (positions restarting per sequence, block-diagonal spans over real keys),
    all heads at once (150 tokens) and a few heads at a time (530), against the float64
    reference."""
    head_dim, heads = 16, 20
    rows = [[1, 7, 100, 42], [150], [5] * 20 + [17]] if width == 150 else PACKED_ROWS
    segments, positions, starts, stops, bias = packed_layout(rows, width)
    real = np.isfinite(bias).sum(axis=1, keepdims=True)
    q, k, v, _, inv_freq = random_case(width, len(rows), width, width, heads, head_dim)
    ours = run_attend(path, q, k, v, inv_freq, positions, positions, starts, np.minimum(stops, real), False)
    allowed = segments[:, :, None] == segments[:, None, :]
    ref = reference_attention(q, k, v, inv_freq, positions, bias, head_dim**-0.5, positions, allowed)
    assert_close(ours, ref, f"{path}, packed rows of {width}")


@pytest.mark.parametrize("path", IMPLEMENTATIONS)
@pytest.mark.parametrize("tokens", [37, 301])
def test_every_implementation_gives_padded_rows_and_single_queries_the_reference(path, tokens):
    """Right-padded rows of one sequence (spans shared by the row), with queries at every token
    and with one query per row at its own position (the masked scan's last layer)."""
    head_dim, heads = 32, 20
    q, k, v, bias, inv_freq = random_case(tokens, 3, tokens, tokens, heads, head_dim)
    positions = np.broadcast_to(np.arange(tokens), (3, tokens))
    start, stop, shared = spans_of_padding(bias, tokens)
    ours = run_attend(path, q, k, v, inv_freq, positions, positions, start, stop, shared)
    assert_close(ours, reference_attention(q, k, v, inv_freq, positions, bias, head_dim**-0.5), f"{path}, rows")
    at = np.array([[0], [tokens // 2], [5]])
    ours = run_attend(path, q[:, :1], k, v, inv_freq, at, positions, start[:, :1], stop[:, :1], shared)
    ref = reference_attention(q[:, :1], k, v, inv_freq, at, bias, head_dim**-0.5)
    assert_close(ours, ref, f"{path}, one query per row")


def test_capture_is_the_same_call_returning_probabilities():
    """probabilities=True returns the reference's output and its attention probabilities
    (rows sum to 1 over real keys, 0 on padding), whatever implementation is named."""
    tokens, heads, head_dim = 40, 4, 16
    q, k, v, bias, inv_freq = random_case(9, 3, tokens, tokens, heads, head_dim)
    positions = np.broadcast_to(np.arange(tokens), (3, tokens))
    for path in ("xla", "dot-product-attention"):
        out, probs = run_attend(path, q, k, v, inv_freq, positions, positions, *spans_of_padding(bias, tokens),
                                probabilities=True)
        assert_close(out, reference_attention(q, k, v, inv_freq, positions, bias, head_dim**-0.5), path)
        assert probs.shape == (3, heads, tokens, tokens)
        np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-5)
        padding = ~np.isfinite(bias)[:, None, None, :]  # (B, 1, 1, Tk)
        assert (probs * padding).max() == 0


@needs_kernel
def test_kernel_refuses_a_variant_this_cpu_cannot_run(monkeypatch):
    monkeypatch.setenv(fused_attention.VARIANT_ENV, "no-such-variant")
    q, k, v, bias, inv_freq = random_case(0, 1, 8, 8, 2, 16)
    with pytest.raises(ValueError, match="this CPU runs"):
        run_kernel(q, k, v, bias, inv_freq, np.arange(8)[None], "no-such-variant", monkeypatch)


# --- choosing the path -----------------------------------------------------------------------
def test_choice_follows_the_hardware_and_requests(monkeypatch):
    monkeypatch.delenv(hardware.ATTENTION_ENV, raising=False)
    auto = hardware.choose(head_dim=16)
    expected = "fused" if KERNEL.available else "xla"
    assert (auto.attention, auto.precision, auto.token_budget) == (expected, "fp32", 8192)
    assert f"attention: {expected}" in auto.describe()
    # A head dimension the kernel does not handle falls back, and says why.
    odd = hardware.choose(head_dim=12)
    assert odd.attention == "xla" and ("divisible by 8" in odd.attention_why or not KERNEL.available)
    monkeypatch.setenv(hardware.ATTENTION_ENV, "xla")
    assert hardware.choose(head_dim=16).attention == "xla"
    with pytest.raises(ValueError, match="choose auto or one of"):
        hardware.choose(head_dim=16, attention="flash")
    with pytest.raises(ValueError, match="precision"):
        hardware.choose(head_dim=16, precision="fp8")


def test_on_a_gpu_the_engine_uses_dot_product_attention_and_a_larger_budget(monkeypatch):
    """No GPU here: the decision is checked with the hardware description a GPU machine gives;
    the dot-product-attention path itself runs on CPU in test_parity (XLA's implementation)."""
    gpu = hardware.Hardware("gpu", "NVIDIA H100", ("avx2", "fma"), True, "GPU multiplies bf16")
    monkeypatch.setattr(hardware, "detect", lambda: gpu)
    monkeypatch.delenv(hardware.ATTENTION_ENV, raising=False)
    fp32 = hardware.choose(head_dim=64)
    assert (fp32.attention, fp32.token_budget) == ("dot-product-attention", 32768)
    assert "XLA implementation" in fp32.attention_why
    bf16 = hardware.choose(head_dim=64, precision="bf16")
    assert "cuDNN" in bf16.attention_why and "bf16" in bf16.describe()
    # The words come from the decision that runs: the implementation value the engine passes
    # to the model says cuDNN (bf16 inputs) exactly when the description does.
    assert bf16.implementation.cudnn and bf16.implementation.dtype == "bfloat16"
    assert not fp32.implementation.cudnn and fp32.implementation.dtype == "float32"
    for backend in (fp32, bf16):
        assert backend.attention_why.startswith(backend.implementation.describe())
    with pytest.raises(ValueError, match="CPU kernel"):
        hardware.choose(head_dim=64, attention="fused")


def test_cpu_description_names_model_and_extensions():
    hw = hardware.detect()
    flags = open("/proc/cpuinfo").read() if sys.platform.startswith("linux") else ""
    assert hw.platform == jax.default_backend()
    for feature in hw.cpu_features:
        assert f" {feature}" in flags or f" {feature}\n" in flags
    if "avx512_bf16" not in flags and " amx_bf16" not in flags and hw.platform == "cpu":
        assert not hw.native_bf16 and "no native bf16" in hw.native_bf16_why
    if " avx512_bf16" in flags and hw.platform == "cpu":  # e.g. AMD Zen 4, Intel Cooper Lake on
        assert hw.native_bf16 and "avx512_bf16" in hw.native_bf16_why


@pytest.fixture
def kernel_missing(monkeypatch):
    """A checkout where the extension was never built: importing it fails."""
    monkeypatch.setitem(sys.modules, "flamino_core.model._attention_cpu", None)  # import raises ImportError
    fused_attention.status.cache_clear()
    yield
    fused_attention.status.cache_clear()


def test_without_the_built_kernel_the_engine_falls_back(kernel_missing, monkeypatch):
    from flamino_core import Engine, load_weights

    monkeypatch.delenv(hardware.ATTENTION_ENV, raising=False)
    status = fused_attention.status()
    assert not status.available and "not built" in status.reason
    weights = load_weights("random:tiny")
    engine = Engine(weights)
    assert engine.attention_path == "xla" and "not built" in engine.backend.describe()
    (out,) = engine.run(["MKTAYIAKQR"])
    assert np.isfinite(out.final).all()
    with pytest.raises(ValueError, match="not available: kernel not built"):
        Engine(weights, attention="fused")


def test_a_kernel_built_from_older_sources_is_not_used(monkeypatch):
    """An extension left from before packed rows (no ``interface()``: a handler of 7 arguments)
    would fail at its first call; it is refused up front and the engine falls back."""
    import types

    from flamino_core import Engine, load_weights

    old = types.ModuleType("flamino_core.model._attention_cpu")
    old.handler = lambda: pytest.fail("an out-of-date handler was registered")
    monkeypatch.setitem(sys.modules, "flamino_core.model._attention_cpu", old)
    monkeypatch.delenv(hardware.ATTENTION_ENV, raising=False)
    fused_attention.status.cache_clear()
    try:
        status = fused_attention.status()
        assert not status.available and "older sources" in status.reason and "reinstall" in status.reason
        engine = Engine(load_weights("random:tiny"))
        assert engine.attention_path == "xla" and "older sources" in engine.backend.describe()
    finally:
        fused_attention.status.cache_clear()


# --- bf16 matmuls ----------------------------------------------------------------------------
def test_bf16_matmuls_round_operands_and_accumulate_in_fp32():
    """Against NumPy: operands rounded to bf16 (ml_dtypes), products summed in float64."""
    from flax import nnx

    from flamino_core.model.precision import use_bf16_matmuls

    layer = nnx.Linear(320, 1280, rngs=nnx.Rngs(0))
    x = np.random.default_rng(0).normal(size=(7, 320)).astype(np.float32)
    fp32 = np.asarray(layer(jnp.asarray(x)))
    use_bf16_matmuls(layer)
    ours = np.asarray(layer(jnp.asarray(x)))
    as_bf16 = lambda a: np.asarray(a).astype(ml_dtypes.bfloat16).astype(np.float64)  # noqa: E731
    ref = as_bf16(x) @ as_bf16(layer.kernel[...]) + np.asarray(layer.bias[...], np.float64)
    # fp32 accumulation of 320 products of size ~0.1: rounding ~1e-6, bf16 rounding of the
    # operands (rel. 4e-3) moves results by ~1e-2 from fp32: the two are far apart.
    assert np.abs(ours - ref).max() < 1e-5
    assert np.abs(ours - fp32).max() > 1e-3


def test_cli_verbose_says_which_path_runs(tmp_path, capsys, monkeypatch):
    from flamino_core import cli

    monkeypatch.delenv(hardware.ATTENTION_ENV, raising=False)
    fasta = tmp_path / "one.fa"
    fasta.write_text(">p1\nMKTAYIAKQRQISFVKSHFSRQ\n")
    assert cli.main(["embed", str(fasta), "-m", "random:tiny", "-o", str(tmp_path / "e.npz"), "--verbose"]) == 0
    err = capsys.readouterr().err
    expected = "fused" if KERNEL.available else "xla"
    assert f"attention: {expected} (" in err and "fp32" in err
