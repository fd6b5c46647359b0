"""A fitted predictor on disk: JSON + NPZ, no pickle (docs/predict.md "The saved predictor").

A folder (or a ``.zip`` of its two files, what the app downloads) holding:

* ``predictor.json``: ``format`` ("flamino-predictor"), ``version`` (1), ``task``, ``target``,
  ``classes``, ``features`` (the ``FeatureSpec``: kind, layer, zero-shot strategy, length),
  ``model`` (the identifier as given) and ``model_fingerprint`` (the weights' checksum and
  precision: embeddings of another model are refused), ``random_weights``, ``wild_type`` and
  ``first`` (variant predictors), ``regularisation`` and ``training`` (folds, statistics);
* ``coefficients.npz``: ``mean`` (p,), ``scale`` (p,), ``coef`` (k, p), ``intercept`` (k,), float64.

The prediction is ``((X - mean) / scale) @ coef.T + intercept``: the value (regression), the
logit of the last class (two classes) or each class's logit (softmax). Reading never runs code
from the file (``numpy.load(allow_pickle=False)``, ``json``).
"""

from __future__ import annotations

import dataclasses
import io
import json
import zipfile
from pathlib import Path

import numpy as np

from flamino_core.wording import byte_size
from flamino_core.atomic import written_atomically
from flamino_core.numbering import Numbering
from flamino_core.predictors.features import FeatureSpec
from flamino_core.predictors.fitting import LinearModel

FORMAT, VERSION = "flamino-predictor", 1
JSON_NAME, ARRAYS_NAME = "predictor.json", "coefficients.npz"
_ARRAYS = ("mean", "scale", "coef", "intercept")
MAX_ZIP_BYTES = 512 << 20  # a predictor's arrays: one-hot of a 5,000-residue protein is 100,000 x 8 bytes


class PredictorError(ValueError):
    """A saved predictor that cannot be read (the message says why)."""


@dataclasses.dataclass
class Predictor:
    """A fitted predictor: the features it reads, its linear model and where it came from."""

    spec: FeatureSpec
    model: LinearModel
    target: str
    model_id: str | None = None
    model_fingerprint: str | None = None
    num_layers: int | None = None
    random_weights: bool = False
    wild_type: str | None = None
    first: int = 1
    training: dict = dataclasses.field(default_factory=dict)

    @property
    def task(self) -> str:
        return self.model.task

    @property
    def numbering(self) -> Numbering:
        """The wild type's residue numbering (the saved metadata keeps its ``first``)."""
        return Numbering(self.first)

    @classmethod
    def from_fit(cls, spec: FeatureSpec, linear: LinearModel, table, *, engine=None, model_id: str | None = None,
                 random_weights: bool = False, training: dict | None = None) -> "Predictor":
        """The predictor of a fit on ``table`` (its target, wild type and numbering)."""
        return cls(spec, linear, table.target, model_id if spec.uses_model else None,
                   engine.fingerprint if engine is not None else None,
                   engine.config.num_layers if engine is not None else None,
                   random_weights, table.wild_type, table.first, dict(training or {}))

    def to_json(self) -> dict:
        return {
            "format": FORMAT, "version": VERSION, "task": self.task, "target": self.target,
            "classes": list(self.model.classes), "features": self.spec.to_json(),
            "model": self.model_id, "model_fingerprint": self.model_fingerprint, "num_layers": self.num_layers,
            "random_weights": self.random_weights, "wild_type": self.wild_type, "first": self.first,
            "regularisation": self.model.regularisation, "training": self.training,
            "prediction": "((X - mean) / scale) @ coef.T + intercept; classes: sigmoid (2) or softmax (more)",
        }

    def arrays(self) -> dict[str, np.ndarray]:
        return {name: np.asarray(getattr(self.model, name), np.float64) for name in _ARRAYS}


def save(predictor: Predictor, directory: str | Path) -> Path:
    """Write ``predictor.json`` and ``coefficients.npz`` into ``directory`` (created)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with written_atomically(directory / ARRAYS_NAME) as tmp:
        with open(tmp, "wb") as handle:
            np.savez(handle, **predictor.arrays())
    with written_atomically(directory / JSON_NAME) as tmp:
        tmp.write_text(json.dumps(predictor.to_json(), indent=2) + "\n")
    return directory


def zip_bytes(predictor: Predictor) -> bytes:
    """The two files in one ``.zip`` (the app's download; ``flamino predict`` reads it as is)."""
    arrays = io.BytesIO()
    np.savez(arrays, **predictor.arrays())
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(JSON_NAME, json.dumps(predictor.to_json(), indent=2) + "\n")
        archive.writestr(ARRAYS_NAME, arrays.getvalue())
    return out.getvalue()


def load(path: str | Path) -> Predictor:
    """A predictor from its folder or ``.zip``.

    Raises:
      PredictorError: missing files, another format or version, arrays that do not fit.
    """
    path = Path(path)
    try:
        if path.is_dir():
            return from_parts((path / JSON_NAME).read_text(), (path / ARRAYS_NAME).read_bytes(), str(path))
        if zipfile.is_zipfile(path):
            return from_zip(path.read_bytes(), str(path))
        if path.exists():
            raise PredictorError(f"{path}: not a predictor folder or .zip (flamino fit --save-model writes one)")
        raise PredictorError(f"{path}: no such predictor folder or file")
    except (OSError, UnicodeDecodeError) as err:
        raise PredictorError(f"{path}: cannot read the predictor: {getattr(err, 'strerror', None) or err}") from None


def from_zip(data: bytes, where: str = "predictor.zip") -> Predictor:
    """A predictor from the bytes of its ``.zip`` (``zip_bytes``; the files may sit in a folder)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            sizes = {info.filename: info.file_size for info in archive.infolist()}
            if sum(sizes.values()) > MAX_ZIP_BYTES:
                raise PredictorError(f"{where}: the archive unpacks to more than {byte_size(MAX_ZIP_BYTES)}")
            names = {Path(name).name: name for name in sizes}
            if JSON_NAME not in names or ARRAYS_NAME not in names:
                raise PredictorError(f"{where}: a predictor archive holds {JSON_NAME} and {ARRAYS_NAME}")
            text = archive.read(names[JSON_NAME]).decode("utf-8")
            arrays = archive.read(names[ARRAYS_NAME])
    except (zipfile.BadZipFile, UnicodeDecodeError) as err:
        raise PredictorError(f"{where}: cannot read the predictor archive: {err}") from None
    return from_parts(text, arrays, where)


def from_parts(text: str, data: bytes, where: str = "predictor") -> Predictor:
    """A predictor from its JSON text and NPZ bytes."""
    try:
        meta = json.loads(text)
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {name: np.asarray(npz[name], np.float64) for name in _ARRAYS}
    except (ValueError, KeyError, OSError) as err:
        raise PredictorError(f"{where}: damaged predictor files ({type(err).__name__}: {err})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise PredictorError(f"{where}: {JSON_NAME} is not a flamino predictor")
    if meta.get("version") != VERSION:
        raise PredictorError(f"{where}: predictor format version {meta.get('version')!r}; this flamino reads "
                             f"version {VERSION}")
    coef, p = arrays["coef"], arrays["mean"].shape[0]
    fits = coef.ndim == 2 and coef.shape[1] == p and arrays["scale"].shape == (p,)
    if not fits or arrays["intercept"].shape != (coef.shape[0],):
        raise PredictorError(f"{where}: the coefficient arrays do not fit together")
    classes = tuple(str(c) for c in meta.get("classes") or ())
    model = LinearModel(meta["task"], arrays["mean"], arrays["scale"], coef, arrays["intercept"], classes,
                        dict(meta.get("regularisation") or {}))
    return Predictor(FeatureSpec.from_json(meta["features"]), model, str(meta.get("target", "")),
                     meta.get("model"), meta.get("model_fingerprint"), meta.get("num_layers"),
                     bool(meta.get("random_weights")), meta.get("wild_type"), int(meta.get("first") or 1),
                     dict(meta.get("training") or {}))
