"""What every ``flamino`` subcommand shares: exit codes, the user-error type, model loading,
FASTA reading and output checks. Light at import: the engine is imported when a model loads."""

from __future__ import annotations

import sys
from pathlib import Path

from ..progress import Progress
from ..progress import say

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2

MODEL_HELP = ("preset name (e.g. esm2_t33_650M_UR50D), local model folder, fair-esm .pt file, flamino "
              "checkpoint, or random:tiny (untrained test model); default $FLAMINO_MODEL or esm2_t12_35M_UR50D")
VERBOSE_HELP = "say which hardware, attention path (fused kernel or pure JAX) and precision run the model"


class UserError(Exception):
    """Bad input, options or model identifier: reported as one message, exit status 2."""


def load_engine(model: str | None, verbose: bool = False):
    """The engine for a model identifier, or a ``UserError`` saying why it cannot load."""
    from ..engine import Engine, enable_compilation_cache
    from ..weights import ModelError, default_model, load_weights

    enable_compilation_cache()
    try:
        weights = load_weights(model, progress=Progress("model").message)
        engine = Engine(weights)
    except ModelError as err:
        raise UserError(str(err)) from None
    except (ValueError, OSError) as err:  # a damaged checkpoint folder, an unreadable file
        first_line = (str(err).splitlines() or [""])[0]
        name = model or default_model()
        raise UserError(f"cannot use model {name!r}: {type(err).__name__}: {first_line}") from None
    if weights.is_random:
        say("note: untrained test model (random weights): outputs are not biology")
    if verbose:  # which attention path, precision and hardware (hardware.Backend.describe)
        say(f"running on {engine.backend.describe()}")
    return engine


def read_records(path: str):
    """The usable records of a FASTA file ('-': standard input) and whether any record had errors.

    Warnings and errors go to stderr; no usable record at all is a ``UserError``.
    """
    from ..fasta import read_fasta

    if path == "-":
        from ..fasta import parse_fasta_bytes

        parsed = parse_fasta_bytes(sys.stdin.buffer.read())
    else:
        parsed = read_fasta(path)
    for issue in parsed.warnings:
        say(f"warning: {issue}")
    for issue in parsed.errors:
        say(f"error: {issue}")
    if not parsed.records:
        raise UserError(f"{path}: no usable protein sequence")
    return parsed.records, bool(parsed.errors)


def check_output(path: str, suffix: str) -> Path:
    """``path`` as an output file with ``suffix`` in an existing folder, or a ``UserError``."""
    out = Path(path)
    if out.suffix != suffix:
        raise UserError(f"output {path!r} should end in {suffix}")
    if out.parent and not out.parent.exists():
        raise UserError(f"output folder {out.parent} does not exist")
    if out.is_dir():
        raise UserError(f"output {path!r} is a folder; give a file name")
    return out
