"""Reading published checkpoint files into flamino's parameters: Hugging Face model folders
(``config.json`` + ``model.safetensors`` or ``pytorch_model.bin``), fair-esm ``.pt`` files (with
their ``-contact-regression.pt``), and flamino checkpoint folders. Pickles (``.bin``, ``.pt``) are
opened with ``torch.load(weights_only=True)`` only, and not at all where ``allow_pickle`` is off.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Mapping

import numpy as np

from flamino_core.model.config import ESM2Config
from flamino_core.weights.convert import state_dict_to_params
from flamino_core.weights.model_cache import CONFIG_FILE, PARAMS_FILE, ModelError, ModelWeights, Progress, cached_or_convert, restore


def load_local(path: Path, identifier: str, progress: Progress, allow_pickle: bool) -> ModelWeights:
    """Weights from a local folder or ``.pt`` file, converted once into the cache."""
    if path.is_dir() and (path / CONFIG_FILE).exists():
        return restore(path, identifier)
    if path.is_dir():
        config_path = path / "config.json"
        candidates = [path / "model.safetensors", path / "pytorch_model.bin"]
        weights_path = next((p for p in candidates if p.exists()), None)
        if not config_path.exists() or weights_path is None:
            raise ModelError(
                f"{path} is not a model directory: expected config.json with model.safetensors "
                f"(or pytorch_model.bin), or a flamino checkpoint ({CONFIG_FILE} + {PARAMS_FILE})"
            )
        files = [config_path, weights_path]
        convert = lambda: convert_hf_files(config_path, weights_path, path.name, allow_pickle)  # noqa: E731
    elif path.suffix == ".pt":
        if not allow_pickle:
            raise ModelError("fair-esm .pt files are disabled on this server")
        regression = path.with_name(path.stem + "-contact-regression.pt")
        files = [path] + ([regression] if regression.exists() else [])
        convert = lambda: _convert_fair_esm(path)  # noqa: E731
    else:
        raise ModelError(
            f"{path}: not a model directory or fair-esm .pt file (for a safetensors file, pass the "
            "directory holding it and its config.json)"
        )
    return cached_or_convert(_local_key(files), identifier, convert, progress)


def _local_key(files: list[Path]) -> str:
    """Cache key of local weights: their absolute paths, sizes and modification times."""
    digest = hashlib.sha256()
    for f in files:
        stat = f.stat()
        digest.update(f"{f.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode())
    return f"local-{files[0].stem if files[0].is_file() else files[0].parent.name}-{digest.hexdigest()[:16]}"


def _read_state_dict(path: Path, allow_pickle: bool) -> dict[str, np.ndarray]:
    if path.suffix == ".safetensors":
        from safetensors.numpy import load_file

        return load_file(str(path))
    if not allow_pickle:
        raise ModelError(f"{path.name} is a pickle file; pickle loading is disabled on this server")
    return {k: _to_numpy(v) for k, v in _torch_load(path).items()}


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
        config = ESM2Config.from_hf_config(hf_config, name=name)
    except (ValueError, KeyError) as err:
        raise ModelError(f"{config_path}: not an ESM-2 config ({err})") from None
    state_dict = _read_state_dict(weights_path, allow_pickle)
    params = state_dict_to_params(state_dict, config, source=str(weights_path))
    return config, params, str(weights_path)


def _convert_fair_esm(path: Path):
    data = _torch_load(path)
    if not isinstance(data, dict) or "model" not in data:
        raise ModelError(f"{path}: not a fair-esm checkpoint (no 'model' entry)")
    cfg = (data.get("cfg") or {}).get("model") if isinstance(data.get("cfg"), dict) else None
    cfg = cfg if cfg is not None else data.get("args")
    if cfg is None:
        raise ModelError(f"{path}: no model configuration ('cfg' or 'args') in the checkpoint")
    get = (lambda k: cfg[k]) if isinstance(cfg, Mapping) else (lambda k: getattr(cfg, k))
    try:
        dim = int(get("encoder_embed_dim"))
        config = ESM2Config(
            num_layers=int(get("encoder_layers")),
            embed_dim=dim,
            attention_heads=int(get("encoder_attention_heads")),
            ffn_dim=4 * dim,  # fair-esm's ESM2 hard-codes 4 x embed dim
            token_dropout=bool(get("token_dropout")),
            name=path.stem,
        )
    except (KeyError, AttributeError, TypeError) as err:
        raise ModelError(f"{path}: incomplete ESM-2 configuration ({err})") from None
    state_dict = {k: _to_numpy(v) for k, v in data["model"].items()}
    regression = path.with_name(path.stem + "-contact-regression.pt")
    if regression.exists():
        state_dict.update({k: _to_numpy(v) for k, v in _torch_load(regression)["model"].items()})
    else:
        raise ModelError(
            f"{path}: the contact regression file {regression.name} is missing; fair-esm ships it "
            "beside the model as <name>-contact-regression.pt"
        )
    params = state_dict_to_params(state_dict, config, source=str(path))
    return config, params, str(path)
