"""flamino: ESM-2 in JAX / Flax NNX, with the loaders, scores and analyses the app and CLI share."""

from . import analysis, share
from .alphabet import STANDARD_AMINO_ACIDS, TOKENS, batch_encode, encode
from .config import MAX_RESIDUES, PRESETS, ESM2Config
from .convert import CheckpointMismatchError, state_dict_to_params
from .engine import LONG_POLICIES, Engine, SequenceOutput, enable_compilation_cache
from .fasta import ParsedInput, ProteinRecord, parse_fasta_bytes, parse_fasta_text, read_fasta
from .hosting import HeavyJobQueue, Limits, QueueFull, current_limits, hosted_mode
from .model import ESM2
from .scores import (
    STRATEGIES,
    masked_marginals,
    pseudo_perplexity,
    substitution_scores,
    wt_marginals,
)
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

__all__ = [
    "analysis",
    "share",
    "HeavyJobQueue",
    "Limits",
    "QueueFull",
    "current_limits",
    "hosted_mode",
    "ESM2",
    "ESM2Config",
    "Engine",
    "CheckpointMismatchError",
    "LONG_POLICIES",
    "MAX_RESIDUES",
    "ModelError",
    "ModelNotAvailableError",
    "ModelWeights",
    "PRESETS",
    "ParsedInput",
    "ProteinRecord",
    "STANDARD_AMINO_ACIDS",
    "STRATEGIES",
    "SequenceOutput",
    "TOKENS",
    "batch_encode",
    "cached_presets",
    "convert_to_checkpoint",
    "default_model",
    "enable_compilation_cache",
    "encode",
    "load_weights",
    "masked_marginals",
    "parse_fasta_bytes",
    "parse_fasta_text",
    "pseudo_perplexity",
    "read_fasta",
    "save_checkpoint",
    "state_dict_to_params",
    "substitution_scores",
    "wt_marginals",
]
