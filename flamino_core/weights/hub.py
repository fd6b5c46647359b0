"""Published presets from the Hugging Face Hub (``families.PRESETS``: ``facebook/<name>`` and
``biohub/ESMC-*`` folders, sharded or not; EvolutionaryScale's ESM C repositories with one ``.pth``):
download with progress,
the Hub's own cache (``HF_HOME``) when offline, and one message saying how to get the weights
here when neither works. Conversion of the downloaded files is ``checkpoint_files``'s.
"""

from __future__ import annotations

import os
from pathlib import Path

from flamino_core.model.families import PRESETS
from flamino_core.weights.model_cache import ModelNotAvailableError, Progress, cache_root

HUB_ORG = "facebook"  # ESM-2, ESM-1b and ESM-1v
# A folder's weights, in the order tried: one safetensors file, transformers' sharded layout (an
# index naming its shards: Biohub's ESMC-6B may be published so), a pickle.
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


def preset_files(name: str, progress: Progress) -> tuple[Path | None, Path]:
    """``(config.json, weights file)`` of preset ``name``, downloaded or from the Hub's cache;
    ``(None, .pth)`` for a preset published as one file (ESM C).

    Honours HF_HOME and HF_HUB_OFFLINE. Offline, the Hub's cache is checked first (that works
    without a network), then it fails in seconds rather than after huggingface_hub's retries.

    Raises:
      ModelNotAvailableError: not cached and not downloadable now (the message says what to do).
    """
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    repo, single = PRESETS[name].repo, PRESETS[name].file
    if not hub_reachable():
        # Fail in seconds rather than after huggingface_hub's retries (~25 s): but only once
        # its own cache (HF_HOME) has been checked, which works offline.
        try:
            config = None if single else Path(hf_hub_download(repo, "config.json", local_files_only=True))
            return config, Path(cached_hub_weights(repo, name))
        except (LocalEntryNotFoundError, EntryNotFoundError, FileNotFoundError):
            raise ModelNotAvailableError(offline_message(name)) from None
    progress(None, f"Fetching {repo} from the Hugging Face Hub")
    bar = _forwarding_tqdm(progress)
    try:
        if single:
            return None, Path(hf_hub_download(repo, single, tqdm_class=bar))
        config_path = hf_hub_download(repo, "config.json")
        weights_path = None
        for filename in WEIGHT_FILES:
            try:
                weights_path = hf_hub_download(repo, filename, tqdm_class=bar)
                break
            except EntryNotFoundError:
                if filename == WEIGHT_FILES[-1]:
                    raise
        for shard in _shard_names(Path(weights_path)):  # a sharded folder: every shard beside its index
            hf_hub_download(repo, shard, tqdm_class=bar)
    except LocalEntryNotFoundError:
        raise ModelNotAvailableError(offline_message(name)) from None
    except Exception as err:  # connection drops surface as OSError or the HTTP client's errors
        detail = str(err).splitlines()[0] if str(err) else ""
        raise ModelNotAvailableError(
            f"could not fetch {name} from the Hub (download error: {type(err).__name__}: {detail}). "
            f"Try again: downloads resume where they stopped.\n" + offline_message(name)
        ) from None
    return Path(config_path), Path(weights_path)


def cached_hub_weights(repo: str, name: str | None = None) -> str:
    """The weights file of ``repo`` (preset ``name``'s) in the Hub's local cache
    (FileNotFoundError: not there)."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    single = PRESETS[name].file if name in PRESETS else None
    for filename in (single,) if single else WEIGHT_FILES:
        try:
            found = hf_hub_download(repo, filename, local_files_only=True)
            for shard in _shard_names(Path(found)):  # an index counts only with all its shards
                hf_hub_download(repo, shard, local_files_only=True)
            return found
        except (LocalEntryNotFoundError, EntryNotFoundError):
            continue
    raise FileNotFoundError(repo)


def _shard_names(weights_path: Path) -> list[str]:
    """The shard files a ``model.safetensors.index.json`` names ([] for a single file)."""
    if weights_path.name != WEIGHT_FILES[1]:
        return []
    import json

    return list(dict.fromkeys(json.loads(weights_path.read_text())["weight_map"].values()))


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hugging Face Hub answers at all (False at once under ``HF_HUB_OFFLINE=1``)."""
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
    """What to do to get preset ``name`` onto a machine that cannot download it."""
    repo = PRESETS[name].repo if name in PRESETS else f"{HUB_ORG}/{name}"
    if name in PRESETS and PRESETS[name].file:
        return (
            f"Model {name} is not on this machine and the Hugging Face Hub cannot be reached.\n"
            f"To get it here, download {PRESETS[name].file} from https://huggingface.co/{repo} and pass "
            f"the .pth path as the model (or run `flamino convert` on it), or copy a Hugging Face cache "
            f"that has {repo} and set HF_HOME to it."
        )
    family = PRESETS[name].family if name in PRESETS else "esm2"
    # fair-esm published .pt files for ESM-2, ESM-1b and ESM-1v only, and a contact regression
    # for the first two (fair-esm's _has_regression_weights: none for esm1v); SaProt has neither.
    fair_esm = {"esm2": f" (+ {name}-contact-regression.pt)", "esm1b": f" (+ {name}-contact-regression.pt)",
                "esm1v": ""}.get(family)
    last = ("; or\n" f"  4. use fair-esm's {name}.pt{fair_esm} and pass the .pt path.") if fair_esm is not None else "."
    return (
        f"Model {name} is not on this machine and the Hugging Face Hub cannot be reached.\n"
        f"To get it here, either:\n"
        f"  1. on a machine with internet run `flamino fetch {name}` and copy its cache folder "
        f"({cache_root()}) to the same place here (or point FLAMINO_CACHE at the copy); or\n"
        f"  2. download config.json and model.safetensors from https://huggingface.co/{repo} "
        f"into a folder and run `flamino convert FOLDER` (or pass the folder as the model); or\n"
        f"  3. copy a Hugging Face cache that has {repo} and set HF_HOME to it{last}"
        + ("\n(A sharded folder: model.safetensors.index.json and every shard it names, beside config.json.)"
           if repo.startswith("biohub/") else "")
    )
