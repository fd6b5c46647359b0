"""Accelerator memory: what a model's weights take on the chip, the batch that fits beside them,
and a smaller batch when the chip runs out all the same.

On a CPU, batches are sized for the caches (``hardware.TOKEN_BUDGET``) and the weights live in
host memory. On a TPU or GPU the chip's own memory (HBM) holds the weights and every pass's
working memory, and it is small next to a host's: ESM-2 3B's weights alone are 11.4 GB of a TPU
v5e's 16.9 GB. So there the token budget is planned from what the device reports
(``memory_stats``: the bytes JAX may allocate, and those in use), a model that cannot fit is
refused before its weights are read, with the bytes needed and present, and an out-of-memory
that happens anyway (the plan is an estimate) halves the batch and runs again instead of ending
in XLA's traceback.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math

import jax

from flamino_core.engine import planner
from flamino_core.options import Precision
from flamino_core.wording import byte_size

log = logging.getLogger(__name__)

# The budget's bounds: one full-width row (a 1,022-residue window) and 64 such rows.
MIN_TOKEN_BUDGET = 1024
MAX_TOKEN_BUDGET = 65536
# The share of the memory left after the weights that the plan gives one pass: XLA also keeps
# the executable, fragmentation and the outputs copied back; a second engine may come later.
WORKING_SHARE = 0.5
# Bytes of working memory per token of a pass, in fp32 floats per token: one layer's live
# values under the layer scan (residual, norm, q/k/v, output and the per-layer outputs kept:
# about 10 widths; the feed-forward's hidden and its activation: ~3 widths of it; attention's
# scores, softmax and its gradient-free temporaries: ~4 per head and key), plus the logits.
RESIDUAL_FLOATS, FFN_FLOATS, SCORE_FLOATS = 10, 3, 4


class ModelTooLargeError(ValueError):
    """The model cannot fit on this device: the message gives the bytes needed and present."""


@dataclasses.dataclass(frozen=True)
class DeviceMemory:
    """The default device's memory as JAX reports it."""

    device: str  # its name, e.g. "TPU v5 lite"
    capacity: int  # bytes JAX may allocate on it
    in_use: int  # bytes allocated now (weights of engines already loaded)

    @property
    def free(self) -> int:
        return max(0, self.capacity - self.in_use)


# What JAX lets a program allocate on chips whose runtime may report no ``memory_stats`` (some
# sandboxes): the memory figures the vendors publish, less what the runtime keeps (a TPU v5e's
# 16 GiB show as 15.75 GiB where it reports).
KNOWN_CAPACITY = {"TPU v5 lite": int(15.75 * 2**30), "TPU v5e": int(15.75 * 2**30), "TPU v4": 32 * 2**30,
                  "TPU v5p": 95 * 2**30, "TPU v6 lite": 32 * 2**30}


def device_memory() -> DeviceMemory | None:
    """The accelerator's memory, or None on a CPU (host memory is ``memory.available_memory``'s)
    or on a chip that reports no figures and is not in ``KNOWN_CAPACITY``."""
    device = jax.devices()[0]
    if device.platform == "cpu":
        return None
    kind = getattr(device, "device_kind", device.platform)
    try:
        stats = device.memory_stats() or {}
    except Exception:  # noqa: BLE001  (a runtime without the call: the table below)
        stats = {}
    capacity = stats.get("bytes_limit") or stats.get("bytes_reservable_limit") or KNOWN_CAPACITY.get(kind)
    if not capacity:
        return None
    return DeviceMemory(kind, int(capacity), int(stats.get("bytes_in_use", 0)))


def weights_bytes(config, precision: str) -> int:
    """Bytes of the model's weights on the device in this precision mode: fp32 everywhere, or on
    an accelerator in bf16 mode every dense layer's kernel stored as bf16 (``precision.use_bf16_matmuls``)."""
    from flamino_core.weights.convert import expected_params, param_leaves

    total = 0
    for path, leaf in param_leaves(expected_params(config)):
        size = math.prod(leaf.shape)
        total += size * (2 if precision == Precision.BF16 and path[-1] == "kernel" else 4)
    return total


def bytes_per_token(config, width: int = 1024) -> int:
    """Working memory per token of a pass over rows ``width`` tokens wide (see the constants)."""
    # Two hidden widths for every family: a gated feed-forward's gate and value (SwiGLU), or a
    # GELU feed-forward's product and activation; an upper bound for the latter, said in words.
    ffn = 2 * config.ffn_dim
    floats = (RESIDUAL_FLOATS * config.embed_dim + FFN_FLOATS * ffn
              + SCORE_FLOATS * config.attention_heads * width + config.vocab_size)
    return 4 * floats


def planned_token_budget(config, precision: str, memory: DeviceMemory, shards: int = 1) -> tuple[int, str]:
    """(tokens per pass, how it was planned in words) for this model beside its weights (their
    1/``shards`` on each device when they are sharded, ``sharding``)."""
    weights = weights_bytes(config, precision) // shards
    room = memory.free - weights
    tokens = int(room * WORKING_SHARE) // bytes_per_token(config)
    budget = max(MIN_TOKEN_BUDGET, min(MAX_TOKEN_BUDGET, planner.pow2_at_most(tokens)))
    return budget, (f"planned from the device's memory: {byte_size(memory.capacity)}, weights "
                    f"{byte_size(weights)}, {byte_size(max(room, 0))} left for passes")


def smallest_need(config, precision: str, shards: int = 1) -> int:
    """Bytes the model needs on one device at the least: its weights (their 1/``shards`` when
    sharded over several devices, ``sharding``) and one full-width row's pass."""
    return weights_bytes(config, precision) // shards + MIN_TOKEN_BUDGET * bytes_per_token(config)


def fitting_precision(config, precision: str, explicit: bool, memory: DeviceMemory | None,
                      shards: int = 1) -> tuple[str, str]:
    """The precision the model runs in on this device, and why when it is not the one asked.

    fp32 is the default; where fp32 weights cannot fit and the user did not ask for fp32 by
    name, bf16 weights (half the bytes) are used and said. Raises ``ModelTooLargeError`` with
    the bytes needed and present when nothing fits. ``shards``: devices the weights are split
    over (``sharding.plan_devices``); the bytes are then one device's.
    """
    if memory is None or precision == Precision.INT8 or smallest_need(config, precision, shards) <= memory.free:
        return precision, ""
    need = smallest_need(config, precision, shards)
    if precision == Precision.FP32 and not explicit and smallest_need(config, "bf16", shards) <= memory.free:
        return "bf16", (f"bf16 weights: fp32 needs {byte_size(need)} on the {memory.device}, which has "
                        f"{byte_size(memory.free)} free")
    bf16_need = smallest_need(config, Precision.BF16, shards)
    smaller = "" if precision == Precision.BF16 else f" (bf16 weights: {byte_size(bf16_need)})"
    raise ModelTooLargeError(
        f"{config.name} needs {byte_size(need)} on the {memory.device} in {precision} (its weights "
        f"{byte_size(weights_bytes(config, precision) // shards)}{' a device' if shards > 1 else ''} and one "
        f"1,024-token pass){smaller}; the device has "
        f"{byte_size(memory.free)} free of {byte_size(memory.capacity)}. Choose a smaller model, or run on a "
        "host with more device memory (several devices: docs/accelerators.md)")


def is_out_of_memory(error: BaseException) -> bool:
    """An allocation the device refused (XLA's RESOURCE_EXHAUSTED), as opposed to a bug."""
    text = str(error)
    return "RESOURCE_EXHAUSTED" in text or "Out of memory" in text or "out of memory" in text


def retry_smaller_batches(method):
    """Run an ``Engine`` method; when the device runs out of memory, halve the engine's token
    budget and run it again (each method plans its batches from the budget, so the rerun is the
    same work in smaller batches: the same numbers up to summation order). Below one
    full-width row there is nothing smaller to try: a ``MemoryError`` says so in words."""

    @functools.wraps(method)
    def run(engine, *args, **kwargs):
        while True:
            try:
                return method(engine, *args, **kwargs)
            except jax.errors.JaxRuntimeError as error:
                if not is_out_of_memory(error):
                    raise
                if engine.token_budget <= MIN_TOKEN_BUDGET:
                    raise MemoryError(
                        f"the {engine.backend.hardware.device} ran out of memory even for one "
                        f"{engine.token_budget}-token row of {engine.config.name}: analyse shorter "
                        "sequences (--long window) or choose a smaller model") from None
                engine.token_budget //= 2
                log.warning("device out of memory: running again with %d tokens per pass", engine.token_budget)

    return run
