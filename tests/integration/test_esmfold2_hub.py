"""The published ESMFold2 checkpoints by name (``weights/esmfold2_hub.py``): which identifiers are
ESMFold2, the download path (``hf_hub_download`` replaced by a stand-in that serves files and
records what was asked), a repository whose config.json is not ESMFold2's refused before its
weights are fetched, and the offline message. No network: the stand-in and ``HF_HUB_OFFLINE`` cover both ways."""

from __future__ import annotations

import json

import huggingface_hub
import pytest

from flamino_core.weights import esmfold2_hub as hub
from flamino_core.weights.model_cache import ModelNotAvailableError
from flamino_core.model.model_id import ModelId


@pytest.mark.parametrize("identifier, expected", [
    ("esmfold2", True), ("esmfold2-fast", True), ("biohub/ESMFold2-Fast", True), ("ESMFold2", True),
    ("random:esmfold2-tiny", True), ("random:esmfold2-tiny:4", True), ("random:esmfold-tiny", False),
    ("esmfold_v1", False), ("esm2_t6_8M_UR50D", False),
])
def test_which_identifiers_are_esmfold2(identifier, expected):
    assert (ModelId.parse(identifier).fold_family() == "esmfold2") is expected


def test_a_folder_is_esmfold2_by_its_config(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "esmfold2"}))
    assert ModelId.parse(str(tmp_path)).fold_family() == "esmfold2"
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "esm"}))
    assert ModelId.parse(str(tmp_path)).fold_family() == "esmfold"


def _serve(monkeypatch, tmp_path, config: dict, shards: dict | None = None):
    """A stand-in Hub holding ``config.json`` and a placeholder ``model.safetensors`` (or, with
    ``shards``, an index with that weight map and no ``model.safetensors``); returns the list of
    (repo, file) asked for."""
    from huggingface_hub.errors import EntryNotFoundError

    asked = []

    def fake_download(repo, file, **kwargs):
        asked.append((repo, file))
        if shards is not None and file == "model.safetensors":
            raise EntryNotFoundError(f"{repo} has no {file}")
        path = tmp_path / "served" / file
        if file == hub.INDEX:
            path.parent.mkdir(exist_ok=True)
            path.write_text(json.dumps({"weight_map": shards}))
            return str(path)
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(config) if file == "config.json" else "weights")
        return str(path)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    monkeypatch.setattr("flamino_core.weights.hub.hub_reachable", lambda timeout=3.0: True)
    monkeypatch.setenv("FLAMINO_CACHE", str(tmp_path / "cache"))
    return asked


def test_the_fast_preset_is_fetched_into_a_linked_folder(monkeypatch, tmp_path):
    asked = _serve(monkeypatch, tmp_path, {"model_type": "esmfold2", "msa_encoder": {"enabled": False}})
    folder = hub.preset_folder("esmfold2-fast")
    assert asked == [("biohub/ESMFold2-Fast", "config.json"), ("biohub/ESMFold2-Fast", "model.safetensors")]
    assert (folder / "config.json").is_symlink() and (folder / "model.safetensors").read_text() == "weights"


def test_the_full_preset_is_fetched_from_its_own_repository(monkeypatch, tmp_path):
    asked = _serve(monkeypatch, tmp_path, {"model_type": "esmfold2", "msa_encoder": {"enabled": True}})
    hub.preset_folder("esmfold2")
    assert asked == [("biohub/ESMFold2", "config.json"), ("biohub/ESMFold2", "model.safetensors")]


def test_sharded_weights_are_fetched_by_their_index(monkeypatch, tmp_path):
    shards = {"esmc.a": "model-00001-of-00002.safetensors", "trunk.b": "model-00002-of-00002.safetensors",
              "trunk.c": "model-00002-of-00002.safetensors"}
    asked = _serve(monkeypatch, tmp_path, {"model_type": "esmfold2"}, shards)
    folder = hub.preset_folder("esmfold2-fast")
    assert [file for _, file in asked] == ["config.json", "model.safetensors", hub.INDEX,
                                           "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    assert sorted(p.name for p in folder.iterdir()) == sorted(["config.json", hub.INDEX, *set(shards.values())])


def test_an_index_naming_paths_is_refused(monkeypatch, tmp_path):
    _serve(monkeypatch, tmp_path, {"model_type": "esmfold2"}, {"x": "../../evil.safetensors"})
    with pytest.raises(ValueError, match="not plain safetensors file names"):
        hub.preset_folder("esmfold2-fast")


def test_a_repository_that_is_not_esmfold2_is_refused_before_its_weights(monkeypatch, tmp_path):
    asked = _serve(monkeypatch, tmp_path, {"model_type": "esm"})
    with pytest.raises(ValueError, match="not ESMFold2"):
        hub.load_fold2_model(ModelId.parse("esmfold2"))
    assert asked == [("biohub/ESMFold2", "config.json")]


def test_offline_without_the_files_says_how_to_get_them(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty"))
    with pytest.raises(ModelNotAvailableError, match="esmfold2-fast is not on this machine") as err:
        hub.preset_folder("esmfold2-fast")
    assert "save_pretrained" in str(err.value) and "MIT" in str(err.value)
