"""Which ESMFold2 a model identifier names, and that model loaded: the published checkpoints
(``esmfold2`` = ``biohub/ESMFold2``, ``esmfold2-fast`` = ``biohub/ESMFold2-Fast`` on the Hugging Face
Hub, MIT licence as the Biohub README states), downloaded into the Hub's cache (``HF_HOME``) and read
from it offline, as ``esmfold_hub.py`` does for esmfold_v1; a folder written by transformers'
``EsmFold2Model.save_pretrained``; or ``random:esmfold2-tiny[:seed]``, an untrained test model.

Not verified here (no internet on the machines this was written on): the repositories' file layout.
flamino fetches what ``save_pretrained`` writes: ``config.json`` and ``model.safetensors``, or, where
the repository has none, ``model.safetensors.index.json`` and the shards it names (every key,
``esmc.*``, the ESM C 6B stem, included); a repository published otherwise (the stem elsewhere) is
refused by the loader's strict list of missing keys.

Both fold single sequences: the full ESMFold2's MSA encoder runs on the featuriser's one-row MSA
(the query), as the reference's ``infer_protein`` does; flamino takes no user MSA yet. The
``config.json`` is fetched first and read (a model that is not ESMFold2 is refused before its
weights are downloaded).
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from flamino_core.model.model_id import FOLD_PRESETS, ModelId
from flamino_core.weights.model_cache import ModelNotAvailableError, Progress, cache_root


@dataclasses.dataclass(frozen=True)
class Fold2Preset:
    repo: str
    licence: str = "MIT"
    files: tuple[str, ...] = ("config.json", "model.safetensors")


# By the name ``ModelId`` gives them (``model_id.FOLD_PRESETS``: their repositories, which name them).
FOLD2_PRESETS = {name: Fold2Preset(repo) for name, (repo, family) in FOLD_PRESETS.items() if family == "esmfold2"}


def load_fold2_model(model_id: ModelId, progress: Progress = lambda fraction, text: None,
                     stem_precision: str = "fp32"):
    """``(model, is_random)`` for an ESMFold2 (``model_id.fold_family() == "esmfold2"``), its ESM C
    stem in ``stem_precision`` (``esmfold.with_stem_precision``, as ESMFold's: bf16 labelled, opt-in).

    Raises:
      ValueError: a malformed seed, a folder that is not ESMFold2's (the loader's strict message),
        an unknown precision (before any download).
      ModelNotAvailableError: a preset neither cached nor downloadable now (what to do, said).
    """
    from flamino_core.weights.esmfold import check_stem_precision, with_stem_precision

    check_stem_precision(stem_precision)  # before any download
    if model_id.is_random:
        return with_stem_precision(random_model(model_id.fold_seed), stem_precision), True
    from flamino_core.weights.esmfold2 import load_esmfold2

    name = model_id.fold_preset if model_id.fold == "esmfold2" else None
    model = load_esmfold2(preset_folder(name, progress) if name else Path(model_id.text))
    return with_stem_precision(model, stem_precision), False


def random_model(seed: int):
    """The untrained test model: ``EsmFold2Config.tiny()`` at random weights. The parameters the
    reference initialises to zero (the pLDDT and resolved weights among them) are drawn too, at a
    small scale, so that its confidences vary from atom to atom (it is a test of the plumbing: its
    structures and confidences are not biology)."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from flamino_core.model.esmfold2.config import EsmFold2Config
    from flamino_core.model.esmfold2.model import EsmFold2

    model = EsmFold2(EsmFold2Config.tiny(), nnx.Rngs(seed))
    graphdef, state = nnx.split(model)
    keys = iter(jax.random.split(jax.random.key(seed), len(jax.tree.leaves(state))))

    def fill(x):
        key = next(keys)
        if jnp.issubdtype(x.dtype, jnp.floating) and not jnp.any(x):
            return 0.5 * jax.random.normal(key, x.shape, x.dtype)
        return x
    return nnx.merge(graphdef, jax.tree.map(fill, state))


def preset_folder(name: str, progress: Progress = lambda fraction, text: None) -> Path:
    """A folder with the preset's ``config.json`` and ``model.safetensors`` (links into the Hub's
    cache, under flamino's cache as ``<name>/``); the config is fetched and read first, so a repository
    that is not ESMFold2's is refused before its weights are downloaded."""
    from flamino_core.model.esmfold2.config import EsmFold2Config
    from flamino_core.weights.hub import hub_reachable

    preset, online = FOLD2_PRESETS[name], hub_reachable()
    try:
        config = _hub_file(name, "config.json", online, progress)
        EsmFold2Config.from_dict(json.loads(config.read_text()), name=name)  # ValueError if not ESMFold2's
        if online:
            progress(None, f"Fetching {preset.repo} from the Hugging Face Hub (the ESM C 6B stem is ~25 GB)")
        weights = _weight_files(name, online, progress)
    except (ModelNotAvailableError, ValueError):
        raise
    except Exception as err:  # connection drops surface as OSError or the HTTP client's errors
        detail = str(err).splitlines()[0] if str(err) else ""
        raise ModelNotAvailableError(f"could not fetch {name} from the Hub ({type(err).__name__}: {detail}). "
                                     "Try again: downloads resume where they stopped.\n"
                                     + offline_message(name)) from None
    from flamino_core.weights.esmfold_hub import _linked_folder

    return _linked_folder(cache_root() / name, {"config.json": config, **weights})


INDEX = "model.safetensors.index.json"
_SHARD = re.compile(r"[A-Za-z0-9._-]+\.safetensors")


class _NotInRepository(Exception):
    """The repository (online) has no such file."""


def _weight_files(name: str, online: bool, progress: Progress) -> dict[str, Path]:
    """``model.safetensors``, or where the repository has none (or the cache holds the sharded
    layout), the index and every shard it names, by the names ``save_pretrained`` gives them."""
    try:
        return {"model.safetensors": _hub_file(name, "model.safetensors", online, progress, missing_ok=True)}
    except (_NotInRepository, ModelNotAvailableError) as first:
        try:
            index = _hub_file(name, INDEX, online, progress, missing_ok=True)
        except (_NotInRepository, ModelNotAvailableError):
            if isinstance(first, ModelNotAvailableError):
                raise first from None
            raise ValueError(f"{FOLD2_PRESETS[name].repo} has neither model.safetensors nor {INDEX}: flamino reads "
                             "the layout EsmFold2Model.save_pretrained writes; save the model with transformers "
                             "and pass the folder") from None
    shards = sorted(set(json.loads(index.read_text()).get("weight_map", {}).values()))
    unsafe = [shard for shard in shards if not _SHARD.fullmatch(shard)]
    if unsafe or not shards:
        raise ValueError(f"{FOLD2_PRESETS[name].repo}: {INDEX} names no shards, or shards that are not plain "
                         f"safetensors file names: {', '.join(map(repr, unsafe[:3]))}")
    return {INDEX: index, **{shard: _hub_file(name, shard, online, progress) for shard in shards}}


def _hub_file(name: str, file: str, online: bool, progress: Progress, missing_ok: bool = False) -> Path:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    from flamino_core.weights.hub import _forwarding_tqdm

    repo = FOLD2_PRESETS[name].repo
    extra = {"tqdm_class": _forwarding_tqdm(progress)} if online else {"local_files_only": True}
    try:
        return Path(hf_hub_download(repo, file, **extra))
    except (LocalEntryNotFoundError, FileNotFoundError):
        raise ModelNotAvailableError(offline_message(name)) from None
    except EntryNotFoundError:
        if not online:
            raise ModelNotAvailableError(offline_message(name)) from None
        if missing_ok:
            raise _NotInRepository(file) from None
        raise ValueError(f"{repo} has no {file}: flamino reads the layout EsmFold2Model.save_pretrained writes; "
                         "save the model with transformers and pass the folder") from None


def offline_message(name: str) -> str:
    preset = FOLD2_PRESETS[name]
    return (f"Model {name} is not on this machine and the Hugging Face Hub cannot be reached.\n"
            f"To get it here, either:\n"
            f"  1. on a machine with internet load it once (flamino fold any.fasta -m {name} -o out) and copy the "
            f"Hugging Face cache (HF_HOME) here, setting HF_HOME to the copy; or\n"
            f"  2. save it with transformers (EsmFold2Model.from_pretrained('{preset.repo}').save_pretrained(DIR)) "
            f"and pass DIR as the model.\n"
            f"Its weights are published under the {preset.licence} licence (Biohub).")
