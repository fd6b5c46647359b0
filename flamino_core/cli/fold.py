"""``flamino fold``: a predicted structure (ESMFold) per record, written as PDB files with pLDDT
(0-100) in the B-factor column, and a table of every record's length, mean pLDDT and pTM."""

from __future__ import annotations

import csv
import io
import re
import time
from pathlib import Path

from flamino_core.atomic import written_atomically
from flamino_core.cli.common import EXIT_OK, EXIT_USAGE, UserError, add_fasta_argument, read_fasta_argument
from flamino_core.progress import duration, say
from flamino_core.model.esmfold.config import STEM_PRECISIONS

# One pass holds the whole sequence: the stem is ESM-2, trained on 1,022 residues at most, and
# the trunk's pair state grows as L^2 (esmfold_v1: 128 floats per pair per block input, and the
# triangular attention's logits per chunk of rows). Longer records are refused, by name.
MAX_RESIDUES = 1022
STEM_BF16_NOTE = "stem in bf16 (opt-in fast mode: not the reference's numbers)"
TABLE = "folds.csv"
MODEL_HELP = ("esmfold_v1 (facebook/esmfold_v1, MIT licence: downloaded once into the Hugging Face cache), an "
              "ESMFold folder written by transformers' EsmForProteinFolding.save_pretrained, or "
              "random:esmfold-tiny[:seed] (an untrained test model: its structures are not biology); or ESMFold2: "
              "esmfold2 or esmfold2-fast (biohub/ESMFold2, biohub/ESMFold2-Fast, downloaded likewise), a folder "
              "written by EsmFold2Model.save_pretrained, or "
              "random:esmfold2-tiny[:seed]")
ESMFOLD2_ONLY = ("complex", "seed", "samples", "steps", "pdb")


def cmd_fold(args) -> int:
    from flamino_core.weights.esmfold import load_fold_model
    from flamino_core.weights.esmfold2_hub import is_esmfold2

    if is_esmfold2(args.model):  # ESMFold2: mmCIF files, complexes (cli/fold2.py)
        from flamino_core.cli.fold2 import cmd_fold2

        return cmd_fold2(args)
    given = [f"--{name}" for name in ESMFOLD2_ONLY if getattr(args, name) not in (None, False)]
    if given:
        raise UserError(f"{', '.join(given)}: for ESMFold2 models only (-m esmfold2-fast, random:esmfold2-tiny, ...)")
    if args.passes is not None and args.passes < 1:
        raise UserError(f"--passes {args.passes}: the trunk runs at least once (1 = no recycling)")
    if args.chunk_size < 0:
        raise UserError(f"--chunk-size {args.chunk_size}: a number of rows, or 0 for all at once")
    records, had_errors = read_fasta_argument(args)
    try:
        model, is_random = load_fold_model(args.model, args.stem_precision)
    except ValueError as err:
        raise UserError(str(err)) from None
    if is_random:
        say("note: untrained test model (random weights): the structures are not biology")
    if args.stem_precision == "bf16":
        say(f"note: {STEM_BF16_NOTE}")
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    rows, skipped, used = [], 0, set()
    for i, record in enumerate(records, 1):
        if len(record.sequence) > MAX_RESIDUES:
            say(f"error: {record.id}: {len(record.sequence):,} residues; flamino folds {MAX_RESIDUES:,} at most "
                "in one pass (the stem's trained length; the pair state grows as its square): skipped")
            skipped += 1
            continue
        rows.append(_fold_one(model, record, out, is_random, args, f"{i}/{len(records)}", used))
    _write_table(out / TABLE, rows)
    print(f"wrote {len(rows)} PDB file(s) and {out / TABLE}")
    return EXIT_USAGE if had_errors or skipped else EXIT_OK


def _fold_one(model, record, out: Path, is_random: bool, args, counter: str, used: set[str]) -> dict:
    from flamino_core.model.esmfold.pdb import to_pdb
    from flamino_core.structure.folding.prediction import fold

    start = time.perf_counter()
    folded = fold(model, record.sequence, passes=args.passes, chunk_size=args.chunk_size or None)
    path = out / _file_name(record.id, used)
    remark = f"flamino ESMFold ({'UNTRAINED TEST MODEL, not biology' if is_random else args.model}): {record.id}"
    if args.stem_precision == "bf16":
        remark += f"; {STEM_BF16_NOTE}"
    with written_atomically(path) as tmp:
        Path(tmp).write_text(to_pdb(folded, remark=remark))
    say(f"folded {record.id} ({counter}, {len(record.sequence)} residues) in "
        f"{duration(time.perf_counter() - start)}: mean pLDDT {100 * folded.mean_plddt:.1f}, pTM {folded.ptm:.3f}")
    return {"name": record.id, "length": len(record.sequence), "mean_plddt": round(100 * folded.mean_plddt, 2),
            "ptm": round(folded.ptm, 4), "pdb": path.name}


def _file_name(record_id: str, used: set[str]) -> str:
    """The record's id as a file name (characters other than letters, digits, '.', '-' and '_' as
    '_'), numbered when an earlier record of this run took it; added to ``used``."""
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", record_id)[:100] or "record"
    name, n = f"{stem}.pdb", 1
    while name in used:
        n += 1
        name = f"{stem}_{n}.pdb"
    used.add(name)
    return name


def _write_table(path: Path, rows: list[dict]) -> None:
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=["name", "length", "mean_plddt", "ptm", "pdb"], lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    with written_atomically(path) as tmp:
        Path(tmp).write_text(text.getvalue())


def add_parsers(sub) -> None:
    fold = sub.add_parser(
        "fold", help="predict structures (ESMFold): one PDB per record and a table",
        description="Fold every record with ESMFold. Writes DIR/<record>.pdb (pLDDT 0-100 in the B-factor "
                    f"column, as ESMFold's own files) and DIR/{TABLE} (name, length, mean pLDDT, pTM). Records "
                    f"over {MAX_RESIDUES} residues are skipped, named on stderr. With an ESMFold2 model: "
                    f"DIR/<name>.cif per fold (and complexes: A:B in a record, or --complex) and DIR/{TABLE} "
                    "(name, chains, length, mean pLDDT, pTM, ipTM).",
    )
    add_fasta_argument(fold)
    fold.add_argument("-m", "--model", required=True, help=MODEL_HELP)
    fold.add_argument("-o", "--output", required=True, metavar="DIR", help="output folder (created if missing)")
    fold.add_argument("--passes", type=int, default=None,
                      help="trunk passes, 1 + recycles (default: the model's, as the reference: 4 for esmfold_v1)")
    fold.add_argument("--chunk-size", type=int, default=64,
                      help="pair-state rows per step in the trunk's attention and pair MLP: less memory, the "
                           "same numbers (default 64; 0: all at once)")
    fold.add_argument("--stem-precision", choices=STEM_PRECISIONS, default="fp32",
                      help="the language-model stem's dense layers: fp32 (default: the reference's numbers) or bf16 "
                           "(5.6 GB less for esmfold_v1, what a long fold on a 16 GiB accelerator needs; not the "
                           "reference's numbers, said in every PDB)")
    two = fold.add_argument_group("ESMFold2 (docs/esmfold.md): mmCIF per fold, complexes as A:B in a record")
    two.add_argument("--complex", action="store_true",
                     help="fold every record of the input as one complex (chains A, B, ... in record order)")
    two.add_argument("--seed", type=int, default=None, help="the sampler's and the trunk's random seed (default 0)")
    two.add_argument("--samples", type=int, default=None,
                     help="diffusion samples per fold, the best by pTM kept (default: the model's)")
    two.add_argument("--steps", type=int, default=None,
                     help="the noise schedule's length before its cap (default: the model's)")
    two.add_argument("--pdb", action="store_true", help="also write DIR/<name>.pdb where the complex fits PDB")
    fold.set_defaults(call=cmd_fold)
