"""``flamino score``: the full single-substitution map or pseudo-perplexity of every record to a CSV.

Positions are numbered like every other command's: from ``--offset``, else from the record id's
``/start-end`` suffix, else from 1; a record made of a structure's chain also names each position
as the file numbers it (``structure_position``: ``184A``). Masked passes go through the result
store (``FLAMINO_CACHE``),
so scoring the same record again with the same model runs no masked pass.
"""

from __future__ import annotations

import csv

from flamino_core.atomic import written_atomically
from flamino_core.numbering import Numbering
from flamino_core.options import DEFAULT_STRATEGY, STRATEGIES, names
from flamino_core.progress import Progress
from flamino_core.cli.common import (
    EXIT_OK, EXIT_USAGE, MODEL_HELP, OFFSET_HELP, VERBOSE_HELP, add_fasta_argument, add_precision_argument,
    check_output, first_residue_number, load_engine, read_fasta_argument, say_plan,
)


def cmd_score(args) -> int:
    from flamino_core.variants.author_numbering import from_record
    from flamino_core.jobs.plan import map_passes
    from flamino_core.variants import substitution_maps as scores

    out_path = check_output(args.output, ".csv")
    records, had_errors = read_fasta_argument(args)
    engine = load_engine(args.model, args.verbose, args.precision)
    per_record = STRATEGIES[args.strategy].per_record
    # A record made of a structure's chain carries the file's numbering (1GBT: chymotrypsin
    # numbering, 184A ...): each position is then named in it too (blank for other records).
    structure = {record.id: from_record(record) for record in records}
    labelled = any(numbering is not None for numbering in structure.values())
    say_plan("score", map_passes(engine, [r.sequence for r in records], args.strategy), engine)
    with written_atomically(out_path) as tmp, open(tmp, "w", newline="") as handle:
        writer = csv.writer(handle)
        if per_record:
            writer.writerow(["record_id", args.strategy])
        else:
            labels = ["structure_position"] if labelled else []
            writer.writerow(["record_id", "position", *labels, "wt", "mt", "score"])
        for index, record in enumerate(records):
            label = f"{record.id} ({index + 1}/{len(records)})"
            scored = scores.substitution_map(engine, record.sequence, args.strategy, progress=Progress(label))
            if per_record:
                writer.writerow([record.id, f"{scored.pppl:.6g}"])
                continue
            numbering, record_numbering = structure[record.id], Numbering(first_residue_number(record, args.offset))
            for row in scores.score_rows(record.id, scored.sequence, scored.substitutions, record_numbering):
                label = ([numbering.label(record_numbering.index(row[1])) if numbering else ""] if labelled else [])
                writer.writerow([*row[:2], *label, *row[2:4], f"{row[4]:.6g}"])
    print(f"wrote {out_path} ({len(records)} sequences, {args.strategy})")
    return EXIT_USAGE if had_errors else EXIT_OK


def add_parsers(sub) -> None:
    score = sub.add_parser("score", help="single-substitution scores or pseudo-perplexity to a .csv file")
    add_fasta_argument(score)
    score.add_argument("-m", "--model", help=MODEL_HELP)
    add_precision_argument(score)
    score.add_argument("-o", "--output", required=True, help="output .csv")
    score.add_argument("--strategy", choices=names("map"), default=DEFAULT_STRATEGY,
                       help="; ".join(f"{name}: {STRATEGIES[name].help}" for name in names("map")))
    score.add_argument("--offset", type=int, help=OFFSET_HELP + "; positions in the output are numbered from it")
    score.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    score.set_defaults(call=cmd_score)
