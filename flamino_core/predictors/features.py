"""What a predictor sees of each sequence: the feature sets and what each costs.

* ``embedding``: the model's mean embedding at one layer (default the last), one unmasked pass
  per distinct sequence, read from and kept in the result store (``passes.record_outputs``), so
  a refit, another layer or another fold scheme runs no pass. Standardised (each dimension to
  mean 0, variance 1 on the training rows) before the linear model, so one regularisation
  strength suits dimensions of any scale.
* ``onehot``: the residue at every position, 20 columns each (position-major, columns in
  ``STANDARD_AMINO_ACIDS`` order). Needs sequences of one length. No model: the baseline.
* ``augmented`` (variant tables): one-hot plus the model's zero-shot score of each mutant
  (``variants.scoring.score_variants``, masked-marginals by default), the augmented model of Hsu
  et al. 2022 (Nature Biotechnology 40, 1114). As in their code (``JointPredictor``), the score
  column is multiplied by ``DENSITY_SCALE`` = sqrt(1 / 1e-8): ridge then shrinks its weight
  1e8 times less than a residue's, so the score is kept and the one-hot columns learn what it
  misses.
* ``composition``: the amino-acid composition (20 fractions); the model-free baseline of a
  table whose sequences differ in length, where one-hot is undefined.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import numpy as np

from flamino_core.wording import byte_size
from flamino_core.progress import ProgressFn
from flamino_core.alphabet import STANDARD_AMINO_ACIDS
from flamino_core.options import DEFAULT_VARIANT_STRATEGY, PREDICT_FEATURES

FEATURE_SETS = PREDICT_FEATURES  # what ``flamino fit --features`` offers
DEFAULT_FEATURES = "embedding"
COMPOSITION = "composition"
DENSITY_SCALE = 1e4  # sqrt(1 / 1e-8): Hsu et al.'s regularisation ratio for the density feature
# Augmented features are dense: the 1e4-scaled column spreads the Gram matrix's eigenvalues over
# ~1e9, where ridge's sparse and dense solvers differ by ~1e-6 in the predictions (measured on the
# shared assay); the dense one centres the columns exactly. Bounded, since it is rows x 20 L.
MAX_DENSE_BYTES = 1 << 30
_COLUMN = {aa: j for j, aa in enumerate(STANDARD_AMINO_ACIDS)}


class FeatureError(ValueError):
    """A feature set that does not apply to these sequences (the message says why)."""


@dataclasses.dataclass(frozen=True)
class FeatureSpec:
    """A feature set, fully described: what ``saved`` writes so ``flamino predict`` rebuilds it.

    ``layer`` is the embedding layer (fair-esm numbering: 0 = token embeddings, the last =
    the final layer); ``zero_shot`` the variant strategy of the augmented score; ``length`` the
    residues a one-hot feature set describes.
    """

    kind: str
    layer: int | None = None
    zero_shot: str | None = None
    length: int | None = None

    @property
    def uses_model(self) -> bool:
        return self.kind in ("embedding", "augmented")

    @property
    def standardise(self) -> bool:
        return self.kind == "embedding"

    @property
    def label(self) -> str:
        """How tables and figures name it."""
        if self.kind == "embedding":
            return f"embedding (layer {self.layer})"
        if self.kind == "augmented":
            return f"augmented (one-hot + {self.zero_shot})"
        return {"onehot": "one-hot (no model)", COMPOSITION: "composition (no model)"}.get(self.kind, self.kind)

    def to_json(self) -> dict:
        return {key: value for key, value in dataclasses.asdict(self).items() if value is not None}

    @classmethod
    def from_json(cls, data: dict) -> "FeatureSpec":
        return cls(kind=str(data["kind"]), layer=data.get("layer"), zero_shot=data.get("zero_shot"),
                   length=data.get("length"))


@dataclasses.dataclass
class Inputs:
    """The sequences to describe; for a variant table also each one's substitutions of ``wild_type``."""

    sequences: list[str]
    variants: list | None = None  # notation.Variant per sequence
    wild_type: str | None = None


def spec_for(kind: str, *, num_layers: int | None = None, layer: int | None = None,
             zero_shot: str = DEFAULT_VARIANT_STRATEGY, length: int | None = None) -> FeatureSpec:
    """The ``FeatureSpec`` of ``kind``: the embedding layer defaults to the model's last."""
    if kind == "embedding":
        chosen = num_layers if layer is None else layer
        if num_layers is not None and not 0 <= chosen <= num_layers:
            raise FeatureError(f"layer {chosen} does not exist: this model has layers 0-{num_layers}")
        return FeatureSpec("embedding", layer=chosen)
    if kind == "augmented":
        return FeatureSpec("augmented", zero_shot=zero_shot, length=length)
    if kind in ("onehot", COMPOSITION):
        return FeatureSpec(kind, length=length if kind == "onehot" else None)
    raise FeatureError(f"unknown features {kind!r}: choose one of {', '.join(FEATURE_SETS)}")


def problem(kind: str, inputs: Inputs) -> str | None:
    """Why ``kind`` cannot describe ``inputs``, or None when it can."""
    lengths = {len(s) for s in inputs.sequences}
    if kind in ("onehot", "augmented") and len(lengths) > 1:
        return (f"{kind} features need sequences of one length (these have {min(lengths)}-{max(lengths)} "
                "residues): use embedding features")
    if kind == "augmented" and (inputs.wild_type is None or inputs.variants is None):
        return ("augmented features need mutants of one wild type (a mutant column, a ProteinGym table, or "
                "sequences with the wild type given as FASTA): use embedding or onehot features")
    if kind == "augmented":
        size = len(inputs.sequences) * (20 * len(inputs.wild_type) + 1) * 8
        if size > MAX_DENSE_BYTES:
            return (f"augmented features of {len(inputs.sequences):,} mutants of a {len(inputs.wild_type):,}-residue "
                    f"protein take {byte_size(size)}, more than the {byte_size(MAX_DENSE_BYTES)} allowed: use "
                    "onehot or embedding features, or fewer rows")
    return None


def build(spec: FeatureSpec, inputs: Inputs, engine=None, *, store=None, progress: ProgressFn | None = None,
          cancelled: Callable[[], bool] | None = None) -> np.ndarray:
    """The (n, features) float64 matrix of ``spec`` for ``inputs`` (sparse CSR for one-hot
    features, dense for the others).

    Args:
      spec: the feature set.
      inputs: the sequences (and variants) to describe.
      engine: the model (embedding and augmented features only).
      store: the result store (default: ``result_store.default_store()``).
      progress: (done, total) in the unit of the model work (sequences or passes).
      cancelled: polled between groups of passes.

    Raises:
      FeatureError: the feature set does not apply, or needs a model that was not given.
    """
    why = problem(spec.kind, inputs)
    if why:
        raise FeatureError(why)
    if spec.uses_model and engine is None:
        raise FeatureError(f"{spec.kind} features need the model")
    if spec.kind == "onehot":
        return onehot(inputs.sequences, spec.length)
    if spec.kind == COMPOSITION:
        return composition(inputs.sequences)
    if spec.kind == "embedding":
        return embeddings(engine, inputs.sequences, spec.layer, store=store, progress=progress, cancelled=cancelled)
    scores = zero_shot_scores(engine, inputs.wild_type, inputs.variants, spec.zero_shot, store=store,
                              progress=progress, cancelled=cancelled)
    return np.hstack([onehot(inputs.sequences, spec.length).toarray(), DENSITY_SCALE * scores[:, None]])


def onehot(sequences: Sequence[str], length: int | None = None):
    """(n, L x 20) one-hot residues, position-major, columns in ``STANDARD_AMINO_ACIDS`` order.

    A sparse (CSR) float64 matrix: L ones per row of 20 L columns. scikit-learn's ridge and
    logistic solvers take it as it is and give the same numbers as on the dense matrix (to
    ~1e-15), the logistic fit four times faster, and a 10,000-row table of a 1,000-residue
    protein is 80 MB of indices instead of 1.6 GB.
    """
    import scipy.sparse

    length = len(sequences[0]) if length is None and len(sequences) else (length or 0)
    columns = np.empty((len(sequences), length), dtype=np.int64)
    for row, sequence in enumerate(sequences):
        if len(sequence) != length:
            raise FeatureError(f"one-hot features were fitted on {length}-residue sequences; this one has "
                               f"{len(sequence)}")
        columns[row] = [i * 20 + _COLUMN[aa] for i, aa in enumerate(sequence)]
    indptr = np.arange(len(sequences) + 1, dtype=np.int64) * length
    data = np.ones(columns.size, dtype=np.float64)
    return scipy.sparse.csr_matrix((data, columns.reshape(-1), indptr), shape=(len(sequences), length * 20))


def composition(sequences: Sequence[str]) -> np.ndarray:
    """(n, 20) the fraction of each amino acid, in ``STANDARD_AMINO_ACIDS`` order."""
    out = np.zeros((len(sequences), 20), dtype=np.float64)
    for row, sequence in enumerate(sequences):
        for aa in sequence:
            out[row, _COLUMN[aa]] += 1.0
        out[row] /= max(len(sequence), 1)
    return out


def embeddings(engine, sequences: Sequence[str], layer: int, *, store=None, progress: ProgressFn | None = None,
               cancelled: Callable[[], bool] | None = None) -> np.ndarray:
    """(n, D) each sequence's mean embedding at ``layer``, from the result store or one pass each."""
    from flamino_core.store.passes import record_outputs

    outputs = record_outputs(engine, list(sequences), store=store, progress=progress, cancelled=cancelled)
    return np.stack([out.means[layer] for out in outputs]).astype(np.float64)


def zero_shot_scores(engine, wild_type: str, variants: Sequence, strategy: str, *, store=None,
                     progress: ProgressFn | None = None, cancelled: Callable[[], bool] | None = None) -> np.ndarray:
    """(n,) the model's score of each variant, as ``flamino variants`` computes it (its masked
    passes from the result store)."""
    from flamino_core.variants.scoring import score_variants

    numbered = [dataclasses.replace(v, order=n) for n, v in enumerate(variants)]  # one row each
    table = score_variants(engine, wild_type, numbered, strategy, progress=progress, cancelled=cancelled,
                           store=store).table
    return table["score"].to_numpy(dtype=np.float64)


def missing_passes(spec: FeatureSpec, inputs: Inputs, engine, store=None) -> tuple[int, int, str]:
    """(passes still to run, passes asked, unit) for ``spec`` on ``inputs``: said before the work.

    Embeddings cost one unmasked pass per distinct sequence not yet stored; the augmented
    model's zero-shot score what ``zero_shot_scores`` runs, counted by the rule it scores by
    (``variant_passes``: masked-marginals one masked pass per distinct mutated position not yet
    stored, wt-marginals one unmasked pass per window ...).
    """
    from flamino_core.store.passes import output_names
    from flamino_core.store.result_store import default_store
    from flamino_core.variants.variant_passes import held_in_store, held_sets_in_store, variant_passes

    store = default_store() if store is None else store
    if spec.kind == "embedding":
        distinct = list(dict.fromkeys(inputs.sequences))
        layers = engine.config.num_layers
        stored = sum(len(store.outputs(engine.fingerprint, s, names)) == len(names)
                     for s in distinct for names in [output_names(layers, len(s), "window", False)])
        return len(distinct) - stored, len(distinct), "unmasked passes (one per distinct sequence)"
    if spec.kind == "augmented":
        needed = variant_passes(inputs.wild_type, inputs.variants, spec.zero_shot, held_in_store(engine, store),
                                held_sets_in_store(engine, store))
        return needed.to_run, needed.planned, f"{'masked' if needed.masked else 'unmasked'} passes ({needed.how})"
    return 0, 0, "passes"
