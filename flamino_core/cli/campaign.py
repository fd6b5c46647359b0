"""``flamino campaign init|add-round|propose|status``: design rounds from a campaign folder
(``flamino_core.design``; docs/predict.md "Design rounds")."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from flamino_core.cli.common import EXIT_FAILURE, EXIT_OK, MODEL_HELP, OFFSET_HELP, UserError, check_output
from flamino_core.progress import say

SETTINGS_HELP = {
    "batch": "proposals per round (default 24)",
    "acquisition": "greedy, ucb or thompson (random: the baseline); default ucb",
    "features": "onehot (no model, default), augmented (one-hot + the zero-shot score as the prior; -m) or "
                "embedding (-m)",
    "keep": "positions never mutated, in the campaign's numbering: 1-20,45",
    "explore": "the only positions mutated (default: all), e.g. 30-60",
    "avoid": "amino acids never introduced: C,P",
    "max_mutations": "substitutions per proposed variant at most (default 3)",
    "per_position": "proposals that may mutate one position (default 1; 0: no limit)",
    "penalty": "near-duplicate penalty, in sds of the acquisition over the pool (default 0.5)",
    "beta": "ucb: mean + beta x sd (default 1)",
    "combine_top": "the best measured singles joined into multi-mutants (default 6; 0: none)",
}


def _settings_arguments(parser, defaults: bool) -> None:
    """The settings of a round; at ``init`` their defaults, at ``propose`` overrides (None: keep)."""
    from flamino_core.design.acquisition import ACQUISITIONS  # light: NumPy only
    from flamino_core.options import PREDICT_FEATURES as DESIGN_FEATURES  # proposals.DESIGN_FEATURES

    kinds = {"batch": int, "max_mutations": int, "per_position": int, "penalty": float, "beta": float,
             "combine_top": int}
    for name, text in SETTINGS_HELP.items():
        flag = "--" + name.replace("_", "-")
        choices = ACQUISITIONS if name == "acquisition" else DESIGN_FEATURES if name == "features" else None
        parser.add_argument(flag, dest=name, type=kinds.get(name, str), choices=choices, default=None, help=text)
    parser.add_argument("-m", "--model", help=MODEL_HELP + ("; used for the zero-shot score and the augmented and "
                                                            "embedding features" if defaults else ""))


def _overrides(args, settings):
    values = {name: getattr(args, name) for name in [*SETTINGS_HELP, "model"] if getattr(args, name, None) is not None}
    if values.get("per_position") == 0:
        values["per_position"] = None
    return dataclasses.replace(settings, **values)


def _design_error():
    from flamino_core.design.gaussian_process import DesignError

    return DesignError


def cmd_init(args) -> int:
    from flamino_core.cli.common import first_residue_number, read_records
    from flamino_core.design import campaign
    from flamino_core.design.proposals import Settings
    from flamino_core.numbering import Numbering

    records, _ = read_records(args.wild_type)
    if len(records) > 1:
        raise UserError(f"--wild-type {args.wild_type}: {len(records)} records; give the one wild-type sequence")
    wild_type, numbering = records[0].sequence, Numbering(first_residue_number(records[0], args.offset))
    candidates = Path(args.candidates).read_bytes() if args.candidates else None
    try:
        made = campaign.init(args.folder, wild_type, args.target, numbering=numbering, seed=args.seed,
                             settings=_overrides(args, Settings()), candidates=candidates,
                             record_id=records[0].id)
    except _design_error() as err:
        raise UserError(str(err)) from None
    print(f"campaign {made.folder}: wild type of {len(wild_type)} residues (from {numbering.first}), "
          f"target {args.target!r}, "
          f"seed {args.seed}{', candidates from ' + args.candidates if candidates else ''}")
    return EXIT_OK


def cmd_add_round(args) -> int:
    from flamino_core.design import campaign

    try:
        found = campaign.load(args.folder)
        number, rows, issues = found.add_round(Path(args.table).read_bytes(), args.table)
    except _design_error() as err:
        raise UserError(str(err)) from None
    except FileNotFoundError:
        raise UserError(f"{args.table}: no such file") from None
    for issue in issues:
        say(f"warning: {issue}")
    print(f"round {number}: {rows:,} measured values of {found.target!r} stored")
    return EXIT_OK


def cmd_propose(args) -> int:
    from flamino_core.design import campaign
    from flamino_core.design.proposals import Settings, propose

    try:
        found = campaign.load(args.folder)
    except _design_error() as err:
        raise UserError(str(err)) from None
    number = args.round or found.next_round
    record = found.round(number) or {}
    stored = found.stored_proposals(number)
    again = stored is not None and not args.force
    base = Settings.from_json(record["proposal"]["settings"]) if again and record.get("proposal") else found.settings
    settings = base if again else _overrides(args, found.settings)
    engine = _engine(settings)
    try:
        made = propose(found.wild_type, found.numbering, found.measured(before=number), settings, seed=found.seed,
                       round_number=number, engine=engine, given=found.given())
    except _design_error() as err:
        raise UserError(str(err)) from None
    for note in made.info["notes"]:
        say(f"note: {note}")
    if args.output:
        with open(check_output(args.output, ".csv"), "w", newline="") as handle:
            made.table.to_csv(handle, index=False)
    if again:
        return _compare(found, number, made, stored)
    path = found.save_proposals(made)
    _say_calibration(made.info.get("calibration"))
    print(f"round {number}: {len(made.table)} proposals by {made.info['acquisition']} from "
          f"{made.info['n_measured']:,} measured, {made.info['n_candidates']:,} candidates: {path}")
    return EXIT_OK


def _engine(settings):
    if settings.model is None:
        return None
    from flamino_core.cli.common import load_engine

    return load_engine(settings.model)


def _compare(found, number: int, made, stored) -> int:
    """Round ``number`` computed again from the folder: the same proposals as stored, or not."""
    fresh = made.table.astype(str).reset_index(drop=True)
    stored = stored.reindex(columns=fresh.columns).reset_index(drop=True)
    same_variants = list(fresh["mutant"]) == list(stored["mutant"])
    if same_variants:
        print(f"round {number}: reproduced from {found.folder}: the same {len(fresh)} proposals in the same order "
              "(give --force to replace them)")
        return EXIT_OK
    say(f"round {number}: the proposals computed again differ from the stored ones "
        f"({sum(a != b for a, b in zip(fresh['mutant'], stored['mutant']))} of {len(fresh)} rows)")
    return EXIT_FAILURE


def _say_calibration(calibration) -> None:
    if not calibration or calibration.get("coverage") is None:
        return
    verdict = "within" if calibration["within"] else "NOT within"
    say(f"80% intervals on held-out folds: {calibration['coverage']:.0%} of {calibration['n']} measured inside "
        f"({verdict} 10 points of 80%)")


def cmd_status(args) -> int:
    from flamino_core.design import campaign

    try:
        found = campaign.load(args.folder)
        table = campaign.history(found)
    except _design_error() as err:
        raise UserError(str(err)) from None
    if args.json:
        print(json.dumps(json.loads(table.to_json(orient="records")), indent=2))
        return EXIT_OK
    print(f"campaign {found.folder}: target {found.target!r}, {len(found.wild_type)} residues, seed {found.seed}; "
          f"next round {found.next_round}")
    print(table.to_string(index=False, na_rep="-", float_format=lambda v: f"{v:.3g}"))
    return EXIT_OK


def add_parsers(sub) -> None:
    top = sub.add_parser("campaign", help="design rounds: from this round's measurements to the next plate "
                                          "(init, add-round, propose, status)")
    commands = top.add_subparsers(dest="campaign_command", required=True)
    init = commands.add_parser("init", help="start a campaign folder")
    init.add_argument("folder", metavar="FOLDER")
    init.add_argument("--wild-type", required=True, metavar="FASTA", help="the wild type (one record)")
    init.add_argument("--target", required=True, metavar="COLUMN", help="the measured column of every round's table")
    init.add_argument("--offset", type=int, help=OFFSET_HELP)
    init.add_argument("--seed", type=int, default=0, help="seeds every random choice of every round (default 0)")
    init.add_argument("--candidates", metavar="CSV", help="the only variants to propose (a mutant column); "
                                                          "default: every allowed single, and multi-mutants")
    _settings_arguments(init, True)
    init.set_defaults(call=cmd_init)
    add = commands.add_parser("add-round", help="store a round's measurements (a mutant column + the target)")
    add.add_argument("folder", metavar="FOLDER")
    add.add_argument("table", metavar="MEASURED.csv")
    add.set_defaults(call=cmd_add_round)
    propose = commands.add_parser("propose", help="the next round's proposals (or, with --round N for a round that "
                                                  "has them, check they are reproduced)")
    propose.add_argument("folder", metavar="FOLDER")
    propose.add_argument("--round", type=int, help="the round to propose (default: the next one)")
    propose.add_argument("--force", action="store_true", help="replace the round's stored proposals")
    propose.add_argument("-o", "--output", metavar="PLATE.csv", help="also write the proposals here")
    _settings_arguments(propose, False)
    propose.set_defaults(call=cmd_propose)
    status = commands.add_parser("status", help="the rounds so far: proposed, measured, best, calibration")
    status.add_argument("folder", metavar="FOLDER")
    status.add_argument("--json", action="store_true", help="the table as JSON")
    status.set_defaults(call=cmd_status)
