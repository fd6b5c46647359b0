"""``flamino contacts``: predicted contacts against a real structure, as precision at L, L/2, L/5.

For each record: the structure's chain that best matches it (or ``--chain``) is aligned to it,
the model's contact head predicts its (L, L) map, and ``structure.contacts.precision_table``
compares the two; the rows of every record go to one CSV with exactly
``record_id,chain,range,cutoff,precision,n_pairs,identity,coverage``. With ``--pdb-out`` the chain
is also written as PDB with a per-residue track (``structure.tracks.TRACKS``) in the B-factor
column. Definitions: docs/structure.md.
"""

from __future__ import annotations

import re
from pathlib import Path

from flamino_core.atomic import written_atomically
from flamino_core.options import LONG_POLICIES, STRATEGIES
from flamino_core.progress import Progress, say
from flamino_core.cli.common import (
    EXIT_OK, EXIT_USAGE, MODEL_HELP, VERBOSE_HELP, UserError, add_fasta_argument, add_precision_argument,
    check_output, load_engine, read_fasta_argument, say_plan,
)

FETCH_PREFIXES = {"pdb": "an RCSB PDB entry", "afdb": "an AlphaFold DB model"}


def open_structure(spec: str):
    """The structure a ``--structure`` value names: a file (plain or .gz), ``pdb:ID`` or ``afdb:ACCESSION``.

    Raises:
      UserError: the file is missing or not a structure, or the download failed (the message
        says why and what to do).
    """
    from flamino_core.structure.files import fetch
    from flamino_core.structure.files.reading import StructureError, read_structure

    prefix, _, identifier = spec.partition(":")
    try:
        if prefix.lower() in FETCH_PREFIXES and identifier and not Path(spec).exists():
            say(f"fetching {FETCH_PREFIXES[prefix.lower()]}: {identifier}")
            # Base URLs read at call time (not as default arguments), so tests can serve them locally.
            if prefix.lower() == "pdb":
                return fetch.fetch_pdb(identifier, base_url=fetch.RCSB_URL)
            return fetch.fetch_alphafold(identifier, base_url=fetch.ALPHAFOLD_API)
        return read_structure(spec)
    except StructureError as err:
        raise UserError(f"--structure: {err}") from None


def pdb_paths(pdb_out: Path, record_ids: list[str]) -> list[Path]:
    """One PDB file per record, in order: ``pdb_out`` itself for one record, ``<stem>.<record_id>.pdb``
    beside it for several (ids made safe for file names, and distinct: ids may repeat)."""
    if len(record_ids) == 1:
        return [pdb_out]
    paths, used = [], set()
    for record_id in record_ids:
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", record_id).strip("_.") or "record"
        while name in used:
            name += "_"
        used.add(name)
        paths.append(pdb_out.with_name(f"{pdb_out.stem}.{name}.pdb"))
    return paths


def _track_choices(args) -> dict:
    """The ``--track-*`` values the chosen track takes (``tracks.PARAMS``), as given."""
    from flamino_core.structure.tracks import PARAMS, TRACKS

    return {key: getattr(args, f"track_{PARAMS[key].flag}") for key in TRACKS[args.track or "entropy"].params}


def _check_track_options(args) -> dict:
    """What can be checked before the model loads: ``--track`` needs ``--pdb-out``, required
    choices given, fixed bounds (``tracks.check_choices``). Returns the track's choices."""
    if args.track is not None and args.pdb_out is None:
        raise UserError("--track goes into the B-factor column of the PDB file: give --pdb-out FILE.pdb")
    if args.pdb_out is None:
        return {}
    track = args.track or "entropy"
    return _checked_choices(track, _track_choices(args))


def _checked_choices(track: str, choices: dict, **bounds) -> dict:
    """``tracks.check_choices`` with a refusal as the command's error (``bounds``: the sequence's
    length, the model's layers and heads, when known)."""
    from flamino_core.structure.tracks import TrackChoiceError, check_choices

    try:
        return check_choices(track, choices, **bounds)
    except TrackChoiceError as err:
        raise UserError(_choice_message(track, err)) from None


def _choice_message(track: str, err) -> str:
    flag = f"--track-{err.param.flag}"
    if err.missing:
        return f"--track {track} needs {flag} {err.param.metavar}: {err.param.help}"
    return f"{flag}: {err}"


def _align_records(parsed, records, args):
    """Each record's alignment (or the message why it cannot be compared), said on stderr."""
    from flamino_core.model.config import MAX_RESIDUES
    from flamino_core.structure.align import choose_chain
    from flamino_core.structure.files.reading import StructureError

    aligned, refused, notes_said = [], [], set()
    for record in records:
        analysed = record.sequence[:MAX_RESIDUES] if args.long == "truncate" else record.sequence  # as the engine will
        try:
            alignment = choose_chain(parsed, analysed, args.chain, args.model_index, args.min_identity)
        except StructureError as err:
            refused.append(f"{record.id}: {err}")
            if len(records) > 1:  # a single record's refusal is the command's one-line error
                say(f"error: {refused[-1]}")
            continue
        say(f"{record.id}: {alignment.describe()}")
        if alignment.chain_id not in notes_said:
            notes_said.add(alignment.chain_id)
            for note in alignment.chain.notes:
                say(f"  chain {alignment.chain_id}: {note}")
        aligned.append((record, alignment))
    return aligned, refused


def _track_values(engine, out, track: str, choices: dict, long: str):
    """The chosen track's (L,) values for one record and its label, from the run's outputs
    (``tracks.track_inputs``: the one resolver from a track's needs to engine outputs)."""
    from flamino_core.structure.tracks import compute_choices, compute_track, track_inputs, track_label

    layer, strategy = choices.get("layer"), choices.get("strategy")
    _, inputs = track_inputs(engine, out.sequence, track, out=out, layer=layer, strategy=strategy, long=long,
                             progress=Progress(f"{strategy} scan") if strategy else None)
    picked = compute_choices(track, choices)
    values = compute_track(track, out.sequence, **inputs, **picked)
    return values, track_label(track, layer=layer, strategy=strategy, **picked)


def _open_described_structure(args):
    """The ``--structure`` opened, a ``--chain`` checked in it, and its chains described on stderr."""
    from flamino_core.structure.files.reading import StructureError, chain_residues

    parsed = open_structure(args.structure)
    try:
        summaries = parsed.chains(args.model_index)
        if args.chain is not None:
            chain_residues(parsed, args.chain, args.model_index)  # a missing or non-protein chain: say so now
    except StructureError as err:
        raise UserError(str(err)) from None
    say(f"{parsed.name}: {parsed.file_format}, {parsed.n_models} model(s); model {args.model_index}:")
    for summary in summaries:
        say(f"  {summary.describe()}")
    return parsed


def _predicted(engine, record, options: dict, long: str, progress_label: str):
    """The engine's outputs for one record: its contacts, and what the track needs (``options``)."""
    try:
        (out,) = engine.run([record.sequence], **{**options, "contacts": True}, long=long,
                            progress=Progress(progress_label))
    except ValueError as err:  # e.g. attention maps of a sequence beyond 1022 residues in windows
        raise UserError(f"{record.id}: {err}") from None
    return out


def _track_pdb(engine, parsed, alignment, out, record_id: str, track: str, choices: dict, args) -> str | None:
    """The aligned chain as PDB text with the record's track in the B-factor column; None
    (after saying why on stderr) when this record cannot have one."""
    from flamino_core.structure.export import pdb_with_track
    from flamino_core.structure.files.reading import StructureError
    from flamino_core.structure.tracks import TRACKS, check_choices

    try:
        checked = check_choices(track, choices, length=len(out.sequence))
        values, label = _track_values(engine, out, track, checked, args.long)
        return pdb_with_track(parsed, alignment, values, label, scale=TRACKS[track].pdb_scale,
                              whole_model=args.whole_model)
    except (ValueError, StructureError) as err:  # a residue beyond the sequence, a value the column cannot hold
        say(f"error: {record_id}: no PDB file: {err}")
        return None


def _write_precision_csv(out_path: Path, tables: list, n_records: int) -> None:
    """Every record's precision rows in one CSV, with exactly ``PRECISION_COLUMNS``."""
    import pandas as pd

    from flamino_core.structure.contacts import PRECISION_COLUMNS
    from flamino_core.structure.export import precision_csv

    table = pd.concat(tables, ignore_index=True)[list(PRECISION_COLUMNS)]
    with written_atomically(out_path) as tmp:
        tmp.write_text(precision_csv(table))
    print(f"wrote {out_path} ({n_records} record(s) x {len(table) // n_records} rows)")


def cmd_contacts(args) -> int:
    from flamino_core.structure.contacts import precision_table
    from flamino_core.structure.tracks import run_options

    out_path = check_output(args.output, ".csv")
    pdb_out = check_output(args.pdb_out, ".pdb") if args.pdb_out else None
    choices = _check_track_options(args)
    parsed = _open_described_structure(args)
    records, had_errors = read_fasta_argument(args)
    aligned, refused = _align_records(parsed, records, args)
    if not aligned:
        if len(refused) == 1:
            raise UserError(refused[0])
        raise UserError(f"none of the {len(records)} records can be compared with {parsed.name} (see above)")

    engine = load_engine(args.model, args.verbose, args.precision)
    track = args.track or "entropy"
    options, paths = {}, []
    if pdb_out:  # the track's choices that depend on the model, and what it asks of each run
        config = engine.config
        choices = _checked_choices(track, choices, layers=config.num_layers, heads=config.attention_heads)
        options = run_options(track, layer=choices.get("layer"), strategy=choices.get("strategy"))
        paths = pdb_paths(pdb_out, [record.id for record, _ in aligned])

    from flamino_core.jobs.plan import map_passes, unmasked_passes

    sequences = [record.sequence for record, _ in aligned]
    say_plan("contacts", unmasked_passes(sequences), engine)
    if pdb_out and choices.get("strategy") and STRATEGIES[choices["strategy"]].masked:  # the track's scan
        say_plan("contacts", map_passes(engine, sequences, choices["strategy"]), engine)
    tables, written = [], []
    for index, (record, alignment) in enumerate(aligned):
        out = _predicted(engine, record, options, args.long, f"{record.id} ({index + 1}/{len(aligned)})")
        tables.append(precision_table(alignment, out.contacts, record.id))
        if not pdb_out:
            continue
        text = _track_pdb(engine, parsed, alignment, out, record.id, track, choices, args)
        if text is None:
            had_errors = True
            continue
        with written_atomically(paths[index]) as tmp:
            tmp.write_text(text)
        written.append(paths[index])

    _write_precision_csv(out_path, tables, len(aligned))
    for path in written:
        print(f"wrote {path} ({track} in the B-factor column)")
    return EXIT_USAGE if had_errors or refused else EXIT_OK


def add_track_arguments(parser) -> None:
    """``--track`` and one ``--track-<flag>`` per ``tracks.PARAMS`` entry, each saying which
    tracks use it: generated, so a new track or param needs nothing here."""
    from flamino_core.structure.tracks import PARAMS, TRACKS

    parser.add_argument("--track", choices=TRACKS, help="per-residue values for --pdb-out (default: entropy)")
    for param in PARAMS.values():
        users = ", ".join(name for name, track in TRACKS.items() if param.name in track.params)
        if not users:
            continue
        choices = param.options() if param.kind == "choice" and param.name != "amino_acid" else None
        parser.add_argument(f"--track-{param.flag}", type=int if param.kind == "int" else str, choices=choices,
                            metavar=None if choices else param.metavar, help=f"{users}: {param.help}")


def add_parsers(sub) -> None:
    contacts = sub.add_parser(
        "contacts",
        help="precision of predicted contacts against a PDB/mmCIF structure, to a .csv file",
        description="Compare the model's predicted contacts with a structure: precision at L, L/2 and L/5 "
        "for short (6-11), medium (12-23), long (>= 24) and all (>= 6) sequence separations, L = the "
        "sequence length. Optionally write the chain as PDB with a per-residue track in the B-factor column.",
    )
    add_fasta_argument(contacts)
    contacts.add_argument("--structure", required=True, metavar="FILE",
                          help="PDB or mmCIF file (optionally .gz), or pdb:1GBT / afdb:P69905 to download one")
    contacts.add_argument("--chain", help="chain id (default: the protein chain that best matches each record)")
    contacts.add_argument("--model-index", type=int, default=0,
                          help="model in the file, 0-based (NMR files hold several; default: the first)")
    contacts.add_argument("--min-identity", type=float, metavar="F",
                          help="identity (0-1) the alignment needs (default: Rost's curve for its length)")
    contacts.add_argument("-m", "--model", help=MODEL_HELP)
    add_precision_argument(contacts)
    contacts.add_argument("-o", "--output", required=True, help="output .csv: record_id,chain,range,cutoff,"
                          "precision,n_pairs,identity,coverage")
    contacts.add_argument("--pdb-out", metavar="FILE.pdb",
                          help="write the chain as PDB with --track in the B-factor column "
                          "(several records: FILE.<record_id>.pdb)")
    add_track_arguments(contacts)
    contacts.add_argument("--whole-model", action="store_true",
                          help="--pdb-out writes every chain, ligand and water of the model, not only the chain")
    contacts.add_argument("--long", choices=LONG_POLICIES, default="window",
                          help="sequences over 1022 residues (default: overlapping windows)")
    contacts.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    contacts.set_defaults(call=cmd_contacts)
