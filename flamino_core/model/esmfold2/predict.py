"""Fold a complex with ESMFold2 end to end, as transformers' ``EsmFold2Model.fold`` does: features
(``features.py``) -> ESM C's hidden states -> the trunk -> the denoiser's conditioning -> the
sampler (``sampler.py``, every step one jitted denoiser call) -> the confidence head on every
sample -> the best sample by pTM (the reference's ``_rank_samples``) as a ``FoldedComplex``.

Each network stage is a jitted pure function of ``(graphdef, state, inputs)``, compiled once per
length, sample count and loop count. Randomness: the trunk's (initial pair state, per-loop LM
dropout) from ``jax.random.key(seed)``, the sampler's from ``numpy.random.default_rng(seed)``;
or both given explicitly (``trunk_noise``, ``sampler_noise``), which is how the parity test feeds
flamino and the reference the same numbers.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from flamino_core.model.esmfold2.features import CHAIN_IDS, Chain, check_chains, prepare_features
from flamino_core.model.esmfold2.folded import FoldedComplex
from flamino_core.model.esmfold2.sampler import SamplerNoise, ScheduleConfig, noise_schedule, sample_structure


@functools.partial(jax.jit, static_argnames=("graphdef", "num_loops"))
def _trunk(graphdef, state, features, noise, lm_states, num_loops):
    return nnx.merge(graphdef, state).trunk(features, noise, lm_states, num_loops)


@functools.partial(jax.jit, static_argnames=("graphdef", "samples"))
def _conditioning(graphdef, state, trunk, attention_mask, samples):
    head = nnx.merge(graphdef, state)
    return head.prepare_conditioning(trunk.atom_inputs, trunk.pair_states, trunk.relative_position_encoding,
                                     trunk.single_inputs, attention_mask, samples)


@functools.partial(jax.jit, static_argnames=("graphdef", "samples", "chains"))
def _confidence(graphdef, state, trunk, features, coords, samples, chains):
    return nnx.merge(graphdef, state).confidence(trunk, features, coords, samples, chains)


def fold_arrays(model, features: dict[str, np.ndarray], *, stem, seed: int = 0, num_samples: int | None = None,
                num_steps: int | None = None, num_loops: int | None = None, trunk_noise=None,
                sampler_noise: SamplerNoise | None = None, matmul_precision: str | None = None) -> dict:
    """Every sample's coordinates and confidences (NumPy, leading axis the samples) for a feature
    dict (``prepare_features``): ``sample_atom_coords``, ``plddt``, ``plddt_per_atom``, ``pae``,
    ``ptm``, ``iptm``, ``pair_chains_iptm``, ``complex_plddt`` under the reference's names.

    Args:
      model: an ``EsmFold2``.
      stem: the engine's pass over its ESM C (``engine/fold.stem_pass``; ``engine.fold.fold_complex``
        folds through it).
      num_samples, num_steps, num_loops: the reference's ``fold`` arguments (None: the config's).
      trunk_noise: a ``model.TrunkNoise`` (None: drawn from ``seed``).
      sampler_noise: the sampler's draws (None: drawn from ``seed``).
      matmul_precision: JAX's matmul precision for the whole fold (None: the caller's, JAX's default
        unless an enclosing ``jax.default_matmul_precision`` says otherwise: exact fp32 on a CPU
        only; ``flamino fold`` passes ``hardware.exact_matmul_precision``).
    """
    from flamino_core.model.esmfold2.model import draw_trunk_noise

    config = model.config
    samples = num_samples or config.structure_head.num_diffusion_samples
    length = features["res_type"].shape[1]
    chains = int(features["asym_id"].max()) + 1
    jnp_features = {key: jnp.asarray(value) for key, value in features.items()}
    # None leaves the caller's precision in force (``default_matmul_precision(None)`` would reset it
    # to the platform's default: one bf16 pass per product on a TPU, 0.55 A off the reference there).
    with contextlib.nullcontext() if matmul_precision is None else jax.default_matmul_precision(matmul_precision):
        lm_states = model.language_model_states(features, stem)
        if trunk_noise is None:
            trunk_noise = draw_trunk_noise(jax.random.key(seed), config, 1, length, num_loops)
        graphdef, state = nnx.split(model)
        trunk = _trunk(graphdef, state, jnp_features, trunk_noise, lm_states, num_loops)
        head_graphdef, head_state = nnx.split(model.structure_head)
        conditioning = _conditioning(head_graphdef, head_state, trunk, jnp_features["attention_mask"], samples)
        schedule = ScheduleConfig.from_structure_head(config.structure_head)
        atom_mask = np.repeat(features["atom_attention_mask"], samples, axis=0)
        if sampler_noise is None:
            steps = len(noise_schedule(schedule, num_steps)[0]) - 1
            sampler_noise = SamplerNoise.draw(np.random.default_rng(seed), steps, samples, atom_mask.shape[1])
        from flamino_core.model.esmfold2.diffusion import denoise

        coords = sample_structure(lambda x, level: denoise(head_graphdef, head_state, conditioning, x, level),
                                  atom_mask, sampler_noise, schedule, num_steps)
        confidence = _confidence(graphdef, state, trunk, jnp_features, coords, samples, chains)
    out = {key: np.asarray(confidence[key]) for key in ("plddt", "plddt_per_atom", "pae", "ptm", "iptm",
                                                         "pair_chains_iptm", "complex_plddt")}
    out["sample_atom_coords"] = np.asarray(coords)
    return out


def fold_complex(model, chains: Sequence[Chain | str], name: str = "prediction",
                 chain_names: Sequence[str] | None = None, **options) -> FoldedComplex:
    """Predict the structure of a complex (one chain or several) and keep its best sample.

    Args:
      model: an ``EsmFold2``.
      chains: the chains in order (lettered A, B, ...); strings are protein chains.
      name: what the prediction is called (files, messages).
      chain_names: what each chain is called (default: ``name`` for one chain, else its letter).
      options: ``fold_arrays``'s keyword arguments (stem, seed, num_samples, num_steps, num_loops, ...).

    Raises:
      ValueError: a chain that cannot be featurised (said before any work), naming it.
    """
    checked = check_chains(chains, name)
    features = prepare_features(checked, name)
    out = fold_arrays(model, features, **options)
    best = int(np.argmax(out["ptm"]))  # _rank_samples: pTM first
    real = features["atom_attention_mask"][0]
    ids = tuple(CHAIN_IDS[:len(checked)])
    if chain_names is None:
        chain_names = (name,) if len(checked) == 1 else ids
    return FoldedComplex(
        name=name, chain_ids=ids, chain_names=tuple(chain_names), sequences=tuple(c.sequence for c in checked),
        positions=out["sample_atom_coords"][best][real], plddt_atoms=out["plddt_per_atom"][best][real],
        plddt=out["plddt"][best], pae=out["pae"][best], ptm=float(out["ptm"][best]),
        iptm=float(out["iptm"][best]), chain_pair_iptm=out["pair_chains_iptm"][best],
        complex_plddt=float(out["complex_plddt"][best]), sample=best, samples=len(out["ptm"]))
