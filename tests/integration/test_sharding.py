"""Several devices (``engine.sharding``), on the CPU with XLA's forced host devices: rows split
over 2 and 4 devices, and weights sharded over them (one device's capacity pretended small with
$FLAMINO_DEVICE_CAPACITY_BYTES), give one device's numbers, in plain and masked passes, for real
proteins; the sharded kernels really are split. Each device count runs in a subprocess (the count
is fixed when JAX starts); the one-device reference runs in this process.

Tolerance 1e-5 (absolute, on logits and hidden states of order 1-10): rows split run each row
whole on one device with the same operations, so only the summation order XLA's CPU kernels pick
for a smaller batch may differ (measured: identical); weights sharded add the partial products of
each input-split projection (attention's output, the feed-forward's second product) across devices
in an all-reduce, a different order of the same fp32 sums than one dot product over all features:
rounding of order sqrt(features) * 2**-24 of the terms per layer: measured at most 4.6e-6 (ESM-2 8M
on 2 devices, masked log-probabilities included; rows split: 0). Deterministic: the same program on
the same inputs, so the margin (2x) does not flake.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

TOLERANCE = 1e-5
MODELS = ("random:tiny", "random:esm2_t6_8M_UR50D")
MASKED_POSITIONS = list(range(0, 40, 5))  # 8 masked rows: split over 2 and 4 devices
WORKER = """
import json, os, sys
sys.path.insert(0, {tests!r})
import jax, numpy as np
from test_sharding import outputs
from flamino_core.engine import sharding
from flamino_core.engine.engine import Engine
from flamino_core.weights.loading import load_weights
sequences, checkpoints, out = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
arrays, facts = {{}}, {{"devices": len(jax.devices())}}
for model, checkpoint in checkpoints.items():
    weights = load_weights(checkpoint)  # the parent's random draw, read back (drawing takes ~20 s)
    for mode, capacity in (("rows", None), ("weights", "1")):
        os.environ.pop(sharding.CAPACITY_ENV, None)
        if capacity:
            os.environ[sharding.CAPACITY_ENV] = capacity  # one byte: nothing fits one device
        engine = Engine(weights)
        arrays.update({{f"{{model}}|{{mode}}|{{k}}": v for k, v in outputs(engine, sequences).items()}})
        layers = engine.state["layers"]
        kernels = {{"fc1": layers["fc1"]["kernel"].value, "fc2": layers["fc2"]["kernel"].value,
                    "norm": layers["final_layer_norm"]["scale"].value}}
        facts[f"{{model}}|{{mode}}"] = {{
            "describe": engine.backend.describe(),
            "specs": {{n: str(a.sharding.spec) for n, a in kernels.items()}},
            "shard_shapes": {{n: [list(s.data.shape) for s in a.addressable_shards] for n, a in kernels.items()}},
            "shapes": {{n: list(a.shape) for n, a in kernels.items()}},
        }}
np.savez(out, **arrays)
print(json.dumps(facts))
"""


def outputs(engine, sequences: list[str]) -> dict[str, np.ndarray]:
    """What the test compares: logits and final hidden states of a set (two packed rows: split over
    2 devices, padded with filler rows on 4) and masked passes (8 rows)."""
    result = {}
    for i, out in enumerate(engine.run(sequences, repr_layers=(-1,))):
        result[f"logits{i}"], result[f"final{i}"] = out.logits, out.final
    result["masked"] = engine.compute_masked(sequences[0], MASKED_POSITIONS)
    return result


@pytest.fixture(scope="module")
def proteins(real_sequences) -> list[str]:
    """Seven real proteins of 150-200 residues: more tokens than one packed row holds (1,024)."""
    chosen = sorted((s for s in real_sequences.values() if 150 <= len(s) <= 200), key=len)
    assert len(chosen) >= 7 and sum(map(len, chosen[:7])) + 14 > 1024
    return chosen[:7]


@pytest.fixture(scope="module")
def weights():
    from flamino_core.weights.loading import load_weights

    return {model: load_weights(model) for model in MODELS}


@pytest.fixture(scope="module")
def checkpoints(weights, tmp_path_factory) -> dict[str, str]:
    """Each model's weights written as a flamino checkpoint, for the subprocesses to read."""
    from flamino_core.weights.loading import save_checkpoint

    folder = tmp_path_factory.mktemp("sharding")
    return {model: str(save_checkpoint(folder / model.replace(":", "-"), w.config, w.params, w.source, w.is_random))
            for model, w in weights.items()}


@pytest.fixture(scope="module")
def one_device(proteins, weights) -> dict[str, np.ndarray]:
    from flamino_core.engine.engine import Engine

    assert len(jax.devices()) == 1, "the reference must run on one device (this process sees several)"
    return {f"{model}|{k}": v for model in MODELS for k, v in outputs(Engine(weights[model]), proteins).items()}


def _on_devices(count: int, models: tuple[str, ...], proteins, checkpoints, tmp_path) -> tuple[dict, dict]:
    out = tmp_path / f"devices{count}.npz"
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": f"--xla_force_host_platform_device_count={count}"}
    done = subprocess.run([sys.executable, "-c", WORKER.format(tests=str(Path(__file__).parent)),
                           json.dumps(proteins), json.dumps({m: checkpoints[m] for m in models}), str(out)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(np.load(out)), json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("count, models", [(2, MODELS), (4, MODELS[1:])])
def test_several_devices_give_one_devices_numbers(count, models, proteins, checkpoints, one_device, tmp_path):
    arrays, facts = _on_devices(count, models, proteins, checkpoints, tmp_path)
    assert facts["devices"] == count
    for model in models:
        rows, weights = facts[f"{model}|rows"], facts[f"{model}|weights"]
        assert f"{count} devices, rows split" in rows["describe"]
        assert f"weights sharded over {count} devices" in weights["describe"]
        # Rows split: the state is whole on every device.
        assert rows["specs"]["fc1"] == "P()"
        assert all(shape == rows["shapes"]["fc1"] for shape in rows["shard_shapes"]["fc1"])
        # Weights sharded: fc1 on its output features, fc2 on its input features, a norm whole;
        # each device holds 1/count of each kernel.
        layers, d_in, d_out = weights["shapes"]["fc1"]
        assert weights["shard_shapes"]["fc1"] == [[layers, d_in, d_out // count]] * count
        assert weights["shard_shapes"]["fc2"] == [[layers, d_out // count, d_in]] * count
        assert weights["specs"]["norm"] == "P()"
        for mode in ("rows", "weights"):
            for key in (k for k in one_device if k.startswith(f"{model}|")):
                got = arrays[f"{model}|{mode}|{key.split('|', 1)[1]}"]
                difference = np.abs(got - one_device[key]).max()
                assert difference <= TOLERANCE, f"{model} {mode} on {count} devices, {key}: {difference:.2e}"


def test_plan_on_one_device_changes_nothing():
    from flamino_core.model.config import ModelConfig
    from flamino_core.engine import sharding

    plan = sharding.plan_devices(ModelConfig.preset("esm2_t6_8M_UR50D"), "fp32", jax.devices()[:1])
    assert plan.mode == "one device" and plan.describe() == "" and plan.weight_shards == 1
    forward = object()
    assert plan.wrap(forward) is forward  # the compiled function itself: numbers and compilations as before
