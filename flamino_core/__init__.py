"""flamino: ESM-2 in JAX / Flax NNX, with the loaders, scores and analyses the app and CLI share.

The names below are imported on first use (PEP 562), so ``import flamino_core`` and
``flamino --help`` load neither JAX nor Streamlit nor Ray; ``flamino_core.Engine`` loads JAX.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# Public name -> the module (relative to this package) that defines it; None: the module itself.
_EXPORTS = {
    "analysis": None,
    "scores": None,
    "STANDARD_AMINO_ACIDS": "alphabet",
    "TOKENS": "alphabet",
    "batch_encode": "alphabet",
    "encode": "alphabet",
    "MAX_RESIDUES": "config",
    "PRESETS": "config",
    "ESM2Config": "config",
    "CheckpointMismatchError": "convert",
    "state_dict_to_params": "convert",
    "Engine": "engine",
    "SequenceOutput": "engine",
    "enable_compilation_cache": "engine",
    "ParsedInput": "fasta",
    "ProteinRecord": "fasta",
    "iter_records": "fasta",
    "parse_fasta_bytes": "fasta",
    "parse_fasta_text": "fasta",
    "to_fasta": "fasta",
    "read_fasta": "fasta",
    "ESM2": "model",
    "LONG_POLICIES": "options",
    "STRATEGIES": "options",
    "SequenceScores": "scores",
    "pseudo_perplexity": "scores",
    "substitution_map": "scores",
    "substitution_scores": "scores",
    "ModelError": "weights",
    "ModelNotAvailableError": "weights",
    "ModelWeights": "weights",
    "cached_presets": "weights",
    "convert_to_checkpoint": "weights",
    "default_model": "weights",
    "load_weights": "weights",
    "save_checkpoint": "weights",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f".{_EXPORTS[name] or name}", __name__)
    value = module if _EXPORTS[name] is None else getattr(module, name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # for type checkers and editors: the same names, imported eagerly
    from . import analysis, scores
    from .alphabet import STANDARD_AMINO_ACIDS, TOKENS, batch_encode, encode
    from .config import MAX_RESIDUES, PRESETS, ESM2Config
    from .convert import CheckpointMismatchError, state_dict_to_params
    from .engine import Engine, SequenceOutput, enable_compilation_cache
    from .fasta import ParsedInput, ProteinRecord, iter_records, parse_fasta_bytes, parse_fasta_text, read_fasta
    from .model import ESM2
    from .options import LONG_POLICIES, STRATEGIES
    from .scores import SequenceScores, pseudo_perplexity, substitution_map, substitution_scores
    from .weights import (
        ModelError,
        ModelNotAvailableError,
        ModelWeights,
        cached_presets,
        convert_to_checkpoint,
        default_model,
        load_weights,
        save_checkpoint,
    )
