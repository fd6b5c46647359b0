"""``flamino variants`` and ``flamino dms``: the user's mutation list, or deep mutational scan,
scored the way ProteinGym scores ESM-2 (docs/variants.md).

Both exit 0 when at least one variant was scored, every skipped one named on stderr and in the
``status`` column, and 2 with a message when nothing could be scored.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from flamino_core.atomic import written_atomically
from flamino_core.options import DEFAULT_VARIANT_STRATEGY, STRATEGIES, names, scoring_strategies
from flamino_core.progress import Progress, say
from flamino_core.cli.common import (
    EXIT_OK, MODEL_HELP, OFFSET_HELP, VERBOSE_HELP, UserError, add_fasta_argument, add_precision_argument,
    check_output, first_residue_number, load_engine, read_fasta_argument, read_records, say_plan,
)

SCORE_FORMAT = "%.6g"  # as ``flamino score`` writes scores
# A --mutations value ending like this (or a path into an existing folder) is meant as a file: a
# typo in its name is reported, not read as a (malformed) one-entry list.
_FILE_SUFFIXES = (".csv", ".tsv", ".txt", ".tab", ".list")
STRATEGY_HELP = ("masked-marginals (default: one masked pass per mutated position), wt-marginals (one unmasked "
                 "pass), joint-masked (a multi-mutant's positions masked together; adds non_additivity), pll "
                 "(pseudo-log-likelihood ratio; L passes per variant, slow), wt-pll-approx (its one-pass "
                 "approximation, ESM Variants' PLLR), pll-per-residue, wt-pll-approx-per-residue (each PLL divided "
                 "by its length). The pll strategies also score indels, stops and frameshifts (p.Phe508del, "
                 "p.Gly12_Ala13insVal, p.Lys23_Val25delinsAsn, p.Lys23dup, p.Arg97Ter) and add a normalisation column")


def read_mutations(value: str) -> bytes | str:
    """The ``--mutations`` value: a file's bytes, standard input ('-'), or the list itself."""
    if value == "-":
        return sys.stdin.buffer.read()
    path = Path(value)
    if path.is_file():
        try:
            return path.read_bytes()
        except OSError as err:
            raise UserError(f"--mutations: cannot read {value!r}: {err.strerror or err}") from None
    if value.lower().endswith(_FILE_SUFFIXES) or ("/" in value and path.parent.is_dir()):
        raise UserError(f"--mutations: no such file {value!r} (give a file, or the list itself, e.g. \"A23V, G45D\")")
    return value


def _notes(notes, shown: set[str]) -> None:
    from flamino_core.variants.scoring import RANDOM_WEIGHTS_NOTE

    for note in notes:
        if note not in shown and note != RANDOM_WEIGHTS_NOTE:  # load_engine said so already
            say(f"note: {note}")
            shown.add(note)


STRUCTURE_HELP = ("a PDB or mmCIF file (.gz too) of the protein, for a structure-aware model (SaProt): each "
                  "residue's Foldseek 3Di letter read from it, '#' where the chain lacks the residue or, in a "
                  "predicted structure (AlphaFold, ESMFold), where pLDDT < 70; without it every residue is '#'")


def structure_letters(args, sequence: str, engine) -> str | None:
    """The 3Di letters ``--structure`` (and ``--chain``) give ``sequence``, said on stderr; None without."""
    if not getattr(args, "structure", None):
        return None
    if not engine.family.structure_aware:
        raise UserError(f"--structure is read by structure-aware models ({engine.family.title} reads sequences only)")
    from flamino_core.structure.files.reading import StructureError
    from flamino_core.structure.three_di import read_structure_tokens

    try:
        tokens = read_structure_tokens(sequence, args.structure, args.chain)
    except StructureError as err:
        raise UserError(f"--structure {args.structure}: {err}") from None
    say(f"structure: {tokens.describe()}")
    if tokens.all_masked:  # #66 D6: then SaProt reads '#' everywhere, as without --structure
        say(f"warning: every residue of {tokens.structure} is masked (pLDDT < 70): the scores are sequence-only")
    elif tokens.masked:
        say(f"masked for pLDDT < 70 (sequence positions): {tokens.masked_ranges()}")
    return tokens.letters


NUMBERING_HELP = ("read --mutations' positions as the structure file numbers its residues (author numbers with "
                  "insertion codes: S195A, Y184AF on chymotrypsin-numbered 1GBT), when FASTA is a PDB or mmCIF "
                  "file or a FASTA saved from one (its numbering= header field); the output then has the variant "
                  "in both numberings")


def structure_numbering_of(args, record):
    """The structure's numbering the record carries (``author_numbering.from_record``), or None;
    ``--structure-numbering`` without one is refused, naming the record."""
    from flamino_core.variants.author_numbering import from_record

    author = from_record(record)
    if author is None and args.structure_numbering:
        raise UserError(f"--structure-numbering: {record.id} carries no structure's numbering (give the PDB or "
                        "mmCIF file as FASTA, or a FASTA whose header has the numbering= flamino wrote)")
    return author


def cmd_variants(args) -> int:
    out_path = check_output(args.output, ".csv")
    mutations = read_mutations(args.mutations)
    records, _ = read_fasta_argument(args)
    table, scored = _variants_of_every_model(args, records, mutations)
    with written_atomically(out_path) as tmp:
        table.to_csv(tmp, index=False, float_format=SCORE_FORMAT)
    print(f"wrote {out_path} ({scored:,} of {len(table):,} variants scored, {args.strategy})")
    if not scored:
        raise UserError(f"nothing could be scored ({len(table):,} entries, all skipped; their status says why)"
                        if len(table) else "nothing could be scored: no variants in --mutations")
    return EXIT_OK


def _variants_of_every_model(args, records, mutations):
    """(table, variants scored): one model's, or an ensemble's (``-m esm1v_ensemble``): each
    member scores every record in turn, a ``score_<member>`` column each, their mean as ``score``."""
    from flamino_core.model.model_id import ModelId
    from flamino_core.variants.ensemble import mean_frame

    try:
        model_id = ModelId.parse(args.model or "")
        members = model_id.members
    except ValueError as err:
        raise UserError(str(err)) from None
    if not members:
        model = model_id if args.model else None  # None: the default model
        return _variants(args, records, mutations, load_engine(model, args.verbose, args.precision))
    results = [_variants(args, records, mutations, load_engine(member, args.verbose, args.precision))
               for member in members]
    return mean_frame(members, [table for table, _ in results]), results[0][1]


def _variants(args, records, mutations, engine):
    import pandas as pd

    from flamino_core.numbering import Numbering
    from flamino_core.variants import indels, notation, structure_numbering as in_structure
    from flamino_core.variants.score_plan import list_plan
    from flamino_core.variants.scoring import OK, output_columns, score_variants
    from flamino_core.variants.sequence_scores import pass_plan

    tables, scored, shown = [], 0, set()
    for n, record in enumerate(records):
        numbering = Numbering(first_residue_number(record, args.offset))
        whole = STRATEGIES[args.strategy].whole_sequences  # the strategies that score indels and stops
        author = structure_numbering_of(args, record)
        if args.structure_numbering:  # positions as the structure file numbers them (S195A on 1GBT)
            read = indels.parse_variant if whole else notation.parse_variant
            variants, issues = in_structure.parse_mutations(mutations, record.sequence, numbering, author, read=read,
                                                            reference=record.id)
        else:
            parse = indels.parse_mutations if whole else notation.parse_mutations
            variants, issues = parse(mutations, record.sequence, numbering, reference=record.id)
        for issue in issues:
            if issue.order < 0:  # about the whole list: unreadable, empty, a shifted numbering
                say(f"{record.id}: {issue.message}")
        if whole:  # the cost before the work: the wild type's passes counted once
            say(f"{record.id}: {pass_plan(record.sequence, variants, args.strategy).describe(len(variants))}")
        label = record.id if len(records) == 1 else f"{record.id} ({n + 1}/{len(records)})"
        structure = structure_letters(args, record.sequence, engine)
        say_plan(record.id, list_plan(engine, record.sequence, variants, args.strategy, record_id=record.id,
                                      structure=structure).needed(), engine)
        result = score_variants(engine, record.sequence, variants, args.strategy, issues=issues,
                                record_id=record.id, progress=Progress(label), structure=structure)
        _notes(result.notes, shown)
        for status in result.table["status"]:
            if status != OK:
                say(f"{record.id}: skipped: {status}")
        columns = output_columns(args.strategy)
        table = result.table
        if author is not None:  # both numberings: the record's (variant) and the structure's
            table = in_structure.with_structure_column(table, author, numbering)
            columns = columns[:2] + ["variant", in_structure.COLUMN] + columns[2:]
        tables.append(table[columns])
        scored += result.n_scored
    return pd.concat(tables, ignore_index=True), scored


def cmd_dms(args) -> int:
    from flamino_core.numbering import Numbering
    from flamino_core.variants.dms import DmsError, numbering_problem, output_frame, read_dms, table_variants
    from flamino_core.variants.metrics import dms_metrics
    from flamino_core.variants.scoring import OK
    from flamino_core.variants.sequence_scores import pass_plan
    from flamino_core.weights.loading import default_model

    out_path = check_output(args.output, ".csv")
    metrics_path = check_output(args.metrics, ".json")
    if args.compare and not args.comparison:
        raise UserError("--compare needs --comparison COMPARISON.json (where the models' agreement is written)")
    wild_type, record_id, first = None, Path(args.dms).stem, args.offset
    if args.sequence:
        records, _ = read_records(args.sequence)
        if len(records) > 1:
            raise UserError(f"--sequence {args.sequence}: {len(records)} records; give the one wild-type sequence")
        wild_type, record_id = records[0].sequence, records[0].id
        first = first_residue_number(records[0], first)
    try:
        dms = read_dms(args.dms, wild_type, Numbering(1 if first is None else first))
    except DmsError as err:
        raise UserError(f"{args.dms}: {err}") from None
    if wild_type is None:
        say(f"{args.dms}: wild type ({len(dms.wild_type):,} residues) {dms.wild_type_source}")
    if dms.by_sequence and not STRATEGIES[args.strategy].whole_sequences:
        raise UserError(f"{args.dms}: its rows are whole mutated sequences (ProteinGym's indel layout): score them "
                        f"with --strategy {' or '.join(names('sequence'))}")
    problem = numbering_problem(dms)
    if problem and not args.force_offset:
        raise UserError(f"{args.dms}: {problem} (--force-offset scores the rows that fit anyway)")
    if problem:
        say(f"warning: {problem}; scoring the rows that fit, as --force-offset asks")
    if STRATEGIES[args.strategy].whole_sequences:  # the cost before the work: the wild type's passes counted once
        variants = table_variants(dms, indels=True)[0]
        say(f"{record_id}: {pass_plan(dms.wild_type, variants, args.strategy).describe(len(variants))}")
    model = args.model or default_model()
    scores = _score_dms(args, dms, record_id, model)
    comparison_path = _compare(args, dms, record_id, model, scores) if args.compare else None
    for issue in scores.dms.issues:
        say(f"warning: {issue}")
    _notes(scores.notes, set())
    for row, status in enumerate(scores.frame["status"]):
        if status != OK:
            say(f"line {row + 2}: skipped: {status}")  # line 1 is the header
    metrics = dms_metrics(scores, model=model, singles_only=args.singles_only)
    metrics = {key: None if isinstance(value, float) and not math.isfinite(value) else value
               for key, value in metrics.items()}
    with written_atomically(out_path) as tmp:
        output_frame(scores).to_csv(tmp, index=False, float_format=SCORE_FORMAT)
    with written_atomically(metrics_path) as tmp:
        tmp.write_text(json.dumps(metrics, indent=2) + "\n")
    scored = int((scores.frame["status"] == OK).sum())
    print(f"wrote {out_path} ({scored:,} of {len(scores.frame):,} rows scored, {args.strategy}) and {metrics_path} "
          f"(spearman {_shown(metrics['spearman'])} on {metrics['n_scored']:,} rows)"
          + (f" and {comparison_path}" if comparison_path else ""))
    if not scored:
        raise UserError(f"nothing could be scored: none of the {len(scores.frame):,} rows fits the wild type "
                        "(their status says why)")
    return EXIT_OK


def _compare(args, dms, record_id: str, model: str, scores):
    """``--compare``: the other models score the table too; a column each in the output (the
    ``-m`` model's ``scores.frame`` gains them, in place) and the comparison JSON written."""
    from flamino_core.variants.compare import compare_models

    comparison_path = check_output(args.comparison, ".json")
    try:
        comparison = compare_models(lambda m: scores if m == model else _score_dms(args, dms, record_id, m),
                                    [model, *args.compare], singles_only=args.singles_only)
    except ValueError as err:
        raise UserError(str(err)) from None
    scores.frame = comparison.frame
    with written_atomically(comparison_path) as tmp:
        tmp.write_text(json.dumps(comparison.as_json(), indent=2) + "\n")
    for name, values in comparison.metrics.items():
        say(f"{name}: spearman {_shown(values['spearman'])}")
    return comparison_path


def _score_dms(args, dms, record_id: str, model: str):
    """One model's scores, or an ensemble's (``-m esm1v_ensemble``, ``-m ensemble:A,B,...``):
    each member's in a column, their mean as ``score``."""
    from flamino_core.model.model_id import ModelId
    from flamino_core.variants.dms import score_dms, table_variants
    from flamino_core.variants.ensemble import score_dms_ensemble
    from flamino_core.variants.score_plan import dms_plan
    from flamino_core.weights.loading import default_model

    try:
        model_id = ModelId.parse(model)
        members = model_id.members
    except ValueError as err:
        raise UserError(str(err)) from None
    if not members:
        engine = load_engine(model_id, args.verbose, args.precision)
        # --structure is the -m model's: a compared model that reads sequences only scores without it.
        main = model == (args.model or default_model())
        structure = structure_letters(args, dms.wild_type, engine) if engine.family.structure_aware or main else None
        variants = table_variants(dms, indels=STRATEGIES[args.strategy].whole_sequences)[0]
        say_plan(record_id, dms_plan(engine, dms, variants, args.strategy, record_id=record_id,
                                     structure=structure).needed(), engine)
        return score_dms(engine, dms, args.strategy, record_id=record_id, progress=Progress(record_id),
                         structure=structure)
    if args.structure and model == (args.model or default_model()):
        raise UserError(f"--structure is read by structure-aware models; {model} is an ensemble of sequence models")
    say(f"{record_id}: an ensemble of {len(members)} models, scored one after the other")
    return score_dms_ensemble(lambda member: load_engine(member, args.verbose, args.precision), members, dms,
                              args.strategy, record_id=record_id, progress=Progress(record_id))


def _shown(value) -> str:
    return "undefined" if value is None else f"{value:.3f}"


def add_parsers(sub) -> None:
    variants = sub.add_parser("variants", help="score your mutation list (A23V, A23V:G45D, p.Ala23Val ...) to a .csv")
    add_fasta_argument(variants, help="FASTA file ('-' for standard input); every record is scored against the list")
    variants.add_argument("--mutations", required=True, metavar="FILE_OR_STRING",
                          help="a file (one variant per line, or a CSV with a mutant column), '-' for standard "
                               "input, or the list itself: \"A23V, A23V:G45D, p.(Gly45Asp)\"")
    variants.add_argument("--offset", type=int, help=OFFSET_HELP)
    variants.add_argument("--structure-numbering", action="store_true", help=NUMBERING_HELP)
    variants.add_argument("--strategy", choices=scoring_strategies(), default=DEFAULT_VARIANT_STRATEGY,
                          help=STRATEGY_HELP)
    variants.add_argument("-m", "--model", help=MODEL_HELP)
    add_precision_argument(variants)
    variants.add_argument("-o", "--output", required=True,
                          help="output .csv: record_id,mutant,score[,non_additivity],status[,normalisation (pll "
                               "strategies)] in input order")
    variants.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    _structure_arguments(variants)
    variants.set_defaults(call=cmd_variants)

    dms = sub.add_parser("dms", help="score a deep mutational scan (ProteinGym format) and measure the agreement")
    dms.add_argument("dms", metavar="DMS.csv", help="columns mutant and DMS_score (mutated_sequence, DMS_score_bin "
                                                    "optional; higher DMS_score = fitter), or ProteinGym's indel "
                                                    "layout: mutated_sequence and DMS_score, with --sequence")
    dms.add_argument("--sequence", metavar="FASTA",
                     help="the wild type (one record); default: derived from mutated_sequence and mutant")
    dms.add_argument("--offset", type=int, help=OFFSET_HELP)
    dms.add_argument("--force-offset", action="store_true",
                     help="score the rows that fit even when most rows do not fit the wild type as numbered "
                          "(by default that stops with the numbering they fit, exit 2)")
    dms.add_argument("--strategy", choices=scoring_strategies(), default=DEFAULT_VARIANT_STRATEGY,
                     help=STRATEGY_HELP + "; a table of whole sequences (ProteinGym's indels) needs a pll strategy")
    dms.add_argument("--singles-only", action="store_true",
                     help="compute the metrics on single substitutions only (multi-mutants are still scored)")
    dms.add_argument("-m", "--model", help=MODEL_HELP)
    add_precision_argument(dms)
    dms.add_argument("-o", "--output", required=True, help="output .csv: every input column plus score and status")
    dms.add_argument("--metrics", required=True, metavar="METRICS.json",
                     help="output .json: spearman, auc, mcc, ndcg, top10_recall, n_scored, n_skipped, "
                          "n_excluded, model, strategy")
    dms.add_argument("--compare", action="append", metavar="MODEL", default=[],
                     help="another model (up to 3, an ensemble counts as one) scoring the same table: a score_<model> "
                          "column each, and their agreement in --comparison")
    dms.add_argument("--comparison", metavar="COMPARISON.json",
                     help="output .json with --compare: each model's metrics, Spearman between the models, the share "
                          "of one model's top 10%% in another's")
    dms.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    _structure_arguments(dms)
    dms.set_defaults(call=cmd_dms)


def _structure_arguments(parser) -> None:
    parser.add_argument("--structure", metavar="FILE", help=STRUCTURE_HELP)
    parser.add_argument("--chain", metavar="C", help="the chain of --structure to read (default: the chain most like "
                                                     "the sequence)")
