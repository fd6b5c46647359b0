"""``flamino score``: the full single-substitution map or pseudo-perplexity of every record to a CSV."""

from __future__ import annotations

import csv

from ..atomic import written_atomically
from ..options import STRATEGIES
from ..progress import Progress
from .common import (
    EXIT_OK, EXIT_USAGE, MODEL_HELP, VERBOSE_HELP, add_fasta_argument, check_output, load_engine, read_fasta_argument,
)  # fmt: skip


def cmd_score(args) -> int:
    from .. import scores

    out_path = check_output(args.output, ".csv")
    records, had_errors = read_fasta_argument(args)
    engine = load_engine(args.model, args.verbose)
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


def add_parsers(sub) -> None:
    score = sub.add_parser("score", help="single-substitution scores or pseudo-perplexity to a .csv file")
    add_fasta_argument(score)
    score.add_argument("-m", "--model", help=MODEL_HELP)
    score.add_argument("-o", "--output", required=True, help="output .csv")
    score.add_argument("--strategy", choices=STRATEGIES, default="masked-marginals")
    score.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    score.set_defaults(call=cmd_score)
