"""Opt-in bf16 matmuls with fp32 accumulation (``hardware.choose(precision="bf16")``).

Every ``nnx.Linear`` of the model (attention projections, MLP, LM-head dense layer) rounds its
two operands to bf16 and accumulates the dot product in fp32; biases, LayerNorm, GELU, softmax,
the residual stream and the tied LM decoder stay fp32. This is what bf16 hardware (AMX,
AVX512_BF16, GPU tensor cores) runs fast. It is never the default: it moves log-probabilities
by far more than the 1e-4 parity bound (measured in docs/benchmarks.md with
benchmarks/bf16_accuracy.py).
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
from flax import nnx


def bf16_dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, **kwargs):
    """``lax.dot_general`` on bf16-rounded operands with an fp32 result (fp32 accumulation)."""
    del preferred_element_type  # always fp32 out
    return jax.lax.dot_general(lhs.astype(jnp.bfloat16), rhs.astype(jnp.bfloat16), dimension_numbers,
                               precision=precision, preferred_element_type=jnp.float32, **kwargs)



def einsum(spec: str, a: jax.Array, b: jax.Array, bf16: bool = False) -> jax.Array:
    """``jnp.einsum(spec, a, b)``; with ``bf16`` on bf16-rounded operands with an fp32 result (fp32
    accumulation), as ``bf16_dot_general``: ESMFold's fast mode's triangular and attention products."""
    if not bf16:
        return jnp.einsum(spec, a, b)
    return jnp.einsum(spec, a.astype(jnp.bfloat16), b.astype(jnp.bfloat16), preferred_element_type=jnp.float32)

class Bf16Linear(nnx.Module):
    """``nnx.Linear`` of the fast mode on an accelerator with a bf16 output: bf16 operands, fp32
    accumulation and bias, the sum rounded to bf16 once (``round_outputs`` of ``use_bf16_matmuls``).

    Why: a bf16 pass on the TPU v5e spent 25% of its time in elementwise fusions over the fp32
    outputs of the dense layers (the MLP's 4D-wide intermediate, rotary on fp32 queries and keys)
    and 11% in copies of them (docs/benchmarks.md "Accelerators"); bf16 halves their bytes. The
    residual stream, LayerNorm, GELU (computed in fp32, ``esm2.gelu``) and softmax stay fp32.
    Keeps ``kernel`` and ``bias`` under the same names as ``nnx.Linear``.
    """

    def __init__(self, kernel: jax.Array, bias: jax.Array | None):
        self.kernel = nnx.Param(kernel.astype(jnp.bfloat16))
        self.bias = nnx.Param(bias) if bias is not None else None

    @classmethod
    def from_linear(cls, linear: nnx.Linear) -> "Bf16Linear":
        return cls(linear.kernel[...], linear.bias[...] if linear.bias is not None else None)

    def __call__(self, x: jax.Array) -> jax.Array:
        y = bf16_dot_general(x, self.kernel[...], (((x.ndim - 1,), (0,)), ((), ())))  # fp32 out
        if self.bias is not None:
            y = y + self.bias[...]  # in fp32, before the one rounding
        return y.astype(jnp.bfloat16)


def use_bf16_matmuls(model: nnx.Module, store_bf16: bool = False, round_outputs: bool = False) -> None:
    """Switch every ``nnx.Linear`` in ``model`` to bf16 operands with fp32 accumulation.

    On a CPU (``store_bf16=False``) the fp32 kernels are kept and rounded in every call. Rounding
    them once at load gives the same numbers but is slower there, even where the CPU multiplies
    bf16 (t30 on an AVX512_BF16 EPYC, one protein: 1.33-1.76x slower): XLA:CPU converts the stacked
    bf16 kernels to fp32 before the layer loop on every pass and each layer's slice back to bf16
    (it turns a bf16 dynamic slice into an fp32 one; docs/benchmarks.md "bf16 on AVX512_BF16").
    On an accelerator they are stored rounded (``store_bf16=True``): half the device memory, and
    XLA there does not keep a rounded copy of every layer's kernels beside the fp32 ones.
    ``round_outputs``: the block stack's dense layers also give bf16 outputs (``Bf16Linear``).
    """
    if round_outputs:  # the block stack's dense layers (``Bf16Linear``); the LM head below as before
        replace_block_linears(model, lambda linear, _name: Bf16Linear.from_linear(linear))
    for _, module in nnx.iter_modules(model):
        if isinstance(module, nnx.Linear):
            module.dot_general = bf16_dot_general
            if store_bf16:  # rounded where it is (a loaded checkpoint: on the host, before the device)
                kernel = module.kernel[...]
                module.kernel = nnx.Param(kernel.astype(jnp.bfloat16))


# int8 (opt-in, any x86-64): W8A8 with int32 accumulation, as esm.cpp's INT8 path and
# LLM.int8()/SmoothQuant-style engines run dense layers. Weights are rounded once at load, per
# output channel (symmetric, scale = max |w| over the input axis / 127: a channel's largest weight
# keeps full resolution whatever its neighbours hold); activations are rounded per token on every
# call (dynamic, scale = max |x| over the features / 127), so no calibration set is needed (esm.cpp
# needs one for its static SmoothQuant scales). XLA:CPU lowers an int8 x int8 -> int32 dot to its
# integer GEMM (VNNI's vpdpbusd where the CPU has it, vpmaddubsw/vpmaddwd on AVX2).
INT8_MAX = 127.0


def quantize_per_channel(kernel: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``kernel`` (..., in, out) -> (int8 kernel of the same shape, fp32 scales (..., out))."""
    scale = jnp.max(jnp.abs(kernel), axis=-2) / INT8_MAX
    scale = jnp.where(scale == 0, 1.0, scale)  # an all-zero column: any scale gives zeros
    return jnp.round(kernel / scale[..., None, :]).astype(jnp.int8), scale.astype(jnp.float32)


def quantize_per_token(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Activations (..., features) -> (int8 values, fp32 scales (..., 1)). Padding tokens (all
    zero) get scale 1 and stay exactly zero."""
    scale = jnp.max(jnp.abs(x), axis=-1, keepdims=True) / INT8_MAX
    scale = jnp.where(scale == 0, 1.0, scale)
    return jnp.round(x / scale).astype(jnp.int8), scale


class Int8Linear(nnx.Module):
    """``nnx.Linear`` with int8 weights and per-token int8 activations: y = (x_q @ W_q) * s_x * s_w + b.

    Made from a loaded fp32 ``nnx.Linear`` (``from_linear``); the fp32 kernel is dropped, so the
    dense layers' weights take a quarter of the memory.
    """

    def __init__(self, kernel_q: jax.Array, scale: jax.Array, bias: jax.Array | None):
        self.kernel_q = nnx.Param(kernel_q)  # (in, out) int8 (a leading layer axis in a stack)
        self.scale = nnx.Param(scale)  # (out,) fp32
        self.bias = nnx.Param(bias) if bias is not None else None

    @classmethod
    def from_linear(cls, linear: nnx.Linear) -> "Int8Linear":
        kernel_q, scale = quantize_per_channel(linear.kernel[...])
        return cls(kernel_q, scale, linear.bias[...] if linear.bias is not None else None)

    def __call__(self, x: jax.Array) -> jax.Array:
        x_q, x_scale = quantize_per_token(x)
        acc = jax.lax.dot_general(x_q, self.kernel_q[...], (((x.ndim - 1,), (0,)), ((), ())),
                                  preferred_element_type=jnp.int32)
        # int32 accumulation is exact: |sum| <= in_features * 127^2, under 2^31 for in < 133,000.
        y = acc.astype(jnp.float32) * x_scale * self.scale[...]
        return y if self.bias is None else y + self.bias[...]


def use_int8_matmuls(model: nnx.Module) -> None:
    """Replace every ``nnx.Linear`` inside the model's block stack (``model.layers``: attention
    projections and feed-forward, where nearly all the arithmetic is) by an ``Int8Linear``. The
    embeddings, LayerNorms, attention itself (softmax over fp32 scores), the LM head and the
    contact head stay fp32: they are a small share of the time and the logits' last step."""
    replace_block_linears(model, lambda linear, _name: Int8Linear.from_linear(linear))


def replace_block_linears(model: nnx.Module, make: Callable[[nnx.Linear, str], nnx.Module]) -> None:
    """Put ``make(linear, its attribute name)`` in place of every ``nnx.Linear`` of the block
    stack (``model.layers``): the int8 mode's, and ``benchmarks/int8_drift.py``'s variants of it."""
    parents = [module for _, module in nnx.iter_modules(model.layers)]
    for parent in parents:
        for name, value in list(vars(parent).items()):
            if isinstance(value, nnx.Linear):
                setattr(parent, name, make(value, name))
