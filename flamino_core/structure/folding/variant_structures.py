"""A variant's structure beside the wild type's: both folded by one model with one setting,
superposed (Kabsch on the C-alpha atoms of the aligned residues), compared residue by residue:
the C-alpha displacement after superposition, the pLDDT difference, and contacts gained and lost.

What a reader must be told where the result is shown (``CAVEAT``): structure predictors barely
respond to point mutations. AlphaFold 3's coordinates stay put with up to 40% of the residues
mutated (Feldman, Brogi and Skolnick 2026); ESMFold responds more, but imperfectly. A small
displacement here is what the folder did, not evidence that the variant keeps the structure.

Variants are substitutions (one or several, ``A23V:G45D``): the variant has the wild type's
length, so residue i of one is aligned to residue i of the other and every residue takes part
in the superposition. Indels, stops and frameshifts are refused (their alignment is not the
identity; fold them as records of their own with ``flamino fold``).

Contacts are those of ``contacts.true_contacts``: contact atoms (C-beta; C-alpha for glycine)
closer than 8 A, residues at least 6 apart in the sequence. A residue's "gained" counts the
partners it touches in the variant's fold and not in the wild type's; "lost", the reverse.
"""

from __future__ import annotations

import dataclasses
import io

import numpy as np
import pandas as pd

from flamino_core.model.esmfold import residue_constants as rc
from flamino_core.numbering import Numbering

CAVEAT = ("Structure predictors barely respond to point mutations: AlphaFold 3's coordinates stay put with up to "
          "40% of the residues mutated (Feldman, Brogi and Skolnick 2026), and ESMFold responds more, but "
          "imperfectly. A small displacement is what the folder did, not evidence that the variant keeps the "
          "structure; a large one is a prediction to test, not a measurement.")
CONTACT_ANGSTROM = 8.0  # as contacts.true_contacts: contact atoms closer than this
MIN_SEPARATION = 6  # |i - j|: the short range's start, as every contact count here
COLUMNS = ["position", "wild_type", "variant", "mutated", "ca_displacement", "plddt_wild_type", "plddt_variant",
           "plddt_difference", "contacts_gained", "contacts_lost"]
_CA, _CB = rc.ATOM_ORDER["CA"], rc.ATOM_ORDER["CB"]


def kabsch(mobile: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rotation R (3, 3) and translation t (3,) that minimise the RMSD of ``mobile @ R.T + t``
    to ``target`` (both (n, 3), n >= 3, in correspondence): Kabsch (1976), with the determinant's
    sign corrected so R is a rotation, never a reflection."""
    mobile, target = np.asarray(mobile, np.float64), np.asarray(target, np.float64)
    if mobile.shape != target.shape or mobile.ndim != 2 or mobile.shape[1] != 3 or len(mobile) < 3:
        raise ValueError(f"superposition needs two (n, 3) sets of n >= 3 points, not {mobile.shape} and "
                         f"{target.shape}")
    mobile_centre, target_centre = mobile.mean(0), target.mean(0)
    h = (mobile - mobile_centre).T @ (target - target_centre)
    u, _, vt = np.linalg.svd(h)
    d = np.sign(np.linalg.det(vt.T @ u.T)) or 1.0
    rotation = vt.T @ np.diag([1.0, 1.0, d]) @ u.T
    return rotation, target_centre - mobile_centre @ rotation.T


def contact_atoms(folded) -> np.ndarray:
    """(L, 3) each residue's contact atom: C-beta, C-alpha for glycine (which has none)."""
    has_cb = folded.atom37_exists[:, _CB] > 0.5
    return np.where(has_cb[:, None], folded.atom37[:, _CB], folded.atom37[:, _CA])


def contact_matrix(xyz: np.ndarray) -> np.ndarray:
    """(L, L) bool: contact atoms closer than ``CONTACT_ANGSTROM``, ``MIN_SEPARATION`` apart or more."""
    distance = np.linalg.norm(xyz[:, None] - xyz[None], axis=-1)
    index = np.arange(len(xyz))
    return (distance < CONTACT_ANGSTROM) & (np.abs(index[:, None] - index[None]) >= MIN_SEPARATION)


@dataclasses.dataclass(frozen=True)
class VariantStructure:
    """One variant's fold compared with the wild type's (both by one model, one setting).

    ``variant``: its name (``E6V``, in the record's numbering); ``folded``: its ``FoldedProtein``
    with the coordinates superposed on the wild type's (``superposed``); ``table``: one row per
    residue (``COLUMNS``); ``rmsd``: C-alpha RMSD after superposition, A."""

    variant: str
    wild_type: object
    folded: object
    table: pd.DataFrame
    rmsd: float

    def describe(self) -> str:
        """``E6V: C-alpha RMSD 0.41 Å over 146 residues; largest displacement 1.2 Å at 7; ...``"""
        t = self.table
        worst = t.loc[t["ca_displacement"].idxmax()]
        mutated = t[t["mutated"]]
        return (f"{self.variant}: C-alpha RMSD {self.rmsd:.2f} Å over {len(t):,} residues after superposition; "
                f"largest displacement {worst['ca_displacement']:.2f} Å at {worst['position']}; at the mutated "
                f"residue(s) {', '.join(f'{d:.2f}' for d in mutated['ca_displacement'])} Å; mean pLDDT "
                f"{t['plddt_variant'].mean():.1f} against {t['plddt_wild_type'].mean():.1f}; contacts gained "
                f"{int(t['contacts_gained'].sum()) // 2}, lost {int(t['contacts_lost'].sum()) // 2}")


def substitution_variants(text: str, sequence: str, numbering: Numbering = Numbering(), author=None) -> list:
    """The variants of ``text`` (``E6V``, ``A23V:G45D``; comma, space or line separated) read on
    ``sequence`` in ``numbering`` (or, given ``author``, a structure's ``AuthorNumbering``, in
    the structure's: S195A on 1GBT): substitutions only.

    Raises:
      ValueError: an entry that cannot be read or is not a substitution, named with the reason.
    """
    from flamino_core.variants.notation import parse_mutations
    from flamino_core.variants.structure_numbering import parse_mutations as in_structure

    variants, issues = (parse_mutations(text, sequence, numbering) if author is None
                        else in_structure(text, sequence, numbering, author))
    if issues:
        raise ValueError("; ".join(issue.message for issue in issues))
    indels = [v.text for v in variants if v.edits]
    if indels:
        raise ValueError(f"{', '.join(indels)}: a variant's structure is compared residue by residue, so only "
                         "substitutions are folded here (fold an indel's sequence as a record of its own)")
    if not variants:
        raise ValueError("no variant given (write them as E6V or A23V:G45D)")
    return variants


def compare(wild_type, folded, variant, numbering: Numbering = Numbering(), author=None) -> VariantStructure:
    """``folded`` (the variant's fold) superposed on ``wild_type`` (the same model's fold of the
    wild type) and compared residue by residue; ``variant``: a ``Variant`` of the wild type;
    ``author``: a structure's numbering of the record (``AuthorNumbering``), given as a
    ``structure_position`` column after ``position`` (1GBT: 195 beside the record's 192)."""
    if len(folded.sequence) != len(wild_type.sequence):
        raise ValueError(f"{variant.mutant}: the variant's fold has {len(folded.sequence)} residues, the wild "
                         f"type's {len(wild_type.sequence)}")
    ca_wt, ca_mt = wild_type.atom37[:, _CA], folded.atom37[:, _CA]
    rotation, shift = kabsch(ca_mt, ca_wt)
    moved = folded.atom37 @ rotation.T + shift
    superposed = dataclasses.replace(folded, atom37=(moved * (folded.atom37_exists[..., None] > 0.5)).astype(
        np.float32))
    displacement = np.linalg.norm(superposed.atom37[:, _CA] - ca_wt, axis=-1)
    before, after = contact_matrix(contact_atoms(wild_type)), contact_matrix(contact_atoms(superposed))
    mutated = np.zeros(len(wild_type.sequence), bool)
    mutated[[s.index for s in variant.substitutions]] = True
    plddt_wt, plddt_mt = 100 * wild_type.residue_plddt, 100 * folded.residue_plddt
    table = pd.DataFrame({
        "position": numbering.number(np.arange(len(mutated))),
        "wild_type": list(wild_type.sequence),
        "variant": list(folded.sequence),
        "mutated": mutated,
        "ca_displacement": displacement.round(3),
        "plddt_wild_type": plddt_wt.round(2),
        "plddt_variant": plddt_mt.round(2),
        "plddt_difference": (plddt_mt - plddt_wt).round(2),
        "contacts_gained": (after & ~before).sum(1),
        "contacts_lost": (before & ~after).sum(1),
    })[COLUMNS]
    if author is not None:
        table.insert(1, "structure_position", list(author.labels))
    rmsd = float(np.sqrt(np.mean(displacement ** 2)))
    return VariantStructure(variant.mutant, wild_type, superposed, table, rmsd)


def fold_variants(fold_one, sequence: str, variants: list, numbering: Numbering = Numbering(), author=None):
    """The wild type and every variant folded by ``fold_one(sequence) -> FoldedProtein`` (one
    model, one setting: ``prediction.predict_stored`` with its model, store and key, so every
    fold is kept like any other), each variant compared with the wild type (``author``: as
    ``compare``'s).

    Returns ``(wild type's FoldedProtein, [VariantStructure, ...])``."""
    wild_type = fold_one(sequence.upper())
    return wild_type, [compare(wild_type, fold_one(v.apply(sequence).upper()), v, numbering, author)
                       for v in variants]


def superposed_pdb(result: VariantStructure, label: str, name: str) -> str:
    """The variant's fold as PDB text in the wild type's frame (pLDDT x 100 in the B-factors,
    a TITLE naming the variant and the model), so both files open superposed in PyMOL/ChimeraX."""
    from flamino_core.structure.folding.prediction import prediction_pdb

    return prediction_pdb(result.folded, label, f"{name} {result.variant}")


def both_chains_pdb(result: VariantStructure, label: str, name: str) -> str:
    """One PDB text with the variant as chain A and the wild type as chain B, superposed: what
    the viewer draws (chain A coloured by a track, chain B in grey)."""
    from Bio.PDB import PDBIO, PDBParser

    from flamino_core.structure.folding.prediction import prediction_pdb

    parser = PDBParser(QUIET=True)
    variant = parser.get_structure("variant", io.StringIO(superposed_pdb(result, label, name)))
    wild = parser.get_structure("wt", io.StringIO(prediction_pdb(result.wild_type, label, name)))
    chain_b = next(wild[0].get_chains())
    chain_b.detach_parent()
    chain_b.id = "B"
    variant[0].add(chain_b)
    out = io.StringIO()
    writer = PDBIO()
    writer.set_structure(variant)
    writer.save(out)
    title = f"TITLE     ESMFOLD PREDICTION OF {name} {result.variant} (A) AND WILD TYPE (B) ({label})"[:80]
    return title + "\n" + out.getvalue()


def table_csv(results: list[VariantStructure]) -> str:
    """Every variant's per-residue table in one CSV, a ``variant_name`` column first."""
    frames = [r.table.assign(variant_name=r.variant) for r in results]
    joined = pd.concat(frames, ignore_index=True)
    joined = joined[["variant_name", *[c for c in joined.columns if c != "variant_name"]]]
    return joined.to_csv(index=False, lineterminator="\n")
