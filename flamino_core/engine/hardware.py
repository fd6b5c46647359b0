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
import platform

import jax

from flamino_core import settings
from flamino_core.model import fused_attention
from flamino_core.engine import device_memory, sharding
from flamino_core.model.attention import PATHS as ATTENTION_PATHS
from flamino_core.model.attention import AttentionImpl
from flamino_core.options import DEFAULT_TOKEN_BUDGET, Precision
from flamino_core.model.precision import use_bf16_matmuls, use_int8_matmuls
from flamino_core.model.model_id import ModelId

ATTENTION_ENV = settings.ATTENTION.name  # auto | fused | xla | dot-product-attention | pallas-flash
PRECISION_ENV = settings.PRECISION.name  # fp32 (default) | bf16 | int8
PACKING_ENV = settings.PACKING.name  # auto (default) | on | off
PRECISIONS = tuple(p.value for p in Precision)
# How each mode is named wherever results are shown (the app's model panel, --verbose, the bench).
PRECISION_WORDS = {"fp32": "fp32",
                   "bf16": "bf16 matmuls with fp32 accumulation (opt-in; not reference numbers)",
                   "int8": "int8 weights and activations in the dense layers (opt-in; not reference numbers)"}
# The matrix products of fp32 mode on an accelerator. JAX's default there is one bf16 pass per
# product (TPU) or TF32 (recent GPUs): 6.7e-2 off HF's logits on a TPU v5e, measured. "highest"
# is true fp32 arithmetic (on a TPU, six bf16 passes); "high" (three passes, bf16_3x) is faster
# and is the default only if it holds the 1e-4 parity (docs/accelerators.md has the measurement).
# A CPU computes fp32 products in fp32 whatever this says, so nothing is set there.
MATMUL_PRECISION_ENV = settings.MATMUL_PRECISION.name  # highest (default) | high
EXACT_MATMUL_PRECISIONS = ("highest", "high")
DEFAULT_EXACT_MATMUL_PRECISION = "highest"
PACKING = ("auto", "on", "off")
# Tokens per forward pass (rows x padded width). On a CPU larger batches stop paying off once
# a batch's activations outgrow the caches; a GPU needs large batches to fill its cores.
TOKEN_BUDGET = {"cpu": DEFAULT_TOKEN_BUDGET, "gpu": 32768}
# The CPU flags that matter to flamino, in the order they are reported.
CPU_FEATURES = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8", "amx_tile",
                "asimd", "bf16", "sve")
# Flags that mean the CPU does bf16 dot products natively (x86: AVX512_BF16, AMX; Arm: BF16).
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")
# The bf16 mode is a speed option: on a CPU without bf16 arithmetic XLA emulates it (converts
# around fp32 products), slower than fp32 with none of its exactness (docs/benchmarks.md, the AVX2
# machine), so it is refused there (issue 52). This variable set to 1 runs it emulated anyway, for
# what needs bf16's numbers and not its speed: a test that builds a bf16 engine on a CI machine
# without the flags (it sets the variable itself, so a refusal elsewhere is still seen), accuracy
# studies (benchmarks/bf16_accuracy.py). The mode's label then says "emulated".
EMULATED_BF16_ENV = settings.ALLOW_EMULATED_BF16.name


class PrecisionRefused(ValueError):
    """A precision mode this machine would only emulate (bf16 on a CPU without bf16 arithmetic)."""


@dataclasses.dataclass(frozen=True)
class Hardware:
    """The machine as flamino sees it."""

    platform: str  # JAX's default backend: "cpu", "gpu" or "tpu"
    device: str  # the accelerator's name, or the CPU model
    cpu_features: tuple[str, ...]  # of CPU_FEATURES, the ones present
    native_bf16: bool  # the default device multiplies bf16 natively
    native_bf16_why: str


def cpu_from_cpuinfo(text: str) -> tuple[str, set[str]]:
    """(the CPU model, its flags) from the text of Linux's /proc/cpuinfo (x86's "model name" and
    "flags" lines, Arm's "Model" and "Features"; the first processor's)."""
    model, flags = "", set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "Model") and not model:
            model = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = set(value.split())
    return model, flags


def _cpu_from_proc() -> tuple[str, set[str]]:
    try:
        with open("/proc/cpuinfo") as handle:
            return cpu_from_cpuinfo(handle.read())
    except OSError:
        return "", set()


@functools.cache
def detect() -> Hardware:
    """Detect the CPU, the accelerator and native bf16 support (once per process)."""
    return hardware_from(*_cpu_from_proc(), jax.default_backend())


def hardware_from(model: str, flags: set[str], backend: str) -> Hardware:
    """The machine as flamino sees it from its CPU model, CPU flags (``cpu_from_cpuinfo``) and
    JAX's default backend: ``detect()``'s answer for this machine, anyone's for theirs."""
    model = model or platform.processor() or platform.machine() or "unknown CPU"
    features = tuple(f for f in CPU_FEATURES if f in flags)
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
    # fused kernel, which computes only each sequence's own keys, and on an accelerator, where
    # full rows pay for the masked keys (measured); XLA:CPU's paths would compute every key of
    # a packed row and mask most of them away.
    packing: bool = False
    # JAX's matmul precision the passes are traced under (``jax.default_matmul_precision``):
    # None on a CPU and in the opt-in modes (JAX's default), "highest"/"high" for fp32 elsewhere.
    matmul_precision: str | None = None
    # How the token budget was set on an accelerator (from the device's memory), and why the
    # precision is not the one asked (bf16 weights where fp32 cannot fit): said with the backend.
    budget_why: str = ""
    precision_why: str = ""
    # Several devices (``sharding.DevicePlan.describe``): "2 devices, rows split", "weights
    # sharded over 4 devices (...)"; "" on one.
    devices: str = ""
    # Batches dispatched before the first one's outputs are fetched: on an accelerator the next
    # batch computes while the host fetches and merges the last (both batches' outputs then sit on
    # the device, so the engine does it for small outputs only); a CPU's cores do both: one there.
    batches_ahead: int = 1

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
        """The precision mode in words, saying when it is not the reference's fp32 and, on an
        accelerator, how its matrix products run."""
        words = PRECISION_WORDS[self.precision]
        if self.matmul_precision:
            words += f" (matrix products at JAX precision '{self.matmul_precision}': float32 arithmetic)"
        elif self.precision == Precision.BF16 and self.hardware.platform != "cpu":
            words = ("bf16 weights and matmul inputs, fp32 accumulation and softmax "
                     "(opt-in fast mode; not reference numbers)")
        return f"{words}: {self.precision_why}" if self.precision_why else words

    def describe(self) -> str:
        """One line for logs, the CLI (--verbose), the app's model panel and the bench header."""
        hw = self.hardware
        where = hw.device if hw.device.upper().startswith(hw.platform.upper()) else f"{hw.platform.upper()} {hw.device}"
        if hw.platform == "cpu":
            where += f" ({' '.join(hw.cpu_features) or 'no AVX2'})"
        packed = "; sequences packed into shared rows" if self.packing else ""
        budget = f" ({self.budget_why})" if self.budget_why else ""
        devices = f"; {self.devices}" if self.devices else ""
        return (f"{where}{devices}; attention: {self.attention} ({self.attention_why}); {self.precision_words}; "
                f"token budget {self.token_budget}{budget}{packed}")


def _attention_for(requested: str, hw: Hardware, head_dim: int, precision: str) -> tuple[AttentionImpl, str]:
    """The implementation for this request and machine, and the reason (see ``Backend.reason``)."""
    kernel = fused_attention.status()
    # cuDNN's fused attention: on a GPU, on bf16 inputs (it has no fp32 kernel).
    on_cudnn = hw.platform == "gpu" and precision == Precision.BF16
    dot_product = AttentionImpl("dot-product-attention", "bfloat16" if on_cudnn else "float32", on_cudnn)
    flash = AttentionImpl("pallas-flash", "bfloat16")  # the fast mode's TPU kernel (bf16 inputs)
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
    if requested == "pallas-flash":
        if hw.platform != "tpu" or precision != Precision.BF16:
            raise ValueError("attention path 'pallas-flash' is a TPU kernel of the bf16 fast mode (bf16 inputs); "
                             f"this is {hw.platform} in {precision}")
        return flash, "requested"
    # auto
    if hw.platform == "tpu" and precision == Precision.BF16:
        return flash, ""  # the fast mode's packed and long rows (docs/accelerators.md)
    if hw.platform != "cpu":
        return dot_product, ""
    if not kernel.available:
        return AttentionImpl("xla"), f"fused kernel {kernel.reason}"
    if not fused_attention.supports(head_dim):
        return AttentionImpl("xla"), f"the fused kernel needs a head dimension divisible by 8, not {head_dim}"
    return AttentionImpl("fused"), ""


def choose(head_dim: int, attention: str | None = None, precision: str | None = None,
           token_budget: int | None = None, packing: str | None = None, emulated_ok: bool = False) -> Backend:
    """The execution choices for a model with this head dimension on this machine.

    Args:
      head_dim: the model's attention head dimension (the fused kernel needs a multiple of 8).
      attention: "auto" (default, or $FLAMINO_ATTENTION) or one of ``ATTENTION_PATHS``.
      precision: "fp32" (default, or $FLAMINO_PRECISION), "bf16" or "int8" (opt-in; outside the
        1e-4 parity, see docs/benchmarks.md for their measured cost).
      token_budget: tokens per batch (default: ``TOKEN_BUDGET`` for the platform).
      packing: "auto" (default, or $FLAMINO_PACKING: on with the fused kernel and on an
        accelerator), "on" or "off".
      emulated_ok: run bf16 emulated where the hardware has no bf16 arithmetic, labelled, instead of
        refusing it (``bf16_emulation``): a fold's opt-in bf16 stem, which any machine may run.

    Returns:
      A ``Backend``. Raises ValueError for an unknown or unavailable request.
    """
    hw = detect()
    attention = attention or settings.ATTENTION.get()
    precision, _ = requested_precision(precision)
    if attention not in ("auto", *ATTENTION_PATHS):
        raise ValueError(f"attention path {attention!r}: choose auto or one of {', '.join(ATTENTION_PATHS)}")
    packing = packing or settings.PACKING.get()
    if packing not in PACKING:
        raise ValueError(f"packing {packing!r}: choose one of {', '.join(PACKING)}")
    implementation, reason = _attention_for(attention, hw, head_dim, precision)
    emulated = bf16_emulation(hw, precision, emulated_ok)
    budget = token_budget or TOKEN_BUDGET.get(hw.platform, TOKEN_BUDGET["cpu"])
    # Packed rows on an accelerator: the chip's parity tests pass with them, and whole rows run the
    # 64-protein set 1.27x faster in fp32 and 1.16x in bf16 at t33 (docs/accelerators.md).
    packed = packing == "on" or (packing == "auto" and (implementation.path == "fused" or hw.platform != "cpu"))
    return Backend(implementation, reason, precision, budget, hw, packed, exact_matmul_precision(hw, precision),
                   precision_why=emulated, batches_ahead=1 if hw.platform == "cpu" else 2)


def bf16_emulation(hw: Hardware, precision: str, emulated_ok: bool = False) -> str:
    """Why ``precision`` runs emulated on ``hw``: "" unless it is bf16 on hardware without bf16
    arithmetic, where it is refused (``PrecisionRefused``, naming the reason) unless
    $FLAMINO_ALLOW_EMULATED_BF16 is 1 (``EMULATED_BF16_ENV``) or ``emulated_ok``; then the label's words."""
    if precision != Precision.BF16 or hw.native_bf16:
        return ""
    if emulated_ok:
        return f"emulated ({hw.native_bf16_why})"
    if settings.ALLOW_EMULATED_BF16.get():
        return f"emulated, {EMULATED_BF16_ENV}=1 ({hw.native_bf16_why}; slower than fp32)"
    raise PrecisionRefused(
        f"precision bf16 is refused on this machine ({hw.device}): {hw.native_bf16_why}. The bf16 mode "
        "only pays where the hardware multiplies bf16 (AVX512_BF16, AMX, Arm BF16 or an accelerator); "
        "emulated it is slower than fp32 and less exact. Use fp32 (the default: no --precision, "
        f"FLAMINO_PRECISION unset) or int8 (opt-in, any x86-64 CPU); {EMULATED_BF16_ENV}=1 runs bf16 emulated anyway "
        "(accuracy studies, tests).")


def refuse_precision(precision: str | None = None) -> None:
    """Refuse, before any weight is read, a precision mode this machine would only emulate
    (``bf16_emulation``): the CLI and the app call it before loading a model."""
    bf16_emulation(detect(), requested_precision(precision)[0])


def requested_precision(precision: str | None = None) -> tuple[str, bool]:
    """(the precision mode asked for, whether it was asked by name): the argument, else
    $FLAMINO_PRECISION, else fp32. Raises ValueError for an unknown mode."""
    chosen = precision or settings.PRECISION.get() or "fp32"
    if chosen not in PRECISIONS:
        raise ValueError(f"precision {chosen!r}: choose one of {', '.join(PRECISIONS)}")
    return chosen, bool(precision or settings.PRECISION.get())


def exact_matmul_precision(hw: Hardware, precision: str) -> str | None:
    """The JAX matmul precision that makes fp32 mode fp32 on this machine (see
    ``MATMUL_PRECISION_ENV``); None on a CPU and for the opt-in modes."""
    if hw.platform == "cpu" or precision != Precision.FP32:
        return None
    chosen = settings.MATMUL_PRECISION.get() or DEFAULT_EXACT_MATMUL_PRECISION
    if chosen not in EXACT_MATMUL_PRECISIONS:
        raise ValueError(f"{MATMUL_PRECISION_ENV}={chosen!r}: choose one of {', '.join(EXACT_MATMUL_PRECISIONS)} "
                         "(anything less is not fp32; the bf16 mode is the fast one)")
    return chosen


def configure(model, attention: str | None = None, precision: str | None = None,
              token_budget: int | None = None, packing: str | None = None, devices=None,
              resident: bool = False) -> Backend:
    """Choose the backend for ``model`` (a family's network) on this machine and set its matmul
    precision. The attention implementation is not stored on the model: the engine passes
    ``Backend.implementation`` to every call.

    Args: as ``choose``; ``devices``: the engine's ``sharding.DevicePlan`` (None: one device);
      ``resident``: ``model`` is part of a network already on the device in its precision (a fold's
      stem, ``engine/fold.py``): its weights are counted among the bytes in use, not added to them,
      and a bf16 precision the CPU would only emulate runs emulated, labelled (the fold's opt-in).
    Returns: the ``Backend`` the model now runs with.
    """
    backend = choose(model.config.head_dim, attention, precision, token_budget, packing, emulated_ok=resident)
    if backend.hardware.platform != "cpu":
        backend = _planned_for_device(backend, model.config, explicit=requested_precision(precision)[1],
                                      token_budget=token_budget, devices=devices, resident=resident)
    if devices is not None and devices.describe():
        backend = dataclasses.replace(backend, devices=devices.describe())
    if backend.precision == Precision.BF16:
        # On an accelerator the kernels are stored as bf16 (half the memory; the same numbers as
        # rounding them in every call, which stays the CPU's way: faster there, measured).
        # bf16 outputs from the block stack's dense layers too (``Bf16Linear``): on the TPU v5e the
        # 64-protein set at t33 ran 0.372 -> 0.336 s (33.9% -> 37.5% of the bf16 peak), the DMS
        # scores' Spearman with fp32's 0.99990 (0.99989 before; docs/accelerators.md).
        on_device = backend.hardware.platform != "cpu"
        use_bf16_matmuls(model, store_bf16=on_device, round_outputs=on_device)
    elif backend.precision == Precision.INT8:
        use_int8_matmuls(model)
    return backend


def _planned_for_device(backend: Backend, config, explicit: bool, token_budget: int | None, devices=None,
                        resident: bool = False) -> Backend:
    """An accelerator's backend with its precision and token budget planned from the device's
    memory (``device_memory``): bf16 weights where fp32 cannot fit and fp32 was not asked by
    name, a refusal where nothing fits, a budget that fits beside the weights (their share of
    one device when sharded; with rows split over N devices, N times one device's budget).
    ``resident``: the weights are on the device already (in its bytes in use): planned as if not."""
    memory = device_memory.device_memory()
    shards = devices.weight_shards if devices is not None else 1
    if resident and memory is not None:
        held = device_memory.weights_bytes(config, backend.precision) // shards
        memory = dataclasses.replace(memory, in_use=max(0, memory.in_use - held))
    precision, why = device_memory.fitting_precision(config, backend.precision, explicit, memory, shards)
    if precision != backend.precision:
        backend = dataclasses.replace(backend, precision=precision, precision_why=why,
                                      matmul_precision=exact_matmul_precision(backend.hardware, precision))
    if token_budget is None and memory is not None:
        budget, budget_why = device_memory.planned_token_budget(config, precision, memory, shards)
        if devices is not None and devices.mode == "rows split":
            budget, budget_why = budget * devices.count, f"{budget_why}; per device, times {devices.count} devices"
        backend = dataclasses.replace(backend, token_budget=budget, budget_why=budget_why)
    return backend


def refuse_before_loading(config, precision: str | None = None) -> None:
    """Refuse, before any weight is read or downloaded, a model that cannot fit on this
    accelerator in any precision the user allows (nothing happens on a CPU)."""
    chosen, explicit = requested_precision(precision)
    shards = sharding.plan_devices(config, chosen).weight_shards  # several devices may share the weights
    device_memory.fitting_precision(config, chosen, explicit, device_memory.device_memory(), shards)


def refuse_named_model(model_id: ModelId, precision: str | None = None) -> None:
    """``refuse_before_loading`` for a published model named by its preset (``esm2_t48_15B_UR50D``,
    ``random:esm2_t48_15B_UR50D``) in ``precision`` (None: $FLAMINO_PRECISION, else fp32): called
    before the download or the random draw. Other sources are checked when the engine is built
    from their config (``hardware.configure``)."""
    from flamino_core.model.config import PRESETS, ModelConfig

    refuse_precision(precision)  # bf16 this CPU would only emulate: before a download, whatever the source
    name = model_id.preset or (model_id.random_spec or "").partition(":")[0]
    if name in PRESETS:
        refuse_before_loading(ModelConfig.preset(name), precision)
