"""Several devices on one host (a TPU slice, several GPUs; on a CPU, XLA's forced host devices):
how one engine uses them, chosen once (``plan_devices``) when it is built.

- **rows split**: the model fits one device. Its state is replicated on every device and each
  batch's rows are split over them on a 1-D mesh (``NamedSharding(mesh, P("devices"))`` on the
  batch axis), so XLA runs the devices' shares in parallel. A row is computed whole on one
  device with the same operations as on a single device: the same numbers up to the
  summation order XLA's kernels pick for the smaller per-device batch.
- **weights sharded**: the weights do not fit one device (``device_memory.smallest_need``
  against one device's capacity). The block stack's dense kernels are split Megatron-style
  (``SHARD_OUTPUTS``: the projections into attention and into the feed-forward split on their
  output features; ``SHARD_INPUTS``: the projections out of them split on their input features),
  everything else replicated, rows whole on every device; XLA (GSPMD) inserts the all-reduce
  after each input-split product. Each device then holds about 1/N of the block weights.

Weights are placed straight into their shardings (``jax.device_put`` with a tree of
``NamedSharding``): each device receives its slice only. They are still read whole into host
memory first (``weights.param_files``); a sharded restore (Orbax's ``CheckpointManager`` with
``ArrayRestoreArgs(sharding=...)``) would read each device's slice from disk and is where a
model larger than host memory would need it (not done: every published model fits a host).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Literal

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from flamino_core import settings
from flamino_core.engine import device_memory
from flamino_core.wording import byte_size

# Pretend one device holds this many bytes (tests of the weight-sharded path on forced CPU
# devices; a smaller share of a chip shared with another process).
CAPACITY_ENV = settings.DEVICE_CAPACITY_BYTES.name
AXIS = "devices"
# The block stack's dense layers (the names every family's block uses) split on
# their output features (attention's q/k/v, the feed-forward's first product) and those split on
# their input features (the products that follow them): each device then computes its heads and
# its share of the feed-forward's hidden units, and one all-reduce per pair joins them.
SHARD_OUTPUTS = frozenset({"q_proj", "k_proj", "v_proj", "fc1", "gate_proj", "up_proj"})
SHARD_INPUTS = frozenset({"out_proj", "o_proj", "fc2", "down_proj"})

Mode = Literal["one device", "rows split", "weights sharded"]


@dataclasses.dataclass(frozen=True)
class DevicePlan:
    """How one engine uses the host's devices."""

    mode: Mode
    devices: tuple
    why: str = ""  # why the weights are sharded (bytes needed vs one device's)

    @property
    def count(self) -> int:
        return len(self.devices)

    @property
    def weight_shards(self) -> int:
        """Devices that share the weights' bytes (1: each device holds all of them)."""
        return self.count if self.mode == "weights sharded" else 1

    @functools.cached_property
    def mesh(self) -> Mesh:
        return Mesh(np.array(self.devices), (AXIS,))

    def describe(self) -> str:
        """What ``Backend.describe()`` says of the devices ("" on one)."""
        if self.mode == "rows split":
            return f"{self.count} devices, rows split"
        if self.mode == "weights sharded":
            return f"weights sharded over {self.count} devices ({self.why})"
        return ""

    def place(self, state):
        """The engine's state on its devices: each leaf straight into its sharding."""
        if self.mode == "one device":
            # One leaf at a time, each transfer finished before the next: sent as one tree, every
            # leaf's host-side staging can be alive at once. Loading 3B on a TPU v5e host reached
            # 29.7 GB of host memory for 11.4 GB of weights before it was stopped (issue #47); this
            # bounds the transfers' share to the largest leaf. Not yet measured on a chip.
            return jax.tree.map(lambda leaf: jax.block_until_ready(jax.device_put(leaf)), state)
        shardings = jax.tree_util.tree_map_with_path(
            lambda path, leaf: NamedSharding(self.mesh, self._spec(path, np.shape(leaf))), state)
        return jax.device_put(state, shardings)

    def _spec(self, path, shape) -> PartitionSpec:
        names = [getattr(key, "key", getattr(key, "name", None)) for key in path]
        names = [n for n in names if n != "value"]  # nnx's Variable wraps each array in .value
        if self.mode != "weights sharded" or "layers" not in names:
            return PartitionSpec()  # replicated
        # The block stack's leaves carry a leading layer axis: kernels (L, in, out), biases (L, out).
        axis = None
        if any(n in SHARD_OUTPUTS for n in names) and names[-1] in ("kernel", "bias"):
            axis = len(shape) - 1
        elif any(n in SHARD_INPUTS for n in names) and names[-1] == "kernel":
            axis = len(shape) - 2  # its bias is added after the all-reduce: replicated
        if axis is None or shape[axis] % self.count:
            return PartitionSpec()
        return PartitionSpec(*([None] * axis + [AXIS]))

    def wrap(self, function: Callable) -> Callable:
        """``function(state, *row arrays, **static)`` with its row arrays placed on the devices:
        split on the batch axis in ``rows split`` mode (padded to a multiple of the device count
        with copies of the last row, whose outputs are cut off again), replicated when the
        weights are sharded. On one device, ``function`` itself."""
        if self.mode == "one device":
            return function
        if self.mode == "weights sharded":
            whole = NamedSharding(self.mesh, PartitionSpec())
            return lambda state, *rows, **static: function(
                state, *(jax.device_put(np.asarray(r), whole) for r in rows), **static)
        split = NamedSharding(self.mesh, PartitionSpec(AXIS))

        def run(state, *rows, **static):
            # Filler rows rather than a batch left whole: a whole batch of B < N rows would run
            # all B rows on every device (the state is on all of them); padded, each device runs
            # one. The filler is a copy of a real row, so it is a valid input (an all-padding row
            # would divide by zero in token dropout's rescaling) and is never read back.
            count = len(rows[0])
            filler = -count % self.count
            padded = [np.concatenate([r, np.repeat(r[-1:], filler, axis=0)]) if filler else r
                      for r in map(np.asarray, rows)]
            out = function(state, *(jax.device_put(r, split) for r in padded), **static)
            return jax.tree.map(lambda a: a[:count], out) if filler else out

        return run


def device_capacity(device) -> int | None:
    """Bytes one device may hold: $FLAMINO_DEVICE_CAPACITY_BYTES, else what the device reports
    (``device_memory``); None on a CPU (host memory: weights always fit)."""
    capacity = settings.DEVICE_CAPACITY_BYTES.get()
    if capacity is not None:
        return capacity
    if device.platform == "cpu":
        return None
    memory = device_memory.device_memory()
    return memory.capacity if memory else None


def plan_devices(config, precision: str, devices=None) -> DevicePlan:
    """How a model of ``config`` in ``precision`` uses ``devices`` (default: ``jax.devices()``):
    one device; its rows split over several when the model fits one; its block weights sharded
    over them when it does not (fp32 sharded is preferred to bf16 weights on one device: the
    numbers stay the reference's)."""
    devices = tuple(jax.devices() if devices is None else devices)
    if len(devices) == 1:
        return DevicePlan("one device", devices)
    capacity = device_capacity(devices[0])
    need = device_memory.smallest_need(config, precision)
    if capacity is None or need <= capacity:
        return DevicePlan("rows split", devices)
    return DevicePlan("weights sharded", devices,
                      f"{config.name} needs {byte_size(need)} in {precision}, one device holds {byte_size(capacity)}")
