"""Model identifiers, conversion errors, the cache of converted weights, hub download and offline behaviour."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from flamino_core.weights import checkpoint_files
from flamino_core.weights import loading as weights_mod
from flamino_core.model.config import PRESETS, ESM2Config
from flamino_core.weights.convert import CheckpointMismatchError, state_dict_to_params
from flamino_core.weights.model_cache import params_checksum
from flamino_core.weights.loading import (
    ModelError,
    ModelNotAvailableError,
    load_weights,
    save_checkpoint,
)
from conftest import TINY


def leaves(tree, prefix=()):
    for k, v in tree.items():
        if isinstance(v, dict):
            yield from leaves(v, prefix + (k,))
        else:
            yield prefix + (k,), v


def assert_identical(a, b):
    la, lb = dict(leaves(a)), dict(leaves(b))
    assert la.keys() == lb.keys()
    for k in la:
        assert np.asarray(la[k]).dtype == np.asarray(lb[k]).dtype, k
        assert np.array_equal(np.asarray(la[k]), np.asarray(lb[k])), k


def test_checkpoint_round_trip_is_bit_identical(tmp_path):
    original = load_weights("random:tiny:3")
    save_checkpoint(tmp_path / "ckpt", original.config, original.params, "test")
    restored = load_weights(str(tmp_path / "ckpt"))
    assert restored.config == original.config
    assert_identical(original.params, restored.params)
    # The key of the weights (Engine.fingerprint) comes from the stored CRCs without hashing the
    # arrays again, and equals what the arrays in memory give.
    assert restored.checksum == params_checksum(original.params) != params_checksum(load_weights("random:tiny:4").params)


def test_an_engine_of_cached_weights_uses_their_memory_and_computes_the_same(tmp_path):
    """Weights read from a flamino checkpoint sit 64-byte aligned (``param_files._aligned_buffer``),
    so JAX on CPU runs on their memory instead of a copy: the engine's state is the arrays read
    (at t30 the whole process peaked at 1.40 GiB before, 0.86 after, for 0.55 GiB of weights).
    An engine built from the same values in fresh (copied) arrays gives identical numbers."""
    import jax

    from flamino_core import Engine

    # The 8M model's sizes (random:tiny's 32-wide tensors are odd-sized in many places).
    original = load_weights("random:esm2_t6_8M_UR50D")
    save_checkpoint(tmp_path / "ckpt", original.config, original.params, "test")
    restored = load_weights(str(tmp_path / "ckpt"))
    read_at = {a.ctypes.data for a in jax.tree.leaves(restored.params)}
    engine = Engine(restored)
    leaves = jax.tree.leaves(engine.state)
    shared = sum(leaf.nbytes for leaf in leaves if leaf.unsafe_buffer_pointer() in read_at)
    # Only tensors that follow an odd-sized one (the 33-letter output bias) are not aligned: small.
    # (Before the aligned buffer: none of them.)
    assert shared >= 0.9 * sum(leaf.nbytes for leaf in leaves), (shared, sum(leaf.nbytes for leaf in leaves))
    assert engine.weights.params is None and engine.weights.checksum == restored.checksum
    copied = Engine(original)
    sequence = "MKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQ"
    (ours,), (theirs,) = engine.run([sequence], logits=True), copied.run([sequence], logits=True)
    np.testing.assert_array_equal(ours.logits, theirs.logits)  # the same bytes in, the same program


def write_orbax_checkpoint(directory: Path, weights) -> Path:
    """A checkpoint folder as flamino wrote them before params.safetensors: Orbax + SHA-256."""
    import orbax.checkpoint as ocp

    from flamino_core.weights.model_cache import _orbax_sha256

    directory.mkdir(parents=True)
    weights.config.save(directory / "flamino_config.json")
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save((directory / "params").absolute(), weights.params)
    checkpointer.wait_until_finished()
    meta = {"source": "old", "created": 0, "checksum": _orbax_sha256(weights.params), "is_random": True}
    (directory / "source.json").write_text(json.dumps(meta))
    return directory


def test_orbax_folder_of_an_older_flamino_still_restores(tmp_path):
    original = load_weights("random:tiny:4")
    folder = write_orbax_checkpoint(tmp_path / "old-ckpt", original)
    restored = load_weights(str(folder))
    assert_identical(original.params, restored.params)
    assert not (folder / "params.safetensors").exists()  # a folder the user named is never rewritten
    meta = json.loads((folder / "source.json").read_text())
    meta["checksum"] = "0" * 64  # its SHA-256 is still checked
    (folder / "source.json").write_text(json.dumps(meta))
    with pytest.raises(ModelError, match="checksum mismatch"):
        load_weights(str(folder))


def test_orbax_cache_entry_is_rewritten_once_in_the_new_layout(hf_checkpoints, monkeypatch, isolated_cache):
    directory, _ = hf_checkpoints(TINY, "2022")
    first = load_weights(str(directory))
    (entry,) = (isolated_cache / "flamino" / "models").iterdir()
    shutil.rmtree(entry)
    write_orbax_checkpoint(entry, first)  # as an older flamino left it
    monkeypatch.setattr(checkpoint_files, "state_dict_to_params", lambda *a, **k: pytest.fail("converted again"))
    assert_identical(first.params, load_weights(str(directory)).params)
    assert (entry / "params.safetensors").is_file() and not (entry / "params").exists()
    assert_identical(first.params, load_weights(str(directory)).params)


def test_converted_weights_are_cached_and_reused(hf_checkpoints, monkeypatch, isolated_cache):
    directory, _ = hf_checkpoints(TINY, "2022")
    first = load_weights(str(directory))
    entries = list((isolated_cache / "flamino" / "models").iterdir())
    assert len(entries) == 1 and (entries[0] / "params.safetensors").is_file()
    # Second start: no conversion at all.
    monkeypatch.setattr(checkpoint_files, "state_dict_to_params", lambda *a, **k: pytest.fail("converted again"))
    second = load_weights(str(directory))
    assert_identical(first.params, second.params)


def test_corrupted_cache_entry_is_detected_and_rebuilt(hf_checkpoints, isolated_cache):
    directory, _ = hf_checkpoints(TINY, "2022")
    first = load_weights(str(directory))
    (entry,) = (isolated_cache / "flamino" / "models").iterdir()
    meta = json.loads((entry / "source.json").read_text())
    name = sorted(meta["crc32"])[0]
    meta["crc32"][name] ^= 1  # as if the stored array no longer matched what was written
    (entry / "source.json").write_text(json.dumps(meta))
    messages = []
    rebuilt = load_weights(str(directory), progress=lambda f, m: messages.append(m))
    assert any("damaged" in m for m in messages)
    assert_identical(first.params, rebuilt.params)


def test_cache_entry_of_another_model_structure_is_rebuilt(hf_checkpoints, isolated_cache):
    """An entry whose arrays do not fit the model (written by a flamino whose model differed)."""
    from flamino_core.weights.param_files import write_params

    directory, _ = hf_checkpoints(TINY, "2022")
    first = load_weights(str(directory))
    (entry,) = (isolated_cache / "flamino" / "models").iterdir()
    params = {**first.params, "extra_head": {"kernel": np.zeros((2, 2), np.float32)}}
    meta = json.loads((entry / "source.json").read_text())
    meta["crc32"] = write_params(entry / "params.safetensors", params)  # sound file, wrong model
    (entry / "source.json").write_text(json.dumps(meta))
    messages = []
    assert_identical(first.params, load_weights(str(directory), progress=lambda f, m: messages.append(m)).params)
    assert any("damaged" in m for m in messages)


def test_deleted_params_are_rebuilt(hf_checkpoints, isolated_cache):
    directory, _ = hf_checkpoints(TINY, "2022")
    first = load_weights(str(directory))
    (entry,) = (isolated_cache / "flamino" / "models").iterdir()
    (entry / "params.safetensors").unlink()
    assert_identical(first.params, load_weights(str(directory)).params)


def _hf_state_dict(directory: Path) -> dict:
    from safetensors.numpy import load_file

    return load_file(str(directory / "model.safetensors"))


def test_mismatch_lists_every_missing_unexpected_and_misshapen_key(hf_checkpoints):
    directory, _ = hf_checkpoints(TINY, "2022")
    sd = dict(_hf_state_dict(directory))
    del sd["esm.encoder.layer.1.intermediate.dense.weight"]
    del sd["lm_head.bias"]
    sd["esm.encoder.layer.0.attention.self.query.bias"] = np.zeros(7, np.float32)
    sd["esm.embeddings.position_embeddings.weight"] = np.zeros((1026, 32), np.float32)
    with pytest.raises(CheckpointMismatchError) as info:
        state_dict_to_params(sd, TINY)
    message = str(info.value)
    assert "layers.1.fc1.kernel" in message
    assert "lm_head.bias" in message
    assert "esm.embeddings.position_embeddings.weight" in message
    assert "layers.0.self_attn.q_proj.bias: checkpoint (7,) vs model (32,)" in message


def test_wrong_architecture_is_refused(hf_checkpoints):
    directory, _ = hf_checkpoints(TINY, "2022")
    sd = _hf_state_dict(directory)
    bigger = ESM2Config(num_layers=3, embed_dim=32, attention_heads=4, ffn_dim=64)
    with pytest.raises(CheckpointMismatchError, match="missing keys"):
        state_dict_to_params(sd, bigger)


def test_all_key_spellings_convert_to_the_same_weights(hf_checkpoints):
    a = load_weights(str(hf_checkpoints(TINY, "2022")[0]))
    b = state_dict_to_params(_hf_state_dict(hf_checkpoints(TINY, "2022")[0]), TINY)
    assert_identical(a.params, b)


def test_preset_offline_without_cache_says_how_to_get_weights():
    with pytest.raises(ModelNotAvailableError) as info:
        load_weights("esm2_t6_8M_UR50D")
    message = str(info.value)
    assert "flamino fetch esm2_t6_8M_UR50D" in message
    assert "huggingface.co/facebook/esm2_t6_8M_UR50D" in message


def test_preset_download_converts_and_caches(hf_checkpoints, monkeypatch):
    """The Hub path with huggingface_hub's download replaced by a local file server."""
    import huggingface_hub

    directory, _ = hf_checkpoints(TINY, "5x")
    requested = []

    def fake_download(repo_id, filename, **kwargs):
        requested.append((repo_id, filename))
        return str(directory / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    from flamino_core.model.families import Preset

    monkeypatch.setitem(PRESETS, "esm2_tiny_test", Preset("esm2", 2, 32, 4, "tiny", "facebook/esm2_tiny_test"))
    loaded = load_weights("facebook/esm2_tiny_test")
    assert requested == [("facebook/esm2_tiny_test", "config.json"), ("facebook/esm2_tiny_test", "model.safetensors")]
    assert loaded.config.num_layers == 2
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", lambda *a, **k: pytest.fail("downloaded again"))
    assert_identical(loaded.params, load_weights("esm2_tiny_test").params)
    assert "esm2_tiny_test" in weights_mod.cached_presets()


@pytest.mark.parametrize(
    "identifier, match",
    [("esm2_t7_bogus", "unknown model"), ("/no/such/dir", "does not exist"), ("random:nope", "bad test model")],
)
def test_bad_identifiers_give_clear_errors(identifier, match):
    with pytest.raises(ModelError, match=match):
        load_weights(identifier)


def test_local_paths_and_pickles_can_be_disabled(hf_checkpoints, tmp_path):
    directory, _ = hf_checkpoints(TINY, "2022")
    with pytest.raises(ModelError, match="disabled"):
        load_weights(str(directory), allow_local_paths=False)
    bin_dir, _ = hf_checkpoints(TINY, "2022-bin")
    with pytest.raises(ModelError, match="pickle"):
        load_weights(str(bin_dir), allow_pickle=False)


def test_pickles_are_loaded_weights_only(tmp_path):
    """A .pt that would run code when unpickled is refused, not executed."""
    import torch

    class Evil:
        def __reduce__(self):
            return (Path("/tmp/flamino-pwned").write_text, ("pwned",))

    path = tmp_path / "evil.pt"
    torch.save({"model": {}, "cfg": Evil()}, path)
    Path(tmp_path / "evil-contact-regression.pt").write_bytes(b"")
    Path("/tmp/flamino-pwned").unlink(missing_ok=True)
    with pytest.raises(ModelError, match="cannot read"):
        load_weights(str(path))
    assert not Path("/tmp/flamino-pwned").exists()


def test_presets_match_hf_parameter_counts():
    """Every preset's parameter shapes equal those of transformers' model of the same config
    (built on the meta device, so even 15B costs no memory): EsmForMaskedLM for ESM-2, ESM-1b and
    ESM-1v (whose untrained contact head flamino does not build), EsmcForMaskedLM for ESM C."""
    import jax
    import torch
    from flax import nnx
    from transformers import EsmcConfig, EsmcForMaskedLM, EsmForMaskedLM

    from flamino_core.model.families import family_of
    from reference_checkpoints import hf_config

    for name in PRESETS:
        config = ESM2Config.preset(name)
        family = family_of(config)
        abstract = nnx.eval_shape(lambda: family.network_class()(config, nnx.Rngs(0)))
        ours = sum(x.size for x in jax.tree.leaves(nnx.state(abstract, nnx.Param)))
        with torch.device("meta"):
            if family.id == "esmc":
                hf = EsmcForMaskedLM(EsmcConfig(hidden_size=config.embed_dim, intermediate_size=config.ffn_dim,
                                                num_hidden_layers=config.num_layers,
                                                num_attention_heads=config.attention_heads))
            else:
                hf = EsmForMaskedLM(hf_config(config))
        # HF builds a position table for rotary models too, unused; ESM-1v's contact head is unpublished.
        skipped = ("position_embeddings",) if family.positions == "rotary" else ()
        skipped += () if family.contact_head else ("contact_head",)
        theirs = sum(p.numel() for n, p in hf.named_parameters() if not any(s in n for s in skipped))
        assert ours == theirs, (name, ours, theirs)


def test_flamino_model_environment_variable(monkeypatch):
    monkeypatch.setenv("FLAMINO_MODEL", "random:tiny:5")
    assert load_weights().is_random and load_weights().source == "random:tiny:5"


def test_untrained_flag_survives_a_checkpoint(tmp_path):
    from flamino_core.weights.loading import convert_to_checkpoint

    out = convert_to_checkpoint("random:tiny:2", tmp_path / "rand")
    assert load_weights(str(out)).is_random
    real = load_weights("random:tiny:2")
    save_checkpoint(tmp_path / "plain", real.config, real.params, "somewhere")
    assert not load_weights(str(tmp_path / "plain")).is_random


def test_unreachable_hub_fails_without_retrying_downloads(monkeypatch):
    """Hub unreachable (not just HF_HUB_OFFLINE): only the local HF cache is consulted, so the
    message comes at once instead of after huggingface_hub's network retries."""
    import huggingface_hub

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: nothing listens
    real_download = huggingface_hub.hf_hub_download
    calls = []

    def recording_download(*args, **kwargs):
        calls.append(kwargs.get("local_files_only", False))
        return real_download(*args, **kwargs)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", recording_download)
    with pytest.raises(ModelNotAvailableError, match="flamino fetch"):
        load_weights("esm2_t6_8M_UR50D")
    assert calls and all(calls), "tried the network although the Hub was unreachable"
