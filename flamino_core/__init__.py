"""flamino: ESM-2 in JAX / Flax NNX, with the loaders, scores and analyses the app and CLI share.

The names below are imported on first use (PEP 562), so ``import flamino_core`` and
``flamino --help`` load neither JAX nor Streamlit nor Ray; ``flamino_core.Engine`` loads JAX.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# Public name -> the module (relative to this package) that defines it.
_EXPORTS = {
    "STANDARD_AMINO_ACIDS": "alphabet",
    "TOKENS": "alphabet",
    "batch_encode": "alphabet",
    "encode": "alphabet",
    "MAX_RESIDUES": "model.config",
    "PRESETS": "model.config",
    "ESM2Config": "model.config",
    "CheckpointMismatchError": "weights.convert",
    "state_dict_to_params": "weights.convert",
    "Engine": "runtime.engine",
    "SequenceOutput": "runtime.engine",
    "enable_compilation_cache": "runtime.engine",
    "ParsedInput": "inputs.fasta",
    "ProteinRecord": "inputs.fasta",
    "iter_records": "inputs.fasta",
    "parse_fasta_bytes": "inputs.fasta",
    "parse_fasta_text": "inputs.fasta",
    "to_fasta": "inputs.fasta",
    "read_fasta": "inputs.fasta",
    "ESM2": "model.esm2",
    "LONG_POLICIES": "options",
    "STRATEGIES": "options",
    "SequenceScores": "variants.substitution_maps",
    "pseudo_perplexity": "variants.substitution_maps",
    "substitution_map": "variants.substitution_maps",
    "substitution_scores": "variants.substitution_maps",
    "masked_log_probs": "store.passes",
    "record_outputs": "store.passes",
    "ModelError": "weights.loading",
    "ModelNotAvailableError": "weights.loading",
    "ModelWeights": "weights.loading",
    "cached_presets": "weights.loading",
    "convert_to_checkpoint": "weights.loading",
    "default_model": "weights.loading",
    "load_weights": "weights.loading",
    "save_checkpoint": "weights.loading",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # for type checkers and editors: the same names, imported eagerly
    from flamino_core.alphabet import STANDARD_AMINO_ACIDS, TOKENS, batch_encode, encode
    from flamino_core.model.config import MAX_RESIDUES, PRESETS, ESM2Config
    from flamino_core.weights.convert import CheckpointMismatchError, state_dict_to_params
    from flamino_core.runtime.engine import Engine, SequenceOutput, enable_compilation_cache
    from flamino_core.inputs.fasta import ParsedInput, ProteinRecord, iter_records, parse_fasta_bytes, parse_fasta_text, read_fasta
    from flamino_core.model.esm2 import ESM2
    from flamino_core.options import LONG_POLICIES, STRATEGIES
    from flamino_core.store.passes import masked_log_probs, record_outputs
    from flamino_core.variants.substitution_maps import SequenceScores, pseudo_perplexity, substitution_map, substitution_scores
    from flamino_core.weights.loading import (
        ModelError,
        ModelNotAvailableError,
        ModelWeights,
        cached_presets,
        convert_to_checkpoint,
        default_model,
        load_weights,
        save_checkpoint,
    )
