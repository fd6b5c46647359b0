"""Per-residue tracks to paint on a structure, declared once: the CLI's ``--track`` options, the
app's Structure page (its widgets and link options) and the engine outputs a track runs on are
all generated from ``TRACKS`` and ``PARAMS``.

* ``Param``: a choice a track takes (a residue, a layer, a head, an amino acid, a scoring
  strategy...): its kind and bounds, whether people count it from 1, its command-line flag and
  its link key. ``check_choices`` applies them.
* ``Track``: what a track needs from the model (``NEEDS``: logits, substitution scores,
  contacts, one layer's attention, one layer's representations), which params it takes, its
  title and the function computing it (``track_values``).
* ``run_options`` and ``track_inputs``: the one resolver from a track's needs to an
  ``Engine.run`` request and back to the inputs of ``compute_track``.

Adding a track is one ``Track`` in ``TRACKS`` (and a ``Param`` if it takes a new kind of choice).
This module imports no NumPy (``flamino --help`` reads it); the values are ``track_values``'.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Callable

from flamino_core.numbering import Numbering
from flamino_core.options import map_strategies

CONTACT_PROBABILITY = 0.5  # a predicted contact, for the contact-count track
CONTACT_MIN_SEPARATION = 6  # as in the precision table: closer pairs are not counted


@dataclasses.dataclass(frozen=True)
class Param:
    """A choice a track takes, as people give it (the CLI's ``--track-<flag>``, the app's widget).

    ``index``: ``compute_track`` takes it 0-based (the value given minus 1). ``optional``: may be
    left out (None: ``none_means``); the app's link and widget say 0 for it. ``low``/``high``:
    fixed bounds (``high`` also bounds the app's link); ``limit``: the bound known only for a
    record and a model: ``length`` (residues), ``layers``, ``heads``.
    """

    name: str  # compute_track's keyword
    flag: str  # the command line's --track-<flag>
    link: str  # the app's link key
    label: str  # the app's widget label
    help: str  # what the value is
    kind: str = "int"  # "int" or "choice"
    choices: tuple | Callable[[], tuple] = ()
    default: object = None  # the app's first value; the command line's unless ``required``
    required: bool = False  # the command line must be given it
    index: bool = False
    optional: bool = False
    none_means: str = ""
    low: int | None = None
    high: int | None = None
    limit: str | None = None
    metavar: str = "N"
    widget: str = "number"  # the app: "number", "select" or "radio"
    shown: str = "{}"  # how a title writes a value; None: ``none_shown``
    none_shown: str = "?"

    def options(self) -> tuple:
        """The values a ``choice`` param takes (read when asked: strategies can be added)."""
        return tuple(self.choices() if callable(self.choices) else self.choices)


@dataclasses.dataclass(frozen=True)
class Need:
    """A model output tracks are computed from; ``params``: the choices that say which one."""

    name: str
    params: tuple[str, ...] = ()
    first_layer: int = 0  # attention comes from layers 1 and up (layer 0 is the token embedding)


@dataclasses.dataclass(frozen=True)
class Track:
    """A per-residue quantity the structure views can show."""

    name: str  # identifier (``--track`` value)
    label: str  # axis / colour-bar title without its choices
    needs: tuple[str, ...]  # ``NEEDS`` names
    params: tuple[str, ...]  # ``PARAMS`` names, in the order the app lays out their widgets
    compute: str | Callable  # (sequence, *, <needs>, <params>) -> (L,) values; "module:function" or callable
    title: str = ""  # the label with its choices ("{residue}" etc., see ``track_label``); "" = label
    pdb_scale: float = 1.0  # multiplier for the PDB B-factor column (two decimals, -99.99..999.99)
    description: str = ""
    signed: bool = False  # a quantity around 0 (scores, PCA): drawn red-blue, centred on 0


NEEDS: dict[str, Need] = {
    need.name: need
    for need in (
        Need("logits"),
        Need("scores", ("strategy",)),
        Need("contacts"),
        Need("attention", ("layer",), first_layer=1),
        Need("representations", ("layer",)),
    )
}

PARAMS: dict[str, Param] = {
    param.name: param
    for param in (
        Param("strategy", "strategy", "sscore", "Scores", "the scores they use (default wt-marginals: one pass; "
              "masked-marginals: one pass per position, slower)", kind="choice", choices=map_strategies,
              default="wt-marginals", metavar="STRATEGY", widget="radio"),
        Param("amino_acid", "aa", "saa", "Substituted amino acid", "the amino acid substituted at every position",
              kind="choice", choices=lambda: tuple(_standard_amino_acids()), default="A", required=True, metavar="A",
              widget="select"),
        Param("residue", "residue", "sres", "From residue", "the residue it comes from (1-based)", default=1,
              required=True, index=True, low=1, limit="length"),
        Param("layer", "layer", "slayer", "Layer", "the layer (fair-esm numbering, -1 = final; default: final)",
              low=0, high=1000, limit="layers", widget="select"),
        Param("head", "head", "shead", "Head", "one head (1-based; default: mean of heads)", default=None,
              index=True, optional=True, none_means="mean of all heads", low=1, high=1000, limit="heads",
              widget="select", shown="head {}", none_shown="mean of heads"),
        Param("component", "component", "spc", "Component", "the principal component (1-based; default 1)",
              default=1, low=1, high=10),
    )
}

_VALUES = "flamino_core.structure.track_values"
TRACKS: dict[str, Track] = {
    track.name: track
    for track in (
        Track("entropy", "entropy (bits)", ("logits",), (), f"{_VALUES}:entropy_values",
              description="Shannon entropy of the predicted amino acids at each position (unmasked pass)"),
        Track("mean-score", "mean substitution score", ("scores",), ("strategy",), f"{_VALUES}:mean_score_values",
              "mean substitution score, {strategy}", signed=True,
              description="mean of log p(mt) - log p(wt) over the 19 substitutions at each position"),
        Track("substitution", "substitution score", ("scores",), ("strategy", "amino_acid"),
              f"{_VALUES}:substitution_values", "score of {amino_acid} at each position, {strategy}", signed=True,
              description="log p(mt) - log p(wt) for one chosen amino acid at every position"),
        Track("contact-count", "predicted contacts", ("contacts",), (), f"{_VALUES}:contact_count_values",
              description=f"partners with p(contact) >= {CONTACT_PROBABILITY} "
                          f"and separation >= {CONTACT_MIN_SEPARATION}"),
        Track("attention", "attention from residue", ("attention",), ("residue", "layer", "head"),
              f"{_VALUES}:attention_values", "attention from residue {residue} (layer {layer}, {head})",
              pdb_scale=100.0, description="attention weights from one chosen residue to every residue, one layer, "
                                           "one head or the mean of heads (x100 in the PDB B-factor column)"),
        Track("pca", "PCA component", ("representations",), ("layer", "component"), f"{_VALUES}:pca_values",
              "PC{component} of layer {layer}", signed=True,
              description="projection of each residue's representation on a principal component"),
    )
}


def _standard_amino_acids() -> str:
    from flamino_core.alphabet import STANDARD_AMINO_ACIDS  # (NumPy comes with it: read when asked, not at import)

    return STANDARD_AMINO_ACIDS


def _track(name: str) -> Track:
    if name not in TRACKS:
        raise ValueError(f"unknown track {name!r}; choose one of {', '.join(TRACKS)}")
    return TRACKS[name]


# --- choices ---------------------------------------------------------------------------------------
class TrackChoiceError(ValueError):
    """A track's choice that is missing or does not fit; ``param`` says which."""

    def __init__(self, param: Param, message: str, missing: bool = False):
        super().__init__(message)
        self.param, self.missing = param, missing


def check_choices(name: str, given: dict, *, length: int | None = None, layers: int | None = None,
                  heads: int | None = None) -> dict:
    """The choices of track ``name`` as people give them, checked, defaults filled in.

    Args:
      given: param name -> value (None or absent: not given); ``residue``/``head``/``component``
        counted from 1, ``layer`` in fair-esm numbering (negative: from the end).
      length, layers, heads: the record's residues and the model's layers and heads; a bound
        left None is not checked (the command line checks what it can before loading the model).

    Returns:
      {param: value} for each param the track takes, in the same terms (layer made >= 0 when
      ``layers`` is known).

    Raises:
      TrackChoiceError: a required choice missing, or a value out of its bounds.
    """
    track = _track(name)
    limits = {"length": length, "layers": layers, "heads": heads}
    first_layer = max([(NEEDS[need].first_layer, need) for need in track.needs] or [(0, "")])
    out = {}
    for key in track.params:
        param, value = PARAMS[key], given.get(key)
        if value is None and key == "layer":
            value = -1  # the final layer
        if value is None:
            if param.required:
                raise TrackChoiceError(param, f"the {name} track needs {param.help}", missing=True)
            value = param.default
        if value is None:
            out[key] = None
            continue
        if param.kind == "choice":
            value = value.upper() if key == "amino_acid" else value
            if value not in param.options():
                raise TrackChoiceError(param, f"{value!r} is not one of {', '.join(param.options())}")
        elif key == "layer":
            value = _layer(param, value, layers, first_layer)
        else:
            _in_bounds(param, value, limits.get(param.limit))
        out[key] = value
    return out


def _in_bounds(param: Param, value: int, limit: int | None) -> None:
    if param.low is not None and value < param.low:
        leave_out = f" (leave it out for the {param.none_means})" if param.optional else ""
        raise TrackChoiceError(param, f"{param.name} is counted from {param.low}{leave_out}")
    if limit is not None and value > limit:
        whole = {"length": "the sequence has residues", "heads": "this model has heads"}[param.limit]
        raise TrackChoiceError(param, f"{param.name} {value} does not exist: {whole} {param.low}..{limit}")


def _layer(param: Param, value: int, layers: int | None, first_layer: tuple[int, str]) -> int:
    if layers is None:
        return value
    if not -(layers + 1) <= value <= layers:
        raise TrackChoiceError(param, f"layer {value} does not exist: this model has layers 0..{layers} (or -1 "
                                      "for the final one)")
    value = value % (layers + 1)
    lowest, need = first_layer
    if value < lowest:
        raise TrackChoiceError(param, f"{need} comes from layers {lowest} and up (layer 0 is the token embedding)")
    return value


def compute_choices(name: str, choices: dict) -> dict:
    """``check_choices``' values as ``compute_track`` and ``track_label`` take them (``index``
    params 0-based), without the ones that pick an engine output (layer, strategy)."""
    picks = {p for need in _track(name).needs for p in NEEDS[need].params}
    return {key: (value - 1 if PARAMS[key].index and value is not None else value)
            for key, value in choices.items() if key not in picks}


# --- titles ----------------------------------------------------------------------------------------
def track_label(name: str, *, numbering: Numbering = Numbering(), **choices) -> str:
    """What a track's values are, with its choices, for a colour bar, a title or the PDB REMARK.

    Takes ``compute_track``'s choices (``residue`` and ``head`` 0-based, as there) plus ``layer``
    (fair-esm numbering) and ``strategy``; heads are written 1-based and the residue in the
    sequence's own ``numbering`` (from 1 unless the record says otherwise): ``attention from residue
    17 (layer 6, head 3)``.
    """
    track = _track(name)
    if not track.title:
        return track.label
    shown = {}
    for key in track.params:
        param, value = PARAMS[key], choices.get(key)
        if value is None:
            shown[key] = param.none_shown
            continue
        if param.index:  # back to how people count: a residue in the sequence's numbering, others from 1
            value = numbering.number(value) if param.limit == "length" else value + 1
        shown[key] = param.shown.format(value)
    return track.title.format(**shown)


# --- from needs to engine outputs ----------------------------------------------------------------------
def run_options(name: str, *, layer: int | None = None, strategy: str | None = None, have=()) -> dict:
    """``Engine.run`` keywords giving, in one unmasked pass, every output track ``name`` needs
    (``have``: needs the caller holds already, such as contacts)."""
    from flamino_core.options import STRATEGIES

    needs = set(_track(name).needs) - set(have)
    unmasked_scores = "scores" in needs and not STRATEGIES[strategy].masked
    return dict(
        repr_layers=(layer,) if "representations" in needs else (),
        logits="logits" in needs or unmasked_scores,
        attention_layers=(layer,) if "attention" in needs else (),
        contacts="contacts" in needs,
    )


def track_inputs(engine, sequence: str, name: str, *, out=None, layer: int | None = None,
                 strategy: str | None = None, long: str = "window", have: dict | None = None, store=None,
                 progress=None) -> tuple[str, dict]:
    """``compute_track``'s model inputs for track ``name`` of ``sequence``.

    Args:
      out: the ``SequenceOutput`` of an ``Engine.run`` that included ``run_options`` (a caller
        that runs the model for more than the track); None: run what the track needs here.
      layer, strategy: the choices that pick the outputs (``check_choices``' values).
      long: sequences over 1022 residues (``Engine.run``).
      have: inputs the caller holds already (contacts, say), used as they are.
      store, progress: for masked substitution scores (``scores.substitution_map``: they come
        from the result store; an unmasked strategy reads the run's logits).

    Returns:
      (the sequence as analysed, {need: array}).
    """
    inputs = dict(have or {})
    options = run_options(name, layer=layer, strategy=strategy, have=inputs)
    if out is None and any(options.values()):
        (out,) = engine.run([sequence], **options, long=long)
    analysed = sequence if out is None else out.sequence
    for need in _track(name).needs:
        if need in inputs:
            continue
        if need == "logits":
            inputs[need] = out.logits
        elif need == "contacts":
            inputs[need] = out.contacts
        elif need == "attention":
            inputs[need] = out.attentions[0]  # (H, L+2, L+2) of the one layer asked for
        elif need == "representations":
            inputs[need] = out.representations[layer]
        elif need == "scores":
            from flamino_core.variants.substitution_maps import substitution_map, uses_unmasked_logits

            unmasked = out if uses_unmasked_logits(strategy) else None
            inputs[need] = substitution_map(engine, analysed, strategy, long=long, unmasked=unmasked,
                                            store=store, progress=progress).substitutions
        else:
            raise ValueError(f"no engine output gives {need!r}")
    return analysed, inputs


def compute_track(name: str, sequence: str, **inputs_and_choices):
    """One track by its ``TRACKS`` name, from the model outputs it needs and its choices.

    Args:
      name: a key of ``TRACKS``.
      sequence: the analysed sequence (L residues).
      inputs_and_choices: its needs (logits (L, vocab); scores (L, 20); contacts (L, L);
        attention (H, L+2, L+2) of the chosen layer; representations (L, D) of the chosen layer)
        and its choices as ``compute_choices`` gives them (residue and head 0-based, head None =
        the mean, component 1-based).

    Returns:
      (L,) float64 values.

    Raises:
      ValueError: an unknown track, a missing input (naming it) or a bad choice.
    """
    import numpy as np

    track = _track(name)
    missing = [need for need in track.needs if inputs_and_choices.get(need) is None]
    if missing:
        raise ValueError(f"the {name} track needs {', '.join(missing)}")
    for key in track.params:
        param = PARAMS[key]
        if param.required and inputs_and_choices.get(key) is None and key not in _picks(track):
            raise ValueError(f"the {name} track needs {param.help}")
    compute = track.compute
    if not callable(compute):
        module, _, function = compute.partition(":")
        compute = getattr(importlib.import_module(module), function)
    values = np.asarray(compute(sequence, **inputs_and_choices), dtype=np.float64)
    if values.shape != (len(sequence),):
        raise ValueError(f"the {name} track has {values.shape[0]} values for a sequence of {len(sequence)} residues")
    return values


def _picks(track: Track) -> set[str]:
    return {p for need in track.needs for p in NEEDS[need].params}
