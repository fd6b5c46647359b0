"""The fused CPU attention kernel (csrc/attention_cpu.cc) as a JAX function.

One XLA FFI custom call does rotary, the scaled scores, the key-padding bias, an online
softmax and the weighted sum of values for every row and head, on q, k, v in the (B, T, H, hd)
layout the projections produce; per-token positions and per-query key spans let one row pack
several sequences (``planner``). ``attention.attend`` calls it for the "fused" implementation.
It is an optional compiled extension: when it was not built (no C++ compiler at install time)
or cannot be loaded, ``status()`` says why and ``hardware.choose`` picks the pure-JAX
implementation, which computes the same numbers.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib

import jax
import jax.numpy as jnp
import numpy as np

from flamino_core import settings

TARGET = "flamino_attention"
# Instruction-set variant of the kernel: "auto" (the best this CPU runs), or one of the names
# ``status().variants`` lists (tests use it to run every variant this CPU can).
VARIANT_ENV = settings.KERNEL_VARIANT.name
# The handler's argument list this module calls (csrc/attention_cpu.cc ``interface()``): an
# extension built from older sources (before packed rows: no ``interface``) is not used.
KERNEL_INTERFACE = 2


@dataclasses.dataclass(frozen=True)
class KernelStatus:
    """Whether the fused kernel can run here, and if not, why."""

    available: bool
    reason: str  # what was found, in words (shown by `flamino --verbose` and the app)
    variant: str | None = None  # the instruction set it runs with by default ("avx2", ...)
    variants: dict[str, int] = dataclasses.field(default_factory=dict)  # name -> id, runnable here


_registered: list[str] = []  # XLA keeps a target for the life of the process: register it once


@functools.cache
def status() -> KernelStatus:
    """Load the compiled kernel and register it with XLA (once per process)."""
    try:
        _attention_cpu = importlib.import_module(f"{__package__}._attention_cpu")
    except ImportError as err:
        return KernelStatus(False, f"not built (no C++ compiler at install time?): {err}")
    built = getattr(_attention_cpu, "interface", lambda: 1)()
    if built != KERNEL_INTERFACE:
        return KernelStatus(False, f"built from older sources (interface {built}, this flamino calls "
                                   f"{KERNEL_INTERFACE}); reinstall flamino to rebuild it")
    try:
        if TARGET not in _registered:
            jax.ffi.register_ffi_target(TARGET, _attention_cpu.handler(), platform="cpu")
            _registered.append(TARGET)
    except Exception as err:  # an FFI API mismatch after a jaxlib upgrade without a rebuild
        return KernelStatus(False, f"built but not loadable by this jaxlib ({type(err).__name__}: {err}); "
                                   "reinstall flamino to rebuild it")
    variants = dict(_attention_cpu.variants())
    best = _attention_cpu.best_variant()
    return KernelStatus(True, f"built, {best} variant", best, variants)


def supports(head_dim: int) -> bool:
    """Whether the kernel handles this head dimension (every ESM-2 preset's: 16, 24, 32, 64, 128)."""
    return head_dim % 8 == 0


def _variant_id() -> int:
    name = settings.KERNEL_VARIANT.get()
    if name == "auto":
        return 0
    variants = status().variants
    if name not in variants:
        raise ValueError(f"{VARIANT_ENV}={name!r}: this CPU runs {', '.join(variants)}")
    return variants[name]


def fused_attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    cos: jax.Array,
    sin: jax.Array,
    q_positions: jax.Array,
    key_bias: jax.Array,
    scale: float,
    k_positions: jax.Array | None = None,
    key_start: jax.Array | None = None,
    key_stop: jax.Array | None = None,
) -> jax.Array:
    """softmax(rot(q * scale) rot(k)^T + key_bias) v per row and head, in one kernel call.

    Args:
      q: (B, Tq, H, hd) float32 queries, unscaled (the q projection's output).
      k, v: (B, Tk, H, hd) float32 keys and values.
      cos, sin: (P, hd / 2) rotary tables for positions 0..P-1 (P >= Tk and > every position),
        as ``RotaryEmbedding.table(P)``.
      q_positions: (B, Tq) int positions of the queries (``arange(Tq)`` for a full pass).
      key_bias: (B, Tk) added to the scores: 0 for real tokens, -inf for padding.
      scale: multiplies q before rotary (head_dim ** -0.5), as the references do.
      k_positions: (B, Tk) int positions of the keys (default: key j at position j).
      key_start, key_stop: (B, Tq) int: query i sees only keys ``key_start[i] <= j <
        key_stop[i]`` (default: all), how a row packing several sequences keeps each to itself.
        Queries sharing a span should be consecutive (they are in a packed row); the kernel
        computes only the keys of each span (rounded out to whole tiles).

    Returns:
      (B, Tq, H, hd) float32, the layout ``out_proj`` reads after a reshape to (B, Tq, H * hd).
    """
    if not status().available:
        raise RuntimeError(f"the fused attention kernel is not available: {status().reason}")
    batch, q_len = q.shape[:2]
    k_len = k.shape[1]
    if k_positions is None:
        k_positions = jnp.broadcast_to(jnp.arange(k_len), (batch, k_len))
    if key_start is None:
        key_start = jnp.zeros((batch, q_len), jnp.int32)
    if key_stop is None:
        key_stop = jnp.full((batch, q_len), k_len, jnp.int32)
    call = jax.ffi.ffi_call(TARGET, jax.ShapeDtypeStruct(q.shape, jnp.float32), vmap_method="sequential")
    f32 = lambda a: a.astype(jnp.float32)  # noqa: E731
    i32 = lambda a: jnp.asarray(a).astype(jnp.int32)  # noqa: E731
    return call(
        f32(q), f32(k), f32(v), f32(cos), f32(sin),
        i32(q_positions), i32(k_positions), i32(key_start), i32(key_stop), f32(key_bias),
        scale=np.float32(scale), variant=np.int32(_variant_id()),
    )
