"""ESMFold2's input features in NumPy: transformers' ``protein_utils.prepare_protein_features``
(one protein chain) extended to a complex of protein chains, with the reference's key names,
dtypes and shapes (a leading batch axis of 1), so the same dict feeds flamino's network and, as
tensors, transformers' ``EsmFold2Model.fold``.

One chain gives exactly the reference's arrays (tests/parity/test_esmfold2_features.py compares them
array by array). Several chains follow the conventions the reference's inputs document
(``EsmFold2Model.forward``) and that its relative-position encoding and confidence head read
(AlphaFold 3's): tokens are the chains' residues one after another; ``asym_id`` numbers the
chains 0, 1, ... in order (the confidence head's chain-pair ipTM matrix and ``output_to_pdb``'s
chain letters index by it); ``entity_id`` numbers the distinct sequences from 1 in order of first
appearance (one chain: 1, as the reference); ``sym_id`` counts the copies of one sequence from 0
(a homodimer's chains are 0 and 1; the encoding reads the clipped difference of ``sym_id`` between
chains); ``residue_index`` restarts at 0 in each chain; ``token_index`` and ``ref_space_uid`` run
over the whole complex (unique per residue). The atoms of every chain are padded together to a
multiple of 32, as the reference pads one chain's. ``token_bonds`` stays zero: the reference's
featuriser sets no bond for a polymer (peptide bonds are implied by the relative positions).

What is refused, before any work: an empty chain, a character that is not a letter (a gap, a
stop), and molecules other than protein. DNA and RNA need reference conformers that the reference
package does not ship for them (its nucleotide definitions come from a component dictionary
distributed as a pickle, which flamino never unpickles); ligands likewise.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import numpy as np

from flamino_core.inputs.fasta_records import CHAIN_LETTERS
from flamino_core.model.esmfold2.residues import (CHARGED_ATOMS, ELEMENT_TO_ATOMIC_NUMBER, ESM_VOCAB, HEAVY_ATOMS,
                                                  ONE_TO_THREE, REF_POS, RES_TYPE, UNK_RES_TYPE)

MOL_TYPE_PROTEIN = 0  # the reference's codes: 0 protein, 1 DNA, 2 RNA, 3 non-polymer
ATOM_PAD = 32  # the reference pads the atom axis to a multiple of 32 (the atom attention's window blocks)
CHAIN_IDS = CHAIN_LETTERS  # as output_to_pdb's tags; the A:B notation's letters (inputs.fasta_records)
MOLECULE_REFUSALS = {
    "dna": "DNA chains are not supported: the reference's nucleotide conformers come from a component "
           "dictionary shipped as a pickle, which flamino does not unpickle",
    "rna": "RNA chains are not supported: the reference's nucleotide conformers come from a component "
           "dictionary shipped as a pickle, which flamino does not unpickle",
    "ligand": "ligands are not supported: their reference conformers come from a component dictionary shipped "
              "as a pickle, which flamino does not unpickle",
}


@dataclasses.dataclass(frozen=True)
class Chain:
    """One chain of a complex: its residues as one-letter codes and its molecule type."""

    sequence: str
    molecule: str = "protein"  # 'protein'; 'dna', 'rna' and 'ligand' are refused (MOLECULE_REFUSALS)


def check_chains(chains: Sequence[Chain | str], name: str = "input") -> list[Chain]:
    """The chains as ``Chain``s (upper case), or ValueError naming ``name``, the chain and the position
    of the first problem. Nothing else is computed first, so a refusal costs nothing."""
    out = [chain if isinstance(chain, Chain) else Chain(chain) for chain in chains]
    if not out:
        raise ValueError(f"{name}: no chain to fold")
    if len(out) > len(CHAIN_IDS):
        raise ValueError(f"{name}: {len(out)} chains; flamino names at most {len(CHAIN_IDS)} (one character each)")
    checked = []
    for number, chain in enumerate(out):
        where = f"{name}, chain {CHAIN_IDS[number]}" if len(out) > 1 else name
        if chain.molecule != "protein":
            reason = MOLECULE_REFUSALS.get(chain.molecule, f"molecule type {chain.molecule!r} is not supported")
            raise ValueError(f"{where}: {reason}; ESMFold2 in flamino folds protein chains only")
        if not chain.sequence:
            raise ValueError(f"{where}: an empty chain has no structure to predict")
        for position, letter in enumerate(chain.sequence, 1):
            if not (letter.isascii() and letter.isalpha()):
                raise ValueError(f"{where}: position {position}: {letter!r} is not an amino-acid letter")
        checked.append(Chain(chain.sequence.upper(), chain.molecule))
    return checked


def chain_identities(sequences: Sequence[str]) -> tuple[list[int], list[int]]:
    """``(entity_id, sym_id)`` per chain: identical sequences share an entity (numbered from 1 in order
    of first appearance) and are told apart by ``sym_id`` (0, 1, ... per entity)."""
    entities: dict[str, int] = {}
    copies: dict[str, int] = {}
    entity_ids, sym_ids = [], []
    for sequence in sequences:
        entity_ids.append(entities.setdefault(sequence, len(entities) + 1))
        sym_ids.append(copies.get(sequence, 0))
        copies[sequence] = sym_ids[-1] + 1
    return entity_ids, sym_ids


def _encode_atom_name(name: str) -> list[int]:
    # The reference's encoding: four characters, ASCII minus 32, blanks as 0.
    return [ord(c) - 32 if c != " " else 0 for c in name.ljust(4)[:4]]


def prepare_features(chains: Sequence[Chain | str], name: str = "input") -> dict[str, np.ndarray]:
    """The feature dict of a complex (one chain: ``prepare_protein_features``'s arrays exactly).

    Args:
      chains: the chains in order (strings are protein chains); letters outside the twenty fold as
        unknown (``UNK``: backbone atoms only, at the origin, as the reference does).
      name: what error messages call the input (a FASTA record's id).

    Returns:
      NumPy arrays under the reference's keys, each with a leading batch axis of 1.
    """
    chains = check_chains(chains, name)
    entity_ids, sym_ids = chain_identities([chain.sequence for chain in chains])
    token_chain, residue_index, res_type, input_ids = [], [], [], []
    atoms: list[tuple[int, str, str]] = []  # (token, residue, atom name)
    distogram_atom_idx = []
    for number, chain in enumerate(chains):
        for position, letter in enumerate(chain.sequence):
            token = len(token_chain)
            residue = ONE_TO_THREE.get(letter, "UNK")
            names = HEAVY_ATOMS[residue]
            # The distogram's representative atom: CB, CA where there is none (glycine, unknown).
            distogram_atom_idx.append(len(atoms) + names.index("CB" if "CB" in names else "CA"))
            atoms += [(token, residue, atom) for atom in names]
            token_chain.append(number)
            residue_index.append(position)
            res_type.append(RES_TYPE.get(residue, UNK_RES_TYPE))
            input_ids.append(ESM_VOCAB.get(letter, ESM_VOCAB["X"]))
    tokens = len(token_chain)
    atom_arrays = _atom_arrays(atoms)
    chain_of = np.asarray(token_chain, np.int64)
    res_type_arr = np.asarray(res_type, np.int64)
    features = {
        "token_index": np.arange(tokens, dtype=np.int64),
        "residue_index": np.asarray(residue_index, np.int64),
        "asym_id": chain_of,
        "sym_id": np.asarray(sym_ids, np.int64)[chain_of],
        "entity_id": np.asarray(entity_ids, np.int64)[chain_of],
        "mol_type": np.full(tokens, MOL_TYPE_PROTEIN, np.int64),
        "res_type": res_type_arr,
        "input_ids": np.asarray(input_ids, np.int64),
        "token_bonds": np.zeros((tokens, tokens, 1), np.float32),
        "attention_mask": np.ones(tokens, bool),
        **atom_arrays,
        "distogram_atom_idx": np.asarray(distogram_atom_idx, np.int64),
        # A single-sequence MSA (depth 1: the query itself), as the reference's featuriser writes.
        "msa": res_type_arr[None],
        "msa_attention_mask": np.ones((1, tokens), bool),
        "has_deletion": np.zeros((1, tokens), bool),
        "deletion_value": np.zeros((1, tokens), np.float32),
        "deletion_mean": np.zeros(tokens, np.float32),
    }
    return {key: value[None] for key, value in features.items()}


def _atom_arrays(atoms: list[tuple[int, str, str]]) -> dict[str, np.ndarray]:
    """The per-atom arrays of ``(token, residue, atom name)`` records, padded to a multiple of 32."""
    n_atoms = math.ceil(len(atoms) / ATOM_PAD) * ATOM_PAD
    out = {"ref_pos": np.zeros((n_atoms, 3), np.float32), "ref_element": np.zeros(n_atoms, np.int64),
           "ref_charge": np.zeros(n_atoms, np.int8), "ref_atom_name_chars": np.zeros((n_atoms, 4), np.int64),
           "ref_space_uid": np.zeros(n_atoms, np.int64), "atom_attention_mask": np.zeros(n_atoms, bool),
           "atom_to_token": np.zeros(n_atoms, np.int64)}
    for i, (token, residue, atom) in enumerate(atoms):
        out["ref_pos"][i] = REF_POS[residue][atom]
        out["ref_element"][i] = ELEMENT_TO_ATOMIC_NUMBER[atom[0]]
        out["ref_charge"][i] = CHARGED_ATOMS.get((residue, atom), 0)
        out["ref_atom_name_chars"][i] = _encode_atom_name(atom)
        out["ref_space_uid"][i] = token  # the atom's group: its token, unique over the complex
        out["atom_attention_mask"][i] = True
        out["atom_to_token"][i] = token
    return out


def atom_names(features: dict[str, np.ndarray]) -> list[str]:
    """Each real atom's name, decoded from ``ref_atom_name_chars`` (the reference's inverse)."""
    chars = features["ref_atom_name_chars"][0][features["atom_attention_mask"][0]]
    return ["".join(chr(int(c) + 32) if c else " " for c in row).strip() for row in chars]
