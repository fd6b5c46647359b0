"""The ``flamino`` command line: the same core functions as the app, for batch work.

Every subcommand's arguments are declared here (``build_parser``), from the light ``options``
module, and each command imports the heavy modules it needs (JAX, Ray) only when it runs:
``flamino --help`` loads neither.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import traceback
from pathlib import Path
from typing import Sequence

from .atomic import written_atomically
from .options import (
    BATCH_EMBED_PARTS, DEFAULT_SHARD_SIZE, DEFAULT_TOKEN_BUDGET, EMBED_PARTS, LONG_POLICIES, STRATEGIES,
)  # fmt: skip
from .progress import Progress, duration
from .progress import say as _say

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


class UserError(Exception):
    """Bad input, options or model identifier: reported as one message, exit status 2."""


def _load_engine(model: str | None, verbose: bool = False):
    from .engine import Engine, enable_compilation_cache
    from .weights import ModelError, default_model, load_weights

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


# --- subcommands ---------------------------------------------------------------------------
def cmd_fetch(args) -> int:
    from .config import PRESETS
    from .weights import ModelError, load_weights

    name = args.name.removeprefix("facebook/")
    if name not in PRESETS:
        raise UserError(f"unknown model {args.name!r}; presets: {', '.join(PRESETS)}")
    try:
        weights = load_weights(name, progress=Progress("fetch").message)
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
                                    progress=Progress("convert").message)
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
            progress=Progress("embed"),
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
    with written_atomically(out_path) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, **arrays)
    print(f"wrote {out_path} ({len(records)} sequences)")
    return EXIT_USAGE if had_errors else EXIT_OK


def cmd_score(args) -> int:
    from . import scores

    out_path = _check_output(args.output, ".csv")
    records, had_errors = _read_records(args.fasta)
    engine = _load_engine(args.model, args.verbose)
    with written_atomically(out_path) as tmp, open(tmp, "w", newline="") as handle:
        writer = csv.writer(handle)
        if args.strategy == "pppl":
            writer.writerow(["record_id", "pppl"])
        else:
            writer.writerow(["record_id", "position", "wt", "mt", "score"])
        for index, record in enumerate(records):
            label = f"{record.id} ({index + 1}/{len(records)})"
            scored = scores.score(engine, record.sequence, args.strategy, progress=Progress(label))
            if args.strategy == "pppl":
                writer.writerow([record.id, f"{scored.pppl:.6g}"])
                continue
            for row in scores.score_rows(record.id, scored.sequence, scored.substitutions):
                writer.writerow(row[:4] + (f"{row[4]:.6g}",))
    print(f"wrote {out_path} ({len(records)} sequences, {args.strategy})")
    return EXIT_USAGE if had_errors else EXIT_OK


def cmd_batch(args) -> int:
    """``flamino batch``: 0 when every record was computed, 2 if some failed (see failures.jsonl)."""
    from .batch import FAILURES, BatchError, run_batch

    include = [part.strip() for part in args.include.split(",") if part.strip() and part.strip() != "none"]
    try:
        summary = run_batch(
            args.batch_command, args.inputs, args.output, args.model, include=include, long=args.long,
            strategy=getattr(args, "strategy", None), shard_size=args.shard_size, token_budget=args.token_budget,
            ray_address=args.ray_address, actors=args.actors, cpus_per_actor=args.cpus_per_actor,
            gpus_per_actor=args.gpus_per_actor, overwrite=args.overwrite, say=_say,
        )
    except BatchError as err:
        raise UserError(str(err)) from None
    print(f"wrote {summary.out_dir}: {summary.rows:,} sequences, {summary.residues:,} residues, "
          f"{summary.shards} shards ({summary.shards_skipped} already done)")
    if summary.shards_run:
        print(f"this run: {summary.shards_run} shards in {duration(summary.seconds)} on {summary.actors} actor(s), "
              f"{summary.residues_per_s:,.0f} residues/s")
    if summary.failures:
        print(f"failed: {summary.failures:,} (reasons in {Path(summary.out_dir) / FAILURES})")
        return EXIT_USAGE
    return EXIT_OK


# --- parser -----------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
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

    _add_batch_parser(sub)
    return parser


def _add_batch_parser(subparsers) -> None:
    """``flamino batch embed|score``: proteome scale on Ray (see ``batch``)."""
    batch = subparsers.add_parser(
        "batch", help="embed or score whole proteomes on Ray, resumably, into Parquet",
        description="Embed or score many sequences on Ray (local by default). Results: one Parquet file "
                    "per shard in OUT_DIR, a manifest, failures.jsonl. Rerun the same command to continue.",
    )
    kinds = batch.add_subparsers(dest="batch_command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("inputs", nargs="+", metavar="INPUT", help="FASTA files (plain or .gz) or folders of them")
    common.add_argument("-m", "--model",
                        help="model identifier, as for embed (default $FLAMINO_MODEL or esm2_t12_35M_UR50D)")
    common.add_argument("-o", "--output", required=True, metavar="OUT_DIR", help="output folder")
    common.add_argument("--ray-address", default="local",
                        help="'local' (default) starts Ray in this process; 'auto' or HOST:PORT joins a cluster")
    common.add_argument("--long", choices=LONG_POLICIES, default="window",
                        help="sequences over 1022 residues (default: overlapping windows)")
    common.add_argument("--shard-size", type=int, default=DEFAULT_SHARD_SIZE,
                        help=f"records per shard, the unit of work and of resumption (default {DEFAULT_SHARD_SIZE})")
    common.add_argument("--actors", type=int,
                        help="model actors (default: one per GPU, else one per --cpus-per-actor CPUs)")
    common.add_argument("--cpus-per-actor", type=float, default=1, help="CPUs per actor (default 1)")
    common.add_argument("--gpus-per-actor", type=float, help="GPUs per actor (default 1 when the cluster has GPUs)")
    common.add_argument("--token-budget", type=int, default=DEFAULT_TOKEN_BUDGET,
                        help=f"tokens per forward pass (default {DEFAULT_TOKEN_BUDGET})")
    common.add_argument("--overwrite", action="store_true", help="replace a different job's results in OUT_DIR")

    embed = kinds.add_parser("embed", parents=[common], help="embeddings to Parquet")
    embed.add_argument("--include", default="mean", help=f"comma-separated: {','.join(BATCH_EMBED_PARTS)} (default mean)")
    score = kinds.add_parser("score", parents=[common], help="variant scores or pseudo-perplexity to Parquet")
    score.add_argument("--include", default="mean", help="'mean' (default) or 'none'")
    score.add_argument("--strategy", choices=STRATEGIES, default=STRATEGIES[0])
    batch.set_defaults(call=cmd_batch)


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
