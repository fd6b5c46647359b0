"""flamino: ESM-2 in JAX / Flax NNX, with the loaders, scores and analyses the app and CLI share.

The public names below are imported on first use (PEP 562), so ``import flamino_core`` and the
import of any light submodule (``fasta``, ``config``, ...) do not load JAX.
"""

import importlib

# Public name -> the submodule that defines it (a submodule itself where the two are equal).
_SOURCES = {
    "analysis": "analysis",
    "STANDARD_AMINO_ACIDS": "alphabet",
    "TOKENS": "alphabet",
    "batch_encode": "alphabet",
    "encode": "alphabet",
    "MAX_RESIDUES": "config",
    "PRESETS": "config",
    "ESM2Config": "config",
    "CheckpointMismatchError": "convert",
    "state_dict_to_params": "convert",
    "LONG_POLICIES": "engine",
    "Engine": "engine",
    "SequenceOutput": "engine",
    "enable_compilation_cache": "engine",
    "ParsedInput": "fasta",
    "ProteinRecord": "fasta",
    "parse_fasta_bytes": "fasta",
    "parse_fasta_text": "fasta",
    "read_fasta": "fasta",
    "ESM2": "model",
    "STRATEGIES": "scores",
    "masked_marginals": "scores",
    "pseudo_perplexity": "scores",
    "substitution_scores": "scores",
    "wt_marginals": "scores",
    "ModelError": "weights",
    "ModelNotAvailableError": "weights",
    "ModelWeights": "weights",
    "cached_presets": "weights",
    "convert_to_checkpoint": "weights",
    "default_model": "weights",
    "load_weights": "weights",
    "save_checkpoint": "weights",
}
__all__ = list(_SOURCES)


def __getattr__(name: str):
    if name not in _SOURCES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f".{_SOURCES[name]}", __name__)
    value = module if name == _SOURCES[name] else getattr(module, name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
