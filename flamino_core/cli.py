"""The ``flamino`` command line: the same core functions as the app, for batch work."""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import sys
import traceback
from pathlib import Path
from typing import Sequence

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
EMBED_PARTS = ("mean", "per_tok", "logits", "attentions", "contacts")


class UserError(Exception):
    """Bad input or model identifier: reported as one message, exit status 2."""


def _say(message: str) -> None:
    print(f"flamino: {message}", file=sys.stderr)


class _Progress:
    """Progress on stderr (rewritten in place on a terminal, every 10% otherwise)."""

    def __init__(self, label: str):
        self.label, self.last = label, -1
        self.tty = sys.stderr.isatty()

    def __call__(self, done: int, total: int) -> None:
        percent = int(100 * done / max(total, 1))
        if self.tty:
            print(f"\r{self.label}: {done}/{total} ({percent}%)", end="\n" if done >= total else "", file=sys.stderr)
        elif percent // 10 != self.last // 10 or done >= total:
            print(f"{self.label}: {done}/{total} ({percent}%)", file=sys.stderr)
        self.last = percent

    def message(self, fraction, text: str) -> None:
        print(text, file=sys.stderr)


def _load_engine(model: str | None, verbose: bool = False):
    from .engine import Engine, enable_compilation_cache
    from .weights import ModelError, default_model, load_weights

    enable_compilation_cache()
    try:
        weights = load_weights(model, progress=_Progress("model").message)
        engine = Engine(weights)
    except ModelError as err:
        raise UserError(str(err)) from None
    except (ValueError, OSError) as err:  # a damaged checkpoint folder, an unreadable file
        first_line = (str(err).splitlines() or [""])[0]
        name = model or default_model()
        raise UserError(f"cannot use model {name!r}: {type(err).__name__}: {first_line}") from None
    if weights.is_random:
        _say("note: untrained test model (random weights): outputs are not biology")
    if verbose:  # which attention path, precision and hardware (hardware.Backend.describe)
        _say(f"running on {engine.backend.describe()}")
    return engine


def _read_records(path: str):
    from .fasta import read_fasta

    if path == "-":
        from .fasta import parse_fasta_bytes

        parsed = parse_fasta_bytes(sys.stdin.buffer.read())
    else:
        parsed = read_fasta(path)
    for issue in parsed.warnings:
        _say(f"warning: {issue}")
    for issue in parsed.errors:
        _say(f"error: {issue}")
    if not parsed.records:
        raise UserError(f"{path}: no usable protein sequence")
    return parsed.records, bool(parsed.errors)


def _check_output(path: str, suffix: str) -> Path:
    out = Path(path)
    if out.suffix != suffix:
        raise UserError(f"output {path!r} should end in {suffix}")
    if out.parent and not out.parent.exists():
        raise UserError(f"output folder {out.parent} does not exist")
    if out.is_dir():
        raise UserError(f"output {path!r} is a folder; give a file name")
    return out


@contextlib.contextmanager
def _written_atomically(out: Path):
    """A temporary file beside ``out``, renamed to ``out`` only when the block succeeds: an
    interrupted or failed run never leaves a truncated file that looks like a result."""
    tmp = out.with_name(f".{out.name}.partial-{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)


# --- subcommands ---------------------------------------------------------------------------
def cmd_fetch(args) -> int:
    from .config import PRESETS
    from .weights import ModelError, load_weights

    name = args.name.removeprefix("facebook/")
    if name not in PRESETS:
        raise UserError(f"unknown model {args.name!r}; presets: {', '.join(PRESETS)}")
    try:
        weights = load_weights(name, progress=_Progress("fetch").message)
    except ModelError as err:
        raise UserError(str(err)) from None
    except Exception as err:  # the Hub client's network errors are not all OSErrors
        _say(f"could not fetch {name}: {type(err).__name__}: {err}; run the command again: "
             "the download resumes where it stopped")
        return EXIT_FAILURE
    print(f"{name}: ready ({weights.config.num_layers} layers, from {weights.source})")
    return EXIT_OK


def cmd_convert(args) -> int:
    from .weights import ModelError, convert_to_checkpoint

    try:
        out = convert_to_checkpoint(args.source, Path(args.output) if args.output else None,
                                    progress=_Progress("convert").message)
    except (ModelError, ValueError) as err:  # ValueError: damaged checkpoint files
        raise UserError(str(err)) from None
    print(f"wrote flamino checkpoint {out}")
    return EXIT_OK


def cmd_embed(args) -> int:
    import numpy as np

    include = [part.strip() for part in args.include.split(",") if part.strip()]
    unknown = sorted(set(include) - set(EMBED_PARTS))
    if unknown:
        raise UserError(f"--include: unknown part(s) {', '.join(unknown)}; choose from {', '.join(EMBED_PARTS)}")
    out_path = _check_output(args.output, ".npz")
    records, had_errors = _read_records(args.fasta)
    engine = _load_engine(args.model, args.verbose)
    n = engine.config.num_layers
    try:
        repr_layers = engine.normalize_layers(args.repr_layers)
    except ValueError as err:
        raise UserError(f"--repr-layers: {err}") from None
    attention_layers = tuple(range(1, n + 1)) if "attentions" in include else ()
    try:
        results = engine.run(
            [r.sequence for r in records],
            repr_layers=repr_layers,
            logits="logits" in include,
            attention_layers=attention_layers,
            contacts="contacts" in include,
            long=args.long,
            progress=_Progress("embed"),
        )
    except ValueError as err:
        raise UserError(str(err)) from None

    arrays: dict[str, np.ndarray] = {
        "ids": np.array([r.id for r in records]),
        "sequences": np.array([res.sequence for res in results]),
    }
    for i, res in enumerate(results):
        if "per_tok" in include:
            arrays[f"per_tok/{i}"] = res.final
        if "mean" in include:
            arrays[f"mean/{i}"] = res.mean
        if "logits" in include:
            arrays[f"logits/{i}"] = res.logits
        if "attentions" in include:
            arrays[f"attentions/{i}"] = res.attentions
        if "contacts" in include:
            arrays[f"contacts/{i}"] = res.contacts
        for layer in repr_layers:
            if layer != n:
                arrays[f"layer{layer}/{i}"] = res.representations[layer]
    with _written_atomically(out_path) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, **arrays)
    print(f"wrote {out_path} ({len(records)} sequences)")
    return EXIT_USAGE if had_errors else EXIT_OK


def cmd_score(args) -> int:
    from . import scores

    out_path = _check_output(args.output, ".csv")
    records, had_errors = _read_records(args.fasta)
    engine = _load_engine(args.model, args.verbose)
    with _written_atomically(out_path) as tmp, open(tmp, "w", newline="") as handle:
        writer = csv.writer(handle)
        if args.strategy == "pppl":
            writer.writerow(["record_id", "pppl"])
        else:
            writer.writerow(["record_id", "position", "wt", "mt", "score"])
        for index, record in enumerate(records):
            label = f"{record.id} ({index + 1}/{len(records)})"
            if args.strategy == "wt-marginals":
                values = scores.wt_marginals(engine, record.sequence)
            else:
                log_probs = engine.masked_log_probs(record.sequence, progress=_Progress(label))
                if args.strategy == "pppl":
                    writer.writerow([record.id, f"{scores.pseudo_perplexity(log_probs, record.sequence):.6g}"])
                    continue
                values = scores.substitution_scores(log_probs, record.sequence)
            for row in scores.score_rows(record.id, record.sequence, values):
                writer.writerow(row[:4] + (f"{row[4]:.6g}",))
    print(f"wrote {out_path} ({len(records)} sequences, {args.strategy})")
    return EXIT_USAGE if had_errors else EXIT_OK


# --- parser -----------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    from .engine import LONG_POLICIES
    from .scores import STRATEGIES

    parser = argparse.ArgumentParser(
        prog="flamino", description="ESM-2 embeddings and variant scores (JAX / Flax NNX)."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    model_help = ("preset name (e.g. esm2_t33_650M_UR50D), local model folder, fair-esm .pt file, flamino "
                  "checkpoint, or random:tiny (untrained test model); default $FLAMINO_MODEL or esm2_t12_35M_UR50D")

    verbose_help = "say which hardware, attention path (fused kernel or pure JAX) and precision run the model"

    fetch = sub.add_parser("fetch", help="download a published model and cache it")
    fetch.add_argument("name")
    fetch.set_defaults(call=cmd_fetch)

    convert = sub.add_parser("convert", help="convert a checkpoint into a flamino checkpoint folder")
    convert.add_argument("source", help="local HF model folder, fair-esm .pt file, or preset name")
    convert.add_argument("-o", "--output", help="output folder (default: <source name>-flamino)")
    convert.set_defaults(call=cmd_convert)

    embed = sub.add_parser("embed", help="embeddings (and logits, attention, contacts) to an .npz file")
    embed.add_argument("fasta", help="FASTA file ('-' for standard input)")
    embed.add_argument("-m", "--model", help=model_help)
    embed.add_argument("-o", "--output", required=True, help="output .npz")
    embed.add_argument("--include", default="mean,per_tok", help=f"comma-separated: {','.join(EMBED_PARTS)}")
    embed.add_argument("--repr-layers", type=int, nargs="+", default=[-1],
                       help="hidden layers to save (0 = embeddings, -1 = final)")
    embed.add_argument("--long", choices=LONG_POLICIES, default="window",
                       help="sequences over 1022 residues (default: overlapping windows)")
    embed.add_argument("-v", "--verbose", action="store_true", help=verbose_help)
    embed.set_defaults(call=cmd_embed)

    score = sub.add_parser("score", help="single-substitution scores or pseudo-perplexity to a .csv file")
    score.add_argument("fasta", help="FASTA file ('-' for standard input)")
    score.add_argument("-m", "--model", help=model_help)
    score.add_argument("-o", "--output", required=True, help="output .csv")
    score.add_argument("--strategy", choices=STRATEGIES, default="masked-marginals")
    score.add_argument("-v", "--verbose", action="store_true", help=verbose_help)
    score.set_defaults(call=cmd_score)

    from .batch import add_batch_parser  # flamino batch embed|score: proteome scale on Ray

    add_batch_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse already printed its usage message
        return EXIT_USAGE if exit_.code else EXIT_OK
    try:
        return args.call(args)
    except UserError as err:
        _say(str(err))
        return EXIT_USAGE
    except KeyboardInterrupt:
        _say("interrupted")
        return 130
    except MemoryError:
        _say("out of memory: try fewer or shorter sequences, or a smaller model")
        return EXIT_FAILURE
    except OSError as err:  # an output folder without write permission, a full disk
        where = f" {err.filename}" if err.filename else ""
        _say(f"could not write{where}: {err.strerror or err}")
        return EXIT_FAILURE
    except Exception as err:  # a bug or a dropped download: one line, the traceback on request
        if os.environ.get("FLAMINO_DEBUG"):
            traceback.print_exc()
        _say(f"unexpected error: {type(err).__name__}: {err} (set FLAMINO_DEBUG=1 to see where; please report it)")
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
