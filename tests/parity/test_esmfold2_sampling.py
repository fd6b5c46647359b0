"""ESMFold2's sampler (``model/esmfold2/sampler.py``) against transformers' own generation code
(5.25, ``generation_esmfold2.py``): the Karras schedule and its cap, and the whole sampling loop
driven by one fake deterministic denoiser written twice (torch for the reference's loop, JAX for
ours) with the same weights, the reference drawing its noise from ``torch.manual_seed`` and ours
given the same stream replayed (``SamplerNoise.from_torch_seed``). The network's own denoiser is
compared end to end in tests/parity/test_esmfold2_predict.py."""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from flamino_core.model.esmfold2 import sampler
from flamino_core.model.esmfold2.features import prepare_features

torch = pytest.importorskip("torch")
generation = pytest.importorskip("transformers.models.esmfold2.generation_esmfold2")
Mixin = generation.EsmFold2FoldingMixin

RELEASED = dict(inference_num_steps=14)  # what the reference's docstring gives for the released checkpoints


def _head(**overrides):
    config = sampler.ScheduleConfig(**overrides)
    fields = {k: v for k, v in vars(config).items() if k != "sigma_data"}
    head = types.SimpleNamespace(**fields, diffusion_module=types.SimpleNamespace(sigma_data=config.sigma_data))
    return config, _Reference(types.SimpleNamespace(structure_head=head))


class _Reference(Mixin):
    """The reference's sampler methods on a bare object: its config, and a denoiser set by the test."""

    def __init__(self, config):
        self.config, self.structure_head = config, None


@pytest.mark.parametrize("overrides", [
    pytest.param({}, id="class-defaults-68"), pytest.param(RELEASED, id="released-14"),
    pytest.param(dict(inference_num_steps=6), id="tiny-6"), pytest.param(dict(inference_num_steps=1), id="one-step"),
    pytest.param(dict(inference_num_steps=9, inference_sigma_cap=None), id="no-cap"),
    pytest.param(dict(inference_num_steps=12, sigma_data=7.5, inference_exponent=5.0, gamma_min=3.0), id="other"),
])
def test_schedule_is_the_references(overrides):
    config, fake = _head(**overrides)
    theirs = fake.inference_noise_schedule().numpy()
    # float32 throughout on both sides; pow may round differently by an ulp.
    np.testing.assert_allclose(sampler.karras_schedule(config), theirs, rtol=2e-7, atol=0)
    sigmas, gammas = fake._build_noise_schedule(None, torch.device("cpu"))
    ours_sigmas, ours_gammas = sampler.noise_schedule(config)
    np.testing.assert_allclose(ours_sigmas, sigmas.numpy(), rtol=2e-7, atol=0)
    np.testing.assert_array_equal(ours_gammas, gammas.numpy())


def test_the_cap_truncates_the_schedule_and_changes_nothing_in_place():
    """The suspected "cap clipped in place": in transformers 5.25 the cap drops the schedule's
    entries above it and puts the cap in front (14 entries -> 10 steps from 256 A for the released
    values), rather than clamping them (which would keep 14 steps, 5 of them at the cap), and the
    uncapped schedule is not modified."""
    config, fake = _head(**RELEASED)
    uncapped = fake.inference_noise_schedule()
    before = uncapped.clone()
    sigmas, _ = fake._build_noise_schedule(None, torch.device("cpu"))
    assert torch.equal(uncapped, before)
    assert len(sigmas) - 1 == 10 and float(sigmas[0]) == 256.0 and float(sigmas[1]) < 256.0
    clamped = uncapped.clamp(max=256.0)
    assert len(clamped) - 1 == 14 and int((clamped == 256.0).sum()) == 5  # what "clipped in place" would run
    ours, _ = sampler.noise_schedule(config)
    assert len(ours) - 1 == 10 and ours[0] == 256.0


class _TorchDenoiser(torch.nn.Module):
    """A deterministic stand-in with the denoiser's interface: EDM preconditioning around a
    nonlinear map that mixes atoms and is not rotation-equivariant (so the alignment matters)."""

    def __init__(self, mix: np.ndarray, weight: np.ndarray, sigma_data: float):
        super().__init__()
        self.mix, self.weight, self.sigma_data = torch.from_numpy(mix), torch.from_numpy(weight), sigma_data

    def prepare_conditioning(self, **kwargs):
        return None

    def forward(self, noisy_coords, noise_level, conditioning):
        sd2, level2 = self.sigma_data ** 2, noise_level * noise_level
        scaled = noisy_coords / torch.sqrt(level2 + sd2)[:, None, None]
        update = torch.tanh(self.mix @ scaled @ self.weight)
        skip = (sd2 / (sd2 + level2))[:, None, None]
        out = (self.sigma_data * noise_level / torch.sqrt(sd2 + level2))[:, None, None]
        return skip * noisy_coords + out * update


def _jax_denoiser(mix, weight, sigma_data):
    mix, weight = jnp.asarray(mix), jnp.asarray(weight)

    def denoise(noisy, level):
        sd2, level2 = sigma_data ** 2, level * level
        scaled = noisy / jnp.sqrt(level2 + sd2)[:, None, None]
        update = jnp.tanh(mix @ scaled @ weight)
        skip = (sd2 / (sd2 + level2))[:, None, None]
        return skip * noisy + (sigma_data * level / jnp.sqrt(sd2 + level2))[:, None, None] * update
    return denoise


@pytest.mark.parametrize("overrides, samples", [
    pytest.param(RELEASED, 2, id="released-schedule"),
    pytest.param(dict(RELEASED, noise_scale=1.0, step_scale=1.5), 3, id="churn-noise-and-step-scale"),
])
def test_sampling_loop_is_the_references(overrides, samples):
    features = prepare_features(["MKTAYIAKQRQISFVKSHFSRQ"])  # 22 residues: 183 atoms, 9 of them padding
    atom_mask = features["atom_attention_mask"]
    atoms = atom_mask.shape[1]
    rng = np.random.default_rng(7)
    mix = (rng.standard_normal((atoms, atoms)) / np.sqrt(atoms)).astype(np.float32) * atom_mask[0][None, :]
    weight = (rng.standard_normal((3, 3)) * 1.5).astype(np.float32)
    config, fake = _head(**overrides)
    fake.structure_head = _TorchDenoiser(mix, weight, config.sigma_data)
    atom_inputs = types.SimpleNamespace(atom_to_token=torch.from_numpy(features["atom_to_token"]),
                                        atom_attention_mask=torch.from_numpy(atom_mask))
    torch.manual_seed(11)
    theirs = fake._sample_structure(pair_trunk=None, single_inputs=torch.zeros(1, 22, 4),
                                     relative_position_encoding=None, atom_inputs=atom_inputs,
                                     num_diffusion_samples=samples).numpy()
    steps = len(sampler.noise_schedule(config)[0]) - 1
    noise = sampler.SamplerNoise.from_torch_seed(11, steps, samples, atoms)
    with jax.default_matmul_precision("highest"):
        ours = np.asarray(sampler.sample_structure(_jax_denoiser(mix, weight, config.sigma_data),
                                                   np.repeat(atom_mask, samples, 0), noise, config))
    real = atom_mask[0]
    # fp32 on both sides over 10 steps from 256 A, with an SVD per step: agreement to ~1e-4 A.
    assert np.abs(ours[:, real] - theirs[:, real]).max() < 1e-3
    assert np.abs(theirs[:, real]).max() > 1.0  # a structure, not zeros


def test_noise_draws_are_seeded_and_shaped():
    a = sampler.SamplerNoise.draw(np.random.default_rng(3), steps=4, samples=2, atoms=64)
    b = sampler.SamplerNoise.draw(np.random.default_rng(3), steps=4, samples=2, atoms=64)
    assert a.start.shape == (2, 64, 3) and a.quaternions.shape == (4, 2, 4)
    assert a.translations.shape == (4, 2, 3) and a.churn.shape == (4, 2, 64, 3)
    np.testing.assert_array_equal(a.churn, b.churn)


def test_rotations_are_rotations():
    rotations = np.asarray(sampler.rotations_from_quaternions(jnp.asarray(np.random.default_rng(0).standard_normal((5, 4)),
                                                                          jnp.float32)))
    np.testing.assert_allclose(rotations @ rotations.transpose(0, 2, 1), np.broadcast_to(np.eye(3), (5, 3, 3)), atol=1e-5)
    np.testing.assert_allclose(np.linalg.det(rotations), 1.0, atol=1e-5)
