"""``flamino suggest``: substitutions the model finds more likely than the wild type (Hie et al.
2023), agreed by every model given, within the user's constraints, scored under every strategy
of ``flamino variants`` and combined into a few multi-mutants (docs/predict.md)."""

from __future__ import annotations

from flamino_core.atomic import written_atomically
from flamino_core.numbering import Numbering
from flamino_core.options import VARIANT_STRATEGIES
from flamino_core.progress import Progress, say
from flamino_core.cli.common import (
    EXIT_OK, MODEL_HELP, OFFSET_HELP, VERBOSE_HELP, UserError, add_fasta_argument, add_precision_argument,
    check_output, first_residue_number, load_engine, read_fasta_argument,
)
from flamino_core.cli.variants import SCORE_FORMAT


def cmd_suggest(args) -> int:
    import pandas as pd

    from flamino_core.predictors.saved import PredictorError, load
    from flamino_core.predictors.suggest import Constraints, SuggestError, parse_amino_acids, parse_positions, suggest
    from flamino_core.weights.loading import default_model

    out_path = check_output(args.output, ".csv")
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    unknown = [s for s in strategies if s not in VARIANT_STRATEGIES]
    if unknown:
        raise UserError(f"--strategies: unknown {', '.join(unknown)}; choose among {', '.join(VARIANT_STRATEGIES)}")
    predictor = None
    if args.predictor:
        try:
            predictor = load(args.predictor)
        except PredictorError as err:
            raise UserError(str(err)) from None
    records, _ = read_fasta_argument(args)
    names = list(dict.fromkeys(args.model or [default_model()]))
    engines = [(name, load_engine(name, args.verbose, args.precision)) for name in names]
    predictor_engine = None
    if predictor is not None and predictor.spec.uses_model:
        fingerprints = {engine.fingerprint: engine for _, engine in engines}
        predictor_engine = (fingerprints.get(predictor.model_fingerprint)
                            or load_engine(predictor.model_id, args.verbose, args.precision))
    tables = []
    for record in records:
        numbering = Numbering(first_residue_number(record, args.offset))
        try:
            constraints = Constraints(
                keep=parse_positions(args.keep, len(record.sequence), numbering),
                explore=parse_positions(args.explore, len(record.sequence), numbering) if args.explore else None,
                avoid=parse_amino_acids(args.avoid),
            )
            found = suggest(engines, record.sequence, numbering=numbering, record_id=record.id, constraints=constraints,
                            threshold=args.threshold, top=args.top, combine=args.combine, strategies=strategies,
                            predictor=predictor, predictor_engine=predictor_engine,
                            progress=lambda stage, rid=record.id: Progress(f"{rid} {stage}"),
                            notify=lambda line, rid=record.id: say(f"{rid}: {line}"))
        except (SuggestError, PredictorError) as err:
            raise UserError(f"{record.id}: {err}") from None
        for note in found.notes:
            say(f"note: {note}")
        under = "every model" if len(names) > 1 else "the model"
        say(f"{record.id}: {found.n_passing:,} of {found.n_candidates:,} allowed substitutions score above "
            f"{args.threshold:g} under {under}; {min(found.n_passing, args.top):,} kept")
        tables.append(found.table)
    table = pd.concat(tables, ignore_index=True)
    with written_atomically(out_path) as tmp:
        table.to_csv(tmp, index=False, float_format=SCORE_FORMAT)
    print(f"wrote {out_path} ({(table['kind'] == 'single').sum():,} proposals, "
          f"{(table['kind'] == 'combination').sum():,} combinations)")
    return EXIT_OK


def add_parsers(sub) -> None:
    suggest = sub.add_parser("suggest", help="propose substitutions the model finds more likely than the wild type "
                                             "(agreed by every -m model), ranked and scored")
    add_fasta_argument(suggest, help="FASTA file ('-' for standard input); proposals for every record")
    suggest.add_argument("-m", "--model", action="append",
                         help=MODEL_HELP + "; repeat for a consensus: a proposal must pass under every model")
    add_precision_argument(suggest)
    suggest.add_argument("--keep", default="", metavar="POSITIONS",
                         help="positions never mutated, in the record's numbering: 1-20,45")
    suggest.add_argument("--explore", default="", metavar="POSITIONS",
                         help="the only positions mutated (default: all), e.g. 30-60")
    suggest.add_argument("--avoid", default="", metavar="AMINO_ACIDS", help="amino acids never introduced: C,P")
    suggest.add_argument("--threshold", type=float, default=0.0,
                         help="a proposal's wt-marginal log-ratio must exceed this under every model (default 0: "
                              "more likely than the wild type)")
    suggest.add_argument("--top", type=int, default=20, metavar="N", help="proposals kept, best first (default 20)")
    suggest.add_argument("--combine", type=int, default=3, metavar="K",
                         help="combine the first K proposals at distinct positions into every multi-mutant of 2+ "
                              "(default 3: 4 multi-mutants; 0 or 1: none)")
    suggest.add_argument("--strategies", default=",".join(VARIANT_STRATEGIES), metavar="LIST",
                         help="strategies every proposal is scored by, as flamino variants scores them (default: "
                              "all; pll costs L masked passes per proposal)")
    suggest.add_argument("--predictor", metavar="DIR", help="a predictor from flamino fit: its prediction beside each "
                                                            "proposal")
    suggest.add_argument("--offset", type=int, help=OFFSET_HELP)
    suggest.add_argument("-o", "--output", required=True, metavar="OUT.csv",
                         help="record_id,kind,rank,mutant,n_mutations,consensus, the scores, non_additivity ...")
    suggest.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    suggest.set_defaults(call=cmd_suggest)
