"""ESM C 6B (``ESMC-6B``, Biohub 2026) and the 2026 ESM C checkpoints as models of the ESM C family.

- The published layout: transformers' ``EsmcForMaskedLM`` folder written by ``save_pretrained`` with
  6B's real width (2,560; 40 heads of 64; SwiGLU 6,912; the 64-wide head) at reduced depth (2 of
  its 80 layers), its weights drawn well away from the default initialisation
  (family_checkpoints.make_hf_esmc), split into shards with ``model.safetensors.index.json`` as
  transformers writes a model larger than ``max_shard_size``. Loaded as ``flamino embed -m FOLDER``
  loads it and compared with EsmcForMaskedLM: logits and every hidden state within
  test_parity.py's 1e-4 absolute + 1e-5 relative (fp32 summation order).
- The real shape: 80 layers built and run with ``jax.eval_shape`` only (no weights in memory):
  6,352,005,184 parameters, transformers' default ``EsmcConfig`` (its 6B) read to the preset.
- The chip: fp32 6B (25.4 GB of weights) does not fit one 16 GiB TPU v5e; bf16 weights do
  (12.7 GB), labelled; fp32 weights sharded over two chips do (12.7 GB each).
- Several devices: the reduced-depth real-width checkpoint with its weights sharded over 2
  forced CPU host devices (test_sharding.py's way), against EsmcForMaskedLM within the same bound.
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
import torch
from flax import nnx

from flamino_core import Engine, load_weights
from flamino_core.alphabet import batch_encode
from flamino_core.engine import device_memory, sharding
from flamino_core.model.config import ModelConfig
from flamino_core.model.families import FAMILIES, PRESETS, preset_name
from conftest import checkpoint_seed
from family_checkpoints import make_hf_esmc
from test_family_parity import compare_forward, hf_esmc_call
from test_parity import close

PARAMETERS_6B = 6_352_005_184  # transformers' EsmcForMaskedLM(EsmcConfig()), counted on the meta device
SHALLOW_6B = ModelConfig.esmc(2, 2560, 40, name="esmc-6b-t2")  # 6B's width, 2 of its 80 layers
V5E = device_memory.DeviceMemory("TPU v5 lite", int(15.75 * 2**30), 0)
WORKER = """
import json, os, sys
import numpy as np
from flamino_core.engine import sharding
from flamino_core.engine.engine import Engine
from flamino_core.weights.loading import load_weights
sequences, checkpoint, out = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
os.environ[sharding.CAPACITY_ENV] = "1"  # one byte: nothing fits one device, the weights are sharded
engine = Engine(load_weights(checkpoint))
arrays = {}
for i, result in enumerate(engine.run(sequences, repr_layers=(0, 1, 2))):
    arrays[f"logits{i}"] = result.logits
    arrays.update({f"hidden{i}_{layer}": h for layer, h in result.representations.items()})
np.savez(out, **arrays)
gate = engine.state["layers"]["mlp"]["gate_proj"]["kernel"].value
down = engine.state["layers"]["mlp"]["down_proj"]["kernel"].value
print(json.dumps({"describe": engine.backend.describe(),
                  "gate": [list(s.data.shape) for s in gate.addressable_shards],
                  "down": [list(s.data.shape) for s in down.addressable_shards]}))
"""


@pytest.fixture(scope="module")
def shallow_6b(tmp_path_factory):
    """EsmcForMaskedLM at 6B's width, 2 layers, saved in shards (about 640 MB of fp32)."""
    hf = make_hf_esmc(SHALLOW_6B, checkpoint_seed("esmc", "6b"))
    folder = tmp_path_factory.mktemp("esmc-6b") / "ESMC-6B-t2"
    hf.save_pretrained(folder, max_shard_size="200MB")
    return hf, folder


@pytest.fixture(scope="module")
def proteins(real_sequences) -> list[str]:
    return sorted((s for s in real_sequences.values() if 40 <= len(s) <= 90), key=len)[:2]


def test_the_sharded_published_layout_matches_transformers(shallow_6b, proteins):
    hf, folder = shallow_6b
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    shards = set(index["weight_map"].values())
    assert len(shards) > 1 and not (folder / "model.safetensors").exists()  # really sharded
    weights = load_weights(str(folder))
    assert (weights.config.family, weights.config.embed_dim, weights.config.ffn_dim) == ("esmc", 2560, 6912)
    # Held once while converting (docs/models.md measures it): the shards mapped, not read, and
    # the stacked layers C-ordered, so that writing the cache copies none of them.
    from flamino_core.weights.param_files import map_safetensors

    assert all(isinstance(a, np.memmap) for a in map_safetensors(folder / sorted(shards)[0]).values())
    assert all(leaf.flags.c_contiguous for leaf in jax.tree.leaves(weights.params["layers"]))
    compare_forward(Engine(weights), hf_esmc_call(hf), proteins, SHALLOW_6B.num_layers, "ESM C 6B width, 2 layers")


def test_a_missing_shard_is_named(shallow_6b, tmp_path):
    _, folder = shallow_6b
    partial = tmp_path / "partial"
    partial.mkdir()
    for f in folder.iterdir():
        (partial / f.name).symlink_to(f)
    missing = sorted(json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"].values())[-1]
    (partial / missing).unlink()
    from flamino_core.weights.loading import ModelError

    with pytest.raises(ModelError, match=missing):
        load_weights(str(partial))


def test_the_real_80_layer_shape_without_memory():
    from transformers import EsmcConfig, EsmcForMaskedLM

    config = ModelConfig.preset("ESMC-6B")
    # transformers' default EsmcConfig is 6B's ("biohub/ESMC-6B style configuration").
    assert ModelConfig.from_hf_config(EsmcConfig().to_dict(), name="ESMC-6B") == config
    with torch.device("meta"):
        assert sum(p.numel() for p in EsmcForMaskedLM(EsmcConfig()).parameters()) == PARAMETERS_6B
    network = FAMILIES["esmc"].network_class()
    abstract = nnx.eval_shape(lambda: network(config, nnx.Rngs(0)))
    assert sum(x.size for x in jax.tree.leaves(nnx.state(abstract, nnx.Param))) == PARAMETERS_6B
    graphdef, state = nnx.split(abstract)
    assert state["layers"]["mlp"]["gate_proj"]["kernel"].value.shape == (80, 2560, 6912)
    tokens = jax.ShapeDtypeStruct((1, 130), np.int32)
    out = jax.eval_shape(lambda s, t: nnx.merge(graphdef, s)(t).logits, state, tokens)
    assert out.shape == (1, 130, 64) and out.dtype == np.float32


def test_presets_name_the_2026_checkpoints_beside_the_2024_ones():
    for name, repo, layers in (("ESMC-300M", "biohub/ESMC-300M", 30), ("ESMC-600M", "biohub/ESMC-600M", 36),
                               ("ESMC-6B", "biohub/ESMC-6B", 80)):
        assert PRESETS[name].repo == repo and PRESETS[name].file is None and PRESETS[name].layers == layers
        assert preset_name(repo) == preset_name(repo.replace("biohub", "Biohub")) == name
        assert PRESETS[name].licence.startswith("MIT")
    # The 2024-12 identifiers stay as they were, with the licence their own cards name.
    assert preset_name("EvolutionaryScale/esmc-300m-2024-12") == "esmc_300m_2024_12_v0"
    assert "Cambrian Non-Commercial" in PRESETS["esmc_600m_2024_12_v0"].licence


def test_6b_on_one_16_gib_chip_is_bf16_and_fp32_is_sharded_over_two(monkeypatch):
    config = ModelConfig.preset("ESMC-6B")
    assert 25.4e9 < device_memory.weights_bytes(config, "fp32") < 25.5e9
    assert 12.7e9 < device_memory.weights_bytes(config, "bf16") < 12.8e9
    precision, why = device_memory.fitting_precision(config, "fp32", False, V5E)
    assert precision == "bf16" and "fp32 needs 24.5 GiB" in why  # 26.35e9 bytes (weights and one pass) / 2^30
    with pytest.raises(device_memory.ModelTooLargeError, match=r"ESMC-6B needs 24\.5 GiB .* in fp32"):
        device_memory.fitting_precision(config, "fp32", True, V5E)
    assert device_memory.fitting_precision(config, "fp32", True, V5E, shards=2) == ("fp32", "")
    monkeypatch.setenv(sharding.CAPACITY_ENV, str(V5E.capacity))
    plan = sharding.plan_devices(config, "fp32", [jax.devices()[0]] * 2)
    assert plan.mode == "weights sharded" and "ESMC-6B needs 24.5 GiB in fp32" in plan.describe()


def test_weights_sharded_over_two_host_devices_match_transformers(shallow_6b, proteins, tmp_path):
    hf, folder = shallow_6b
    out = tmp_path / "sharded.npz"
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    done = subprocess.run([sys.executable, "-c", WORKER, json.dumps(proteins), str(folder), str(out)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    assert "weights sharded over 2 devices" in facts["describe"]
    assert facts["gate"] == [[2, 2560, 6912 // 2]] * 2 and facts["down"] == [[2, 6912 // 2, 2560]] * 2
    arrays = np.load(out)
    logits, hidden, _ = hf_esmc_call(hf)(batch_encode(proteins))
    for i, seq in enumerate(proteins):
        close(arrays[f"logits{i}"], logits[i, 1:len(seq) + 1], f"sharded logits of {i}")
        for layer in range(3):
            close(arrays[f"hidden{i}_{layer}"], hidden[layer][i, 1:len(seq) + 1], f"sharded layer {layer} of {i}")


def test_flamino_models_says_each_checkpoints_licence(capsys):
    from flamino_core.cli import main

    assert main(["models", "--family", "esmc"]) == 0
    said = dict(zip(*[iter(capsys.readouterr().out.splitlines())] * 2))  # name line, licence line
    licences = {line.split()[0]: licence.strip() for line, licence in said.items()}
    assert list(licences) == ["esmc_300m_2024_12_v0", "esmc_600m_2024_12_v0", "ESMC-300M", "ESMC-600M", "ESMC-6B"]
    assert licences["esmc_300m_2024_12_v0"].startswith("licence: EvolutionaryScale Cambrian Open License")
    assert licences["esmc_600m_2024_12_v0"].startswith("licence: EvolutionaryScale Cambrian Non-Commercial License")
    assert all(licences[n].startswith("licence: MIT") for n in ("ESMC-300M", "ESMC-600M", "ESMC-6B"))


def test_a_sharded_preset_is_fetched_shard_by_shard(tmp_path, monkeypatch):
    """The Hub path (huggingface_hub's download replaced by the folder): no model.safetensors, so
    the index, then every shard it names; offline (the tests' HF_HUB_OFFLINE) the Hub's cache is
    asked for the same files."""
    import huggingface_hub
    from huggingface_hub.errors import EntryNotFoundError

    from flamino_core.model.families import Preset

    folder = tmp_path / "ESMC-tiny"
    make_hf_esmc(ModelConfig.esmc(2, 128, 2), checkpoint_seed("esmc", "hub")).save_pretrained(
        folder, max_shard_size="300KB")
    requested = []

    def fake_download(repo_id, filename, **kwargs):
        requested.append(filename)
        if not (folder / filename).exists():
            raise EntryNotFoundError(filename)
        return str(folder / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    monkeypatch.setitem(PRESETS, "ESMC-tiny", Preset("esmc", 2, 128, 2, "tiny", "biohub/ESMC-tiny"))
    weights = load_weights("Biohub/ESMC-tiny")
    shards = sorted(set(json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"].values()))
    assert len(shards) > 1 and requested[:3] == ["config.json", "model.safetensors", "model.safetensors.index.json"]
    assert sorted(requested[3:]) == shards and weights.config.num_layers == 2
