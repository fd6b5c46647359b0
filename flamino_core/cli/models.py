"""``flamino fetch`` and ``flamino convert``: published checkpoints into the local cache;
``flamino models``: the published checkpoints flamino names, each with its weights' licence."""

from __future__ import annotations

from pathlib import Path

from flamino_core.progress import Progress, say
from flamino_core.cli.common import EXIT_FAILURE, EXIT_OK, UserError


def cmd_fetch(args) -> int:
    from flamino_core.model.families import ENSEMBLES, PRESETS
    from flamino_core.model.model_id import ModelId

    if args.name in ENSEMBLES:  # every member, one after the other
        codes = [_fetch(member) for member in ENSEMBLES[args.name].members]
        return EXIT_FAILURE if EXIT_FAILURE in codes else EXIT_OK
    name = ModelId.parse(args.name).preset
    if name is None:
        raise UserError(f"unknown model {args.name!r}; presets: {', '.join([*PRESETS, *ENSEMBLES])}")
    return _fetch(name)


def _fetch(name: str) -> int:
    from flamino_core.model.families import PRESETS
    from flamino_core.weights.loading import ModelError, load_weights

    try:
        weights = load_weights(name, progress=Progress("fetch").message)
    except ModelError as err:
        raise UserError(str(err)) from None
    except Exception as err:  # the Hub client's network errors are not all OSErrors
        say(f"could not fetch {name}: {type(err).__name__}: {err}; run the command again: "
            "the download resumes where it stopped")
        return EXIT_FAILURE
    print(f"{name}: ready ({PRESETS[name].title}, {weights.config.num_layers} layers, from {weights.source})")
    return EXIT_OK


def cmd_convert(args) -> int:
    from flamino_core.weights.loading import ModelError, convert_to_checkpoint

    try:
        out = convert_to_checkpoint(args.source, Path(args.output) if args.output else None,
                                    progress=Progress("convert").message)
    except (ModelError, ValueError) as err:  # ValueError: damaged checkpoint files
        raise UserError(str(err)) from None
    print(f"wrote flamino checkpoint {out}")
    return EXIT_OK


def cmd_models(args) -> int:
    """One paragraph per published checkpoint: name, family, size, shape, Hub repository,
    whether it is cached here, and its weights' licence as its card gives it (docs/models.md)."""
    from flamino_core.model.families import ENSEMBLES, PRESETS
    from flamino_core.weights.model_cache import cached_presets

    cached = cached_presets()
    for name, preset in PRESETS.items():
        if args.family and preset.family != args.family:
            continue
        here = "cached" if name in cached else "not cached"
        print(f"{name}  {preset.title} {preset.size}, {preset.layers} layers x {preset.dim}, "
              f"https://huggingface.co/{preset.repo} ({here})\n    licence: {preset.licence}")
    if not args.family:
        for name, ensemble in ENSEMBLES.items():
            print(f"{name}  {ensemble.title}: {', '.join(ensemble.members)}")
    return EXIT_OK


def add_parsers(sub) -> None:
    fetch = sub.add_parser("fetch", help="download a published model and cache it")
    fetch.add_argument("name")
    fetch.set_defaults(call=cmd_fetch)

    convert = sub.add_parser("convert", help="convert a checkpoint into a flamino checkpoint folder")
    convert.add_argument("source", help="local HF model folder, fair-esm .pt file, or preset name")
    convert.add_argument("-o", "--output", help="output folder (default: <source name>-flamino)")
    convert.set_defaults(call=cmd_convert)

    models = sub.add_parser("models", help="list the published models flamino names, with their weights' licences")
    from flamino_core.model.families import FAMILIES

    models.add_argument("--family", choices=list(FAMILIES), help="only this family's checkpoints")
    models.set_defaults(call=cmd_models)
