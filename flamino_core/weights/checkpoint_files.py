"""Reading published checkpoint files into flamino's parameters: Hugging Face model folders
(``config.json`` + ``model.safetensors``, its shards with ``model.safetensors.index.json``, or
``pytorch_model.bin``: ESM-2, ESM-1b, ESM-1v, ESM C),
fair-esm ``.pt`` files (ESM-2, ESM-1b, ESM-1v; with their ``-contact-regression.pt``),
EvolutionaryScale's ESM C ``.pth`` files, and flamino checkpoint folders. Pickles (``.bin``, ``.pt``) are
opened with ``torch.load(weights_only=True)`` only, and not at all where ``allow_pickle`` is off.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Mapping

import numpy as np

from flamino_core.alphabet import MASK_IDX
from flamino_core.model.config import ModelConfig
from flamino_core.model.families import families_sentence, family, family_from_name, rotary_esm_family
from flamino_core.weights.convert import state_dict_to_params
from flamino_core.weights.key_maps import evolutionaryscale_shape, is_evolutionaryscale
from flamino_core.weights.param_files import ParamFileError, map_safetensors
from flamino_core.weights.model_cache import (
    CONFIG_FILE, PARAMS_FILE, ModelError, ModelWeights, Progress, cached_or_convert, restore,
)

SHARD_INDEX = "model.safetensors.index.json"  # transformers' sharded layout: the shards beside it


def load_local(path: Path, identifier: str, progress: Progress, allow_pickle: bool) -> ModelWeights:
    """Weights from a local folder or ``.pt`` file, converted once into the cache."""
    if path.is_dir() and (path / CONFIG_FILE).exists():
        return restore(path, identifier)
    if path.is_dir() and not (path / "config.json").exists() and len(list(path.glob("data/weights/*.pth"))) == 1:
        path = next(path.glob("data/weights/*.pth"))  # an EvolutionaryScale snapshot folder
    if path.is_dir():
        config_path = path / "config.json"
        candidates = [path / "model.safetensors", path / SHARD_INDEX, path / "pytorch_model.bin"]
        weights_path = next((p for p in candidates if p.exists()), None)
        if not config_path.exists() or weights_path is None:
            raise ModelError(
                f"{path} is not a model directory: expected config.json with model.safetensors "
                f"(or its shards and {SHARD_INDEX}, or pytorch_model.bin), or a flamino checkpoint "
                f"({CONFIG_FILE} + {PARAMS_FILE})"
            )
        files = [config_path, weights_path, *shard_files(weights_path)]
        convert = lambda: convert_hf_files(config_path, weights_path, path.name, allow_pickle)  # noqa: E731
    elif path.suffix == ".pt":
        if not allow_pickle:
            raise ModelError("fair-esm .pt files are disabled on this server")
        regression = path.with_name(path.stem + "-contact-regression.pt")
        files = [path] + ([regression] if regression.exists() else [])
        convert = lambda: _convert_fair_esm(path)  # noqa: E731
    elif path.suffix == ".pth":
        if not allow_pickle:
            raise ModelError("EvolutionaryScale .pth files are disabled on this server")
        files = [path]
        convert = lambda: convert_evolutionaryscale(path)  # noqa: E731
    else:
        raise ModelError(
            f"{path}: not a model directory, fair-esm .pt or EvolutionaryScale .pth file (for a "
            "safetensors file, pass the directory holding it and its config.json)"
        )
    return cached_or_convert(_local_key(files), identifier, convert, progress)


def _local_key(files: list[Path]) -> str:
    """Cache key of local weights: their absolute paths, sizes and modification times."""
    digest = hashlib.sha256()
    for f in files:
        stat = f.stat()
        digest.update(f"{f.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode())
    return f"local-{files[0].stem if files[0].is_file() else files[0].parent.name}-{digest.hexdigest()[:16]}"


def shard_files(weights_path: Path) -> list[Path]:
    """The shards a ``model.safetensors.index.json`` names (each once, in order), beside it;
    [] for a single weights file. transformers writes this layout when a model passes
    ``save_pretrained``'s ``max_shard_size`` (ESM C 6B's 25.4 GB of fp32 may be published so).

    Raises:
      ModelError: an index that is not JSON, has no weight map, or names a shard not there.
    """
    if weights_path.name != SHARD_INDEX:
        return []
    try:
        weight_map = json.loads(weights_path.read_text())["weight_map"]
    except (ValueError, KeyError, TypeError) as err:
        raise ModelError(f"{weights_path}: not a safetensors shard index ({type(err).__name__}: {err})") from None
    shards = [weights_path.parent / name for name in dict.fromkeys(weight_map.values())]
    missing = [s.name for s in shards if not s.exists()]
    if missing:
        raise ModelError(f"{weights_path} names {len(shards)} shards; not in {weights_path.parent}: "
                         f"{', '.join(missing)}")
    return shards


def _read_state_dict(path: Path, allow_pickle: bool) -> dict[str, np.ndarray]:
    if path.name == SHARD_INDEX:
        state_dict: dict[str, np.ndarray] = {}
        for shard in shard_files(path):  # each shard's tensors, once: the index maps every key to one
            state_dict.update(_read_safetensors(shard))
        return state_dict
    if path.suffix == ".safetensors":
        return _read_safetensors(path)
    if not allow_pickle:
        raise ModelError(f"{path.name} is a pickle file; pickle loading is disabled on this server")
    return {k: _to_numpy(v) for k, v in _torch_load(path).items()}


def _read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The file mapped (``param_files.map_safetensors``: its pages are the file's, not a copy),
    or read whole by safetensors where it holds other than float32 tensors."""
    try:
        return map_safetensors(path)
    except ParamFileError:
        from safetensors.numpy import load_file

        return load_file(str(path))


def _torch_load(path: Path):
    try:
        import torch
    except ImportError:
        raise ModelError(
            f"{path.name} is a PyTorch pickle; reading it needs torch (pip install torch), or use a "
            "model.safetensors file instead"
        ) from None
    import argparse

    # Pickles execute code: weights_only=True refuses everything but tensors and plain data.
    # fair-esm stores its config as an argparse.Namespace, which is plain data; allow just that.
    try:
        with torch.serialization.safe_globals([argparse.Namespace]):
            return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # UnpicklingError, zip errors, truncated files
        raise ModelError(f"cannot read {path}: {type(err).__name__}: {str(err).splitlines()[0]}") from None


def _to_numpy(value) -> np.ndarray:
    return value.detach().cpu().float().numpy() if value.is_floating_point() else value.cpu().numpy()


def convert_hf_files(config_path: Path, weights_path: Path, name: str, allow_pickle: bool):
    """``(config, params, source)`` of a Hugging Face ``config.json`` and its weights file."""
    try:
        hf_config = json.loads(config_path.read_text())
    except ValueError as err:
        raise ModelError(f"{config_path}: not a JSON config ({err})") from None
    try:
        config = ModelConfig.from_hf_config(hf_config, name=name)
    except KeyError as err:
        raise ModelError(f"{config_path}: an incomplete config (no {err})") from None
    except ValueError as err:  # a family flamino does not read: the sentence names those it does
        raise ModelError(f"{config_path}: {err}") from None
    _check_vocabulary(config_path.parent / "vocab.txt", config)
    state_dict = _read_state_dict(weights_path, allow_pickle)
    params = state_dict_to_params(state_dict, config, source=str(weights_path))
    return config, params, str(weights_path)


def _check_vocabulary(vocab_path: Path, config: ModelConfig) -> None:
    """A folder's ``vocab.txt`` (SaProt's: 446 residue + 3Di tokens), where its family has a
    vocabulary of its own, must be that vocabulary token for token: the embedding rows are read
    in its order."""
    model_family = family(config.family)
    if model_family.vocabulary is None or not vocab_path.exists():
        return
    tokens = tuple(vocab_path.read_text().split())
    if tokens != model_family.tokens():
        first = next((i for i, (a, b) in enumerate(zip(tokens, model_family.tokens())) if a != b), None)
        where = f"token {first} is {tokens[first]!r}, not {model_family.tokens()[first]!r}" if first is not None else (
            f"{len(tokens)} tokens, not {len(model_family.tokens())}")
        raise ModelError(f"{vocab_path}: not {model_family.title}'s published vocabulary ({where})")


def _convert_fair_esm(path: Path):
    """A fair-esm ``.pt``: ESM-2 (its config under ``cfg['model']``) or ESM-1b / ESM-1v (an
    ``args`` Namespace with ``arch='roberta_large'``), as fair-esm's ``load_model_and_alphabet``
    tells them apart."""
    data = _torch_load(path)
    if not isinstance(data, dict) or "model" not in data:
        raise ModelError(f"{path}: not a fair-esm checkpoint (no 'model' entry)")
    if isinstance(data.get("config"), Mapping) and "cfg" not in data and "args" not in data:
        return _convert_esm_style_config(path, data)
    cfg = (data.get("cfg") or {}).get("model") if isinstance(data.get("cfg"), dict) else None
    cfg = cfg if cfg is not None else data.get("args")
    if cfg is None:
        raise ModelError(f"{path}: no model configuration ('cfg' or 'args') in the checkpoint")
    get = (lambda k: cfg[k]) if isinstance(cfg, Mapping) else (lambda k: getattr(cfg, k))
    arch = cfg.get("arch") if isinstance(cfg, Mapping) else getattr(cfg, "arch", None)
    family_id = family_from_name(path.stem, "esm1b") if arch == "roberta_large" else "esm2"
    if arch not in (None, "esm2", "ESM2", "roberta_large"):
        raise ModelError(f"{path}: a fair-esm {arch!r} model is not one flamino reads; it reads {families_sentence()}")
    try:
        dim = int(get("encoder_embed_dim"))
        token_dropout = (bool(get("token_dropout")) if family_id == "esm2"
                         else bool(getattr(cfg, "token_dropout", False)))
        config = ModelConfig(
            num_layers=int(get("encoder_layers")),
            embed_dim=dim,
            attention_heads=int(get("encoder_attention_heads")),
            ffn_dim=4 * dim if family_id == "esm2" else int(get("encoder_ffn_embed_dim")),  # ESM2 hard-codes 4 x dim
            token_dropout=token_dropout,
            name=path.stem,
            family=family_id,
        )
    except (KeyError, AttributeError, TypeError) as err:
        raise ModelError(f"{path}: incomplete {family(family_id).title} configuration ({err})") from None
    state_dict = {k: _to_numpy(v) for k, v in data["model"].items()}
    if family_id != "esm2":
        # fair-esm's loader zeroes ESM-1b's <mask> embedding row on load ("for token drop"); the
        # tied LM head then gives <mask> its bias alone. HF's converted folders hold the zero row.
        # The stored LM decoder shares that tensor's storage in fair-esm's files: zeroed with it.
        for key in ("encoder.sentence_encoder.embed_tokens.weight", "encoder.lm_head.weight"):
            if key in state_dict:
                state_dict[key] = state_dict[key].copy()
                state_dict[key][MASK_IDX] = 0.0
    regression = path.with_name(path.stem + "-contact-regression.pt")
    if regression.exists() and family(family_id).contact_head:
        state_dict.update({k: _to_numpy(v) for k, v in _torch_load(regression)["model"].items()})
    elif family(family_id).contact_head:
        raise ModelError(
            f"{path}: the contact regression file {regression.name} is missing; fair-esm ships it "
            "beside the model as <name>-contact-regression.pt"
        )
    params = state_dict_to_params(state_dict, config, source=str(path))
    return config, params, str(path)


def _convert_esm_style_config(path: Path, data: dict):
    """A ``.pt`` of fair-esm's ``ESM2`` saved with a plain ``config`` dict (num_layers, embed_dim,
    attention_heads, token_dropout), as SaProt publishes its "esm version" (SaProt's
    ``utils/esm_loader.py``: ``{"model": ESM2 state dict, "config": ...}``); the family told by
    its vocabulary's size (446 rows: SaProt's tokens)."""
    state_dict = {k: _to_numpy(v) for k, v in data["model"].items()}
    cfg = data["config"]
    try:
        vocab = int(np.shape(state_dict["embed_tokens.weight"])[0])
        dim = int(cfg["embed_dim"])
        config = ModelConfig(num_layers=int(cfg["num_layers"]), embed_dim=dim,
                             attention_heads=int(cfg["attention_heads"]), ffn_dim=4 * dim, vocab_size=vocab,
                             token_dropout=bool(cfg.get("token_dropout", True)),
                             name=path.stem, family=rotary_esm_family(vocab))
    except (KeyError, TypeError, ValueError) as err:
        raise ModelError(f"{path}: an incomplete ESM-2-style checkpoint ({err})") from None
    params = state_dict_to_params(state_dict, config, source=str(path))
    return config, params, str(path)


def convert_evolutionaryscale(path: Path):
    """An EvolutionaryScale ESM C ``.pth`` (a bare state dict: its shape read from the tensors)."""
    data = _torch_load(path)
    if not isinstance(data, dict) or not is_evolutionaryscale(data) or "embed.weight" not in data:
        raise ModelError(f"{path}: not an ESM C state dict; flamino reads {families_sentence()}")
    state_dict = {k: _to_numpy(v) for k, v in data.items()}
    config = ModelConfig.esmc(*evolutionaryscale_shape(state_dict), name=path.stem)
    params = state_dict_to_params(state_dict, config, source=str(path))
    return config, params, str(path)
