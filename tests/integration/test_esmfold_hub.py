"""esmfold_v1 from the Hub (flamino_core/weights/esmfold_hub.py), without the network: a small
ESMFold written by transformers' own ``save_pretrained`` and put in the published layout (the
language model's tensors in fp16, as facebook/esmfold_v1's model.safetensors stores them), then
(a) placed in a Hugging Face cache read with HF_HUB_OFFLINE, (b) served by a stand-in for
``hf_hub_download`` on the download path. The preset's expected shape is set to the small one
for these tests (a real esmfold_v1 checkpoint is 8.4 GB); the real expectation refuses it."""

from __future__ import annotations

import shutil

import jax
import numpy as np
import pytest
from conftest import checkpoint_seed
from esmfold_checkpoints import make_hf_esmfold, write_hf_esmfold
from flax import nnx

from flamino_core.model.esmfold.config import FoldConfig
from flamino_core.weights import esmfold_hub
from flamino_core.weights.esmfold import load_esmfold, load_fold_model
from flamino_core.weights.model_cache import ModelNotAvailableError
from flamino_core.model.model_id import ModelId

REPO = "facebook/esmfold_v1"
REVISION = "0" * 40  # a snapshot folder's name is its commit


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """(folder in the published layout, the fp32 folder it was made from)."""
    import json

    from safetensors.numpy import load_file, save_file

    fp32 = write_hf_esmfold(make_hf_esmfold(checkpoint_seed("esmfold", "hub")), tmp_path_factory.mktemp("fp32") / "m")
    state = load_file(str(fp32 / "model.safetensors"))
    half = {k: v.astype(np.float16) if k.startswith("esm.") else v for k, v in state.items()}
    assert sum(v.dtype == np.float16 for v in half.values()) > 10  # the stem's tensors
    folder = tmp_path_factory.mktemp("published") / "esmfold_v1"
    folder.mkdir()
    save_file(half, str(folder / "model.safetensors"))
    config = json.loads((fp32 / "config.json").read_text())
    config["esmfold_config"]["fp16_esm"] = True  # as the published config says
    (folder / "config.json").write_text(json.dumps(config))
    return folder, fp32


@pytest.fixture
def small_preset(published, monkeypatch):
    import json

    folder, _ = published
    small = FoldConfig.from_hf_config(json.loads((folder / "config.json").read_text()), name="esmfold_v1")
    monkeypatch.setitem(esmfold_hub.FOLD_PRESETS, "esmfold_v1",
                        esmfold_hub.FoldPreset(REPO, lambda: small, "MIT"))


def hub_cache(root, folder):
    """A Hugging Face cache holding ``folder``'s files as facebook/esmfold_v1's main revision."""
    repo = root / "models--facebook--esmfold_v1"
    snapshot = repo / "snapshots" / REVISION
    snapshot.mkdir(parents=True)
    for file in folder.iterdir():
        shutil.copy(file, snapshot / file.name)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REVISION)
    return root


def leaves(model) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree.leaves(nnx.state(model))]


def test_offline_from_the_hub_cache_every_weight_fp32_and_the_fp16_stem_exact(published, small_preset, tmp_path,
                                                                             monkeypatch):
    import huggingface_hub.constants

    folder, fp32 = published
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub_cache(tmp_path / "hub", folder)))
    model, is_random = load_fold_model(ModelId.parse("esmfold_v1"))
    assert not is_random
    assert all(x.dtype == np.float32 for x in leaves(model) if np.issubdtype(x.dtype, np.floating))
    # Against the fp32 original loaded directly: the trunk identical, the stem within fp16's
    # rounding of values of order 0.1-1 (a relative 2^-11), never more.
    original = leaves(load_esmfold(fp32))
    got = leaves(load_fold_model(ModelId.parse("facebook/esmfold_v1"))[0])
    assert len(got) == len(original)
    worst = max(float(np.max(np.abs(a - b) / (np.abs(b) + 1e-3))) for a, b in zip(got, original) if a.size)
    assert 0 < worst <= 2 ** -11 * 1.01
    same = sum(np.array_equal(a, b) for a, b in zip(got, original))
    assert same > len(original) // 2  # the trunk and heads were fp32 in the file: bit-equal


def test_the_download_path_fetches_config_and_weights_into_the_hub_cache(published, small_preset, monkeypatch):
    import huggingface_hub

    folder, _ = published
    requested = []

    def fake_download(repo_id, filename, revision=None, local_files_only=False, **kwargs):
        requested.append((repo_id, filename, revision, local_files_only, "tqdm_class" in kwargs))
        return str(folder / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    monkeypatch.setattr("flamino_core.weights.hub.hub_reachable", lambda timeout=3.0: True)
    said = []
    linked = esmfold_hub.fold_preset_folder("esmfold_v1", lambda f, text: said.append(text))
    assert requested == [(REPO, "config.json", None, False, True), (REPO, "model.safetensors", None, False, True)]
    assert said and REPO in said[0]
    assert {p.name: p.resolve() for p in linked.iterdir()} == {
        "config.json": (folder / "config.json").resolve(), "model.safetensors": (folder / "model.safetensors").resolve()}


def test_weights_missing_on_main_are_taken_from_the_hubs_safetensors_conversion(published, small_preset, monkeypatch):
    """facebook/esmfold_v1's main revision may hold only pytorch_model.bin: the safetensors file
    is then read from the Hub's conversion (refs/pr/4), the config still from main."""
    import huggingface_hub
    from huggingface_hub.errors import EntryNotFoundError

    folder, _ = published
    requested = []

    def fake_download(repo_id, filename, revision=None, **kwargs):
        requested.append((filename, revision))
        if filename == "model.safetensors" and revision is None:
            raise EntryNotFoundError("404: model.safetensors is not on main")
        return str(folder / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    monkeypatch.setattr("flamino_core.weights.hub.hub_reachable", lambda timeout=3.0: True)
    model, _ = load_fold_model(ModelId.parse("esmfold_v1"))
    assert requested == [("config.json", None), ("model.safetensors", None), ("model.safetensors", "refs/pr/4")]
    assert model.config.trunk.num_blocks == 2


def test_offline_without_the_weights_says_how_to_get_them_and_the_licence(tmp_path, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty"))
    with pytest.raises(ModelNotAvailableError) as info:
        load_fold_model(ModelId.parse("esmfold_v1"))
    message = str(info.value)
    assert "huggingface.co/facebook/esmfold_v1" in message and "HF_HOME" in message and "MIT licence" in message


def test_the_real_expectation_refuses_a_checkpoint_of_another_shape(published, tmp_path, monkeypatch):
    import huggingface_hub.constants

    folder, _ = published
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub_cache(tmp_path / "hub", folder)))
    with pytest.raises(ValueError, match="another shape than esmfold_v1.*trunk.num_blocks: the checkpoint has 2"):
        load_fold_model(ModelId.parse("esmfold_v1"))
