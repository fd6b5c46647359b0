"""``flamino fit`` and ``flamino predict``: a predictor from your own measurements, honestly
evaluated, saved as JSON + NPZ and applied to new sequences (docs/predict.md).

``fit`` writes every input column plus ``prediction`` and ``fold`` (out-of-fold), the metrics
JSON (the chosen feature set, every other one on the same folds, learning curves) and the
predictor folder; ``predict`` reads that folder (or the app's ``.zip`` of it).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from flamino_core.atomic import written_atomically
from flamino_core.numbering import Numbering
from flamino_core.options import DEFAULT_VARIANT_STRATEGY, PREDICT_FEATURES, VARIANT_STRATEGIES
from flamino_core.progress import Progress, say
from flamino_core.cli.common import (
    EXIT_OK, MODEL_HELP, OFFSET_HELP, VERBOSE_HELP, UserError, add_fasta_argument, add_precision_argument,
    check_output, first_residue_number, load_engine, read_fasta_argument, read_records,
)

TABLE_SUFFIXES = (".csv", ".tsv", ".tab", ".txt")
FEATURES_HELP = ("embedding (default: the model's mean embedding at --layer), augmented (one-hot + the model's "
                 "zero-shot score, Hsu et al. 2022; mutants of one wild type), onehot (no model: the baseline)")
FOLDS_HELP = ("random (default: 5 folds, seed 0; stratified for classes) or a column of fold labels, e.g. "
              "ProteinGym's fold_modulo_5 or fold_contiguous_5 (random folds over-estimate on DMS data)")


def _wild_type(fasta: str | None, offset: int | None) -> tuple[str | None, Numbering]:
    """(sequence, its numbering) of ``--sequence``, or (None, numbered from --offset or 1)."""
    if not fasta:
        return None, Numbering(1 if offset is None else offset)
    records, _ = read_records(fasta)
    if len(records) > 1:
        raise UserError(f"--sequence {fasta}: {len(records)} records; give the one wild-type sequence")
    return records[0].sequence, Numbering(first_residue_number(records[0], offset))


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _interval(row: dict, key: str) -> str:
    value, low, high = row.get(key), row.get(f"{key}_low"), row.get(f"{key}_high")
    if value is None:
        return "undefined"
    span = f" [{low:.3f}, {high:.3f}]" if low is not None and high is not None else ""
    return f"{value:.3f}{span}"


def cmd_fit(args) -> int:
    from flamino_core.predictors import features
    from flamino_core.predictors.table_fit import feature_sets, fit_table, plan_line, planned_work
    from flamino_core.predictors.saved import save
    from flamino_core.predictors.table import LabelError, parse_labelled_table
    from flamino_core.weights.loading import default_model

    out_path = check_output(args.output, ".csv")
    metrics_path = check_output(args.metrics, ".json")
    model_dir = Path(args.save_model)
    if model_dir.exists() and not model_dir.is_dir():
        raise UserError(f"--save-model {args.save_model}: a file is in the way; give a folder")
    wild_type, numbering = _wild_type(args.sequence, args.offset)
    try:
        data = Path(args.table).read_bytes()
    except OSError as err:
        raise UserError(f"cannot read the table {args.table!r}: {err.strerror or err}") from None
    try:
        table = parse_labelled_table(data, args.target, wild_type, numbering, args.task)
    except LabelError as err:
        raise UserError(f"{args.table}: {err}") from None
    for issue in table.issues:
        say(f"warning: {issue}")
    if wild_type is None and table.wild_type is not None:
        say(f"{args.table}: wild type ({len(table.wild_type):,} residues) derived from mutated_sequence")
    say(f"{args.table}: {table.labelled.sum():,} labelled rows of {len(table.frame):,}, {table.task} of {args.target}")
    engine = load_engine(args.model, args.verbose, args.precision)
    model = args.model or default_model()
    kinds = feature_sets(table, True) if not args.no_compare else [args.features]
    for planned in planned_work(table, kinds, engine, layer=args.layer, zero_shot=args.zero_shot):
        say(plan_line(*planned))
    try:
        result = fit_table(table, args.features, engine=engine, model=model, folds=args.folds, layer=args.layer,
                           zero_shot=args.zero_shot, compare=not args.no_compare,
                           progress=lambda stage: Progress(stage))
    except (features.FeatureError, LabelError) as err:
        raise UserError(str(err)) from None
    for note in result.notes:
        say(f"note: {note}")
    metrics = _finite(result.metrics(model))
    with written_atomically(out_path) as tmp:
        result.output_frame().to_csv(tmp, index=False)  # full precision: statistics recomputed from it agree
    with written_atomically(metrics_path) as tmp:
        tmp.write_text(json.dumps(metrics, indent=2) + "\n")
    save(result.predictor, model_dir)
    key = "spearman" if table.task == "regression" else "auc"
    print(f"out-of-fold {key} ({args.folds} folds, {metrics['n_evaluated']:,} rows), 95% bootstrap interval:")
    for row in metrics["comparison"]:
        extra = f"   mcc {_interval(row, 'mcc')}" if table.task == "classification" else ""
        print(f"  {row['label']:<48} {_interval(row, key)}{extra}")
    print(f"wrote {out_path}, {metrics_path} and the predictor {model_dir}/ ({result.spec.label})")
    return EXIT_OK


def _is_table(path: str) -> bool:
    name = path.lower()
    return name.endswith(TABLE_SUFFIXES) or name.endswith(tuple(s + ".gz" for s in TABLE_SUFFIXES))


def cmd_predict(args) -> int:
    import pandas as pd

    from flamino_core.predictors import apply, features
    from flamino_core.predictors.saved import PredictorError, load
    from flamino_core.predictors.table import LabelError

    out_path = check_output(args.output, ".csv")
    try:
        predictor = load(args.predictor)
    except PredictorError as err:
        raise UserError(str(err)) from None
    if predictor.random_weights:
        say("note: this predictor was fitted on a model with random weights (a test model): not biology")
    wild_type, given_numbering = _wild_type(args.sequence, args.offset)
    engine = None
    if predictor.spec.uses_model:
        engine = load_engine(args.model or predictor.model_id, args.verbose, args.precision)
    try:
        if _is_table(args.fasta) and not args.singles:
            data = Path(args.fasta).read_bytes() if Path(args.fasta).is_file() else None
            if data is None:
                raise UserError(f"cannot read the table {args.fasta!r}: no such file")
            numbered_from = None if args.sequence is None and args.offset is None else given_numbering
            frame, inputs, rows, issues = apply.table_inputs(predictor, data, wild_type, numbered_from)
            for issue in issues:
                say(f"warning: {issue}")
            result = apply.predict(predictor, inputs, engine, progress=Progress("features"))
            out = apply.output_frame(predictor, frame, rows, result)
            what = f"{len(rows):,} of {len(frame):,} rows predicted"
        else:
            records, _ = read_fasta_argument(args)
            if args.singles:
                parts = []
                for record in records:
                    numbering = Numbering(first_residue_number(record, args.offset))
                    grid, _ = apply.prediction_map(predictor, record.sequence, engine, numbering=numbering,
                                                   progress=Progress(record.id))
                    parts.append(apply.map_rows(record.id, record.sequence, grid, numbering))
                out = pd.concat(parts, ignore_index=True)
                what = f"every single substitution of {len(records):,} record(s)"
            else:
                inputs = apply.inputs_for(predictor, [r.sequence for r in records])
                result = apply.predict(predictor, inputs, engine, progress=Progress("features"))
                frame = pd.DataFrame({"record_id": [r.id for r in records]})
                out = apply.output_frame(predictor, frame, list(range(len(records))), result)
                what = f"{len(records):,} record(s) predicted"
    except (PredictorError, features.FeatureError, LabelError) as err:
        raise UserError(str(err)) from None
    with written_atomically(out_path) as tmp:
        out.to_csv(tmp, index=False)  # full precision: statistics recomputed from it agree
    print(f"wrote {out_path} ({what}; {predictor.spec.label} -> {predictor.target})")
    return EXIT_OK


def add_parsers(sub) -> None:
    fit = sub.add_parser("fit", help="fit a predictor of your measurements (ridge / logistic on the model's "
                                     "features) with out-of-fold predictions for every row")
    fit.add_argument("table", metavar="TABLE.csv",
                     help="a column sequence (or mutated_sequence), or mutant (A23V, A23V:G45D) with --sequence or a "
                          "ProteinGym mutated_sequence, and the column to learn")
    fit.add_argument("--target", required=True, metavar="COLUMN", help="the column to predict (numbers: regression; "
                                                                       "classes or 0/1: classification)")
    fit.add_argument("--sequence", metavar="FASTA", help="the wild type of a mutant column (one record); default: "
                                                         "derived from mutated_sequence")
    fit.add_argument("--offset", type=int, help=OFFSET_HELP)
    fit.add_argument("--folds", default="random", metavar="COLUMN|random", help=FOLDS_HELP)
    fit.add_argument("--features", choices=PREDICT_FEATURES, default="embedding", help=FEATURES_HELP)
    fit.add_argument("--layer", type=int, help="embedding layer (0 = token embeddings; default: the last layer)")
    fit.add_argument("--zero-shot", choices=VARIANT_STRATEGIES, default=DEFAULT_VARIANT_STRATEGY,
                     help="the variant strategy of the augmented model's score (default masked-marginals)")
    fit.add_argument("--task", choices=("auto", "regression", "classification"), default="auto",
                     help="auto (default): numbers with more than two values are regressed, anything else classified")
    fit.add_argument("--no-compare", action="store_true",
                     help="evaluate only --features and, for classes, the majority class (by default every feature set "
                          "is evaluated on the same folds)")
    fit.add_argument("-m", "--model", help=MODEL_HELP)
    add_precision_argument(fit)
    fit.add_argument("-o", "--output", required=True, metavar="OUT.csv",
                     help="every input column plus prediction (out-of-fold) and fold")
    fit.add_argument("--metrics", required=True, metavar="M.json",
                     help="statistics with bootstrap intervals, every feature set side by side, learning curves")
    fit.add_argument("--save-model", required=True, metavar="DIR",
                     help="the fitted predictor: predictor.json + coefficients.npz (flamino predict reads it)")
    fit.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    fit.set_defaults(call=cmd_fit)

    predict = sub.add_parser("predict", help="apply a predictor from flamino fit to new sequences or mutants")
    predict.add_argument("predictor", metavar="DIR",
                         help="the folder flamino fit --save-model wrote, or the app's .zip")
    add_fasta_argument(predict, help="a table (.csv/.tsv with sequence, mutated_sequence or mutant) or FASTA "
                                     "(one prediction per record; with --singles, every single substitution)")
    for action in predict._actions:  # the shared FASTA positional is named INPUT here: it also takes tables
        if action.dest == "fasta":
            action.metavar = "INPUT"
    predict.add_argument("--singles", action="store_true",
                         help="FASTA input: predict every single substitution of each record (record_id,position,wt,"
                              "mt,prediction)")
    predict.add_argument("--sequence", metavar="FASTA",
                         help="the wild type a mutant column refers to (default: the predictor's own)")
    predict.add_argument("--offset", type=int, help=OFFSET_HELP)
    predict.add_argument("-m", "--model", help="the model the predictor's features come from (default: the one it "
                                               "was fitted with; another model is refused)")
    add_precision_argument(predict)
    predict.add_argument("-o", "--output", required=True, metavar="OUT.csv",
                         help="the input's columns (or record_id) plus prediction")
    predict.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    predict.set_defaults(call=cmd_predict)

