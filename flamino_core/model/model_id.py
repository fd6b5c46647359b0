"""A model identifier, read once: what the CLI's ``-m``, the app's picker, a share link's
``model`` and ``FLAMINO_MODEL`` name.

Five kinds, told apart here and nowhere else:

- ``preset``: a published checkpoint (``families.PRESETS``), by its name, its name with the Hub
  organisation (``facebook/esm2_t6_8M_UR50D``) or its repository;
- ``random``: ``random:<preset|tiny|tiny-<family>>[:seed]``, the labelled untrained test model;
- ``ensemble``: a published ensemble (``esm1v_ensemble``) or ``ensemble:<model>,<model>,...``;
- ``fold``: a published fold model (``FOLD_PRESETS``: ``esmfold_v1``, ``esmfold2``, ``esmfold2-fast``),
  by its name or its Hub repository, any case;
- ``path``: anything else, taken for a checkpoint on this machine (``load_weights`` says whether
  it exists).

A fold model's family (``fold``: ``esmfold`` for ESMFold v1, ``esmfold2``) is told here too: its
presets', its untrained test models' (``random:esmfold-tiny[:seed]``, ``random:esmfold2-tiny[:seed]``,
kind ``random``), and a folder's from its ``config.json`` (``fold_family``).

The text stays as written (stripped): links, cache keys and messages keep every spelling. Light:
no JAX at import.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Literal

from flamino_core.model.families import ENSEMBLE_PREFIX, ENSEMBLES, ensemble_members, preset_name

RANDOM_PREFIX = "random:"
RANDOM_TEST_MODEL = "random:tiny"  # the untrained model every server offers, to try the interface

Kind = Literal["preset", "random", "ensemble", "path", "fold"]
FoldFamily = Literal["esmfold", "esmfold2"]
# The published fold models: name -> (Hub repository, family); weights/esmfold_hub.py and
# esmfold2_hub.py download them.
FOLD_PRESETS: dict[str, tuple[str, FoldFamily]] = {
    "esmfold_v1": ("facebook/esmfold_v1", "esmfold"), "esmfold2": ("biohub/ESMFold2", "esmfold2"),
    "esmfold2-fast": ("biohub/ESMFold2-Fast", "esmfold2")}
# The untrained fold test models, ``<name>[:seed]``: family -> name.
RANDOM_FOLD_MODELS: dict[FoldFamily, str] = {"esmfold": "random:esmfold-tiny", "esmfold2": "random:esmfold2-tiny"}


@dataclasses.dataclass(frozen=True)
class ModelId:
    """One parsed model identifier: ``ModelId.parse(text)``."""

    text: str  # as written, stripped
    kind: Kind
    preset: str | None = None  # the preset's name (kind "preset")
    fold: FoldFamily | None = None  # a fold preset's or fold test model's family
    fold_preset: str | None = None  # the fold preset's name (kind "fold")

    @classmethod
    def parse(cls, text: str) -> ModelId:
        text = text.strip()
        if text.startswith(RANDOM_PREFIX):
            family = next((f for f, name in RANDOM_FOLD_MODELS.items()
                           if text == name or text.startswith(name + ":")), None)
            return cls(text, "random", fold=family)
        for name, (repo, family) in FOLD_PRESETS.items():  # the Hub's names ignore case
            if text.lower() in (name, repo.lower()):
                return cls(text, "fold", fold=family, fold_preset=name)
        if text in ENSEMBLES or text.startswith(ENSEMBLE_PREFIX):
            return cls(text, "ensemble")
        name = preset_name(text)
        return cls(text, "preset", name) if name is not None else cls(text, "path")

    @property
    def is_random(self) -> bool:
        return self.kind == "random"

    @property
    def is_preset(self) -> bool:
        return self.kind == "preset"

    def fold_family(self) -> FoldFamily | None:
        """The fold model this names, where a fold model is asked for: a preset's or test model's
        family, a folder's ``esmfold2`` where its ``config.json`` says ``model_type: esmfold2``, any
        other path ``esmfold`` (its loader says what is wrong with it); None for a language model's
        preset, test model or ensemble."""
        if self.fold is not None or self.kind != "path":
            return self.fold
        config = Path(self.text) / "config.json"
        try:
            is_esmfold2 = config.is_file() and json.loads(config.read_text()).get("model_type") == "esmfold2"
        except (OSError, ValueError):
            is_esmfold2 = False
        return "esmfold2" if is_esmfold2 else "esmfold"

    @property
    def fold_seed(self) -> int:
        """A fold test model's seed (``random:esmfold-tiny:3``: 3; none written: 0).

        Raises:
          ValueError: a seed that is not a whole number.
        """
        name = RANDOM_FOLD_MODELS[self.fold] if self.fold else ""
        seed = self.text[len(name) + 1:] or "0"
        if not self.is_random or not self.fold or not seed.isdigit():
            raise ValueError(f"{self.text!r}: the seed after {name or RANDOM_PREFIX}: is a whole number")
        return int(seed)

    @property
    def key(self) -> str:
        """What lists of allowed models compare: a preset by its name, anything else as written."""
        return self.preset or self.text

    @property
    def random_spec(self) -> str:
        """The untrained model's spec as written after ``random:`` (``tiny``, ``tiny-esmc:3``)."""
        return self.text[len(RANDOM_PREFIX):] if self.is_random else ""

    @property
    def members(self) -> tuple[str, ...]:
        """An ensemble's member identifiers, in order (() for a single model).

        Raises:
          ValueError: an ``ensemble:`` list of fewer than two models.
        """
        return ensemble_members(self.text) or () if self.kind == "ensemble" else ()

    @property
    def short_name(self) -> str:
        """A file-name-like name, as an ensemble's member columns use it (``short_name``)."""
        return short_name(self.text)


def short_name(text: str) -> str:
    """An identifier's file-name-like name, read from its text alone (an ensemble's members are
    text): a path's last part without ``.pt``/``.pth``, ``ensemble`` for an ``ensemble:`` list,
    anything else as written."""
    text = text.strip()
    if text.startswith(ENSEMBLE_PREFIX):
        return "ensemble"
    return Path(text.rstrip("/")).name.removesuffix(".pt").removesuffix(".pth") or text
