"""ESMFold2 checkpoints: a folder written by transformers' ``EsmFold2Model.save_pretrained``
(``config.json`` + ``model.safetensors``, its key names) into ``model.esmfold2.model.EsmFold2``.

The bundled language model (``esmc.*``) goes through the language models' converter
(``convert.state_dict_to_params``, ESM C's transformers names; ESMFold2 bundles ``EsmcModel``, which
has no LM head: zeros stand in for flamino's and are dropped). Every other key names its module as
our attributes do: a torch ``Linear``'s ``weight`` is our ``kernel`` transposed, a LayerNorm's our
``scale``, an ``Embedding``'s our ``embedding``, anything else (buffers such as the Fourier
``frequencies`` and ``boundaries``, raw parameters such as ``plddt_weight``) the same name. A
``<stack>.layers.<i>.*`` key is index i of a list of layers or of a stacked one (our pair-update
stacks keep their layers on a leading axis). Strict: every missing, unexpected and misshapen key
is listed in one error.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Mapping

import numpy as np

from flamino_core.model.esmfold2.config import EsmFold2Config
from flamino_core.weights.convert import CheckpointMismatchError, network_holding, network_shapes
from flamino_core.weights.convert import expected_params as language_model_shapes
from flamino_core.weights.convert import state_dict_to_params as language_model_params

TITLE = "ESMFold2"
_INDEX = re.compile(r"\d+")


def expected_params(config: EsmFold2Config) -> dict:
    """The model's state as a pure nested dict of shapes (no arrays)."""
    from flamino_core.model.esmfold2.model import EsmFold2

    return network_shapes(EsmFold2, config)


def params_to_model(params: dict, config: EsmFold2Config):
    from flamino_core.model.esmfold2.model import EsmFold2

    return network_holding(EsmFold2, params, config)


def _leaves(tree: dict, prefix: tuple = ()):
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from _leaves(value, prefix + (key,))
        else:
            yield prefix + (key,), value


def _set(tree: dict, path: tuple, value) -> None:
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


_TORCH_LEAF = {"kernel": "weight", "scale": "weight", "embedding": "weight"}


def checkpoint_key(path: tuple, index: int | None = None) -> str:
    """How the checkpoint spells one of our leaves; a stacked leaf's layer as ``index`` (``*`` if None)."""
    parts = [str(p) for p in path[:-1]] + [_TORCH_LEAF.get(path[-1], str(path[-1]))]
    if "layers" in parts and not any(_INDEX.fullmatch(p) for p in parts):
        parts.insert(parts.index("layers") + 1, "*" if index is None else str(index))
    return ".".join(parts)


def _candidates(path: tuple, value: np.ndarray):
    """(our leaf path, value) spellings of a torch leaf, most likely first."""
    module, leaf = path[:-1], path[-1]
    if leaf == "weight":
        yield module + ("kernel",), value.T
        yield module + ("scale",), value
        yield module + ("embedding",), value
    yield path, value


def _place(key: str, value: np.ndarray, shapes: dict):
    """(our path, layer index or None, value) for a non-stem key, or None if nothing of ours fits.
    A ``layers.<i>`` key is tried as a list entry, then as index i of a stacked leaf."""
    parts = tuple(int(p) if _INDEX.fullmatch(p) else p for p in key.split("."))
    for path, placed in _candidates(parts, value):
        if path in shapes:
            return path, None, placed
    if "layers" in parts and isinstance(parts[parts.index("layers") + 1], int):
        at = parts.index("layers") + 1
        stacked = parts[:at] + parts[at + 1:]
        for path, placed in _candidates(stacked, value):
            if path in shapes:
                return path, parts[at], placed
    return None


def _stem_params(state_dict: Mapping[str, np.ndarray], config: EsmFold2Config, source: str):
    """(ESM C params or None, missing, unexpected, mismatched) from the ``esmc.`` keys."""
    stem = {k: v for k, v in state_dict.items() if k.startswith("esmc.")}
    head = language_model_shapes(config.esmc)["lm_head"]
    stand_in = {}
    for path, leaf in _leaves(head):
        name = "esmc.lm_head." + checkpoint_key(path)
        shape = tuple(leaf.shape)[::-1] if path[-1] == "kernel" else tuple(leaf.shape)
        stand_in[name] = np.zeros(shape, np.float32)
    try:
        params = language_model_params({**stem, **stand_in}, config.esmc, source)
    except CheckpointMismatchError as error:
        def prefix(names):  # the converter names a missing tensor by our leaf: say it as the checkpoint would
            names = [re.sub(r"\.(scale|kernel|embedding)\b", ".weight", n) for n in names]
            return [n if n.startswith("esmc.") else f"esmc.{n}" for n in names]

        return None, prefix(error.missing), prefix(error.unexpected), prefix(error.mismatched)
    params.pop("lm_head")
    return params, [], [], []


def state_dict_to_params(state_dict: Mapping[str, np.ndarray], config: EsmFold2Config,
                         source: str = "checkpoint") -> dict:
    """Convert an ``EsmFold2Model`` state dict into ``EsmFold2(config)``'s pure state dict.

    Raises:
      CheckpointMismatchError: every missing, unexpected and misshapen key at once.
    """
    expected = expected_params(config)
    shapes = {path: tuple(leaf.shape) for path, leaf in _leaves(expected) if path[0] != "esmc"}
    stem, missing, unexpected, mismatched = _stem_params(state_dict, config, source)
    flat, stacked = {}, {}
    for key, value in state_dict.items():
        if key.startswith("esmc."):
            continue
        placed = _place(key, np.asarray(value, np.float32), shapes)
        if placed is None:
            unexpected.append(key)
        elif placed[1] is None:
            flat[placed[0]] = placed[2]
        else:
            stacked.setdefault(placed[0], {})[placed[1]] = placed[2]
    for path, layers in stacked.items():
        depth = shapes[path][0]
        unexpected += [checkpoint_key(path, i) for i in sorted(layers) if i >= depth]
        missing += [checkpoint_key(path, i) for i in range(depth) if i not in layers]
        bad = [i for i in range(depth) if i in layers and layers[i].shape != shapes[path][1:]]
        mismatched += [f"{checkpoint_key(path, i)}: checkpoint {layers[i].shape} vs model {shapes[path][1:]}"
                       for i in bad]
        if all(i in layers for i in range(depth)) and not bad:
            flat[path] = np.stack([layers[i] for i in range(depth)])
    params = {"esmc": stem} if stem is not None else {}
    for path, shape in shapes.items():
        if path not in flat:
            if path not in stacked:  # a partly present stacked leaf is listed per layer above
                missing.append(checkpoint_key(path))
        elif flat[path].shape != shape:
            mismatched.append(f"{checkpoint_key(path)}: checkpoint {flat[path].shape} vs model {shape}")
        else:
            _set(params, path, flat[path])
    if missing or unexpected or mismatched:
        raise CheckpointMismatchError(source, sorted(missing), sorted(unexpected), mismatched, TITLE)
    return params


_WEIGHTS, _INDEX_FILE = "model.safetensors", "model.safetensors.index.json"


def read_config(folder: Path | str) -> EsmFold2Config:
    """The ``EsmFold2Config`` of a ``save_pretrained`` folder.

    Raises:
      ValueError: the folder lacks config.json or its weights (model.safetensors, or the shards an
        index names), or is not ESMFold2's.
    """
    folder = Path(folder)
    config_path = folder / "config.json"
    if not config_path.exists() or not ((folder / _WEIGHTS).exists() or (folder / _INDEX_FILE).exists()):
        raise ValueError(f"{folder} is not an ESMFold2 folder: expected config.json and model.safetensors (or "
                         f"{_INDEX_FILE} and its shards), as EsmFold2Model.save_pretrained writes them")
    return EsmFold2Config.from_dict(json.loads(config_path.read_text()), name=folder.name)


def read_state_dict(folder: Path | str) -> dict[str, np.ndarray]:
    """Every tensor of a ``save_pretrained`` folder as fp32 NumPy: one ``model.safetensors`` or the
    shards its index names; bf16 and fp16 files widened (NumPy has no bfloat16: read through JAX,
    on the host).

    Raises:
      ValueError: a shard the index names is missing.
    """
    import jax
    from safetensors import safe_open

    folder = Path(folder)
    if (folder / _WEIGHTS).exists():
        files = [folder / _WEIGHTS]
    else:
        names = sorted(set(json.loads((folder / _INDEX_FILE).read_text())["weight_map"].values()))
        files = [folder / name for name in names]
        if absent := [f.name for f in files if not f.exists()]:
            raise ValueError(f"{folder}: {_INDEX_FILE} names shards that are not there: {', '.join(absent)}")
    state: dict[str, np.ndarray] = {}
    with jax.default_device(jax.devices("cpu")[0]):
        for path in files:
            with safe_open(str(path), "flax") as handle:
                for key in handle.keys():
                    value = np.asarray(handle.get_tensor(key))
                    # kind "V": ml_dtypes' bfloat16, which is what JAX hands back for BF16
                    state[key] = value.astype(np.float32) if value.dtype.kind in "fV" else value
    return state


def load_esmfold2(folder: Path | str):
    """The ``EsmFold2`` model of a ``save_pretrained`` folder, in fp32.

    Raises:
      ValueError: not an ESMFold2 folder (``read_config``).
      CheckpointMismatchError: the tensors do not fit the config (every key listed).
    """
    config = read_config(folder)
    params = state_dict_to_params(read_state_dict(folder), config, str(folder))
    return params_to_model(params, config)
