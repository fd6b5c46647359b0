"""Resolve a model identifier to weights: Hub presets, local HF directories, fair-esm ``.pt``
files, flamino checkpoints, and the labelled untrained test model.

Whatever the source, converted weights are written once as an Orbax checkpoint plus the config
as JSON under ``FLAMINO_CACHE`` (default ``~/.cache/flamino``); later starts restore that.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

from .config import PRESETS, ESM2Config
from .convert import state_dict_to_params

DEFAULT_MODEL = "esm2_t12_35M_UR50D"
RANDOM_PREFIX = "random:"
HUB_ORG = "facebook"
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


def default_model() -> str:
    return os.environ.get("FLAMINO_MODEL") or DEFAULT_MODEL


def cache_root() -> Path:
    return Path(os.environ.get("FLAMINO_CACHE") or Path.home() / ".cache" / "flamino")


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
        return _cached_or_convert(
            f"hub-{hub_name}", identifier, lambda: _download_preset(hub_name, progress, allow_pickle), progress
        )
    path = Path(identifier).expanduser()
    if path.exists():
        if not allow_local_paths:
            raise ModelError("local model paths are disabled on this server; choose a preset model")
        return _load_local(path, identifier, progress, allow_pickle)
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

    from .model import ESM2

    model = ESM2(config, nnx.Rngs(seed))
    params = jax.tree.map(np.asarray, nnx.to_pure_dict(nnx.state(model)))
    return ModelWeights(f"untrained test model ({spec})", config, params, identifier, is_random=True)


# --- sources --------------------------------------------------------------------------------
def _download_preset(name: str, progress: Progress, allow_pickle: bool = True) -> tuple[ESM2Config, dict, str]:
    """Download ``facebook/<name>`` from the Hub (honours HF_HOME, HF_HUB_OFFLINE) and convert."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    repo = f"{HUB_ORG}/{name}"
    if not _hub_reachable():
        # Fail in seconds rather than after huggingface_hub's retries (~25 s): but only once
        # its own cache (HF_HOME) has been checked, which works offline.
        try:
            return _convert_hf_files(
                Path(hf_hub_download(repo, "config.json", local_files_only=True)),
                Path(_cached_hub_weights(repo)),
                name,
                allow_pickle=allow_pickle,
            )
        except (LocalEntryNotFoundError, EntryNotFoundError, FileNotFoundError):
            raise ModelNotAvailableError(offline_message(name)) from None
    progress(None, f"Fetching {repo} from the Hugging Face Hub")
    bar = _forwarding_tqdm(progress)
    try:
        config_path = hf_hub_download(repo, "config.json")
        try:
            weights_path = hf_hub_download(repo, "model.safetensors", tqdm_class=bar)
        except EntryNotFoundError:
            weights_path = hf_hub_download(repo, "pytorch_model.bin", tqdm_class=bar)
    except LocalEntryNotFoundError:
        raise ModelNotAvailableError(offline_message(name)) from None
    except Exception as err:  # connection drops surface as OSError or the HTTP client's errors
        detail = str(err).splitlines()[0] if str(err) else ""
        raise ModelNotAvailableError(
            f"could not fetch {name} from the Hub (download error: {type(err).__name__}: {detail}). "
            f"Try again: downloads resume where they stopped.\n" + offline_message(name)
        ) from None
    progress(None, f"Converting {name}")
    return _convert_hf_files(Path(config_path), Path(weights_path), name, allow_pickle=allow_pickle)


def _cached_hub_weights(repo: str) -> str:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    for filename in ("model.safetensors", "pytorch_model.bin"):
        try:
            return hf_hub_download(repo, filename, local_files_only=True)
        except (LocalEntryNotFoundError, EntryNotFoundError):
            continue
    raise FileNotFoundError(repo)


def _hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hub answers at all; False at once under HF_HUB_OFFLINE=1."""
    import socket
    from urllib.parse import urlparse

    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}:
        return False
    endpoint = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        with socket.create_connection((endpoint.hostname, port), timeout=timeout):
            return True
    except OSError:
        return False


def _forwarding_tqdm(progress: Progress):
    """A tqdm class that also reports download progress to ``progress`` (the app's bar)."""
    from tqdm.auto import tqdm

    class ForwardingTqdm(tqdm):
        def update(self, n=1):
            shown = super().update(n)
            if self.total:
                progress(min(self.n / self.total, 1.0), f"Downloading {self.desc or 'weights'}")
            return shown

    return ForwardingTqdm


def offline_message(name: str) -> str:
    return (
        f"Model {name} is not on this machine and the Hugging Face Hub cannot be reached.\n"
        f"To get it here, either:\n"
        f"  1. on a machine with internet run `flamino fetch {name}` and copy its cache folder "
        f"({cache_root()}) to the same place here (or point FLAMINO_CACHE at the copy); or\n"
        f"  2. download config.json and model.safetensors from https://huggingface.co/{HUB_ORG}/{name} "
        f"into a folder and run `flamino convert FOLDER` (or pass the folder as the model); or\n"
        f"  3. copy a Hugging Face cache that has {HUB_ORG}/{name} and set HF_HOME to it; or\n"
        f"  4. use fair-esm's {name}.pt (+ {name}-contact-regression.pt) and pass the .pt path."
    )


def _load_local(path: Path, identifier: str, progress: Progress, allow_pickle: bool) -> ModelWeights:
    if path.is_dir() and (path / CONFIG_FILE).exists():
        return _restore(path, identifier)
    if path.is_dir():
        config_path = path / "config.json"
        candidates = [path / "model.safetensors", path / "pytorch_model.bin"]
        weights_path = next((p for p in candidates if p.exists()), None)
        if not config_path.exists() or weights_path is None:
            raise ModelError(
                f"{path} is not a model directory: expected config.json with model.safetensors "
                f"(or pytorch_model.bin), or a flamino checkpoint ({CONFIG_FILE} + {PARAMS_DIR}/)"
            )
        files = [config_path, weights_path]
        convert = lambda: _convert_hf_files(config_path, weights_path, path.name, allow_pickle)  # noqa: E731
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
    return _cached_or_convert(_local_key(files), identifier, convert, progress)


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


def _convert_hf_files(config_path: Path, weights_path: Path, name: str, allow_pickle: bool):
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


# --- the Orbax cache ------------------------------------------------------------------------
def _cached_or_convert(key: str, identifier: str, convert, progress: Progress) -> ModelWeights:
    entry = cache_root() / "models" / key
    if (entry / SOURCE_FILE).exists():
        try:
            return _restore(entry, identifier)
        except Exception as err:  # a damaged entry is rebuilt, never used
            progress(None, f"Cache entry {entry} is damaged ({type(err).__name__}); rebuilding")
            shutil.rmtree(entry, ignore_errors=True)
    config, params, source = convert()
    progress(None, "Saving converted weights to the cache")
    save_checkpoint(entry, config, params, source)
    return ModelWeights(identifier, config, params, source)


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
    checksum = _params_checksum(params)
    (tmp / SOURCE_FILE).write_text(
        json.dumps(
            {"source": source, "created": time.time(), "checksum": checksum, "is_random": is_random}, indent=2
        )
    )
    shutil.rmtree(directory, ignore_errors=True)
    tmp.rename(directory)
    return directory


def _restore(directory: Path, identifier: str) -> ModelWeights:
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
    if meta.get("checksum") and meta["checksum"] != _params_checksum(params):
        raise ModelError(f"checkpoint {directory} is corrupted (checksum mismatch)")
    return ModelWeights(
        identifier, config, params, meta.get("source", str(directory)), is_random=bool(meta.get("is_random"))
    )


def _params_checksum(params: dict) -> str:
    """SHA-256 over every array, in a fixed order: detects a damaged cache entry."""
    import jax

    digest = hashlib.sha256()
    leaves = jax.tree_util.tree_flatten_with_path(params)[0]
    for path, leaf in sorted(leaves, key=lambda item: jax.tree_util.keystr(item[0])):
        digest.update(jax.tree_util.keystr(path).encode())
        digest.update(np.ascontiguousarray(np.asarray(leaf, dtype=np.float32)).tobytes())
    return digest.hexdigest()


def convert_to_checkpoint(source: str, output: Path | None = None, progress: Progress | None = None) -> Path:
    """``flamino convert``: load any supported source and write a flamino checkpoint directory."""
    weights = load_weights(source, progress=progress)
    output = Path(output) if output else Path(Path(source).name.removesuffix(".pt") + "-flamino")
    return save_checkpoint(output, weights.config, weights.params, weights.source, weights.is_random)


def cached_presets() -> set[str]:
    """Preset names that are converted and cached on this machine."""
    root = cache_root() / "models"
    return {n for n in PRESETS if (root / f"hub-{n}" / SOURCE_FILE).exists()}


def available_now(identifier: str, hub_reachable: bool | None = None) -> bool:
    """Whether ``load_weights(identifier)`` can find the weights now, without a download that
    cannot happen: an untrained model; a preset converted in the cache, in the Hugging Face cache
    (``HF_HOME``) or on a reachable Hub; an existing local path. Says nothing about whether the
    files are valid (loading says that).

    Args:
      hub_reachable: whether the Hub answers, if the caller knows (it takes up to 3 s to ask).
    """
    identifier = identifier.strip()
    if identifier.startswith(RANDOM_PREFIX):
        return True
    name = identifier.removeprefix(f"{HUB_ORG}/")
    if name in PRESETS:
        if name in cached_presets():
            return True
        try:
            _cached_hub_weights(f"{HUB_ORG}/{name}")
            return True
        except FileNotFoundError:
            pass
        return _hub_reachable() if hub_reachable is None else hub_reachable
    return Path(identifier).expanduser().exists()


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hugging Face Hub answers (False at once under ``HF_HUB_OFFLINE=1``)."""
    return _hub_reachable(timeout)
