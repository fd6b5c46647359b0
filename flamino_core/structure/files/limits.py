"""How much of a structure file is read: atoms, models and chains counted before and while
Biopython builds them, so an upload never becomes more objects than the limits allow.

Chains are capped apart from atoms: each chain of a structure becomes a record, a chain listing
and an alignment on the pages, so an mmCIF of 15,000 one-atom chains (within the atom cap) cost
12 s of page work after a 1-5 s parse; it is now refused on its text in 0.13 s.

Biopython keeps ~1.05 kB per atom once parsed and peaks at 1.7 kB (PDB) to 2.8 kB (mmCIF, its
token dictionary) while parsing (measured on 2BEG.pdb and 4ZHL.cif with tracemalloc): a cap on
atoms is a cap on memory. Hosted servers pass one (``policy.Limits.structure_limits``); the
inflated size is capped before this, in ``reading.parse_structure_bytes``.
"""

from __future__ import annotations

from Bio.PDB.StructureBuilder import StructureBuilder

BYTES_PER_ATOM = 1_100  # kept per parsed atom (see above): what a cache charges for a structure
# A chain id is a label the pages print in listings, options and file names: PDB's are 1 character,
# wwPDB's mmCIF ids of large assemblies 4 at most. A 400-character id was printed in full (issue #67).
MAX_CHAIN_ID_CHARS = 16


class StructureError(ValueError):
    """A structure file or a choice in it that cannot be used; the message says why."""


def _too_many(name: str, what: str, limit: int, count: int | None = None) -> StructureError:
    counted = f"{count:,}" if count is not None else f"more than {limit:,}"
    return StructureError(f"{name} has {counted} {what}; this server reads structures of up to {limit:,} {what}")


def check_counts(text: str, name: str, file_format: str, max_atoms: int | None, max_models: int | None,
                 max_chains: int | None = None) -> None:
    """Refuse before parsing when the lines that make atoms, models and chains are over the
    limits (in mmCIF, rows starting ATOM/HETATM: the first column wwPDB and AlphaFold DB write,
    one row a line; a file written otherwise is caught by ``BoundedBuilder``)."""
    if max_atoms is not None:
        atoms = sum(text.startswith(tag) + text.count("\n" + tag) for tag in ("ATOM", "HETATM"))
        if atoms > max_atoms:
            raise _too_many(name, "atoms", max_atoms, atoms)
    if max_models is not None and file_format == "PDB":
        models = text.startswith("MODEL ") + text.count("\nMODEL ")
        if models > max_models:
            raise _too_many(name, "models", max_models, models)
    if max_chains is not None:
        chains = _most_chains(text, file_format)
        if chains > max_chains:
            raise _too_many(name, "chains", max_chains, chains)


def _most_chains(text: str, file_format: str) -> int:
    """The most chains one model's atom lines start, as Biopython's builder starts them: a chain
    wherever the chain id changes from one atom to the next. Counted before Biopython's mmCIF
    tokenizer, which alone took 0.6 s of the 15,000-chain file's refusal."""
    lines = text.splitlines()
    model_chain = _pdb_model_chain if file_format == "PDB" else _cif_model_chain(lines)
    if model_chain is None:
        return 0
    most = count = 0
    last = ("", None)
    for line in lines:
        if line.startswith("MODEL"):
            count, last = 0, ("", None)
        elif line.startswith(("ATOM", "HETATM")):
            here = model_chain(line)
            if here != last:
                count = 1 if here[0] != last[0] else count + 1
                most, last = max(most, count), here
    return most


def _pdb_model_chain(line: str) -> tuple[str, str]:
    """A PDB atom line's chain id, column 22 (its model is the MODEL line's, counted apart)."""
    return "", line[21:22]


def _cif_model_chain(lines: list[str]):
    """The (model, chain) of an mmCIF atom row by its ``_atom_site`` columns: Biopython's chain
    (``auth_asym_id``, else ``label_asym_id``) and ``pdbx_PDB_model_num``; None without a chain
    column."""
    names = [line.strip() for line in lines if line.startswith("_atom_site.")]
    chain = next((names.index(f"_atom_site.{name}") for name in ("auth_asym_id", "label_asym_id")
                  if f"_atom_site.{name}" in names), None)
    model = names.index("_atom_site.pdbx_PDB_model_num") if "_atom_site.pdbx_PDB_model_num" in names else None
    if chain is None:
        return None

    def model_chain(line: str) -> tuple[str, str]:
        fields = line.split()
        return (fields[model] if model is not None and model < len(fields) else "",
                fields[chain] if chain < len(fields) else "")

    return model_chain


class BoundedBuilder(StructureBuilder):
    """Biopython's builder, stopped with a ``StructureError`` at the first atom, model or chain (of
    one model) past the limits (so a parse never holds more than ``max_atoms`` atom objects)."""

    def __init__(self, name: str, max_atoms: int | None, max_models: int | None, max_chains: int | None = None):
        super().__init__()
        self.name, self.max_atoms, self.max_models, self.max_chains = name, max_atoms, max_models, max_chains
        self.atoms = self.models = self.chains = 0

    def init_model(self, *args, **kwargs):
        self.models += 1
        self.chains = 0
        if self.max_models is not None and self.models > self.max_models:
            raise _too_many(self.name, "models", self.max_models)
        super().init_model(*args, **kwargs)

    def init_chain(self, chain_id, *args, **kwargs):
        if len(str(chain_id)) > MAX_CHAIN_ID_CHARS:
            raise StructureError(f"{self.name} has a chain id of {len(str(chain_id)):,} characters "
                                 f"({str(chain_id)[:8]!r}…); chain ids of up to {MAX_CHAIN_ID_CHARS} are read")
        self.chains += 1  # a chain id met again later in the model counts again: a bound, not a count
        if self.max_chains is not None and self.chains > self.max_chains:
            raise _too_many(self.name, "chains", self.max_chains)
        super().init_chain(chain_id, *args, **kwargs)

    def init_atom(self, *args, **kwargs):
        self.atoms += 1
        if self.max_atoms is not None and self.atoms > self.max_atoms:
            raise _too_many(self.name, "atoms", self.max_atoms)
        super().init_atom(*args, **kwargs)
