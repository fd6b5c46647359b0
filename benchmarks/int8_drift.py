"""Where int8's pseudo-perplexity drift comes from, on a shape's random checkpoint (issue 40).

    .venv/bin/python benchmarks/int8_drift.py --shape t30 --root DIR [--modes int8,w8,a8,...]

Each mode replaces every dense layer of the block stack (as ``use_int8_matmuls`` does) by a
rounding of its operands done in fp32 arithmetic (dequantized values: the integer path's rounding,
not its summation order), and scores the shared NEIME assay's wild type with one masked pass per
position (``precision_gates.assay``), printing the PPPL and its drift from fp32:

- ``engine``: the engine's own int8 path (``Engine(precision="int8")``);
- ``int8``: W8A8 as the engine rounds it (per output channel, per token, symmetric);
- ``w8`` / ``a8``: only the weights / only the activations rounded;
- ``fc2_fp32``: int8 everywhere but the MLP's second layer;
- ``fc2_zero_point`` / ``all_zero_point``: that layer's (every layer's) input rounded with a zero
  point, 255 steps over the token's [min, max] instead of 254 over [-max|x|, max|x|];
- ``jitterE``: fp32, every dense layer's input times ``1 + E sin(12.99 i)`` over its features
  (a fixed, systematic perturbation of relative size E): how far these weights' PPPL moves at all;
- ``bf16_inputs``: fp32 weights, inputs rounded to bf16.

Random weights: the numbers say how sensitive this checkpoint's PPPL is, not how a trained
model's predictions change (docs/benchmarks.md, Round 4).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
import precision_gates  # noqa: E402

MODES = "engine,int8,w8,a8,fc2_fp32,fc2_zero_point,all_zero_point,jitter1e-4,jitter1e-3,bf16_inputs"


def rounded_weights(kernel):
    """The engine's per-output-channel int8 rounding (``quantize_per_channel``), dequantized."""
    from flamino_core.model.precision import quantize_per_channel

    q, scale = quantize_per_channel(kernel)
    return q.astype(kernel.dtype) * scale[..., None, :]


def rounded_tokens(x):
    """The engine's per-token int8 rounding (``quantize_per_token``), dequantized."""
    from flamino_core.model.precision import quantize_per_token

    q, scale = quantize_per_token(x)
    return q.astype(x.dtype) * scale


def zero_point(x, axis):
    import jax.numpy as jnp

    low, high = jnp.min(x, axis=axis, keepdims=True), jnp.max(x, axis=axis, keepdims=True)
    scale = jnp.where(high == low, 1.0, (high - low) / 255.0)
    return jnp.round((x - low) / scale) * scale + low


def rounded_linear(linear, role: str, mode: str):
    """An ``nnx.Module`` computing ``linear`` with the operands ``mode`` rounds."""
    import jax.numpy as jnp
    from flax import nnx

    class Rounded(nnx.Module):
        def __init__(self):
            self.kernel, self.bias = nnx.Param(linear.kernel[...]), nnx.Param(linear.bias[...])

        def __call__(self, x):
            w = self.kernel[...]
            if mode.startswith("jitter"):
                x = x * (1 + float(mode[6:]) * jnp.sin(jnp.arange(x.shape[-1], dtype=jnp.float32) * 12.9898))
            elif mode == "bf16_inputs":
                x = x.astype(jnp.bfloat16).astype(jnp.float32)
            elif not (mode == "fc2_fp32" and role == "fc2"):
                w = w if mode == "a8" else rounded_weights(w)
                asym = mode == "all_zero_point" or (mode == "fc2_zero_point" and role == "fc2")
                x = x if mode == "w8" else (zero_point(x, -1) if asym else rounded_tokens(x))
            return x @ w + self.bias[...]

    return Rounded()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", default="t30")
    p.add_argument("--root", help="a work folder holding the shape's checkpoint (written there if absent)")
    p.add_argument("--modes", default=MODES)
    args = p.parse_args()
    os.environ.setdefault("FLAMINO_CACHE", tempfile.mkdtemp(prefix="flamino-drift-"))

    from flamino_core import Engine, load_weights
    from flamino_core.alphabet import AA_TO_IDX
    from flamino_core.model.precision import replace_block_linears
    from flamino_core.engine import hardware
    from flamino_core.variants import substitution_maps as scores
    from scipy.stats import spearmanr

    engine_int8 = hardware.use_int8_matmuls

    def rounding(mode):
        return lambda model: replace_block_linears(model, lambda linear, name: rounded_linear(linear, name, mode))

    root = Path(args.root or tempfile.mkdtemp(prefix="drift-"))
    weights = load_weights(str(common.write_checkpoint(args.shape, root)))
    wild_type, mutants, measured = precision_gates.assay()
    reference = None
    for mode in ["fp32", *args.modes.split(",")]:
        hardware.use_int8_matmuls = engine_int8 if mode == "engine" else rounding(mode)
        engine = Engine(weights, precision="fp32" if mode == "fp32" else "int8")
        start = time.perf_counter()
        masked = engine.compute_masked(wild_type)
        pppl = scores.pseudo_perplexity(masked, wild_type)
        rho = spearmanr([masked[i, AA_TO_IDX[m]] - masked[i, AA_TO_IDX[w]] for i, w, m in mutants], measured).statistic
        reference = reference or (pppl, rho)
        print(f"| {args.shape} | {mode} | {pppl:.3f} | {pppl - reference[0]:+.3f} ({(pppl / reference[0] - 1) * 100:+.2f}%) "
              f"| {rho - reference[1]:+.1e} | {time.perf_counter() - start:.0f} s |", flush=True)
    hardware.use_int8_matmuls = engine_int8


if __name__ == "__main__":
    main()
