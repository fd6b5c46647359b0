"""What this machine offers flamino, and the execution choices made from it, once.

``detect()`` reads the CPU model and its vector extensions, JAX's accelerator and whether the
hardware has native bf16 arithmetic; ``choose()`` picks, for one model, the attention
implementation (``attention.AttentionImpl``: which path, and on a GPU whether cuDNN runs), the
matmul precision, the token budget per batch and sequence packing. The engine passes the chosen
implementation to the model as a value and shows ``Backend.describe()`` (generated from that
same choice) in ``flamino --verbose``, the app's model panel and the ``make bench`` header, so a
user always knows which path ran. The paths are listed in ``attention``.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import platform

import jax

from flamino_core.model import fused_attention
from flamino_core.model.attention import PATHS as ATTENTION_PATHS
from flamino_core.model.attention import AttentionImpl
from flamino_core.options import DEFAULT_TOKEN_BUDGET
from flamino_core.model.precision import use_bf16_matmuls, use_int8_matmuls

ATTENTION_ENV = "FLAMINO_ATTENTION"  # auto | fused | xla | dot-product-attention
PRECISION_ENV = "FLAMINO_PRECISION"  # fp32 (default) | bf16 | int8
PACKING_ENV = "FLAMINO_PACKING"  # auto (default) | on | off
PRECISIONS = ("fp32", "bf16", "int8")
# How each mode is named wherever results are shown (the app's model panel, --verbose, the bench).
PRECISION_WORDS = {"fp32": "fp32",
                   "bf16": "bf16 matmuls with fp32 accumulation (opt-in; not reference numbers)",
                   "int8": "int8 weights and activations in the dense layers (opt-in; not reference numbers)"}
PACKING = ("auto", "on", "off")
# Tokens per forward pass (rows x padded width). On a CPU larger batches stop paying off once
# a batch's activations outgrow the caches; a GPU needs large batches to fill its cores.
TOKEN_BUDGET = {"cpu": DEFAULT_TOKEN_BUDGET, "gpu": 32768}
# The CPU flags that matter to flamino, in the order they are reported.
CPU_FEATURES = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8", "amx_tile",
                "asimd", "bf16", "sve")
# Flags that mean the CPU does bf16 dot products natively (x86: AVX512_BF16, AMX; Arm: BF16).
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")


@dataclasses.dataclass(frozen=True)
class Hardware:
    """The machine as flamino sees it."""

    platform: str  # JAX's default backend: "cpu", "gpu" or "tpu"
    device: str  # the accelerator's name, or the CPU model
    cpu_features: tuple[str, ...]  # of CPU_FEATURES, the ones present
    native_bf16: bool  # the default device multiplies bf16 natively
    native_bf16_why: str


def _cpu_from_proc() -> tuple[str, set[str]]:
    model, flags = "", set()
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "Model") and not model:
                    model = value.strip()
                elif key in ("flags", "Features") and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    return model, flags


@functools.cache
def detect() -> Hardware:
    """Detect the CPU, the accelerator and native bf16 support (once per process)."""
    model, flags = _cpu_from_proc()
    model = model or platform.processor() or platform.machine() or "unknown CPU"
    features = tuple(f for f in CPU_FEATURES if f in flags)
    backend = jax.default_backend()
    if backend == "cpu":
        bf16_flags = [f for f in NATIVE_BF16_FLAGS if f in flags]
        native = bool(bf16_flags)
        why = (f"CPU has {', '.join(bf16_flags)}" if native
               else "CPU has no native bf16 (no AVX512_BF16 / AMX / Arm BF16): bf16 would be emulated")
        device = model
    else:
        device = getattr(jax.devices()[0], "device_kind", backend)
        native, why = True, f"{backend.upper()} ({device}) multiplies bf16 natively"
    return Hardware(backend, device, features, native, why)


@dataclasses.dataclass(frozen=True)
class Backend:
    """How one engine runs: the attention implementation, the matmul precision, the token budget."""

    implementation: AttentionImpl  # passed to the model as a value
    reason: str  # why this implementation: "" (the default here), "requested", or the fallback's cause
    precision: str  # one of PRECISIONS
    token_budget: int
    hardware: Hardware
    # Several sequences per row in plain forward passes (``planner``): on by default with the
    # fused kernel, which computes only each sequence's own keys; the other paths would compute
    # every key of a packed row and mask most of them away.
    packing: bool = False

    @property
    def attention(self) -> str:
        """The attention path's name, one of ``ATTENTION_PATHS``."""
        return self.implementation.path

    @property
    def attention_why(self) -> str:
        """What runs and why, in words: generated from the implementation that runs."""
        what = self.implementation.describe()
        if not self.reason:
            return what
        return f"{what}; requested" if self.reason == "requested" else f"{what}: {self.reason}"

    @property
    def precision_words(self) -> str:
        """The precision mode in words, saying when it is not the reference's fp32."""
        return PRECISION_WORDS[self.precision]

    def describe(self) -> str:
        """One line for logs, the CLI (--verbose), the app's model panel and the bench header."""
        hw = self.hardware
        where = f"{hw.platform.upper()} {hw.device}"
        if hw.platform == "cpu":
            where += f" ({' '.join(hw.cpu_features) or 'no AVX2'})"
        packed = "; sequences packed into shared rows" if self.packing else ""
        return (f"{where}; attention: {self.attention} ({self.attention_why}); {self.precision_words}; "
                f"token budget {self.token_budget}{packed}")


def _attention_for(requested: str, hw: Hardware, head_dim: int, precision: str) -> tuple[AttentionImpl, str]:
    """The implementation for this request and machine, and the reason (see ``Backend.reason``)."""
    kernel = fused_attention.status()
    # cuDNN's fused attention: on a GPU, on bf16 inputs (it has no fp32 kernel).
    on_cudnn = hw.platform == "gpu" and precision == "bf16"
    dot_product = AttentionImpl("dot-product-attention", "bfloat16" if on_cudnn else "float32", on_cudnn)
    if requested == "fused":
        if hw.platform != "cpu":
            raise ValueError(f"attention path 'fused' is a CPU kernel; this machine runs JAX on {hw.platform}")
        if not kernel.available:
            raise ValueError(f"attention path 'fused' is not available: kernel {kernel.reason}")
        if not fused_attention.supports(head_dim):
            raise ValueError(f"attention path 'fused' needs a head dimension divisible by 8, not {head_dim}")
        return AttentionImpl("fused"), "requested"
    if requested == "xla":
        return AttentionImpl("xla"), "requested"
    if requested == "dot-product-attention":
        return dot_product, "requested"
    # auto
    if hw.platform != "cpu":
        return dot_product, ""
    if not kernel.available:
        return AttentionImpl("xla"), f"fused kernel {kernel.reason}"
    if not fused_attention.supports(head_dim):
        return AttentionImpl("xla"), f"the fused kernel needs a head dimension divisible by 8, not {head_dim}"
    return AttentionImpl("fused"), ""


def choose(head_dim: int, attention: str | None = None, precision: str | None = None,
           token_budget: int | None = None, packing: str | None = None) -> Backend:
    """The execution choices for a model with this head dimension on this machine.

    Args:
      head_dim: the model's attention head dimension (the fused kernel needs a multiple of 8).
      attention: "auto" (default, or $FLAMINO_ATTENTION) or one of ``ATTENTION_PATHS``.
      precision: "fp32" (default, or $FLAMINO_PRECISION), "bf16" or "int8" (opt-in; outside the
        1e-4 parity, see docs/benchmarks.md for their measured cost).
      token_budget: tokens per batch (default: ``TOKEN_BUDGET`` for the platform).
      packing: "auto" (default, or $FLAMINO_PACKING: on with the fused kernel), "on" or "off".

    Returns:
      A ``Backend``. Raises ValueError for an unknown or unavailable request.
    """
    hw = detect()
    attention = attention or os.environ.get(ATTENTION_ENV) or "auto"
    precision = precision or os.environ.get(PRECISION_ENV) or "fp32"
    if attention not in ("auto", *ATTENTION_PATHS):
        raise ValueError(f"attention path {attention!r}: choose auto or one of {', '.join(ATTENTION_PATHS)}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
    packing = packing or os.environ.get(PACKING_ENV) or "auto"
    if packing not in PACKING:
        raise ValueError(f"packing {packing!r}: choose one of {', '.join(PACKING)}")
    implementation, reason = _attention_for(attention, hw, head_dim, precision)
    budget = token_budget or TOKEN_BUDGET.get(hw.platform, TOKEN_BUDGET["cpu"])
    packed = packing == "on" or (packing == "auto" and implementation.path == "fused")
    return Backend(implementation, reason, precision, budget, hw, packed)


def configure(model, attention: str | None = None, precision: str | None = None,
              token_budget: int | None = None, packing: str | None = None) -> Backend:
    """Choose the backend for ``model`` (a family's network) on this machine and set its matmul
    precision. The attention implementation is not stored on the model: the engine passes
    ``Backend.implementation`` to every call.

    Args: as ``choose``. Returns: the ``Backend`` the model now runs with.
    """
    backend = choose(model.config.head_dim, attention, precision, token_budget, packing)
    bf16 = backend.precision == "bf16"
    if backend.hardware.platform == "gpu" and not bf16:
        # JAX computes fp32 dots on recent GPUs in TF32 by default (10-bit mantissas): far
        # outside the 1e-4 parity. fp32 means fp32 (process-wide; explicit bf16 dots unaffected).
        jax.config.update("jax_default_matmul_precision", "float32")
    if bf16:
        use_bf16_matmuls(model)
    elif backend.precision == "int8":
        use_int8_matmuls(model)
    return backend
