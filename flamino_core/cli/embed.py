"""``flamino embed``: embeddings (and logits, attention maps, contacts) of every record to an NPZ,
or the per-sequence embeddings and their metadata in ProtSpace's HDF5 layout (``-o OUT.h5``)."""

from __future__ import annotations

from pathlib import Path

from flamino_core.atomic import written_atomically
from flamino_core.options import EMBED_PARTS, LONG_POLICIES
from flamino_core.progress import Progress, say
from flamino_core.cli.common import (
    EXIT_OK, EXIT_USAGE, MODEL_HELP, VERBOSE_HELP, UserError, add_fasta_argument, add_precision_argument,
    check_output, load_engine, read_fasta_argument, say_plan,
)

NPZ_DEFAULT_PARTS = "mean,per_tok"
H5_SUFFIXES = (".h5", ".hdf5")


def cmd_embed(args) -> int:
    out_path = check_output(args.output, (".npz", *H5_SUFFIXES))
    as_h5 = out_path.suffix in H5_SUFFIXES
    include = _parts(args.include, as_h5)
    if as_h5 and len(args.repr_layers) != 1:
        raise UserError("--repr-layers: an .h5 output holds one per-sequence embedding per record; give one layer")
    records, had_errors = read_fasta_argument(args)
    engine = load_engine(args.model, args.verbose, args.precision)
    n = engine.config.num_layers
    try:
        repr_layers = engine.normalize_layers(args.repr_layers)
    except ValueError as err:
        raise UserError(f"--repr-layers: {err}") from None
    attention_layers = tuple(range(1, n + 1)) if "attentions" in include else ()
    from flamino_core.jobs.plan import unmasked_passes  # imported once a model is loaded: the CLI stays light

    say_plan("embed", unmasked_passes([r.sequence for r in records]), engine)
    try:
        results = engine.run(
            [r.sequence for r in records],
            repr_layers=repr_layers,
            logits="logits" in include,
            attention_layers=attention_layers,
            contacts="contacts" in include,
            long=args.long,
            progress=Progress("embed"),
        )
    except ValueError as err:
        raise UserError(str(err)) from None
    if as_h5:
        _write_protspace(out_path, records, results, repr_layers[0], args.model or engine.weights.name)
    else:
        _write_npz(out_path, records, results, include, repr_layers, n)
    return EXIT_USAGE if had_errors else EXIT_OK


def _parts(given: str | None, as_h5: bool) -> list[str]:
    include = [part.strip() for part in (given or ("mean" if as_h5 else NPZ_DEFAULT_PARTS)).split(",") if part.strip()]
    unknown = sorted(set(include) - set(EMBED_PARTS))
    if unknown:
        raise UserError(f"--include: unknown part(s) {', '.join(unknown)}; choose from {', '.join(EMBED_PARTS)}")
    if as_h5 and include != ["mean"]:
        raise UserError("--include: an .h5 output (ProtSpace's layout) holds the per-sequence mean embeddings "
                        "only; write an .npz for per-residue states, logits, attention or contacts")
    return include


def _write_npz(out_path: Path, records, results, include, repr_layers, n) -> None:
    import numpy as np

    arrays: dict[str, np.ndarray] = {
        "ids": np.array([r.id for r in records]),
        "sequences": np.array([res.sequence for res in results]),
    }
    for i, res in enumerate(results):
        if "per_tok" in include:
            arrays[f"per_tok/{i}"] = res.final
        if "mean" in include:
            arrays[f"mean/{i}"] = res.mean
        if "logits" in include:
            arrays[f"logits/{i}"] = res.logits
        if "attentions" in include:
            arrays[f"attentions/{i}"] = res.attentions
        if "contacts" in include:
            arrays[f"contacts/{i}"] = res.contacts
        for layer in repr_layers:
            if layer != n:
                arrays[f"layer{layer}/{i}"] = res.representations[layer]
    with written_atomically(out_path) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, **arrays)
    print(f"wrote {out_path} ({len(records)} sequences)")
    with_gaps = [res for res in results if res.contacts is not None and np.isnan(res.contacts).any()]
    if with_gaps:
        say(f"contacts of {len(with_gaps)} sequence(s) over 1022 residues: pairs no window holds are NaN "
            "(not predicted)")


def _write_protspace(out_path: Path, records, results, layer: int, model: str) -> None:
    """The .h5 of per-sequence means and its metadata table beside it (``protspace`` module)."""
    import numpy as np

    from flamino_core.records.protspace import metadata_csv, metadata_path, model_label, write_h5

    means = np.stack([res.representations[layer].mean(axis=0) for res in results])  # (N, D)
    table = metadata_path(out_path)
    with written_atomically(out_path) as tmp:
        notes = write_h5(tmp, [r.id for r in records], means, model_label(model))
    with written_atomically(table) as tmp:
        Path(tmp).write_text(metadata_csv(records))
    for note in notes:
        say(f"note: {note}")
    print(f"wrote {out_path} and {table} ({len(records)} sequences; for ProtSpace: "
          f"protspace prepare -i {out_path} -a {table} -m pca2 -o OUT)")


def add_parsers(sub) -> None:
    embed = sub.add_parser(
        "embed", help="embeddings (and logits, attention, contacts) to an .npz file, or ProtSpace's .h5",
        description="Embed every record. -o OUT.npz: per-residue and mean embeddings (and what --include asks "
                    "for). -o OUT.h5: ProtSpace's layout, one per-sequence mean embedding per record keyed by its "
                    "id, with OUT_metadata.csv (identifier, length, header fields) beside it.",
    )
    add_fasta_argument(embed)
    embed.add_argument("-m", "--model", help=MODEL_HELP)
    add_precision_argument(embed)
    embed.add_argument("-o", "--output", required=True, help="output .npz, or .h5 for ProtSpace")
    embed.add_argument("--include", help=f"comma-separated: {','.join(EMBED_PARTS)} "
                                         f"(default {NPZ_DEFAULT_PARTS}; .h5: mean only)")
    embed.add_argument("--repr-layers", type=int, nargs="+", default=[-1],
                       help="hidden layers to save (0 = embeddings, -1 = final); .h5: the one layer averaged")
    embed.add_argument("--long", choices=LONG_POLICIES, default="window",
                       help="sequences over 1022 residues (default: overlapping windows)")
    embed.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    embed.set_defaults(call=cmd_embed)
