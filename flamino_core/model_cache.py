"""Weights in memory (``ModelWeights``) and on disk: flamino checkpoint folders and the Orbax
cache under ``FLAMINO_CACHE`` (default ``~/.cache/flamino``).

A checkpoint folder holds the config as JSON (``CONFIG_FILE``), the parameters as an Orbax
checkpoint (``PARAMS_DIR``) and where they came from with a checksum (``SOURCE_FILE``). Every
source is converted once into such a folder under ``models/`` in the cache; later starts
restore it. The identifiers and sources are in ``weights.py``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Callable

import numpy as np

from .config import PRESETS, ESM2Config

# Files of a flamino checkpoint directory (also the layout of each cache entry).
CONFIG_FILE = "flamino_config.json"
PARAMS_DIR = "params"
SOURCE_FILE = "source.json"

Progress = Callable[[float | None, str], None]


class ModelError(ValueError):
    """A model identifier that cannot be used (unknown name, unreadable file, bad format)."""


class ModelNotAvailableError(ModelError):
    """The weights are not on this machine and cannot be downloaded now."""


@dataclasses.dataclass(frozen=True)
class ModelWeights:
    """Weights ready to build a model from."""

    name: str  # what the user asked for, for display
    config: ESM2Config
    params: dict  # pure nested dict of NumPy arrays, see convert.state_dict_to_params
    source: str  # where they came from
    is_random: bool = False  # untrained test model: never present its output as biology
    checksum: str = ""  # params_checksum when known (a cache entry records it); "" = not computed


def cache_root() -> Path:
    return Path(os.environ.get("FLAMINO_CACHE") or Path.home() / ".cache" / "flamino")


def cached_or_convert(key: str, identifier: str, convert, progress: Progress) -> ModelWeights:
    """The cache entry ``key`` restored, or ``convert()`` (config, params, source) run and saved there.

    A damaged entry is rebuilt, never used.
    """
    entry = cache_root() / "models" / key
    if (entry / SOURCE_FILE).exists():
        try:
            return restore(entry, identifier)
        except Exception as err:  # a damaged entry is rebuilt, never used
            progress(None, f"Cache entry {entry} is damaged ({type(err).__name__}); rebuilding")
            shutil.rmtree(entry, ignore_errors=True)
    config, params, source = convert()
    progress(None, "Saving converted weights to the cache")
    save_checkpoint(entry, config, params, source)
    return ModelWeights(identifier, config, params, source, checksum=params_checksum(params))


def save_checkpoint(
    directory: Path, config: ESM2Config, params: dict, source: str, is_random: bool = False
) -> Path:
    """Write a flamino checkpoint: the config as JSON and the parameters as an Orbax checkpoint.

    Written to a temporary sibling and renamed, so an interrupted save never looks complete.
    """
    import orbax.checkpoint as ocp

    directory = Path(directory).absolute()
    tmp = directory.with_name(directory.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    config.save(tmp / CONFIG_FILE)
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(tmp / PARAMS_DIR, params)
    checkpointer.wait_until_finished()  # the save is asynchronous
    checksum = params_checksum(params)
    (tmp / SOURCE_FILE).write_text(
        json.dumps(
            {"source": source, "created": time.time(), "checksum": checksum, "is_random": is_random}, indent=2
        )
    )
    shutil.rmtree(directory, ignore_errors=True)
    tmp.rename(directory)
    return directory


def restore(directory: Path, identifier: str) -> ModelWeights:
    """A flamino checkpoint folder back into memory, its checksum verified."""
    import jax
    import orbax.checkpoint as ocp
    from flax import nnx

    from .model import ESM2

    directory = Path(directory).absolute()
    config = ESM2Config.load(directory / CONFIG_FILE)
    abstract = nnx.to_pure_dict(nnx.state(nnx.eval_shape(lambda: ESM2(config, nnx.Rngs(0)))))
    restored = ocp.StandardCheckpointer().restore(directory / PARAMS_DIR, abstract)
    params = jax.tree.map(np.asarray, restored)
    meta = json.loads((directory / SOURCE_FILE).read_text()) if (directory / SOURCE_FILE).exists() else {}
    checksum = params_checksum(params)
    if meta.get("checksum") and meta["checksum"] != checksum:
        raise ModelError(f"checkpoint {directory} is corrupted (checksum mismatch)")
    return ModelWeights(
        identifier, config, params, meta.get("source", str(directory)), is_random=bool(meta.get("is_random")),
        checksum=checksum,
    )


def params_checksum(params: dict) -> str:
    """SHA-256 over every array, in a fixed order: detects a damaged cache entry."""
    import jax

    digest = hashlib.sha256()
    leaves = jax.tree_util.tree_flatten_with_path(params)[0]
    for path, leaf in sorted(leaves, key=lambda item: jax.tree_util.keystr(item[0])):
        digest.update(jax.tree_util.keystr(path).encode())
        digest.update(np.ascontiguousarray(np.asarray(leaf, dtype=np.float32)).tobytes())
    return digest.hexdigest()


def cached_presets() -> set[str]:
    """Preset names that are converted and cached on this machine."""
    root = cache_root() / "models"
    return {n for n in PRESETS if (root / preset_key(n) / SOURCE_FILE).exists()}


def preset_key(name: str) -> str:
    """The cache entry of a published preset."""
    return f"hub-{name}"
