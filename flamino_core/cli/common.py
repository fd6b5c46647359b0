"""What every ``flamino`` subcommand shares: exit codes, the user-error type, model loading,
FASTA reading and output checks. Light at import: the engine is imported when a model loads.

A command that reads sequences declares its input with ``add_fasta_argument(parser)`` (the
FASTA path and ``--allow-dna``) and reads it with ``read_fasta_argument(args)``: one line each,
and every such command takes the same flags and prints the same messages.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from flamino_core.options import Precision
from flamino_core.progress import Progress
from flamino_core.progress import say

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2

MODEL_HELP = ("preset name (e.g. esm2_t33_650M_UR50D), local model folder, fair-esm .pt file, flamino "
              "checkpoint, or random:tiny (untrained test model); default $FLAMINO_MODEL or esm2_t12_35M_UR50D")
PRECISION_HELP = ("fp32 (default, or $FLAMINO_PRECISION: the reference, 1e-4 parity), bf16 or int8 (opt-in fast modes, "
                  "labelled, stored apart; bf16 refused where the machine would only emulate it)")
VERBOSE_HELP = "say which hardware, attention path (fused kernel or pure JAX) and precision run the model"
FASTA_HELP = ("FASTA file ('-' for standard input), plain or gzipped; GenBank, GenPept, EMBL and "
              "Swiss-Prot flat files are read too")
OFFSET_HELP = "number of the sequence's first residue (default: from a /start-end id suffix, else 1)"
ALLOW_DNA_HELP = ("analyse sequences that look like DNA/RNA (>= 90%% A/C/G/T/U/N over >= 20 letters) "
                  "as protein; by default they are refused")


class UserError(Exception):
    """Bad input, options or model identifier: reported as one message, exit status 2."""


def _text(model) -> str | None:
    """A model identifier as written (a ``ModelId``'s text)."""
    return getattr(model, "text", model)


def say_plan(label: str, needed, engine) -> None:
    """Before the work: the passes a command still runs (``jobs.plan.Needed``) and, when this
    machine timed the model, their time, from the core's one cost model (``Needed.seconds``): the
    plan the app's pages show before the same work."""
    from flamino_core.jobs.status import about

    seconds = needed.seconds(engine) if needed.passes else None
    when = f", {about(seconds)} at the rate this machine measured" if seconds is not None else ""
    say(f"{label}: to run: {needed.describe()}{when}")


def add_precision_argument(parser) -> None:
    """``--precision``, read into an ``options.Precision`` here at the door (``load_engine``'s
    ``precision``); unset: $FLAMINO_PRECISION, else fp32."""
    parser.add_argument("--precision", type=_precision, metavar="{fp32,bf16,int8}", help=PRECISION_HELP)


def _precision(text: str) -> Precision:
    try:
        return Precision(text.strip().lower())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: choose one of {', '.join(Precision)}") from None


def load_engine(model, verbose: bool = False, precision: Precision | None = None):
    """The engine for a model identifier (text, a parsed ``ModelId`` or None for the default), or
    a ``UserError`` saying why it cannot load. ``precision``: the command's ``--precision``
    (None: $FLAMINO_PRECISION, else fp32), refused before any weight is read where this machine
    would only emulate it."""
    from flamino_core.engine.device_memory import ModelTooLargeError
    from flamino_core.engine.hardware import PrecisionRefused, refuse_named_model
    from flamino_core.engine.engine import Engine, enable_compilation_cache
    from flamino_core.model.model_id import ModelId
    from flamino_core.weights.loading import ModelError, default_model, load_weights

    enable_compilation_cache()
    model = model if isinstance(model, ModelId) else ModelId.parse(model or default_model())  # read once, here
    try:
        refuse_named_model(model, precision)  # bf16 emulated, or more than an accelerator holds: before a download
        weights = load_weights(model, progress=Progress("model").message)
        engine = Engine(weights, precision=precision)
    except (ModelError, ModelTooLargeError, PrecisionRefused) as err:  # the reason, as it is worded
        raise UserError(str(err)) from None
    except (ValueError, OSError) as err:  # a damaged checkpoint folder, an unreadable file
        first_line = (str(err).splitlines() or [""])[0]
        name = _text(model) or default_model()
        raise UserError(f"cannot use model {name!r}: {type(err).__name__}: {first_line}") from None
    if weights.is_random:
        say("note: untrained test model (random weights): outputs are not biology")
    if engine.backend.precision != Precision.FP32:  # an opt-in fast mode ($FLAMINO_PRECISION): labelled, as in the app
        say(f"note: precision {engine.backend.precision_words}")
    if verbose:  # which attention path, precision and hardware (hardware.Backend.describe)
        say(f"running on {engine.backend.describe()}")
    return engine


def add_fasta_argument(parser, help: str = FASTA_HELP) -> None:
    """The positional FASTA input and ``--allow-dna``, for a command read by ``read_fasta_argument``."""
    parser.add_argument("fasta", help=help)
    parser.add_argument("--allow-dna", action="store_true", help=ALLOW_DNA_HELP)


def read_fasta_argument(args, *, windowed: bool = True):
    """``read_records`` of what ``add_fasta_argument`` declared."""
    return read_records(args.fasta, allow_dna=args.allow_dna, windowed=windowed)


def read_records(path: str, *, allow_dna: bool = False, windowed: bool = True):
    """The usable records of a FASTA file ('-': standard input) and whether any record had errors.

    Warnings and errors go to stderr; no usable record at all is a ``UserError``. Sequences
    that look like DNA/RNA are refused unless ``allow_dna``. A PDB or mmCIF file (plain or
    gzipped) is read as the app's Input page reads one (``chain_records.structure_records``):
    each protein chain of its first model a record, numbered from the file (``1GBT_A/16-245``).
    ``windowed``: False for a command that does not read long records in windows (``flamino fold``
    folds them whole and says so itself): the reader's window warning is not said.
    """
    from flamino_core.inputs.fasta import parse_fasta_bytes, read_fasta
    from flamino_core.inputs.fasta_records import ESM2_TRAINING_LENGTH

    data = sys.stdin.buffer.read() if path == "-" else None
    structure = _structure_records(path, data)
    if structure is not None:
        say(f"{path}: read as a {structure.describe()}")
        parsed = parse_fasta_bytes(structure.fasta.encode(), allow_nucleotides=allow_dna)
    elif data is not None:
        parsed = parse_fasta_bytes(data, allow_nucleotides=allow_dna)
    else:
        parsed = read_fasta(path, allow_nucleotides=allow_dna)
    windows_note = f"longer than {ESM2_TRAINING_LENGTH} residues"
    for issue in parsed.warnings:
        if windowed or not issue.message.startswith(windows_note):
            say(f"warning: {issue}")
    for issue in parsed.errors:
        say(f"error: {issue}")
    refused_dna = len(parsed.nucleotide_labels) if not allow_dna else 0
    if refused_dna:
        say(f"note: {refused_dna:,} record(s) refused as nucleotide sequence; translate them to protein, "
            "or pass --allow-dna to analyse the letters as amino acids anyway")
    if not parsed.records:
        raise UserError(f"{path}: no usable protein sequence")
    return parsed.records, bool(parsed.errors)


def _structure_records(path: str, data: bytes | None):
    """The records of a structure file given where FASTA is expected, or None for anything else
    (the FASTA reader then says what it is). ``data``: standard input's bytes, else None."""
    from flamino_core.structure.files.chain_records import SNIFF_BYTES, looks_like_structure, structure_records

    try:
        if data is None:
            with open(path, "rb") as file:  # the head only: a FASTA file may be a proteome
                head = file.read(4 * SNIFF_BYTES)
        else:
            head = data
    except OSError:
        return None  # a missing or unreadable path: read_fasta's message says which
    if not looks_like_structure(head):
        return None
    from flamino_core.structure.files.reading import parse_structure_bytes, read_structure

    try:
        return structure_records(read_structure(path) if data is None else parse_structure_bytes(data, "stdin"))
    except ValueError as err:  # StructureError is one: the reader's words
        raise UserError(f"{path}: {err}") from None


def first_residue_number(record, offset: int | None) -> int:
    """The number of ``record``'s first residue: ``--offset`` when given, else what the id's
    ``/start-end`` suffix says (said on stderr), else 1. Every command that writes positions
    numbers them from it."""
    from flamino_core.inputs.numbering import first_number

    if offset is not None:
        return offset
    found, note = first_number(record.id, len(record.sequence))
    if note:
        say(f"warning: {note}")
    if found != 1:
        say(f"{record.id}: numbering starts at {found} (from the id; --offset changes it)")
    return found


def check_output(path: str, suffix: str | tuple[str, ...]) -> Path:
    """``path`` as an output file with ``suffix`` (or one of several) in an existing folder, or a
    ``UserError``."""
    out = Path(path)
    suffixes = (suffix,) if isinstance(suffix, str) else suffix
    if out.suffix not in suffixes:
        raise UserError(f"output {path!r} should end in {' or '.join(suffixes)}")
    if out.parent and not out.parent.exists():
        raise UserError(f"output folder {out.parent} does not exist")
    if out.is_dir():
        raise UserError(f"output {path!r} is a folder; give a file name")
    return out
