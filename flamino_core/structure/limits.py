"""How much of a structure file is read: atoms and models counted before and while Biopython
builds them, so an upload never becomes more objects than the limits allow.

Biopython keeps ~1.05 kB per atom once parsed and peaks at 1.7 kB (PDB) to 2.8 kB (mmCIF, its
token dictionary) while parsing (measured on 2BEG.pdb and 4ZHL.cif with tracemalloc): a cap on
atoms is a cap on memory. Hosted servers pass one (``policy.Limits.structure_limits``); the
inflated size is capped before this, in ``reading.parse_structure_bytes``.
"""

from __future__ import annotations

from Bio.PDB.StructureBuilder import StructureBuilder

BYTES_PER_ATOM = 1_100  # kept per parsed atom (see above): what a cache charges for a structure


class StructureError(ValueError):
    """A structure file or a choice in it that cannot be used; the message says why."""


def _too_many(name: str, what: str, limit: int, count: int | None = None) -> StructureError:
    counted = f"{count:,}" if count is not None else f"more than {limit:,}"
    return StructureError(f"{name} has {counted} {what}; this server reads structures of up to {limit:,} {what}")


def check_counts(text: str, name: str, file_format: str, max_atoms: int | None, max_models: int | None) -> None:
    """Refuse before parsing when the lines that make atoms and models are over the limits (in
    mmCIF, rows starting ATOM/HETATM: the first column wwPDB and AlphaFold DB write; a file that
    orders its columns otherwise is caught by ``BoundedBuilder``)."""
    if max_atoms is not None:
        atoms = sum(text.startswith(tag) + text.count("\n" + tag) for tag in ("ATOM", "HETATM"))
        if atoms > max_atoms:
            raise _too_many(name, "atoms", max_atoms, atoms)
    if max_models is not None and file_format == "PDB":
        models = text.startswith("MODEL ") + text.count("\nMODEL ")
        if models > max_models:
            raise _too_many(name, "models", max_models, models)


class BoundedBuilder(StructureBuilder):
    """Biopython's builder, stopped with a ``StructureError`` at the first atom or model past
    the limits (so a parse never holds more than ``max_atoms`` atom objects)."""

    def __init__(self, name: str, max_atoms: int | None, max_models: int | None):
        super().__init__()
        self.name, self.max_atoms, self.max_models = name, max_atoms, max_models
        self.atoms = self.models = 0

    def init_model(self, *args, **kwargs):
        self.models += 1
        if self.max_models is not None and self.models > self.max_models:
            raise _too_many(self.name, "models", self.max_models)
        super().init_model(*args, **kwargs)

    def init_atom(self, *args, **kwargs):
        self.atoms += 1
        if self.max_atoms is not None and self.atoms > self.max_atoms:
            raise _too_many(self.name, "atoms", self.max_atoms)
        super().init_atom(*args, **kwargs)
