"""``flamino embed``: embeddings (and logits, attention maps, contacts) of every record to an NPZ."""

from __future__ import annotations

from ..atomic import written_atomically
from ..options import EMBED_PARTS, LONG_POLICIES
from ..progress import Progress, say
from .common import EXIT_OK, EXIT_USAGE, MODEL_HELP, VERBOSE_HELP, UserError, check_output, load_engine, read_records


def cmd_embed(args) -> int:
    import numpy as np

    include = [part.strip() for part in args.include.split(",") if part.strip()]
    unknown = sorted(set(include) - set(EMBED_PARTS))
    if unknown:
        raise UserError(f"--include: unknown part(s) {', '.join(unknown)}; choose from {', '.join(EMBED_PARTS)}")
    out_path = check_output(args.output, ".npz")
    records, had_errors = read_records(args.fasta)
    engine = load_engine(args.model, args.verbose)
    n = engine.config.num_layers
    try:
        repr_layers = engine.normalize_layers(args.repr_layers)
    except ValueError as err:
        raise UserError(f"--repr-layers: {err}") from None
    attention_layers = tuple(range(1, n + 1)) if "attentions" in include else ()
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
        windowed = len(with_gaps)
        say(f"contacts of {windowed} sequence(s) over 1022 residues: pairs no window holds are NaN (not predicted)")
    return EXIT_USAGE if had_errors else EXIT_OK


def add_parsers(sub) -> None:
    embed = sub.add_parser("embed", help="embeddings (and logits, attention, contacts) to an .npz file")
    embed.add_argument("fasta", help="FASTA file ('-' for standard input)")
    embed.add_argument("-m", "--model", help=MODEL_HELP)
    embed.add_argument("-o", "--output", required=True, help="output .npz")
    embed.add_argument("--include", default="mean,per_tok", help=f"comma-separated: {','.join(EMBED_PARTS)}")
    embed.add_argument("--repr-layers", type=int, nargs="+", default=[-1],
                       help="hidden layers to save (0 = embeddings, -1 = final)")
    embed.add_argument("--long", choices=LONG_POLICIES, default="window",
                       help="sequences over 1022 residues (default: overlapping windows)")
    embed.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    embed.set_defaults(call=cmd_embed)
