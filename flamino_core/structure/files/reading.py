"""Reading protein structures (PDB or mmCIF, plain or gzipped) into per-chain residue arrays.

Biopython does the parsing (``Bio.PDB.PDBParser`` / ``MMCIFParser``). This module decides what
counts as an amino acid, which atom stands for a residue in a contact, and turns everything a
real file can throw at a parser into a ``StructureError`` with a message a biologist can act on.

What a chain's residues are:
  * water is dropped; ions, ligands, caps and nucleotides are counted and reported, never used;
  * an amino acid is a residue whose name is in Biopython's PDB table of (modified) amino acids
    (``MSE`` is read as M, ``SEP`` as S ...) or, for a name the table lacks, one that carries the
    N, CA and C backbone atoms (read as ``X``, e.g. 5-phenyl-norvaline ``PH8`` in 2N0N);
  * an amino acid without a C-alpha atom cannot be placed and is left out, with a note (and is
    listed as such, not among the ligands);
  * a letter ESM-2 has no token for (``XLE`` -> J, leucine or isoleucine) is read as ``X``, with a
    note, so every residue read is one the aligner and the model take;
  * alternate locations: Biopython keeps, for each atom, the location with the highest occupancy;
  * microheterogeneity (two residue types at one position, e.g. 3JQH residue 1 PRO 0.83 / SER
    0.17): the type with the highest occupancy is read (Biopython selects the last one listed),
    with a note;
  * residue numbers and insertion codes are kept as labels (``52``, ``184A``) and are never used
    as sequence positions: ``structure_align`` aligns the residues to the sequence.
"""

from __future__ import annotations

import dataclasses
import io
import os
import re
import stat
from collections import Counter
from pathlib import Path

import numpy as np
from Bio.PDB import MMCIFParser, PDBParser
from Bio.PDB.Structure import Structure

from flamino_core.inputs.formats import TooLarge, Unreadable, gunzip
from flamino_core.structure.files.amino_acids import SpecialResidues, is_amino_acid, lacks_ca, listed_counts
from flamino_core.structure.contact_atoms import contact_atom
from flamino_core.structure.files.limits import BoundedBuilder, StructureError, check_counts

MAX_STRUCTURE_BYTES = 200 * 1024 * 1024  # decompressed; guards against gzip bombs

@dataclasses.dataclass(frozen=True)
class ChainSummary:
    """One chain of one model, as listed to the user before any choice is made."""

    chain_id: str
    n_amino_acids: int
    others: dict[str, int]  # residue name -> count, water as "HOH" (ligands, ions, caps, nucleotides)
    no_ca: dict[str, int] = dataclasses.field(default_factory=dict)  # amino acids without a C-alpha (left out)

    @property
    def is_protein(self) -> bool:
        return self.n_amino_acids > 0

    def describe(self) -> str:
        """``chain E: 82 amino acids; also SO4 x2, water x74``."""
        parts = [f"{self.n_amino_acids} amino acids" if self.is_protein else "no amino acids"]
        if self.no_ca:
            parts.append(f"left out, without a C-alpha atom: {listed_counts(Counter(self.no_ca))}")
        if self.others:
            listed = ", ".join(
                f"{'water' if name == 'HOH' else name} x{count}" for name, count in self.others.items()
            )
            parts.append(f"also {listed}")
        return f"chain {self.chain_id}: " + "; ".join(parts)


@dataclasses.dataclass(frozen=True)
class ParsedStructure:
    """A parsed file: the Biopython structure plus what the user needs to choose from."""

    name: str
    file_format: str  # "PDB" or "mmCIF"
    structure: Structure  # never modified by flamino (the app caches it); export works on copies

    @property
    def n_models(self) -> int:
        return len(self.structure)

    def model(self, model_index: int = 0):
        """The Biopython model at a 0-based index; a StructureError names the valid range."""
        if not 0 <= model_index < self.n_models:
            raise StructureError(
                f"{self.name} has {self.n_models} model(s), numbered 0..{self.n_models - 1}; "
                f"there is no model {model_index}"
            )
        return self.structure.child_list[model_index]

    def chains(self, model_index: int = 0) -> list[ChainSummary]:
        """Every chain of a model in file order, protein or not."""
        return [_summarise(chain) for chain in self.model(model_index)]


@dataclasses.dataclass(frozen=True, eq=False)  # holds arrays: compare fields, not objects
class ChainResidues:
    """The amino acids of one chain, in file order, with the coordinates the analyses use."""

    chain_id: str
    model_index: int
    residue_ids: tuple[tuple[str, int, str], ...]  # Biopython ids (hetero flag, number, insertion code)
    names: tuple[str, ...]  # three-letter names as in the file (MSE, AIB ...)
    sequence: str  # one letter per residue; X for an amino acid Biopython's table lacks
    ca: np.ndarray  # (N, 3) C-alpha coordinates, Angstrom
    contact_xyz: np.ndarray  # (N, 3) C-beta, C-alpha for glycine, or a stand-in (see contact_atom)
    contact_atom: tuple[str, ...]  # CB, GLY_CA, VIRTUAL_CB or CA_ONLY for each residue
    notes: tuple[str, ...] = ()  # what was read specially (modified residues, left-out residues)

    def __len__(self) -> int:
        return len(self.sequence)

    @property
    def labels(self) -> list[str]:
        """Residue numbers as the file writes them, with the insertion code: ``52``, ``184A``."""
        return [residue_label(rid) for rid in self.residue_ids]


def residue_label(residue_id: tuple[str, int, str]) -> str:
    """``(' ', 184, 'A')`` -> ``184A``."""
    return f"{residue_id[1]}{residue_id[2].strip()}"


# --- reading ------------------------------------------------------------------------------------
def read_structure(
    path: str | os.PathLike, max_bytes: int = MAX_STRUCTURE_BYTES, *, max_atoms: int | None = None,
    max_models: int | None = None, max_chains: int | None = None,
) -> ParsedStructure:
    """Read a PDB or mmCIF file from disk (``.gz`` or not; the format is read from the content).

    Only a regular file is opened (never a device such as ``/dev/zero``, a pipe or a folder), and
    at most ``max_bytes`` of it are read, whatever its size claims.

    Raises:
      StructureError: a missing, unreadable or over-large file, or one that is not a structure.
    """
    path = Path(path)
    try:
        # Non-blocking: opening a named pipe would otherwise wait for a writer, forever.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            os.close(descriptor)
            raise StructureError(f"{path.name or path} is not a regular file (a device, a pipe or a folder)")
        with os.fdopen(descriptor, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as err:
        raise StructureError(f"cannot read {path}: {err.strerror or err}") from None
    if len(data) > max_bytes:
        raise StructureError(f"{path.name} is larger than {max_bytes:,} bytes, the limit")
    return parse_structure_bytes(data, path.name, max_bytes=max_bytes, max_atoms=max_atoms, max_models=max_models,
                                 max_chains=max_chains)


def parse_structure_bytes(
    data: bytes, name: str = "upload", max_bytes: int = MAX_STRUCTURE_BYTES, *, max_atoms: int | None = None,
    max_models: int | None = None, max_chains: int | None = None,
) -> ParsedStructure:
    """Parse the bytes of a PDB or mmCIF file (an upload, a download), gzipped or not.

    Args:
      data: the file's bytes.
      name: what to call the file in messages (its file name).
      max_bytes: refuse files (after decompression) larger than this; gzip data is inflated a
        chunk at a time and refused as soon as it passes (``input_formats.gunzip``).
      max_atoms, max_models: refuse structures with more (None: any). Counted in the text
        before Biopython runs (ATOM/HETATM and MODEL lines), and again as Biopython builds,
        which stops at the limit: a file that hides its atoms from the first count still never
        builds more than ``max_atoms`` objects.
      max_chains: refuse a model with more chains (None: any), counted in the text before
        Biopython runs and again as it builds them.

    Returns:
      A ``ParsedStructure`` with at least one model and one atom.

    Raises:
      StructureError: the bytes are not a PDB or mmCIF structure, with what they look like, or
        they pass one of the limits.
    """
    if data[:2] == b"\x1f\x8b":
        data = _gunzip(data, name, max_bytes)
    if len(data) > max_bytes:
        raise StructureError(f"{name} is {len(data):,} bytes; the limit is {max_bytes:,}")
    text = _decoded(data)
    file_format = _sniff_format(text, name)
    check_counts(text, name, file_format, max_atoms, max_models, max_chains)
    builder = BoundedBuilder(name, max_atoms, max_models, max_chains)
    if file_format == "mmCIF":
        parser = MMCIFParser(structure_builder=builder, QUIET=True)
    else:
        parser = PDBParser(structure_builder=builder, QUIET=True)
    stem = block_name(name.split(".")[0])
    try:
        structure = parser.get_structure(stem, io.StringIO(text))
    except StructureError:
        raise
    except Exception as err:  # Biopython raises many kinds on damaged files; all mean the same here
        raise StructureError(f"{name} looks like {file_format} but could not be read: {err}") from None
    if len(structure) == 0 or not any(True for _ in structure.get_atoms()):
        raise StructureError(f"{name} has no atom records: it is not a structure file")
    broken = next((atom for atom in structure.get_atoms() if not np.isfinite(atom.coord).all()), None)
    if broken is not None:
        residue = broken.get_parent()
        raise StructureError(
            f"{name}: atom {broken.get_id()} of {residue.get_resname()} {residue_label(residue.id)} "
            f"(chain {residue.get_parent().id}) has coordinates that are not finite numbers"
        )
    return ParsedStructure(name, file_format, structure)


def count_atom_lines(data: bytes, max_bytes: int = MAX_STRUCTURE_BYTES) -> int:
    """The atoms a structure file's text holds (its ATOM/HETATM lines, as ``check_counts`` counts
    them), gzip inflated within ``max_bytes`` (past it: that many, the parse refuses the file): what
    an upload is charged before it is parsed (the app's atom budget per upload and session)."""
    if data[:2] == b"\x1f\x8b":
        try:
            data = gunzip(data, max_bytes)
        except (TooLarge, Unreadable):
            return 0  # the parse refuses it in its own words, having built nothing
    return sum(data.startswith(tag) + data.count(b"\n" + tag) for tag in (b"ATOM", b"HETATM"))


def block_name(text: str) -> str:
    """``text`` as an mmCIF data block name (Biopython's MMCIFIO writes ``data_`` + the structure's
    id): letters, digits, ``_``, ``-`` and ``.`` kept, anything else ``_``, at most 40 characters.
    A visitor's record name became ``data_=HYPERLINK(...)<img`` (issue #67): blanks, quotes or a
    ``#`` there end the name or start a comment for every mmCIF reader after."""
    kept = re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:40]
    return kept if kept.strip("_") else "structure"


def _decoded(data: bytes) -> str:
    """The file's text: UTF-8 (mmCIF's encoding since its 2.0 syntax; ASCII is UTF-8), else Latin-1
    (an old PDB file's odd byte), which never fails. Read as Latin-1 always, a U+202E chain id
    became three characters of mojibake (issue #67)."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _gunzip(data: bytes, name: str, max_bytes: int) -> bytes:
    try:
        return gunzip(data, max_bytes)
    except TooLarge:
        raise StructureError(f"{name} decompresses to more than {max_bytes:,} bytes; "
                             f"the limit is {max_bytes:,}") from None
    except Unreadable:
        raise StructureError(f"{name} is a damaged or truncated gzip file") from None


def _sniff_format(text: str, name: str) -> str:
    """'PDB' or 'mmCIF' from the content; a StructureError saying what the text is otherwise."""
    head = text[:200_000]
    lines = [line for line in head.splitlines()[:2000] if line.strip()]
    first = lines[0].lstrip() if lines else ""
    if first.startswith("data_") or "\n_atom_site." in head or "\nloop_" in head:
        if "_atom_site." not in text:
            raise StructureError(f"{name} is an mmCIF file without atom coordinates (_atom_site); "
                                 "it may be a dictionary or a chemical component file")
        return "mmCIF"
    if any(line.startswith(("ATOM  ", "HETATM")) for line in text.splitlines()):
        return "PDB"
    if first.startswith(">"):
        hint = "a FASTA file (sequences, no coordinates)"
    elif "\x00" in head or sum(ch < " " and ch not in "\r\n\t" for ch in head[:4096]) > 8:
        hint = "a binary file (BinaryCIF, MMTF, an archive?); save the structure as PDB or mmCIF"
    elif not lines:
        hint = "empty"
    else:
        hint = "a text file without ATOM/HETATM records or an mmCIF _atom_site table"
    raise StructureError(f"{name} is not a PDB or mmCIF structure: it is {hint}")


# --- chains -------------------------------------------------------------------------------------
def _summarise(chain) -> ChainSummary:
    others: Counter = Counter()
    no_ca: Counter = Counter()
    n_amino = 0
    for residue in chain:
        if is_amino_acid(residue):
            n_amino += 1
        elif lacks_ca(residue):
            no_ca[residue.get_resname().strip().upper()] += 1
        else:
            others["HOH" if residue.id[0] == "W" else residue.get_resname().strip()] += 1
    return ChainSummary(chain.id, n_amino, dict(others), dict(no_ca))


def _major_form(residue):
    """The residue type with the highest mean atom occupancy where two or more share a position
    (microheterogeneity, a ``DisorderedResidue``), else the residue; and a note when one was chosen.

    Read from the forms without selecting one: the parsed structure stays as Biopython built it.
    """
    if residue.is_disordered() != 2:
        return residue, ""
    forms = {name: residue.child_dict[name] for name in residue.disordered_get_id_list()}
    occupancy = {name: float(np.mean([atom.get_occupancy() or 0.0 for atom in form])) for name, form in forms.items()}
    best = max(forms, key=lambda name: occupancy[name])  # the first listed on a tie
    listed = " / ".join(f"{name} {occupancy[name]:.2f}" for name in forms)
    return forms[best], f"{residue_label(residue.id)} ({listed}): {best}"


def chain_residues(parsed: ParsedStructure, chain_id: str, model_index: int = 0) -> ChainResidues:
    """The amino acids of one chain of one model, with C-alpha and contact-atom coordinates.

    Args:
      parsed: from ``parse_structure_bytes`` / ``read_structure``.
      chain_id: the chain identifier as the file writes it (author chain id in mmCIF).
      model_index: 0-based model (NMR files have several; the first by default).

    Raises:
      StructureError: the model or chain does not exist, or the chain holds no amino acid (the
        message lists the chains there are, and what the asked one holds).
    """
    chain = _protein_chain(parsed, chain_id, model_index)
    ids, names, letters, ca, contact, kinds = [], [], [], [], [], []
    special = SpecialResidues()
    for position in chain:
        residue, chosen = _major_form(position)
        name = residue.get_resname().strip().upper()
        if lacks_ca(residue):
            special.no_ca.append(f"{name} {residue_label(residue.id)}")
            continue
        if not is_amino_acid(residue):
            continue
        if chosen:
            special.mixed.append(chosen)
        letter = special.letter_for(name)
        xyz, kind = contact_atom(residue, letter)
        ids.append(residue.id)
        names.append(name)
        letters.append(letter)
        ca.append(residue["CA"].coord)
        contact.append(xyz)
        kinds.append(kind)
    return ChainResidues(
        chain_id=chain_id,
        model_index=model_index,
        residue_ids=tuple(ids),
        names=tuple(names),
        sequence="".join(letters),
        ca=np.array(ca, dtype=np.float64).reshape(-1, 3),
        contact_xyz=np.array(contact, dtype=np.float64).reshape(-1, 3),
        contact_atom=tuple(kinds),
        notes=tuple(special.notes(kinds)),
    )


def _protein_chain(parsed: ParsedStructure, chain_id: str, model_index: int):
    """The Biopython chain, or a StructureError when it is absent or holds no amino acid."""
    model = parsed.model(model_index)
    if chain_id not in model:
        listing = "; ".join(summary.describe() for summary in parsed.chains(model_index))
        raise StructureError(f"{parsed.name} has no chain {chain_id!r} in model {model_index}. Chains: {listing}")
    chain = model[chain_id]
    summary = _summarise(chain)
    if not summary.is_protein:
        raise StructureError(f"{parsed.name}, {summary.describe()}: not a protein chain")
    return chain


def protein_chains(parsed: ParsedStructure, model_index: int = 0) -> list[ChainResidues]:
    """Every chain of a model that holds at least one amino acid, in file order."""
    return [
        chain_residues(parsed, summary.chain_id, model_index)
        for summary in parsed.chains(model_index)
        if summary.is_protein
    ]
