"""``flamino batch embed|score|fold``: proteome scale on Ray (the work itself is in ``flamino_core.batch``).

Only the arguments and the report live here; ``batch`` raises ``BatchError``, which becomes a
``UserError`` (exit 2), so ``batch`` never imports the command line (no import cycle).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from flamino_core.options import (
    BATCH_EMBED_PARTS, DEFAULT_SHARD_SIZE, DEFAULT_STRATEGY, DEFAULT_TOKEN_BUDGET, LONG_POLICIES, STRATEGIES, names,
)
from flamino_core.model.esmfold.config import STEM_PRECISIONS
from flamino_core.progress import duration, say
from flamino_core.cli.common import EXIT_OK, EXIT_USAGE, UserError


def cmd_batch(args) -> int:
    """``flamino batch``: 0 when every record was computed, 2 if some failed (see failures.jsonl)."""
    from flamino_core.batch import FAILURES, BatchError, run_batch

    include = [part.strip() for part in getattr(args, "include", "none").split(",")
               if part.strip() and part.strip() != "none"]
    fold = None
    if args.batch_command == "fold":
        fold = {"passes": args.passes, "chunk_size": args.chunk_size, "stem_precision": args.stem_precision,
                "max_residues": args.max_residues}
    try:
        summary = run_batch(
            args.batch_command, args.inputs, args.output, args.model, include=include,
            long=getattr(args, "long", "window"), strategy=getattr(args, "strategy", None),
            shard_size=args.shard_size, token_budget=getattr(args, "token_budget", None),
            ray_address=args.ray_address, actors=args.actors, cpus_per_actor=args.cpus_per_actor,
            gpus_per_actor=args.gpus_per_actor, overwrite=args.overwrite, store=not getattr(args, "no_store", False),
            fold=fold, say=say,
        )
    except BatchError as err:
        raise UserError(str(err)) from None
    made = "structures (PDB files and folds.csv)" if args.batch_command == "fold" else "sequences"
    print(f"wrote {summary.out_dir}: {summary.rows:,} {made}, {summary.residues:,} residues, "
          f"{summary.shards} shards ({summary.shards_skipped} already done)")
    if summary.shards_run:
        print(f"this run: {summary.shards_run} shards in {duration(summary.seconds)} on {summary.actors} actor(s), "
              f"{summary.residues_per_s:,.0f} residues/s")
    if summary.failures:
        print(f"failed: {summary.failures:,} (reasons in {Path(summary.out_dir) / FAILURES})")
        return EXIT_USAGE
    return EXIT_OK


def add_parsers(subparsers) -> None:
    batch = subparsers.add_parser(
        "batch", help="embed, score or fold whole proteomes on Ray, resumably",
        description="Embed, score or fold many sequences on Ray (local by default). Results: one Parquet file "
                    "per shard in OUT_DIR, a manifest, failures.jsonl (fold: also a PDB file per record and "
                    "folds.csv, as `flamino fold`). Rerun the same command to continue.",
    )
    kinds = batch.add_subparsers(dest="batch_command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("inputs", nargs="+", metavar="INPUT", help="FASTA files (plain or .gz) or folders of them")
    common.add_argument("-m", "--model",
                        help="model identifier, as for embed (default $FLAMINO_MODEL or esm2_t12_35M_UR50D)")
    common.add_argument("-o", "--output", required=True, metavar="OUT_DIR", help="output folder")
    common.add_argument("--ray-address", default="local",
                        help="'local' (default) starts Ray in this process; 'auto' or HOST:PORT joins a cluster")
    common.add_argument("--shard-size", type=int, default=DEFAULT_SHARD_SIZE,
                        help=f"records per shard, the unit of work and of resumption (default {DEFAULT_SHARD_SIZE})")
    common.add_argument("--actors", type=int,
                        help="model actors (default: one per GPU, else one per --cpus-per-actor CPUs)")
    common.add_argument("--cpus-per-actor", type=float, default=1, help="CPUs per actor (default 1)")
    common.add_argument("--gpus-per-actor", type=float, help="GPUs per actor (default 1 when the cluster has GPUs)")
    common.add_argument("--overwrite", action="store_true", help="replace a different job's results in OUT_DIR")
    language = argparse.ArgumentParser(add_help=False)  # the language models' jobs (embed, score)
    language.add_argument("--long", choices=LONG_POLICIES, default="window",
                          help="sequences over 1022 residues (default: overlapping windows)")
    language.add_argument("--token-budget", type=int, default=DEFAULT_TOKEN_BUDGET,
                          help=f"tokens per forward pass (default {DEFAULT_TOKEN_BUDGET})")

    embed = kinds.add_parser("embed", parents=[common, language], help="embeddings to Parquet")
    embed.add_argument("--include", default="mean",
                       help=f"comma-separated: {','.join(BATCH_EMBED_PARTS)} (default mean)")
    score = kinds.add_parser("score", parents=[common, language], help="variant scores or pseudo-perplexity to Parquet")
    score.add_argument("--include", default="mean", help="'mean' (default) or 'none'")
    score.add_argument("--strategy", choices=names("map"), default=DEFAULT_STRATEGY,
                       help="; ".join(f"{name}: {STRATEGIES[name].help}" for name in names("map")))
    score.add_argument("--no-store", action="store_true",
                       help="masked strategies: neither read nor keep masked passes in the result store "
                            "(FLAMINO_CACHE/results.sqlite on each node)")
    fold = kinds.add_parser(
        "fold", parents=[common], help="ESMFold structures: a PDB file per record and folds.csv, as flamino fold",
        description="Fold every record with ESMFold (v1), one model replica per actor (per device): the same "
                    "PDB files and folds.csv as `flamino fold` into OUT_DIR, plus the batch's manifest, shard "
                    "files and failures.jsonl (invalid records, records over an actor's length limit).")
    fold.add_argument("--passes", type=int, default=None, help="trunk passes, 1 + recycles (default: the model's)")
    fold.add_argument("--chunk-size", type=int, default=64,
                      help="pair-state rows per step in the trunk's attention and pair MLP (default 64; 0: all)")
    fold.add_argument("--max-residues", type=int, default=None, metavar="N",
                      help="fold records of N residues at most (default: the longest each device holds)")
    fold.add_argument("--stem-precision", choices=STEM_PRECISIONS, default="fp32",
                      help="the stem's dense layers: fp32 (default, the reference's numbers) or bf16 (opt-in)")
    batch.set_defaults(call=cmd_batch)
