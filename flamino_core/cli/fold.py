"""``flamino fold``: a predicted structure (ESMFold) per record, written as PDB files with pLDDT
(0-100) in the B-factor column, and a table of every record's length, mean pLDDT and pTM."""

from __future__ import annotations

from pathlib import Path

from flamino_core.cli.common import EXIT_OK, EXIT_USAGE, UserError, add_fasta_argument, read_fasta_argument
from flamino_core.model.esmfold.config import STEM_PRECISIONS
from flamino_core.options import FoldPrecision, Precision
from flamino_core.progress import say
from flamino_core.structure.folding.fold_files import (  # noqa: F401  (COLUMNS: read by scripts from here)
    COLUMNS, TABLE, FoldSettings, fold_record, known_config, precision_note, run_length_limit, write_table,
)
from flamino_core.structure.folding.prediction import TRAINED_RESIDUES


MODEL_HELP = ("esmfold_v1 (facebook/esmfold_v1, MIT licence: downloaded once into the Hugging Face cache), an "
              "ESMFold folder written by transformers' EsmForProteinFolding.save_pretrained, or "
              "random:esmfold-tiny[:seed] (an untrained test model: its structures are not biology); or ESMFold2: "
              "esmfold2 or esmfold2-fast (biohub/ESMFold2, biohub/ESMFold2-Fast, downloaded likewise), a folder "
              "written by EsmFold2Model.save_pretrained, or "
              "random:esmfold2-tiny[:seed]")
ESMFOLD2_ONLY = ("complex", "seed", "samples", "steps", "pdb")


def cmd_fold(args) -> int:
    from flamino_core.engine.engine import enable_compilation_cache
    from flamino_core.structure.folding.fold_run import run_folds
    from flamino_core.structure.folding.fold_time import record_fold_time
    from flamino_core.structure.folding.prediction import memory_room

    if args.model.fold_family() == "esmfold2":  # ESMFold2: mmCIF files, complexes (cli/fold2.py)
        from flamino_core.cli.fold2 import cmd_fold2

        if args.mutations:
            raise UserError("--mutations: a variant's structure is folded with ESMFold (v1) models for now, "
                            "not ESMFold2")

        return cmd_fold2(args)
    given = [f"--{name}" for name in ESMFOLD2_ONLY if getattr(args, name) not in (None, False)]
    if given:
        raise UserError(f"{', '.join(given)}: for ESMFold2 models only (-m esmfold2-fast, random:esmfold2-tiny, ...)")
    if args.passes is not None and args.passes < 1:
        raise UserError(f"--passes {args.passes}: the trunk runs at least once (1 = no recycling)")
    if args.chunk_size < 0:
        raise UserError(f"--chunk-size {args.chunk_size}: a number of rows, or 0 for all at once")
    if args.max_residues is not None and args.max_residues < 1:
        raise UserError(f"--max-residues {args.max_residues}: at least one residue")
    records, had_errors = read_fasta_argument(args, windowed=False)  # folded whole: the plan says it
    enable_compilation_cache()  # one compilation per bucket, kept for the next run as every command's
    if args.mutations:  # the wild type and its variants, superposed (#66: cli/fold_mutations.py)
        from flamino_core.cli import fold_mutations

        model, is_random = _load(args)
        Path(args.output).mkdir(parents=True, exist_ok=True)
        return fold_mutations.run(args, model, is_random, records, write_table, _note(args))
    room = memory_room()  # before the weights arrive: the plan counts them in each fold's memory
    config, model, is_random = known_config(args.model), None, False
    if config is None:  # a folder without a readable config.json: the loader says what is wrong
        model, is_random = _load(args)
        config = model.config
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    plan, key = _plan(config, records, out, args, room)
    for line in plan.lines():
        say(line)
    for name, reason in plan.refused:
        say(f"error: {name}: {reason}: skipped")
    if plan.todo and model is None:  # the plan is said before the weights load (esmfold_v1: 8.4 GB)
        model, is_random = _load(args)
    settings = FoldSettings(args.model, is_random, args.passes, args.chunk_size or None, _stem(args),
                            args.fold_precision)
    rows = run_folds(plan, out, key, lambda task: fold_record(model, task, out, settings, say), say,
                     folded_in=lambda task, seconds: record_fold_time(config, task.length, key, seconds,
                                                                      passes=args.passes))
    write_table(out / TABLE, [rows[i] for i in sorted(rows)])
    kept = f" ({len(plan.done)} kept from an earlier run)" if plan.done else ""
    print(f"wrote {len(rows) - len(plan.done)} PDB file(s) and {out / TABLE}{kept}")
    return EXIT_USAGE if had_errors or plan.refused else EXIT_OK


def _load(args):
    from flamino_core.weights.esmfold import load_fold_model

    try:
        model, is_random = load_fold_model(args.model, args.stem_precision, args.fold_precision)
    except ValueError as err:
        raise UserError(str(err)) from None
    if is_random:
        say("note: untrained test model (random weights): the structures are not biology")
    if note := _note(args):
        say(f"note: {note}")
    return model, is_random


def _plan(config, records, out: Path, args, memory: tuple[int | None, str]):
    """The run's plan (``fold_run.plan_run``) and the model's store key: the length limit is the
    core's (``fold_files.run_length_limit``), or ``--max-residues`` where lower."""
    from flamino_core.structure.folding.fold_run import plan_run
    from flamino_core.structure.folding.prediction import model_key

    chunk = args.chunk_size or None
    stem = _stem(args)
    longest, where, device = run_length_limit(config, memory, chunk, stem, args.max_residues)
    key = model_key(args.model, args.passes or config.trunk.max_recycles, stem, args.fold_precision)
    return plan_run(records, out, config, key, longest, where, chunk, stem, args.passes,
                    device=device), key


def _stem(args) -> Precision:
    """The stem's precision the fold runs (and its memory is planned) in: bf16 in the fast mode."""
    return Precision.BF16 if args.fold_precision == FoldPrecision.FAST else Precision(args.stem_precision)


def _note(args) -> str:
    return precision_note(_stem(args), args.fold_precision)


def add_parsers(sub) -> None:
    fold = sub.add_parser(
        "fold", help="predict structures (ESMFold): one PDB per record and a table",
        description="Fold every record with ESMFold. Writes DIR/<record>.pdb (pLDDT 0-100 in the B-factor "
                    f"column, as ESMFold's own files) and DIR/{TABLE} (name, length, mean pLDDT, pTM, file, "
                    "past_trained_length). The plan is said first: records, lengths, buckets, memory, this "
                    "device's length limit and the time. Records are folded by length bucket (lengths padded to "
                    "a multiple of 64: <= 64, <= 128, ...; one compilation each, kept in the persistent "
                    "compilation cache), each file written as it finishes; the same command again into the same "
                    "DIR folds only what is missing. Records over the device's limit (its memory, by the "
                    "estimate; --max-residues) are skipped, named on stderr; records over "
                    f"{TRAINED_RESIDUES:,} residues fold past the ESM-2 stem's trained length, flagged in the file, "
                    "the table and on stderr. With an ESMFold2 model: "
                    f"DIR/<name>.cif per fold (and complexes: A:B in a record, or --complex) and DIR/{TABLE} "
                    "(name, chains, length, mean pLDDT, pTM, ipTM).",
    )
    add_fasta_argument(fold)
    fold.add_argument("-m", "--model", required=True, type=_model_id, help=MODEL_HELP)
    fold.add_argument("-o", "--output", required=True, metavar="DIR", help="output folder (created if missing)")
    fold.add_argument("--passes", type=int, default=None,
                      help="trunk passes, 1 + recycles (default: the model's, as the reference: 4 for esmfold_v1)")
    fold.add_argument("--chunk-size", type=int, default=64,
                      help="pair-state rows per step in the trunk's attention and pair MLP: less memory, the "
                           "same numbers (default 64; 0: all at once)")
    fold.add_argument("--max-residues", type=int, default=None, metavar="N",
                      help="fold records of N residues at most (default: the longest this device's memory holds "
                           "by the estimate, said in the plan)")
    fold.add_argument("--stem-precision", choices=STEM_PRECISIONS, default="fp32",
                      help="the language-model stem's dense layers: fp32 (default: the reference's numbers) or bf16 "
                           "(5.6 GB less for esmfold_v1, what a long fold on a 16 GiB accelerator needs; not the "
                           "reference's numbers, said in every PDB)")
    fold.add_argument("--fold-precision", type=FoldPrecision, choices=tuple(FoldPrecision), default=FoldPrecision.FP32,
                      help="the whole fold: fp32 (default: the reference's numbers) or fast (opt-in: bf16 products "
                           "with fp32 accumulation in the trunk's dense layers, triangular updates and attentions, "
                           "the stem in bf16; layer norms, softmax, the structure module and the heads in fp32; "
                           "not the reference's numbers, said in every PDB and stored apart; docs/esmfold.md)")
    two = fold.add_argument_group("ESMFold2 (docs/esmfold.md): mmCIF per fold, complexes as A:B in a record")
    two.add_argument("--complex", action="store_true",
                     help="fold every record of the input as one complex (chains A, B, ... in record order)")
    two.add_argument("--seed", type=int, default=None, help="the sampler's and the trunk's random seed (default 0)")
    two.add_argument("--samples", type=int, default=None,
                     help="diffusion samples per fold, the best by pTM kept (default: the model's)")
    two.add_argument("--steps", type=int, default=None,
                     help="the noise schedule's length before its cap (default: the model's)")
    two.add_argument("--pdb", action="store_true", help="also write DIR/<name>.pdb where the complex fits PDB")
    fold.add_argument("--mutations", default=None, metavar="E6V[,...]", help=fold_mutations_help())
    fold.set_defaults(call=cmd_fold)


def _model_id(text: str):
    """``-m``'s text read once into a ``ModelId`` (imported here: ``flamino --help`` stays light)."""
    from flamino_core.model.model_id import ModelId

    return ModelId.parse(text)


def fold_mutations_help() -> str:
    from flamino_core.cli.fold_mutations import HELP

    return HELP
