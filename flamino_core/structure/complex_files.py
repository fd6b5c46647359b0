"""A predicted complex (``FoldedComplex``, ESMFold2) as files: mmCIF (always possible), PDB (where
the complex fits the format) and a JSON of its confidences (pLDDT per residue, PAE, pTM, ipTM and
the chain-pair ipTM matrix).

Both structure files carry every atom's own pLDDT x 100 (0-100, as AlphaFold's and ESMFold's files
do and as viewers colour by it) in the B-factor column; chains are lettered A, B, ... from the
reference's ``asym_id`` (0, 1, ...), residues numbered from 1 in each chain. The mmCIF is written
here, not by Biopython's MMCIFIO, so that no user text reaches it unescaped: the data block name is
the name reduced to letters, digits, '.', '-' and '_'; record names (entity descriptions, the
title) are quoted as CIF requires, with control characters replaced. Biopython's ``MMCIFParser``
reads the file back (tests/integration/test_esmfold2_cli.py checks chains, residues and B-factors).
"""

from __future__ import annotations

import json
import re

import numpy as np

from flamino_core.model.esmfold2.folded import FoldedComplex

PDB_MAX_ATOMS = 99_999  # the serial-number field is five columns wide
PDB_MAX_RESIDUES = 9_999  # the residue-number field is four
_CIF_RESERVED = re.compile(r"^(data_|loop_|save_|global_|stop_)", re.IGNORECASE)


def block_name(name: str) -> str:
    """A CIF data block name from ``name``: letters, digits, '.', '-' and '_' only (others as '_')."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)[:80] or "prediction"


def cif_value(text: str) -> str:
    """``text`` as one CIF value: bare where CIF allows, else quoted, else a text field. Control
    characters (a newline among them) become spaces first, so a value stays on its line."""
    text = re.sub(r"[\x00-\x1f\x7f]", " ", str(text))
    if not text:
        return "?"
    bare = not re.search(r"\s", text) and text[0] not in "_#$'\"[];" and text not in (".", "?")
    if bare and not _CIF_RESERVED.match(text):
        return text
    if "'" not in text:
        return f"'{text}'"
    if '"' not in text:
        return f'"{text}"'
    return f"\n;{text}\n;"  # a text field: ends only at a line starting with ';', which the text cannot hold


def _entities(folded: FoldedComplex) -> tuple[list[str], list[int]]:
    """The distinct sequences (entities, in order of first appearance) and each chain's entity (from 1),
    as the featuriser numbers ``entity_id``."""
    distinct: list[str] = []
    for sequence in folded.sequences:
        if sequence not in distinct:
            distinct.append(sequence)
    return distinct, [distinct.index(sequence) + 1 for sequence in folded.sequences]


def _wrapped(sequence: str, width: int = 80) -> str:
    return "\n;" + "\n".join(sequence[i:i + width] for i in range(0, len(sequence), width)) + "\n;"


def to_mmcif(folded: FoldedComplex, title: str) -> str:
    """The complex as mmCIF text (atom_site with label and auth fields, entities, chains, a title)."""
    name = block_name(folded.name)
    distinct, entity_of = _entities(folded)
    lines = [f"data_{name}", "#", f"_entry.id {name}", "#", f"_struct.title {cif_value(title)}", "#"]
    lines += ["loop_", "_entity.id", "_entity.type", "_entity.pdbx_description"]
    for number, sequence in enumerate(distinct, 1):
        names = [folded.chain_names[c] for c, entity in enumerate(entity_of) if entity == number]
        lines.append(f"{number} polymer {cif_value(', '.join(dict.fromkeys(names)))}")
    lines += ["#", "loop_", "_entity_poly.entity_id", "_entity_poly.type", "_entity_poly.pdbx_strand_id",
              "_entity_poly.pdbx_seq_one_letter_code_can"]
    for number, sequence in enumerate(distinct, 1):
        strands = ",".join(folded.chain_ids[c] for c, entity in enumerate(entity_of) if entity == number)
        lines.append(f"{number} polypeptide(L) {strands}{_wrapped(sequence)}")
    lines += ["#", "loop_", "_struct_asym.id", "_struct_asym.entity_id"]
    lines += [f"{chain} {entity}" for chain, entity in zip(folded.chain_ids, entity_of)]
    fields = ["group_PDB", "id", "type_symbol", "label_atom_id", "label_alt_id", "label_comp_id", "label_asym_id",
              "label_entity_id", "label_seq_id", "pdbx_PDB_ins_code", "Cartn_x", "Cartn_y", "Cartn_z", "occupancy",
              "B_iso_or_equiv", "pdbx_formal_charge", "auth_seq_id", "auth_comp_id", "auth_asym_id",
              "auth_atom_id", "pdbx_PDB_model_num"]
    lines += ["#", "loop_"] + [f"_atom_site.{field}" for field in fields]
    residues = folded.residues()
    for serial, ((chain, token, residue, atom), xyz, plddt) in enumerate(
            zip(folded.atoms(), folded.positions, folded.plddt_atoms), 1):
        number, chain_id = residues[token][1], folded.chain_ids[chain]
        lines.append(f"ATOM {serial} {atom[0]} {atom} . {residue} {chain_id} {entity_of[chain]} {number} ? "
                     f"{xyz[0]:.3f} {xyz[1]:.3f} {xyz[2]:.3f} 1.00 {100 * plddt:.2f} ? {number} {residue} "
                     f"{chain_id} {atom} 1")
    lines += ["#", ""]
    return "\n".join(lines)


def pdb_problem(folded: FoldedComplex) -> str | None:
    """Why the complex does not fit a PDB file, or None where it does."""
    atoms = len(folded.positions) + len(folded.sequences)  # each chain's TER takes a serial number
    if atoms > PDB_MAX_ATOMS:
        return f"{atoms:,} atoms and chain ends; PDB numbers {PDB_MAX_ATOMS:,} at most (the mmCIF file has them all)"
    longest = max(len(sequence) for sequence in folded.sequences)
    if longest > PDB_MAX_RESIDUES:
        return f"a chain of {longest:,} residues; PDB numbers {PDB_MAX_RESIDUES:,} at most per chain"
    return None


def to_pdb(folded: FoldedComplex, title: str) -> str:
    """The complex as PDB text (ValueError where it does not fit: ``pdb_problem``)."""
    problem = pdb_problem(folded)
    if problem:
        raise ValueError(f"{folded.name}: {problem}")
    clean = re.sub(r"[\x00-\x1f\x7f]", " ", title)
    lines = [f"TITLE     {clean}"[:80]]
    residues, serial, previous = folded.residues(), 1, None
    for (chain, token, residue, atom), xyz, plddt in zip(folded.atoms(), folded.positions, folded.plddt_atoms):
        if previous is not None and previous[0] != chain:
            lines.append(_ter(serial, previous, folded))
            serial += 1
        number = residues[token][1]
        name = atom if len(atom) == 4 else f" {atom}"
        lines.append(f"ATOM  {serial:>5} {name:<4} {residue:>3} {folded.chain_ids[chain]}{number:>4}    "
                     f"{xyz[0]:>8.3f}{xyz[1]:>8.3f}{xyz[2]:>8.3f}{1.0:>6.2f}{100 * plddt:>6.2f}          "
                     f"{atom[0]:>2}")
        serial += 1
        previous = (chain, number, residue)
    if previous is not None:
        lines.append(_ter(serial, previous, folded))
    return "\n".join(lines + ["END", ""])


def _ter(serial: int, previous: tuple[int, int, str], folded: FoldedComplex) -> str:
    chain, number, residue = previous
    return f"TER   {serial:>5}      {residue:>3} {folded.chain_ids[chain]}{number:>4}"


def confidences_json(folded: FoldedComplex, model: str = "") -> str:
    """The fold's confidences as JSON: the model that made them (a test model says it is not
    biology), pLDDT (0-100) per residue, PAE (Angstrom, residues x residues), pTM, ipTM, the
    chain-pair ipTM matrix (rows and columns in ``chain_ids`` order)."""
    return json.dumps({
        "name": folded.name, "model": model,
        "chain_ids": list(folded.chain_ids), "chain_names": list(folded.chain_names),
        "mean_plddt": round(100 * folded.complex_plddt, 2), "ptm": round(folded.ptm, 4),
        "iptm": round(folded.iptm, 4), "sample": folded.sample, "samples": folded.samples,
        "chain_pair_iptm": np.round(folded.chain_pair_iptm, 4).tolist(),
        "plddt": np.round(100 * folded.plddt, 2).tolist(), "pae": np.round(folded.pae, 2).tolist(),
    })
