"""``flamino fold --mutations E6V[,E6K ...]``: the wild type and each variant folded by the same
model with the same settings, each variant superposed on the wild type (Kabsch on C-alpha), and
a per-residue table of the C-alpha displacement, the pLDDT difference and contacts gained and
lost (``structure/folding/variant_structures.py``). Writes, in the output folder:

- ``<record>.pdb``: the wild type (pLDDT x 100 in the B-factors, as ``flamino fold`` writes it);
- ``<record>_<variant>.pdb``: each variant, superposed on the wild type (both open aligned);
- ``<record>_variants.csv``: one row per variant and residue (``variant_structures.COLUMNS``
  after ``variant_name``);
- ``folds.csv``: every structure's length, mean pLDDT and pTM, as ``flamino fold`` writes it.

Kept apart from ``cli/fold.py`` (which only hands over to ``run``) so the two change separately.
"""

from __future__ import annotations

import time
from pathlib import Path

from flamino_core.atomic import written_atomically
from flamino_core.cli.common import EXIT_OK, UserError, first_residue_number
from flamino_core.progress import duration, say

HELP = ("fold the wild type and these variants (substitutions in the record's numbering: E6V, or A23V:G45D for "
        "a multi-mutant; comma separated) with the same model and settings, superpose each on the wild type and "
        "write <record>_<variant>.pdb and <record>_variants.csv (C-alpha displacement, pLDDT difference, contacts "
        "gained and lost per residue); one record only")


def run(args, model, is_random: bool, records: list, write_table, note: str = "") -> int:
    """The ``--mutations`` run of ``flamino fold`` on its one record (``write_table``: fold.py's
    ``folds.csv`` writer; ``note``: its precision note, the fast mode's or a bf16 stem's, said in
    every file). Exit status 0; a ``UserError`` for anything the user must change."""
    from flamino_core.numbering import Numbering
    from flamino_core.structure.folding import variant_structures as vs
    from flamino_core.structure.folding.prediction import fold

    if len(records) != 1:
        raise UserError(f"--mutations: give one record (the wild type), not {len(records)}: positions are the "
                        "record's own")
    record = records[0]
    numbering = Numbering(first_residue_number(record, None))
    try:
        variants = vs.substitution_variants(args.mutations, record.sequence, numbering)
    except ValueError as err:
        raise UserError(f"--mutations: {record.id}: {err}") from None
    label = "UNTRAINED TEST MODEL, not biology" if is_random else args.model.text
    if note:  # the fast mode or a bf16 stem, in every file's REMARK
        label += f"; {note}"
    say(f"note: {vs.CAVEAT}")

    def fold_one(sequence: str):
        start = time.perf_counter()
        folded = fold(model, sequence, passes=args.passes, chunk_size=args.chunk_size or None)
        say(f"folded {len(sequence)} residues in {duration(time.perf_counter() - start)}")
        return folded

    wild_type, results = vs.fold_variants(fold_one, record.sequence, variants, numbering)
    out = Path(args.output)
    stem = _stem(record.id)
    files = {f"{stem}.pdb": _pdb(wild_type, label, record.id)}
    rows = [_row(record.id, wild_type, f"{stem}.pdb")]
    for result in results:
        name = f"{stem}_{_stem(result.variant)}.pdb"
        files[name] = vs.superposed_pdb(result, label, record.id)
        rows.append(_row(f"{record.id} {result.variant}", result.folded, name))
        say(result.describe())
    files[f"{stem}_variants.csv"] = vs.table_csv(results)
    for name, text in files.items():
        with written_atomically(out / name) as tmp:
            Path(tmp).write_text(text)
    write_table(out / "folds.csv", rows)
    print(f"wrote {len(files) - 1} PDB file(s), {out / f'{stem}_variants.csv'} and {out / 'folds.csv'}")
    return EXIT_OK


def _stem(text: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9._-]", "_", text)[:100] or "record"


def _pdb(folded, label: str, name: str) -> str:
    from flamino_core.structure.folding.prediction import prediction_pdb

    return prediction_pdb(folded, label, name)


def _row(name: str, folded, pdb: str) -> dict:
    return {"name": name, "length": len(folded.sequence), "mean_plddt": round(100 * folded.mean_plddt, 2),
            "ptm": round(folded.ptm, 4), "pdb": pdb}
