"""Resolve a model identifier to weights: Hub presets, local HF directories, fair-esm ``.pt``
files, flamino checkpoints, and the labelled untrained test model.

Whatever the source, converted weights are written once as one safetensors file (a CRC-32 per
array) plus the config as JSON under ``FLAMINO_CACHE`` (default ``~/.cache/flamino``); later
starts read that (Orbax folders of earlier versions are still read, see ``model_cache.py``). The
pieces: ``hub.py`` (downloads), ``checkpoint_files.py`` (reading published files),
``model_cache.py`` (``ModelWeights``, checkpoint folders, the cache). This module is the one
entry point (``load_weights``) and re-exports what callers use.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from flamino_core import settings
from flamino_core.weights.checkpoint_files import convert_evolutionaryscale, convert_hf_files, load_local
from flamino_core.model.config import PRESETS, ModelConfig
from flamino_core.model.families import FAMILIES
from flamino_core.model.model_id import ModelId
from flamino_core.weights.hub import cached_hub_weights, hub_reachable, preset_files
from flamino_core.weights.hub import offline_message  # noqa: F401  (re-exported, like the names below)
from flamino_core.weights.model_cache import (  # noqa: F401  (re-exported: the rest of flamino imports them from here)
    ModelError, ModelNotAvailableError, ModelWeights, Progress, cache_root, cached_or_convert, cached_presets,
    preset_key, save_checkpoint,
)

DEFAULT_MODEL = "esm2_t12_35M_UR50D"


def default_model() -> str:
    return settings.MODEL.get() or DEFAULT_MODEL


def _noop(fraction: float | None, message: str) -> None:
    pass


# --- the public entry point ----------------------------------------------------------------
def load_weights(
    identifier: str | ModelId | None = None,
    *,
    progress: Progress | None = None,
    allow_local_paths: bool = True,
    allow_pickle: bool = True,
) -> ModelWeights:
    """Find, download or convert the weights named by ``identifier``.

    Args:
      identifier: a preset name (``esm2_t33_650M_UR50D``, optionally ``facebook/``-prefixed), a
        local HF model directory, a fair-esm ``.pt`` file, a flamino checkpoint directory, or
        ``random:<preset|tiny|tiny-<family>>[:seed]`` for an untrained test model, as text or
        already parsed (a ``ModelId``: not parsed again). None: ``FLAMINO_MODEL`` or the default.
      progress: called with (fraction or None, message) during long steps.
      allow_local_paths: False on the hosted demo: server paths cannot be named.
      allow_pickle: False on the hosted demo: no ``.pt``/``.bin`` pickles are opened.

    Raises:
      ModelError: unknown identifier or unusable files (message says why and what to do).
      ModelNotAvailableError: offline and not cached (message says how to get the weights).
    """
    progress = progress or _noop
    model_id = _parsed(identifier or default_model())
    identifier = model_id.text
    if model_id.is_random:
        return random_weights(model_id)
    try:
        members = model_id.members
    except ValueError as err:
        raise ModelError(str(err)) from None
    if members:
        raise ModelError(f"{identifier} is an ensemble of {len(members)} models: it scores variants "
                         "(flamino dms, flamino variants, the Variant effects page's Compare models); "
                         f"for anything else choose one of its members ({', '.join(members)})")
    hub_name = model_id.preset
    if hub_name is not None:
        return cached_or_convert(
            preset_key(hub_name), identifier, lambda: _download_preset(hub_name, progress, allow_pickle), progress
        )
    path = Path(identifier).expanduser()
    if path.exists():
        if not allow_local_paths:
            raise ModelError("local model paths are disabled on this server; choose a preset model")
        return load_local(path, identifier, progress, allow_pickle)
    looks_like_path = os.sep in identifier or identifier.endswith((".pt", ".safetensors", ".bin"))
    if looks_like_path:
        raise ModelError(f"model path {identifier!r} does not exist")
    known = ", ".join(PRESETS)
    raise ModelError(
        f"unknown model {identifier!r}: use one of {known}, a local directory with config.json and "
        f"model.safetensors, a fair-esm .pt or EvolutionaryScale .pth file, or 'random:tiny' for an "
        f"untrained test model"
    )


def _parsed(identifier: str | ModelId) -> ModelId:
    """The identifier as a ``ModelId``, parsed only when the caller has not (issue 49)."""
    return identifier if isinstance(identifier, ModelId) else ModelId.parse(identifier)


def is_tiny_test_model(model_id: ModelId) -> bool:
    """Whether ``model_id`` is a two-layer test model (``random:tiny``, ``random:tiny-<family>``,
    any seed): as small as ``random:tiny``, so a share link may open on it (#66 D5)."""
    name, _, seed = model_id.random_spec.partition(":")
    family = "esm2" if name == "tiny" else name.removeprefix("tiny-") if name.startswith("tiny-") else None
    return model_id.is_random and family in FAMILIES and (seed == "" or seed.isdigit())


def tiny_test_models() -> list[str]:
    """The two-layer test models, one per family (``random:tiny-esm2`` ...), for messages."""
    return [f"random:tiny-{family}" for family in FAMILIES]


def random_weights(model_id: ModelId) -> ModelWeights:
    """``random:<preset|tiny|tiny-<family>>[:seed]``: untrained weights, deterministic per seed
    (``tiny-esm1b``, ``tiny-esmc``: the two-layer model of that family). Takes the parsed id
    (issue #49: a load parsed its identifier twice)."""
    identifier = model_id.text
    spec = model_id.random_spec or "tiny"
    name, _, seed_text = spec.partition(":")
    try:
        seed = int(seed_text or 0)
        tiny_family = name.removeprefix("tiny-") if name.startswith("tiny-") else ("esm2" if name == "tiny" else None)
        if tiny_family is not None and tiny_family not in FAMILIES:
            raise ValueError(f"no family {tiny_family!r} (tiny-{', tiny-'.join(FAMILIES)})")
        config = ModelConfig.tiny(tiny_family) if tiny_family else ModelConfig.preset(name)
    except ValueError as err:
        raise ModelError(f"bad test model {identifier!r}: {err}") from None
    import jax
    from flax import nnx

    model = config_network(config)(config, nnx.Rngs(seed))
    params = jax.tree.map(np.asarray, nnx.to_pure_dict(nnx.state(model)))
    return ModelWeights(f"untrained test model ({spec})", config, params, identifier, is_random=True)


def config_network(config: ModelConfig):
    """The Flax module class of the config's family."""
    return FAMILIES[config.family].network_class()


def _download_preset(name: str, progress: Progress, allow_pickle: bool) -> tuple[ModelConfig, dict, str]:
    config_path, weights_path = preset_files(name, progress)
    progress(None, f"Converting {name}")
    if config_path is None:  # EvolutionaryScale's one .pth (a pickle, read with weights_only)
        if not allow_pickle:
            raise ModelError(f"{name} is published as a pickle (.pth); pickles are not opened on this server")
        return convert_evolutionaryscale(weights_path)
    return convert_hf_files(config_path, weights_path, name, allow_pickle=allow_pickle)


def convert_to_checkpoint(source: str, output: Path | None = None, progress: Progress | None = None) -> Path:
    """``flamino convert``: load any supported source and write a flamino checkpoint directory."""
    weights = load_weights(source, progress=progress)
    output = Path(output) if output else Path(Path(source).name.removesuffix(".pt") + "-flamino")
    return save_checkpoint(output, weights.config, weights.params, weights.source, weights.is_random)


def available_now(identifier: str | ModelId, reachable: bool | None = None) -> bool:
    """Whether ``load_weights(identifier)`` can find the weights now, without a download that
    cannot happen: an untrained model; a preset converted in the cache, in the Hugging Face cache
    (``HF_HOME``) or on a reachable Hub; an existing local path. Says nothing about whether the
    files are valid (loading says that).

    Args:
      identifier: as text, or already parsed (a ``ModelId``).
      reachable: whether the Hub answers, if the caller knows (it takes up to 3 s to ask).
    """
    model_id = _parsed(identifier)
    if model_id.is_random:
        return True
    name = model_id.preset
    if name is not None:
        if name in cached_presets():
            return True
        try:
            cached_hub_weights(PRESETS[name].repo, name)
            return True
        except FileNotFoundError:
            pass
        return hub_reachable() if reachable is None else reachable
    return Path(model_id.text).expanduser().exists()
