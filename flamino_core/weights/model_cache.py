"""Weights in memory (``ModelWeights``) and on disk: flamino checkpoint folders and the cache
of converted weights under ``FLAMINO_CACHE`` (default ``~/.cache/flamino``).

A checkpoint folder holds the config as JSON (``CONFIG_FILE``), the parameters as one
safetensors file (``PARAMS_FILE``, ``param_files.py``: read in one piece, milliseconds for the
small models) and where they came from with a CRC-32 per tensor (``SOURCE_FILE``). Every source
is converted once into such a folder under ``models/``
in the cache; later starts restore it. Folders written by flamino before 2026-12 hold an Orbax
checkpoint (``PARAMS_DIR``) with a SHA-256 instead: still read (Orbax is imported only then),
and a cache entry of that kind is rewritten in the new layout on first use. The identifiers
and sources are in ``weights.py``.
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

from flamino_core import settings
from flamino_core.model.config import PRESETS, ModelConfig
from flamino_core.weights.param_files import (
    ParamFileError, checksums, flatten, flatten_shapes, read_params, write_params,
)

# Files of a flamino checkpoint directory (also the layout of each cache entry).
CONFIG_FILE = "flamino_config.json"
PARAMS_FILE = "params.safetensors"
PARAMS_DIR = "params"  # the Orbax checkpoint of folders written before PARAMS_FILE
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
    config: ModelConfig
    params: dict | None  # pure nested dict of NumPy arrays, see convert.state_dict_to_params (None: an engine's)
    source: str  # where they came from
    is_random: bool = False  # untrained test model: never present its output as biology
    checksum: str = ""  # params_checksum when known (a cache entry records it); "" = not computed


def cache_root() -> Path:
    return Path(settings.CACHE.get() or Path.home() / ".cache" / "flamino")


def cached_or_convert(key: str, identifier: str, convert, progress: Progress) -> ModelWeights:
    """The cache entry ``key`` restored, or ``convert()`` (config, params, source) run and saved there.

    A damaged entry is rebuilt, never used.
    """
    entry = cache_root() / "models" / key
    if (entry / SOURCE_FILE).exists():
        try:
            weights = restore(entry, identifier)
        except Exception as err:  # a damaged entry is rebuilt, never used
            progress(None, f"Cache entry {entry} is damaged ({type(err).__name__}); rebuilding")
            shutil.rmtree(entry, ignore_errors=True)
        else:
            if not (entry / PARAMS_FILE).exists():  # an Orbax entry of an older flamino: rewrite it once
                save_checkpoint(entry, weights.config, weights.params, weights.source, weights.is_random)
            return weights
    config, params, source = convert()
    progress(None, "Saving converted weights to the cache")
    save_checkpoint(entry, config, params, source)
    return ModelWeights(identifier, config, params, source, checksum=params_checksum(params))


def save_checkpoint(
    directory: Path, config: ModelConfig, params: dict, source: str, is_random: bool = False
) -> Path:
    """Write a flamino checkpoint: the config as JSON, the parameters as float32 safetensors and
    each tensor's CRC-32 (``param_files``).

    Written to a temporary sibling and renamed, so an interrupted save never looks complete.
    """
    directory = Path(directory).absolute()
    tmp = directory.with_name(directory.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    config.save(tmp / CONFIG_FILE)
    crcs = write_params(tmp / PARAMS_FILE, params)
    (tmp / SOURCE_FILE).write_text(
        json.dumps({"source": source, "created": time.time(), "crc32": crcs, "is_random": is_random}, indent=2)
    )
    shutil.rmtree(directory, ignore_errors=True)
    tmp.rename(directory)
    return directory


def restore(directory: Path, identifier: str) -> ModelWeights:
    """A flamino checkpoint folder back into memory, its checksums verified and its arrays
    checked against the model's structure.

    Raises:
      ModelError: the folder is damaged (unreadable, truncated, a checksum mismatch) or does not
        hold this model's parameters.
    """
    directory = Path(directory).absolute()
    config = ModelConfig.load(directory / CONFIG_FILE)
    meta = json.loads((directory / SOURCE_FILE).read_text()) if (directory / SOURCE_FILE).exists() else {}
    if (directory / PARAMS_FILE).exists():
        crcs = meta.get("crc32") or {}
        try:
            params = read_params(directory / PARAMS_FILE, crcs)
        except (OSError, ParamFileError) as err:
            raise ModelError(f"checkpoint {directory} is corrupted ({err})") from None
        checksum = checksum_of(crcs)  # read_params verified every CRC: what params_checksum would give
    elif (directory / PARAMS_DIR).is_dir():
        params = _restore_orbax(directory, config, meta)
        checksum = params_checksum(params)
    else:
        raise ModelError(f"checkpoint {directory} is corrupted ({PARAMS_FILE} is missing)")
    _check_structure(params, config, directory)
    return ModelWeights(
        identifier, config, params, meta.get("source", str(directory)), is_random=bool(meta.get("is_random")),
        checksum=checksum,
    )


def _restore_orbax(directory: Path, config: ModelConfig, meta: dict) -> dict:
    """The parameters of a folder written before ``PARAMS_FILE`` (Orbax, SHA-256 checksum)."""
    import jax
    import orbax.checkpoint as ocp

    from flamino_core.weights.convert import expected_params

    restored = ocp.StandardCheckpointer().restore(directory / PARAMS_DIR, expected_params(config))
    params = jax.tree.map(np.asarray, restored)
    if meta.get("checksum") and meta["checksum"] != _orbax_sha256(params):
        raise ModelError(f"checkpoint {directory} is corrupted (checksum mismatch)")
    return params


def _check_structure(params: dict, config: ModelConfig, directory: Path) -> None:
    """Refuse parameters that are not this model's (a folder from a flamino whose model differs).
    The model's shapes come from the abstract model that ``params_to_model`` reuses."""
    from flamino_core.weights.convert import expected_params

    want, have = flatten_shapes(expected_params(config)), flatten_shapes(params)
    if want != have:
        differ = sorted(k for k in want.keys() | have.keys() if want.get(k) != have.get(k))
        raise ModelError(f"checkpoint {directory} does not hold this model's parameters (differ: {', '.join(differ)})")


def params_checksum(params: dict) -> str:
    """What the weights are, as a key (``ModelWeights.checksum``, ``Engine.fingerprint``): a
    SHA-256 of every tensor's name and CRC-32, in name order. The same weights give the same
    key wherever they come from; a cache entry gives it from the CRCs it stores (``checksum_of``)
    without hashing its arrays again."""
    return checksum_of(checksums(flatten(params)))


def checksum_of(crcs: dict[str, int]) -> str:
    """``params_checksum`` of parameters whose tensors have these CRC-32s."""
    return hashlib.sha256(json.dumps(sorted(crcs.items())).encode()).hexdigest()


def _orbax_sha256(params: dict) -> str:
    """SHA-256 over every array, in a fixed order: the checksum of Orbax folders (before ``PARAMS_FILE``)."""
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
