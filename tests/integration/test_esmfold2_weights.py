"""Loading ESMFold2 checkpoints: a folder written by transformers' ``EsmFold2Model.save_pretrained``
read strictly into ``EsmFold2`` (``weights/esmfold2.py``), its tensors where the reference keeps
them (checked against the torch modules by hand-written paths, not the loader's own key map), and
every defect of a checkpoint named in one error."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from safetensors.numpy import load_file

from esmfold2_checkpoints import tiny_shape, with_msa_encoder, write_esmfold2_checkpoint
from flamino_core.weights.convert import CheckpointMismatchError
from flamino_core.weights.esmfold2 import load_esmfold2, read_config, state_dict_to_params


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    reference, folder = write_esmfold2_checkpoint(tmp_path_factory.mktemp("esmfold2"), seed=3)
    return reference, folder, load_esmfold2(folder)


def test_round_trip_places_every_tensor(checkpoint):
    reference, folder, ours = checkpoint
    torch_state = {k: v.detach().numpy() for k, v in reference.state_dict().items()}
    pairs = {  # checkpoint key -> our array (Linear weights transposed)
        "folding_trunk.layers.1.tri_mul_in.proj_bundle.weight":
            ours.folding_trunk.layers.tri_mul_in.proj_bundle.kernel[1].T,
        "lm_encoder.layers.0.pair_transition.norm.weight": ours.lm_encoder.layers.pair_transition.norm.scale[0],
        "parcae.output_stack.layers.0.tri_mul_out.norm_mix.bias":
            ours.parcae.output_stack.layers.tri_mul_out.norm_mix.bias[0],
        "parcae.input_matrix_continuous": ours.parcae.input_matrix_continuous[...],
        "parcae.log_delta": ours.parcae.log_delta[...],
        "language_model.layer_weights": ours.language_model.layer_weights[...],
        "language_model.single_to_pair.output_fc1.bias": ours.language_model.single_to_pair.output_fc1.bias[...],
        "confidence_head.plddt_weight": ours.confidence_head.plddt_weight[...],
        "confidence_head.boundaries": ours.confidence_head.boundaries[...],
        "confidence_head.dist_bin_pairwise_embed.weight": ours.confidence_head.dist_bin_pairwise_embed.embedding[...],
        "confidence_head.row_attention_pooling.attn_proj.weight":
            ours.confidence_head.row_attention_pooling.attn_proj.kernel[...].T,
        "distogram_head.bias": ours.distogram_head.bias[...],
        "input_embedder.atom_encoder.layers.1.self_attn.q_proj.weight":
            ours.input_embedder.atom_encoder.layers[1].self_attn.q_proj.kernel[...].T,
        "structure_head.conditioning.fourier.frequencies": ours.structure_head.conditioning.fourier.frequencies[...],
        "esmc.layers.1.self_attn.q_proj.weight": ours.esmc.layers.self_attn.q_proj.kernel[1].T,
        "esmc.embed_tokens.weight": ours.esmc.embed_tokens.embedding[...],
        "esmc.norm.weight": ours.esmc.norm.scale[...],
    }
    for key, value in pairs.items():
        assert np.array_equal(np.asarray(value), torch_state[key]), key
    # Every number of the checkpoint is somewhere in ours, and nothing else is (bar ESM C's LM
    # head, which ESMFold2's stem lacks, and rotary tables recomputed as the reference does).
    from flax import nnx

    ours_sizes = sum(np.size(leaf) for path, leaf in nnx.to_flat_state(nnx.state(ours, nnx.Param))
                     if path[:2] != ("esmc", "lm_head"))
    assert ours_sizes == sum(v.size for v in load_file(str(folder / "model.safetensors")).values())


def test_every_defect_is_named_in_one_error(checkpoint):
    _, folder, ours = checkpoint
    state = load_file(str(folder / "model.safetensors"))
    for key in ("folding_trunk.layers.1.tri_mul_out.proj_gate.weight", "esmc.norm.weight", "distogram_head.bias"):
        del state[key]
    beyond = "folding_trunk.layers.7.tri_mul_out.proj_gate.weight"  # the tiny trunk has two layers
    state[beyond] = state["lm_encoder.layers.0.tri_mul_out.proj_gate.weight"]
    state["trunk.extra.weight"] = np.zeros(3, np.float32)
    state["parcae.log_delta"] = np.zeros(5, np.float32)
    state["input_embedder.atom_encoder.layers.0.self_attn.q_proj.weight"] = np.zeros((3, 3), np.float32)
    with pytest.raises(CheckpointMismatchError) as caught:
        state_dict_to_params(state, ours.config, "defective")
    error = caught.value
    assert set(error.missing) >= {"folding_trunk.layers.1.tri_mul_out.proj_gate.weight", "esmc.norm.weight",
                                  "distogram_head.bias"}
    assert set(error.unexpected) == {beyond, "trunk.extra.weight"}
    assert any(m.startswith("parcae.log_delta") for m in error.mismatched)
    assert any(m.startswith("input_embedder.atom_encoder.layers.0.self_attn.q_proj.weight") for m in error.mismatched)
    assert "ESMFold2" in str(error) and "defective" in str(error)


def test_a_folder_without_the_files_is_refused(tmp_path):
    with pytest.raises(ValueError, match="save_pretrained"):
        read_config(tmp_path)


def test_msa_encoder_round_trip(tmp_path):
    """A checkpoint with the MSA encoder (biohub/ESMFold2's layout): its list of layers, the last
    without MSA-side weights, placed by index."""
    reference, folder = write_esmfold2_checkpoint(tmp_path, seed=1, shape=with_msa_encoder(tiny_shape()))
    ours = load_esmfold2(folder)
    torch_state = {k: v.detach().numpy() for k, v in reference.state_dict().items()}
    layers = ours.msa_encoder.layers
    assert not hasattr(layers[2], "msa_transition") and hasattr(layers[1], "msa_transition")
    pairs = {"msa_encoder.embed.weight": ours.msa_encoder.embed.kernel[...].T,
             "msa_encoder.layers.1.msa_pair_weighted_averaging.bias_proj.weight":
                 layers[1].msa_pair_weighted_averaging.bias_proj.kernel[...].T,
             "msa_encoder.layers.2.outer_product_mean.output_proj.bias":
                 layers[2].outer_product_mean.output_proj.bias[...],
             "msa_encoder.layers.2.tri_mul_in.norm_mix.weight": layers[2].tri_mul_in.norm_mix.scale[...]}
    for key, value in pairs.items():
        assert np.array_equal(np.asarray(value), torch_state[key]), key


def test_sharded_and_bf16_folders_load(checkpoint, tmp_path):
    """save_pretrained's shards (an index naming several files) and a bf16 save: the same
    tensors, the bf16 ones widened from their bf16 values."""
    import torch

    reference, folder, ours = checkpoint
    sharded = tmp_path / "sharded"
    reference.save_pretrained(sharded, max_shard_size="200KB")
    assert (sharded / "model.safetensors.index.json").exists() and not (sharded / "model.safetensors").exists()
    key = "folding_trunk.layers.0.tri_mul_out.proj_bundle.weight"
    loaded = load_esmfold2(sharded)
    assert np.array_equal(np.asarray(loaded.folding_trunk.layers.tri_mul_out.proj_bundle.kernel[0]),
                          np.asarray(ours.folding_trunk.layers.tri_mul_out.proj_bundle.kernel[0]))
    half = tmp_path / "bf16"
    copy.deepcopy(reference).to(torch.bfloat16).save_pretrained(half)  # the fixture's model stays fp32
    want = reference.state_dict()[key].to(torch.bfloat16).float().numpy()
    got = load_esmfold2(half).folding_trunk.layers.tri_mul_out.proj_bundle.kernel[0]
    assert np.array_equal(np.asarray(got).T, want)
