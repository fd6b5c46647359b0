"""A model identifier, read once: what the CLI's ``-m``, the app's picker, a share link's
``model`` and ``FLAMINO_MODEL`` name.

Four kinds, told apart here and nowhere else:

- ``preset``: a published checkpoint (``families.PRESETS``), by its name, its name with the Hub
  organisation (``facebook/esm2_t6_8M_UR50D``) or its repository;
- ``random``: ``random:<preset|tiny|tiny-<family>>[:seed]``, the labelled untrained test model;
- ``ensemble``: a published ensemble (``esm1v_ensemble``) or ``ensemble:<model>,<model>,...``;
- ``path``: anything else, taken for a checkpoint on this machine (``load_weights`` says whether
  it exists).

The text stays as written (stripped): links, cache keys and messages keep every spelling. Light:
no JAX at import.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from flamino_core.model.families import ENSEMBLE_PREFIX, ENSEMBLES, ensemble_members, preset_name

RANDOM_PREFIX = "random:"
RANDOM_TEST_MODEL = "random:tiny"  # the untrained model every server offers, to try the interface

Kind = Literal["preset", "random", "ensemble", "path"]


@dataclasses.dataclass(frozen=True)
class ModelId:
    """One parsed model identifier: ``ModelId.parse(text)``."""

    text: str  # as written, stripped
    kind: Kind
    preset: str | None = None  # the preset's name (kind "preset")

    @classmethod
    def parse(cls, text: str) -> ModelId:
        text = text.strip()
        if text.startswith(RANDOM_PREFIX):
            return cls(text, "random")
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
        """A file-name-like name, as an ensemble's member columns use it: a path's last part
        without ``.pt``/``.pth``, ``ensemble`` for an ``ensemble:`` list, anything else as written."""
        if self.text.startswith(ENSEMBLE_PREFIX):
            return "ensemble"
        return Path(self.text.rstrip("/")).name.removesuffix(".pt").removesuffix(".pth") or self.text
