"""What this machine offers flamino, and the execution choices made from it.

``detect()`` reads the CPU model and its vector extensions, JAX's accelerator and whether the
hardware has native bf16 arithmetic; ``choose()`` picks, for one model, the attention path,
the matmul precision and the token budget per batch. Engines call ``choose`` once and show the
result (``Backend.describe``) in ``flamino --verbose``, the app's model panel and the
``make bench`` header, so a user always knows which path ran.

Attention paths (the captured-maps path is always the pure-JAX one, which keeps the
probabilities for ``nnx.sow``):

- ``fused``: flamino's C++ kernel on XLA:CPU (``fused_attention``), the CPU default when built;
- ``xla``: the model's pure-JAX attention (``model.attend``), the fallback everywhere;
- ``dot-product-attention``: ``jax.nn.dot_product_attention``, the GPU default; with bf16
  matmuls on a GPU it runs cuDNN's fused attention on bf16 inputs, otherwise XLA's.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import platform

import jax

from .options import DEFAULT_TOKEN_BUDGET

ATTENTION_ENV = "FLAMINO_ATTENTION"  # auto | fused | xla | dot-product-attention
PRECISION_ENV = "FLAMINO_PRECISION"  # fp32 (default) | bf16
PACKING_ENV = "FLAMINO_PACKING"  # auto (default) | on | off
ATTENTION_PATHS = ("fused", "xla", "dot-product-attention")
PRECISIONS = ("fp32", "bf16")
PACKING = ("auto", "on", "off")
# Tokens per forward pass (rows x padded width). On a CPU larger batches stop paying off once
# a batch's activations outgrow the caches; a GPU needs large batches to fill its cores.
TOKEN_BUDGET = {"cpu": DEFAULT_TOKEN_BUDGET, "gpu": 32768}
# The CPU flags that matter to flamino, in the order they are reported.
CPU_FEATURES = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "asimd", "bf16", "sve")
# Flags that mean the CPU does bf16 dot products natively (x86: AVX512_BF16, AMX; Arm: BF16).
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")


@dataclasses.dataclass(frozen=True)
class Hardware:
    """The machine as flamino sees it."""

    platform: str  # JAX's default backend: "cpu", "gpu" or "tpu"
    device: str  # the accelerator's name, or the CPU model
    cpu_model: str
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
    return Hardware(backend, device, model, features, native, why)


@dataclasses.dataclass(frozen=True)
class Backend:
    """How one engine runs: the attention path, the matmul precision, the token budget."""

    attention: str  # one of ATTENTION_PATHS
    attention_why: str
    precision: str  # "fp32" or "bf16"
    token_budget: int
    hardware: Hardware
    # Several sequences per row in plain forward passes (``packing``): on by default with the
    # fused kernel, which computes only each sequence's own keys; the other paths would compute
    # every key of a packed row and mask most of them away.
    packing: bool = False

    def describe(self) -> str:
        """One line for logs, the CLI (--verbose), the app's model panel and the bench header."""
        hw = self.hardware
        where = f"{hw.platform.upper()} {hw.device}"
        if hw.platform == "cpu":
            where += f" ({' '.join(hw.cpu_features) or 'no AVX2'})"
        precision = "fp32" if self.precision == "fp32" else "bf16 matmuls with fp32 accumulation (opt-in)"
        packed = "; sequences packed into shared rows" if self.packing else ""
        return (f"{where}; attention: {self.attention} ({self.attention_why}); {precision}; "
                f"token budget {self.token_budget}{packed}")


def _attention_for(requested: str, hw: Hardware, head_dim: int, precision: str) -> tuple[str, str]:
    from . import fused_attention

    kernel = fused_attention.status()
    if requested == "fused":
        if hw.platform != "cpu":
            raise ValueError(f"attention path 'fused' is a CPU kernel; this machine runs JAX on {hw.platform}")
        if not kernel.available:
            raise ValueError(f"attention path 'fused' is not available: kernel {kernel.reason}")
        if not fused_attention.supports(head_dim):
            raise ValueError(f"attention path 'fused' needs a head dimension divisible by 8, not {head_dim}")
        return "fused", f"C++ kernel, {kernel.variant}; requested"
    if requested == "xla":
        return "xla", "pure JAX; requested"
    if requested == "dot-product-attention":
        return requested, _dpa_why(hw, precision) + "; requested"
    # auto
    if hw.platform != "cpu":
        return "dot-product-attention", _dpa_why(hw, precision)
    if not kernel.available:
        return "xla", f"pure JAX: fused kernel {kernel.reason}"
    if not fused_attention.supports(head_dim):
        return "xla", f"pure JAX: the fused kernel needs a head dimension divisible by 8, not {head_dim}"
    return "fused", f"C++ kernel, {kernel.variant}"


def _dpa_why(hw: Hardware, precision: str) -> str:
    if hw.platform == "gpu" and precision == "bf16":
        return "jax.nn.dot_product_attention, cuDNN on bf16 inputs"
    return "jax.nn.dot_product_attention, XLA implementation"


def choose(head_dim: int, attention: str | None = None, precision: str | None = None,
           token_budget: int | None = None, packing: str | None = None) -> Backend:
    """The execution choices for a model with this head dimension on this machine.

    Args:
      head_dim: the model's attention head dimension (the fused kernel needs a multiple of 8).
      attention: "auto" (default, or $FLAMINO_ATTENTION) or one of ``ATTENTION_PATHS``.
      precision: "fp32" (default, or $FLAMINO_PRECISION) or "bf16" (opt-in; outside the 1e-4
        parity, see docs/benchmarks.md for its measured cost).
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
    path, why = _attention_for(attention, hw, head_dim, precision)
    budget = token_budget or TOKEN_BUDGET.get(hw.platform, TOKEN_BUDGET["cpu"])
    packed = packing == "on" or (packing == "auto" and path == "fused")
    return Backend(path, why, precision, budget, hw, packed)


def configure(model, attention: str | None = None, precision: str | None = None,
              token_budget: int | None = None, packing: str | None = None) -> Backend:
    """Choose the backend for ``model`` (an ``ESM2``) on this machine and set the model up for it.

    Args: as ``choose``. Returns: the ``Backend`` the model now runs with.
    """
    from .model import set_attention_path
    from .precision import use_bf16_matmuls

    backend = choose(model.config.head_dim, attention, precision, token_budget, packing)
    bf16 = backend.precision == "bf16"
    if backend.hardware.platform == "gpu" and not bf16:
        # JAX computes fp32 dots on recent GPUs in TF32 by default (10-bit mantissas): far
        # outside the 1e-4 parity. fp32 means fp32 (process-wide; explicit bf16 dots unaffected).
        jax.config.update("jax_default_matmul_precision", "float32")
    set_attention_path(model, backend.attention, "bfloat16" if bf16 else "float32")
    if bf16:
        use_bf16_matmuls(model)
    return backend
