"""ESMFold2 end to end (``model/esmfold2/predict.py``) against transformers' ``EsmFold2Model.fold``
(5.25) on the same random weights (B's tiny checkpoint, written by ``save_pretrained`` and read by
flamino's loader) and the same noise: the trunk's initial pair state and per-loop LM dropout fed to
the reference in place of its own draws (``tests/esmfold2_checkpoints.reference_noise``), the
sampler's draws replayed from ``torch.manual_seed`` (``SamplerNoise.from_torch_seed``). Features
are flamino's (a two-chain complex, which the reference ships no featuriser for, and one chain),
handed to both sides.

The bar (docs/esmfold.md): every sampled atom within 1e-3 A, pLDDT (0-1), PAE (A), pTM and ipTM
within 1e-3. Both sides run fp32; the sampler's 10 steps from 256 A amplify the trunk's and the
denoiser's ~1e-6 relative differences to ~1e-4 A at most."""

from __future__ import annotations

import numpy as np
import pytest

from flamino_core.model.esmfold2.features import prepare_features
from flamino_core.model.esmfold2.sampler import SamplerNoise, ScheduleConfig, noise_schedule

torch = pytest.importorskip("torch")
pytest.importorskip("transformers.models.esmfold2")
from tests.esmfold2_checkpoints import (reference_noise, tiny_shape, with_msa_encoder,  # noqa: E402
                                        write_esmfold2_checkpoint)

SEED = 5


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """ESMFold2-Fast's layout (no MSA encoder) at the tiny shape."""
    return write_esmfold2_checkpoint(tmp_path_factory.mktemp("esmfold2_tiny"), seed=3)


@pytest.fixture(scope="module")
def msa_checkpoint(tmp_path_factory):
    """The full ESMFold2's layout: its MSA encoder runs on the features' one-row MSA."""
    return write_esmfold2_checkpoint(tmp_path_factory.mktemp("esmfold2_msa"), seed=4,
                                     shape=with_msa_encoder(tiny_shape()))


def _reference_fold(model, features: dict, pair_state, dropout, samples: int):
    """``EsmFold2Model.fold`` with the trunk's draws replaced (as ``reference_trunk`` does) and the
    sampler's drawn after ``torch.manual_seed(SEED)``."""
    from transformers.models.esmfold2 import modeling_esmfold2 as reference

    original, calls = reference.F.dropout, []

    def fed_dropout(x, p=0.5, training=True, inplace=False):
        if not training or p == 0.0:
            return original(x, p, training, inplace)
        calls.append(None)
        return x * dropout[len(calls) - 1]

    model._init_pair_state = lambda reference_tensor: pair_state.clone()
    reference.F.dropout = fed_dropout
    try:
        torch.manual_seed(SEED)
        with torch.no_grad():
            out = model.fold(**{k: torch.from_numpy(v) for k, v in features.items()}, num_diffusion_samples=samples)
    finally:
        reference.F.dropout = original
        del model._init_pair_state
    assert len(calls) == len(dropout)
    return {k: v.numpy() for k, v in out.items() if isinstance(v, torch.Tensor)}


@pytest.mark.parametrize("which, chains", [
    pytest.param("checkpoint", ["MKTAYIAKQRQISFVK", "GSHMWLEV"], id="two-chains"),
    pytest.param("checkpoint", ["MVHLTPEEKSAVTALWGKV"], id="one-chain"),
    pytest.param("msa_checkpoint", ["MKTAYIAKQRQ", "GSHMWLEVK"], id="two-chains-msa-encoder"),
])
def test_a_whole_fold_is_the_references(request, which, chains):
    from flamino_core.model.esmfold2.model import TrunkNoise
    from flamino_core.engine.fold import stem_pass
    from flamino_core.model.esmfold2.predict import fold_arrays
    from flamino_core.weights.esmfold2 import load_esmfold2

    hf_model, folder = request.getfixturevalue(which)
    model = load_esmfold2(folder)
    features = prepare_features(chains)
    samples = model.config.structure_head.num_diffusion_samples
    pair, dropout = reference_noise(hf_model, {"res_type": torch.from_numpy(features["res_type"])}, seed=SEED)
    theirs = _reference_fold(hf_model, features, pair, dropout, samples)

    steps = len(noise_schedule(ScheduleConfig.from_structure_head(model.config.structure_head))[0]) - 1
    atoms = features["atom_attention_mask"].shape[1]
    ours = fold_arrays(model, features, stem=stem_pass(model), trunk_noise=TrunkNoise(pair.numpy(), dropout.numpy()),
                       sampler_noise=SamplerNoise.from_torch_seed(SEED, steps, samples, atoms))
    real = features["atom_attention_mask"][0]
    coords_diff = np.abs(ours["sample_atom_coords"][:, real] - theirs["sample_atom_coords"][:, real]).max()
    print(f"\n{chains}: coordinates max |diff| {coords_diff:.2e} A")
    assert coords_diff < 1e-3, coords_diff
    assert np.abs(theirs["sample_atom_coords"][:, real]).max() > 1.0
    for key in ("plddt", "plddt_per_atom", "pae", "ptm", "iptm", "pair_chains_iptm", "complex_plddt"):
        assert ours[key].shape == theirs[key].shape, key
        diff = np.abs(ours[key] - theirs[key]).max()
        print(f"{key} max |diff| {diff:.2e}")
        assert diff < 1e-3, (key, diff)
    assert np.std(theirs["plddt_per_atom"]) > 1e-3  # the random pLDDT head is not flat
