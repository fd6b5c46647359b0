"""ESMFold2's diffusion sampler (transformers' ``generation_esmfold2.py``): the Karras noise
schedule with its cap, and the EDM sampling loop (AlphaFold 3's Algorithm 18: centre, randomly
rotate and translate, add churn noise, denoise, align the noisy coordinates onto the denoised ones,
step), as pure functions over a denoiser callable.

Every random number the reference draws inside its loop is drawn here beforehand, in the
reference's order and shapes, and passed in (``SamplerNoise``): the starting noise, and per step
the quaternions of the random rotation, the translation and the churn noise (drawn even when
``noise_scale`` is 0, as the reference draws it then too). ``SamplerNoise.from_torch_seed`` replays
``torch.manual_seed(seed)``'s stream in that order, so a test gives both sides the same numbers;
``SamplerNoise.draw`` uses a NumPy generator for flamino's own folds.

The schedule, as the reference computes it (checked in tests/parity/test_esmfold2_sampling.py): the
Karras schedule has ``inference_num_steps`` entries from ``sigma_data * sigma_max_ratio`` to
``sigma_data * sigma_min_ratio`` plus a final 0; entries above the absolute cap
``inference_sigma_cap`` are dropped and the cap put in front. The cap therefore truncates the
schedule (released values: 14 entries become 10 steps, starting at 256 A), it does not clamp it
in place (which would keep every step and repeat the cap). An independent JAX port suspected the
cap of being "clipped in place"; in transformers 5.25 it is not: the schedule is filtered into a
new tensor and nothing the caller holds is changed. flamino follows the reference numerically
(truncation).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

Denoiser = Callable[[jax.Array, jax.Array], jax.Array]  # (noisy (S, A, 3), noise level (S,)) -> denoised


@dataclasses.dataclass(frozen=True)
class ScheduleConfig:
    """The sampler's settings, under ``EsmFold2StructureHeadConfig``'s names."""

    sigma_data: float = 16.0
    gamma_0: float = 0.605
    gamma_min: float = 1.107
    noise_scale: float = 0.0
    step_scale: float = 1.0
    inference_sigma_max_ratio: float = 160.0
    inference_sigma_min_ratio: float = 4e-4
    inference_exponent: float = 8.0
    inference_num_steps: int = 68
    inference_sigma_cap: float | None = 256.0

    @classmethod
    def from_structure_head(cls, head) -> "ScheduleConfig":
        """From a ``StructureHeadConfig`` (``config.structure_head``)."""
        names = [field.name for field in dataclasses.fields(cls) if field.name != "sigma_data"]
        return cls(sigma_data=head.diffusion_module.sigma_data, **{name: getattr(head, name) for name in names})


def karras_schedule(config: ScheduleConfig, num_steps: int | None = None) -> np.ndarray:
    """``inference_noise_schedule``: the uncapped Karras schedule, ``steps + 1`` float32 sigmas
    ending in 0. Computed in float32 as the reference's tensors are (its Python-float constants
    rounded to float32 where they meet a tensor)."""
    steps = config.inference_num_steps if num_steps is None else int(num_steps)
    f32 = np.float32
    if steps == 1:
        return np.asarray([config.inference_sigma_max_ratio * config.sigma_data, 0.0], np.float32)
    inverse = 1.0 / config.inference_exponent
    top, bottom = config.inference_sigma_max_ratio ** inverse, config.inference_sigma_min_ratio ** inverse
    ramp = np.arange(steps, dtype=np.float32) / f32(steps - 1)
    base = f32(top) + ramp * f32(bottom - top)
    schedule = f32(config.sigma_data) * np.power(base, f32(config.inference_exponent))
    return np.append(schedule, f32(0.0)).astype(np.float32)


def noise_schedule(config: ScheduleConfig, num_steps: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``_build_noise_schedule``: ``(sigmas, gammas)``, the schedule truncated at the cap with the cap
    in front (see the module's docstring), and each entry's churn factor (``gamma_0`` above
    ``gamma_min``, else 0). The loop runs ``len(sigmas) - 1`` steps."""
    schedule = karras_schedule(config, num_steps)
    if config.inference_sigma_cap is not None:
        cap = np.float32(config.inference_sigma_cap)
        schedule = np.concatenate([[cap], schedule[schedule <= cap]]).astype(np.float32)
    gammas = np.where(schedule > np.float32(config.gamma_min), np.float32(config.gamma_0), np.float32(0.0))
    return schedule, gammas.astype(np.float32)


@dataclasses.dataclass(frozen=True)
class SamplerNoise:
    """Every random draw of one sampling run, in the reference's shapes: ``start`` (S, A, 3) standard
    normal (scaled by the first sigma in the loop), and per step ``quaternions`` (T, S, 4),
    ``translations`` (T, S, 3) and ``churn`` (T, S, A, 3), all standard normal."""

    start: np.ndarray
    quaternions: np.ndarray
    translations: np.ndarray
    churn: np.ndarray

    @classmethod
    def draw(cls, rng: np.random.Generator, steps: int, samples: int, atoms: int) -> "SamplerNoise":
        """From a NumPy generator (flamino's folds; seeded by the caller)."""
        normal = lambda *shape: rng.standard_normal(shape, dtype=np.float32)  # noqa: E731
        return cls(normal(samples, atoms, 3), normal(steps, samples, 4), normal(steps, samples, 3),
                   normal(steps, samples, atoms, 3))

    @classmethod
    def from_torch_seed(cls, seed: int, steps: int, samples: int, atoms: int) -> "SamplerNoise":
        """What ``_sample_structure`` draws after ``torch.manual_seed(seed)`` on the CPU, in its order
        (start; then per step the rotation's quaternions, the translation, the churn noise). Needs torch."""
        import torch

        generator = torch.Generator().manual_seed(seed)
        start = torch.randn(samples, atoms, 3, generator=generator)
        quaternions, translations, churn = [], [], []
        for _ in range(steps):
            quaternions.append(torch.randn(samples, 4, generator=generator))
            translations.append(torch.randn(samples, 1, 3, generator=generator)[:, 0])
            churn.append(torch.randn(samples, atoms, 3, generator=generator))
        stack = lambda parts: torch.stack(parts).numpy()  # noqa: E731
        return cls(start.numpy(), stack(quaternions), stack(translations), stack(churn))


def rotations_from_quaternions(quaternions: jax.Array) -> jax.Array:
    """``_random_rotations`` from its normal draws: (S, 4) -> (S, 3, 3), the quaternion normalised
    with the sign that makes its real part positive, as the reference."""
    scale = jnp.sqrt(jnp.sum(quaternions * quaternions, axis=1))
    signs = jnp.where(quaternions[:, 0] < 0, -scale, scale)
    q = quaternions / signs[:, None]
    r, i, j, k = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    two_s = 2.0 / jnp.sum(q * q, axis=-1)
    return jnp.stack([
        1 - two_s * (j * j + k * k), two_s * (i * j - k * r), two_s * (i * k + j * r),
        two_s * (i * j + k * r), 1 - two_s * (i * i + k * k), two_s * (j * k - i * r),
        two_s * (i * k - j * r), two_s * (j * k + i * r), 1 - two_s * (i * i + j * j),
    ], axis=-1).reshape(-1, 3, 3)


def center_random_augmentation(coords, atom_mask, quaternions, translations, second=None):
    """Algorithm 19 with its draws given: centre on the masked mean, rotate (row vectors times the
    matrix, as the reference), translate; ``second`` (the previous denoised coordinates) rides along."""
    mask = atom_mask[..., None]  # (S, A, 1)
    mean = jnp.sum(coords * mask, axis=1, keepdims=True) / jnp.maximum(jnp.sum(mask, axis=1, keepdims=True), 1)
    rotations = rotations_from_quaternions(quaternions)
    shift = translations[:, None, :]  # (S, 1, 3)
    coords = (coords - mean) @ rotations + shift
    if second is not None:
        second = (second - mean) @ rotations + shift
    return coords, second


def weighted_rigid_align(coords, target, weights, mask):
    """``_weighted_rigid_align``: ``coords`` moved onto ``target`` by the weighted Kabsch rotation
    (reflections excluded by the determinant's sign), coordinates (S, A, 3)."""
    w = (mask * weights)[..., None]
    denominator = jnp.maximum(jnp.sum(w, axis=-2, keepdims=True), 1e-8)
    centroid = jnp.sum(coords * w, axis=-2, keepdims=True) / denominator
    target_centroid = jnp.sum(target * w, axis=-2, keepdims=True) / denominator
    centred, target_centred = coords - centroid, target - target_centroid
    covariance = jnp.swapaxes(w * target_centred, -1, -2) @ centred  # (S, 3, 3)
    u, _, vh = jnp.linalg.svd(covariance)
    determinant = jnp.linalg.det(u @ vh)
    ones = jnp.ones_like(determinant)
    rotation = u @ (jnp.stack([ones, ones, determinant], axis=-1)[..., None] * vh)  # U diag(1, 1, det) Vh
    return centred @ jnp.swapaxes(rotation, -1, -2) + target_centroid


def sample_structure(denoise: Denoiser, atom_mask, noise: SamplerNoise, config: ScheduleConfig,
                     num_steps: int | None = None) -> jax.Array:
    """``_sample_structure``'s loop: the sampled atom coordinates (S, A, 3), fp32.

    Args:
      denoise: the denoiser with its conditioning bound, ``(noisy (S, A, 3), noise level (S,)) ->
        denoised (S, A, 3)``.
      atom_mask: (S, A) the real atoms (the features' ``atom_attention_mask`` repeated per sample).
      noise: the run's draws; its step count must be the schedule's.
      config: the schedule and step settings.
      num_steps: the Karras schedule's length before the cap (None: ``inference_num_steps``).
    """
    sigmas, gammas = noise_schedule(config, num_steps)
    steps = len(sigmas) - 1
    if noise.quaternions.shape[0] != steps:
        raise ValueError(f"the noise holds {noise.quaternions.shape[0]} steps; the schedule runs {steps}")
    atom_mask = jnp.asarray(atom_mask, jnp.float32)
    coords = jnp.float32(sigmas[0]) * jnp.asarray(noise.start)
    previous = None
    for step in range(steps):
        coords, previous = center_random_augmentation(coords, atom_mask, jnp.asarray(noise.quaternions[step]),
                                                      jnp.asarray(noise.translations[step]), previous)
        # Scalars in double precision on the host, as the reference's ``.item()`` arithmetic.
        sigma, sigma_next, gamma = float(sigmas[step]), float(sigmas[step + 1]), float(gammas[step + 1])
        level = sigma * (1.0 + gamma)
        churn_std = config.noise_scale * max(level ** 2 - sigma ** 2, 0.0) ** 0.5
        noisy = coords + jnp.float32(churn_std) * jnp.asarray(noise.churn[step])
        denoised = denoise(noisy, jnp.full((noisy.shape[0],), level, jnp.float32))
        noisy = weighted_rigid_align(noisy, denoised, atom_mask, atom_mask)
        direction = (noisy - denoised) / jnp.float32(level)
        coords = noisy + jnp.float32(config.step_scale * (sigma_next - level)) * direction
        previous = denoised
    return coords
