"""flamino: protein language models in JAX / Flax NNX (ESM-2, ESM-1b, the ESM-1v ensemble, ESM C,
SaProt; ESMFold for structures), with the loaders, scores and analyses the app and CLI share.

The family-neutral face: ``load_weights`` (any family's identifier or checkpoint) gives
``ModelWeights`` whose ``ModelConfig`` names its ``Family`` (``FAMILIES``); ``Engine`` runs any of
them; ``ModelId`` and ``Numbering`` are the values the core passes for a model and a residue
numbering. ``ESM2`` and ``ESMC`` are the networks; ``ESM2Config`` is ``ModelConfig``'s old name.

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
    "ModelConfig": "model.config",
    "FAMILIES": "model.families",
    "Family": "model.families",
    "ModelId": "model.model_id",
    "Numbering": "numbering",
    "ESMC": "model.esmc",
    "CheckpointMismatchError": "weights.convert",
    "state_dict_to_params": "weights.convert",
    "Engine": "engine.engine",
    "SequenceOutput": "engine.engine",
    "enable_compilation_cache": "engine.engine",
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
    from flamino_core.model.config import MAX_RESIDUES, PRESETS, ESM2Config, ModelConfig
    from flamino_core.model.families import FAMILIES, Family
    from flamino_core.model.model_id import ModelId
    from flamino_core.numbering import Numbering
    from flamino_core.model.esmc import ESMC
    from flamino_core.weights.convert import CheckpointMismatchError, state_dict_to_params
    from flamino_core.engine.engine import Engine, SequenceOutput, enable_compilation_cache
    from flamino_core.inputs.fasta import (
        ParsedInput, ProteinRecord, iter_records, parse_fasta_bytes, parse_fasta_text, read_fasta,
    )
    from flamino_core.model.esm2 import ESM2
    from flamino_core.options import LONG_POLICIES, STRATEGIES
    from flamino_core.store.passes import masked_log_probs, record_outputs
    from flamino_core.variants.substitution_maps import (
        SequenceScores, pseudo_perplexity, substitution_map, substitution_scores,
    )
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
