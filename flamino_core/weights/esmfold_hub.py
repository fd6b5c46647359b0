"""The published ESMFold (``esmfold_v1``, ``facebook/esmfold_v1`` on the Hugging Face Hub, MIT
licence as the esm repository's weights): downloaded with progress into the Hub's own cache
(``HF_HOME``), read from that cache when offline, one message saying how to get it here when
neither works (as ``hub.py`` does for the language models), then loaded strictly at esmfold_v1's
shape (``load_esmfold(expect=...)``: a checkpoint of another shape is refused naming each field).

Cached in the Hub's cache, with ``FLAMINO_CACHE/esmfold_v1/`` linking its two files: they are
safetensors, read without torch, and the key renaming is done at each load; a converted flamino
copy would add 13 GiB of fp32 on disk.
The published file stores the language model in fp16 (transformers' ``fp16_esm``, 2.84 billion
values) and the rest in fp32 (8.4 GB in all); flamino runs everything in fp32, so every
parameter is widened to fp32 on load (exact: every fp16 value is an fp32 value).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

from flamino_core.model.esmfold.config import FoldConfig
from flamino_core.model.model_id import FOLD_PRESETS as MODEL_FOLD_PRESETS
from flamino_core.weights.model_cache import ModelNotAvailableError, Progress, cache_root


@dataclasses.dataclass(frozen=True)
class FoldPreset:
    repo: str
    expect: Callable[[], FoldConfig]  # the shape its checkpoint must have
    licence: str
    files: tuple[str, ...] = ("config.json", "model.safetensors")


# By the name ``ModelId`` gives it (``model_id.FOLD_PRESETS``: its repository, which names it).
FOLD_PRESETS = {"esmfold_v1": FoldPreset(MODEL_FOLD_PRESETS["esmfold_v1"][0], FoldConfig.esmfold_v1, "MIT")}


def _preset_of(repo: str) -> str:
    return next((name for name, preset in FOLD_PRESETS.items() if preset.repo == repo), repo)


def fold_preset_folder(name: str, progress: Progress = lambda fraction, text: None) -> Path:
    """A folder holding the preset's ``config.json`` and ``model.safetensors`` (links into the
    Hub's cache, under flamino's cache as ``<name>/``), downloaded first when the Hub answers
    (downloads resume where they stopped). The weights are looked for on the repository's main
    revision, then on ``WEIGHTS_FALLBACK`` (see there).

    Raises:
      ModelNotAvailableError: not cached and not downloadable now (the message says what to do).
    """
    from flamino_core.weights.hub import hub_reachable

    preset, online = FOLD_PRESETS[name], hub_reachable()
    if online:
        progress(None, f"Fetching {preset.repo} from the Hugging Face Hub (8.4 GB)")
    try:
        config = _hub_file(preset.repo, "config.json", None, online, progress)
        weights = _weights_file(preset.repo, online, progress)
    except ModelNotAvailableError:
        raise
    except Exception as err:  # connection drops surface as OSError or the HTTP client's errors
        detail = str(err).splitlines()[0] if str(err) else ""
        raise ModelNotAvailableError(f"could not fetch {name} from the Hub (download error: {type(err).__name__}: "
                                     f"{detail}). Try again: downloads resume where they stopped.\n"
                                     + offline_message(name)) from None
    return _linked_folder(cache_root() / name, {"config.json": config, "model.safetensors": weights})


# facebook/esmfold_v1's main revision was published with pytorch_model.bin (a pickle, read only with
# torch); the Hub's own safetensors conversion of it is pull request 4 (SFconvertbot, "Adding
# `safetensors` variant of this model"), where transformers' loader looks for it too.
WEIGHTS_FALLBACK = "refs/pr/4"


def _weights_file(repo: str, online: bool, progress: Progress) -> Path:
    from huggingface_hub.errors import EntryNotFoundError

    try:
        return _hub_file(repo, "model.safetensors", None, online, progress)
    except (EntryNotFoundError, ModelNotAvailableError):
        return _hub_file(repo, "model.safetensors", WEIGHTS_FALLBACK, online, progress)


def _hub_file(repo: str, file: str, revision: str | None, online: bool, progress: Progress) -> Path:
    """One file of ``repo`` from the Hub (online) or its cache (offline: ModelNotAvailableError if absent)."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    from flamino_core.weights.hub import _forwarding_tqdm

    extra = {"tqdm_class": _forwarding_tqdm(progress)} if online else {"local_files_only": True}
    try:
        return Path(hf_hub_download(repo, file, revision=revision, **extra))
    except (LocalEntryNotFoundError, FileNotFoundError):
        raise ModelNotAvailableError(offline_message(_preset_of(repo))) from None
    except EntryNotFoundError:
        if not online:
            raise ModelNotAvailableError(offline_message(_preset_of(repo))) from None
        raise


def _linked_folder(folder: Path, files: dict[str, Path]) -> Path:
    """``folder`` with a link to each file (replaced when it points elsewhere: a newer revision)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, target in files.items():
        link = folder / name
        if link.is_symlink() and link.resolve() == target.resolve():
            continue
        if link.exists() or link.is_symlink():
            link.unlink()
        link.symlink_to(target.resolve())
    return folder


def as_fp32(model):
    """``model`` with every floating-point array widened to fp32 (the published stem is fp16)."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    graphdef, state = nnx.split(model)
    widened = jax.tree.map(lambda x: x.astype(jnp.float32) if jnp.issubdtype(x.dtype, jnp.floating) else x, state)
    return nnx.merge(graphdef, widened)


def offline_message(name: str) -> str:
    preset = FOLD_PRESETS[name]
    return (f"Model {name} is not on this machine and the Hugging Face Hub cannot be reached.\n"
            f"To get it here, either:\n"
            f"  1. on a machine with internet load it once (flamino fold any.fasta -m {name} -o out) and copy the "
            f"Hugging Face cache (HF_HOME) here, setting HF_HOME to the copy; or\n"
            f"  2. download {' and '.join(preset.files)} from https://huggingface.co/{preset.repo} into a folder "
            f"and pass the folder as the model.\n"
            f"Its weights are published under the {preset.licence} licence (facebookresearch/esm).")

