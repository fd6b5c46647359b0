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

from flamino_core.weights.checkpoint_files import convert_hf_files, load_local
from flamino_core.model.config import PRESETS, ESM2Config
from flamino_core.weights.hub import HUB_ORG, cached_hub_weights, hub_reachable, preset_files
from flamino_core.weights.hub import offline_message  # noqa: F401  (re-exported, like the names below)
from flamino_core.weights.model_cache import (  # noqa: F401  (re-exported: the rest of flamino imports them from here)
    ModelError, ModelNotAvailableError, ModelWeights, Progress, cache_root, cached_or_convert, cached_presets,
    preset_key, save_checkpoint,
)  # fmt: skip

DEFAULT_MODEL = "esm2_t12_35M_UR50D"
RANDOM_PREFIX = "random:"


def default_model() -> str:
    return os.environ.get("FLAMINO_MODEL") or DEFAULT_MODEL


def _noop(fraction: float | None, message: str) -> None:
    pass


# --- the public entry point ----------------------------------------------------------------
def load_weights(
    identifier: str | None = None,
    *,
    progress: Progress | None = None,
    allow_local_paths: bool = True,
    allow_pickle: bool = True,
) -> ModelWeights:
    """Find, download or convert the weights named by ``identifier``.

    Args:
      identifier: a preset name (``esm2_t33_650M_UR50D``, optionally ``facebook/``-prefixed), a
        local HF model directory, a fair-esm ``.pt`` file, a flamino checkpoint directory, or
        ``random:<preset|tiny>[:seed]`` for an untrained test model. None: ``FLAMINO_MODEL`` or
        the default.
      progress: called with (fraction or None, message) during long steps.
      allow_local_paths: False on the hosted demo: server paths cannot be named.
      allow_pickle: False on the hosted demo: no ``.pt``/``.bin`` pickles are opened.

    Raises:
      ModelError: unknown identifier or unusable files (message says why and what to do).
      ModelNotAvailableError: offline and not cached (message says how to get the weights).
    """
    progress = progress or _noop
    identifier = (identifier or default_model()).strip()
    if identifier.startswith(RANDOM_PREFIX):
        return random_weights(identifier)
    hub_name = identifier.removeprefix(f"{HUB_ORG}/")
    if hub_name in PRESETS:
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
        f"model.safetensors, a fair-esm .pt file, or 'random:tiny' for an untrained test model"
    )


def random_weights(identifier: str) -> ModelWeights:
    """``random:<preset|tiny>[:seed]``: untrained weights, deterministic per seed."""
    spec = identifier[len(RANDOM_PREFIX):] or "tiny"
    name, _, seed_text = spec.partition(":")
    try:
        seed = int(seed_text or 0)
        config = ESM2Config.tiny() if name == "tiny" else ESM2Config.preset(name)
    except ValueError as err:
        raise ModelError(f"bad test model {identifier!r}: {err}") from None
    import jax
    from flax import nnx

    from flamino_core.model.esm2 import ESM2

    model = ESM2(config, nnx.Rngs(seed))
    params = jax.tree.map(np.asarray, nnx.to_pure_dict(nnx.state(model)))
    return ModelWeights(f"untrained test model ({spec})", config, params, identifier, is_random=True)


def _download_preset(name: str, progress: Progress, allow_pickle: bool) -> tuple[ESM2Config, dict, str]:
    config_path, weights_path = preset_files(name, progress)
    progress(None, f"Converting {name}")
    return convert_hf_files(config_path, weights_path, name, allow_pickle=allow_pickle)


def convert_to_checkpoint(source: str, output: Path | None = None, progress: Progress | None = None) -> Path:
    """``flamino convert``: load any supported source and write a flamino checkpoint directory."""
    weights = load_weights(source, progress=progress)
    output = Path(output) if output else Path(Path(source).name.removesuffix(".pt") + "-flamino")
    return save_checkpoint(output, weights.config, weights.params, weights.source, weights.is_random)


def available_now(identifier: str, reachable: bool | None = None) -> bool:
    """Whether ``load_weights(identifier)`` can find the weights now, without a download that
    cannot happen: an untrained model; a preset converted in the cache, in the Hugging Face cache
    (``HF_HOME``) or on a reachable Hub; an existing local path. Says nothing about whether the
    files are valid (loading says that).

    Args:
      reachable: whether the Hub answers, if the caller knows (it takes up to 3 s to ask).
    """
    identifier = identifier.strip()
    if identifier.startswith(RANDOM_PREFIX):
        return True
    name = identifier.removeprefix(f"{HUB_ORG}/")
    if name in PRESETS:
        if name in cached_presets():
            return True
        try:
            cached_hub_weights(f"{HUB_ORG}/{name}")
            return True
        except FileNotFoundError:
            pass
        return hub_reachable() if reachable is None else reachable
    return Path(identifier).expanduser().exists()
