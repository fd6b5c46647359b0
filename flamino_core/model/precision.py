"""Opt-in bf16 matmuls with fp32 accumulation (``hardware.choose(precision="bf16")``).

Every ``nnx.Linear`` of the model (attention projections, MLP, LM-head dense layer) rounds its
two operands to bf16 and accumulates the dot product in fp32; biases, LayerNorm, GELU, softmax,
the residual stream and the tied LM decoder stay fp32. This is what bf16 hardware (AMX,
AVX512_BF16, GPU tensor cores) runs fast. It is never the default: it moves log-probabilities
by far more than the 1e-4 parity bound (measured in docs/benchmarks.md with
benchmarks/bf16_accuracy.py).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx


def bf16_dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, **kwargs):
    """``lax.dot_general`` on bf16-rounded operands with an fp32 result (fp32 accumulation)."""
    del preferred_element_type  # always fp32 out
    return jax.lax.dot_general(lhs.astype(jnp.bfloat16), rhs.astype(jnp.bfloat16), dimension_numbers,
                               precision=precision, preferred_element_type=jnp.float32, **kwargs)


def use_bf16_matmuls(model: nnx.Module) -> None:
    """Switch every ``nnx.Linear`` in ``model`` to bf16 operands with fp32 accumulation.

    The fp32 kernels are kept and rounded in every call. Rounding them once at load (bf16
    kernels, no dtype promotion) gives the same numbers but was slower on XLA:CPU 0.10.2 (t12,
    one protein of 100 residues: 214 ms against 91 ms; docs/benchmarks.md).
    """
    for _, module in nnx.iter_modules(model):
        if isinstance(module, nnx.Linear):
            module.dot_general = bf16_dot_general
