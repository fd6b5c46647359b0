"""Where ESMFold2's trunk drifts on an accelerator: each trunk stage (and each part of one pair
layer, and a few single ops) run by the same JAX code on the host's CPU and on the default device,
fed the same inputs, products at ``highest``; its largest difference, its largest value and their
ratio printed. Weights are the tiny config's, scaled as the parity tests' checkpoints are (3x the
default draw, offsets on the vectors) so differences show. Then each element-wise op against
float64 on both devices (in ulps), and the whole trunk with suspect functions swapped for
``model/exact_math``'s: what names the op behind a drift.

Run on the chip host (after benchmarks/accelerator_host.sh): ``python3 benchmarks/esmfold2_chip_stages.py``.
Its output of 2026-12-07 is in benchmarks/recorded/esmfold2-chip-parity-tpu-v5e-2026-12-07.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flamino_core.model import exact_math  # noqa: E402
from flamino_core.model.esmfold2.config import EsmFold2Config  # noqa: E402
from flamino_core.model.esmfold2.features import check_chains, prepare_features  # noqa: E402
from flamino_core.model.esmfold2.layers import Transition  # noqa: E402
from flamino_core.model.esmfold2.model import EsmFold2, draw_trunk_noise, one_hot_features  # noqa: E402
from flamino_core.model.esmfold2.pair import TriangleMultiplicativeUpdate  # noqa: E402


def scaled(module):
    """Weights 3x their draw, vectors offset: as the parity tests' checkpoints, so errors show."""
    graphdef, state = nnx.split(module)
    return nnx.merge(graphdef, jax.tree.map(
        lambda x: x * 3.0 if x.ndim >= 2 else x + 0.3 * jnp.sin(jnp.arange(x.size).reshape(x.shape)), state))


def compare(name, module, fn, *args):
    """``fn(module, *args)`` jitted on the CPU and on the default device; the difference printed."""
    graphdef, state = nnx.split(module)

    def on(device):
        run = jax.jit(lambda s, *a: fn(nnx.merge(graphdef, s), *a))
        return np.asarray(run(jax.device_put(state, device), *jax.device_put(args, device)))

    cpu, chip = on(jax.devices("cpu")[0]), on(jax.devices()[0])
    diff, size = np.abs(cpu - chip).max(), np.abs(cpu).max()
    print(f"{name:34s} max|d| {diff:.3e}  max|x| {size:.3e}  rel {diff / size:.2e}", flush=True)


def main() -> int:
    jax.config.update("jax_default_matmul_precision", "highest")
    config = EsmFold2Config.tiny()
    with jax.default_device(jax.devices("cpu")[0]):
        model = scaled(EsmFold2(config, rngs=nnx.Rngs(0)))
        dim = config.pairwise_hidden_size
        parts = {"tri_mul_out": scaled(TriangleMultiplicativeUpdate(dim, True, nnx.Rngs(1))),
                 "tri_mul_in": scaled(TriangleMultiplicativeUpdate(dim, False, nnx.Rngs(2))),
                 "transition": scaled(Transition(dim, config.pair_transition_intermediate_size, None, nnx.Rngs(3)))}
    features = prepare_features(check_chains(["MKTAYIAKQRQISFVKSHFSRQ"]), "x")
    length = features["res_type"].shape[1]
    rng = np.random.default_rng(0)
    pair = rng.normal(size=(1, length, length, dim)).astype(np.float32) * 2
    lm = rng.normal(size=(1, length, config.esmc.num_layers + 1, config.esmc.embed_dim)).astype(np.float32)
    mask = np.ones((1, length, length), np.float32)

    compare("language_model", model, lambda m, h: m.language_model(h), lm)
    compare("lm_encoder stack", model, lambda m, x, pm: m.lm_encoder(x, pm), pair, mask)
    compare("folding_trunk stack", model, lambda m, x, pm: m.folding_trunk(x, pm), pair, mask)
    compare("parcae step", model, lambda m, x, inj: m.parcae(x, inj, *m.parcae.discretize()), pair, pair)
    compare("parcae decode_state", model, lambda m, x, pm: m.parcae.decode_state(x, pm), pair, mask)
    compare("distogram head", model, lambda m, x: m.distogram_head(x + jnp.swapaxes(x, 1, 2)), pair)
    compare("matmul 22x22, fp32", model, lambda m, x: x[0, :, :, 0] @ x[0, :, :, 1].T, pair)
    compare("einsum bikc,bjkc", model, lambda m, x: jnp.einsum("bikc,bjkc->bijc", x, x), pair)
    compare("sigmoid", model, lambda m, x: jax.nn.sigmoid(x), pair)
    compare("layer norm by hand", model,
            lambda m, x: (x - x.mean(-1, keepdims=True)) * jax.lax.rsqrt(x.var(-1, keepdims=True) + 1e-5), pair)
    compare("tri_mul_out", parts["tri_mul_out"], lambda m, x, pm: m(x, pm), pair, mask)
    compare("tri_mul_in", parts["tri_mul_in"], lambda m, x, pm: m(x, pm), pair, mask)
    compare("transition", parts["transition"], lambda m, x: m(x), pair)
    compare("  norm_start", parts["tri_mul_out"], lambda m, x: m.norm_start(x), pair)
    compare("  proj_bundle", parts["tri_mul_out"], lambda m, x: m.proj_bundle(m.norm_start(x)), pair)

    # Upstream of the pair stack (a CPU experiment, 2026-12-07: sigmoid and exp made 1e-6 relative
    # wrong on the CPU move the trunk test by 2.6e-5, not the chip's 5.4e-4): the input embedder,
    # whose atom attention makes the initial pair state every loop injects, then the whole trunk.
    with jax.default_device(jax.devices("cpu")[0]):
        noise = draw_trunk_noise(jax.random.key(0), config, 1, length, explicit_dropout=True)
        lm_all = rng.normal(size=(1, length, config.esmc.num_layers + 1, config.esmc.embed_dim)).astype(np.float32)
    arrays = {k: np.asarray(v) for k, v in features.items() if v is not None}
    keys = ("token_index", "residue_index", "asym_id", "sym_id", "entity_id", "token_bonds")

    def embedder(m, f, index):
        res_type, profile, deletion_mean, atoms = one_hot_features(f, config)
        return m.input_embedder(atoms, res_type, profile, deletion_mean, *(f[k] for k in keys))[index]

    compare("input_embedder single_inputs", model, lambda m, f: embedder(m, f, 0), arrays)
    compare("input_embedder initial pair", model, lambda m, f: embedder(m, f, 1), arrays)
    compare("trunk pair states, no LM", model, lambda m, f, n: m.trunk(f, n, None).pair_states, arrays, noise)
    compare("trunk pair states, with LM", model, lambda m, f, n, h: m.trunk(f, n, h).pair_states, arrays, noise, lm_all)

    # Which element-wise op is not at fp32 rounding on this device: each against float64 truth.
    op_accuracy()
    # The whole trunk again with each suspect op swapped for a form built from others: the variant
    # that closes the CPU/chip gap names the op (jax.nn's functions are looked up at trace time).
    for name, patch in SUBSTITUTES.items():
        with patch():
            compare(f"trunk, {name}", model, lambda m, f, n, h: m.trunk(f, n, h).pair_states, arrays, noise, lm_all)
    return 0


def op_accuracy():
    """Each op on the CPU and on the device against float64 numpy: max error relative to
    max(|truth|, 1) (a gate near 0 matters by its absolute error), in fp32 ulps (1.19e-7)."""
    from scipy import special

    x = np.linspace(-30, 30, 200_001).astype(np.float32)
    pos = np.linspace(1e-3, 1e3, 200_001).astype(np.float32)
    truths = {
        "sigmoid": (jax.nn.sigmoid, lambda v: special.expit(v), x),
        "1/(1+exp(-x))": (lambda v: 1 / (1 + jnp.exp(-v)), lambda v: special.expit(v), x),
        "0.5+0.5tanh(x/2)": (lambda v: 0.5 + 0.5 * jnp.tanh(v / 2), lambda v: special.expit(v), x),
        "silu": (jax.nn.silu, lambda v: v * special.expit(v), x),
        "gelu erf": (lambda v: jax.nn.gelu(v, approximate=False),
                     lambda v: v * 0.5 * (1 + special.erf(v / np.sqrt(2))), x),
        "erf": (jax.lax.erf, special.erf, x / 5),
        "exp": (jnp.exp, np.exp, x / 1.5),
        "exact_math.exp": (exact_math.exp, np.exp, x / 1.5),
        "exact_math.sigmoid": (exact_math.sigmoid, lambda v: special.expit(v), x),
        "exact_math.softplus": (exact_math.softplus, lambda v: np.logaddexp(0, v), x),
        "exact_math.log": (exact_math.log, np.log, pos),
        "tanh": (jnp.tanh, np.tanh, x / 5),
        "softplus": (jax.nn.softplus, lambda v: np.logaddexp(0, v), x),
        "log": (jnp.log, np.log, pos),
        "sqrt": (jnp.sqrt, np.sqrt, pos),
        "rsqrt": (jax.lax.rsqrt, lambda v: 1 / np.sqrt(v), pos),
        "1/x": (lambda v: 1 / v, lambda v: 1 / v, pos),
        "x/y": (lambda v: v / (v + 0.37), lambda v: v / (v + 0.37), pos),
    }
    for name, (fn, truth, inputs) in truths.items():
        want = truth(inputs.astype(np.float64))
        scale = np.maximum(np.abs(want), 1.0)
        errors = []
        for device in (jax.devices("cpu")[0], jax.devices()[0]):
            have = np.asarray(jax.jit(fn)(jax.device_put(inputs, device))).astype(np.float64)
            errors.append((np.abs(have - want) / scale).max() / 1.19e-7)
        print(f"op {name:18s} max rel error: cpu {errors[0]:8.1f} ulp   device {errors[1]:8.1f} ulp", flush=True)


def _patched(*swaps):
    """A context manager setting each (module, name, replacement), restoring them after."""
    import contextlib

    @contextlib.contextmanager
    def patch():
        originals = [(module, name, getattr(module, name)) for module, name, _ in swaps]
        for module, name, replacement in swaps:
            setattr(module, name, replacement)
        try:
            yield
        finally:
            for module, name, original in originals:
                setattr(module, name, original)
    return patch


_EXACT_EXP = ((jnp, "exp", exact_math.exp), (jax.nn, "softmax", exact_math.softmax))
_EXACT_GATES = ((jax.nn, "sigmoid", exact_math.sigmoid), (jax.nn, "silu", exact_math.silu))


SUBSTITUTES = {
    "exact exp and softmax": _patched(*_EXACT_EXP),
    "exact sigmoid and silu": _patched(*_EXACT_GATES),
    "all exact": _patched(*_EXACT_EXP, *_EXACT_GATES),
}


if __name__ == "__main__":
    raise SystemExit(main())
