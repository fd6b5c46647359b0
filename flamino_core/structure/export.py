"""Exports: the structure as PDB with a per-residue track in the B-factor column; the precision CSV.

A track in the B-factor column is the convention ESMFold (and AlphaFold) use for pLDDT, so any
molecular viewer can colour by it (PyMOL ``spectrum b``, ChimeraX ``color bfactor``).
"""

from __future__ import annotations

import io
import math
import textwrap

import numpy as np
import pandas as pd
from Bio.PDB import PDBIO, Select
from Bio.PDB.Model import Model

from flamino_core.structure.files.reading import ParsedStructure, StructureError
from flamino_core.structure.align import ChainAlignment

UNALIGNED_BFACTOR = 0.0  # residues with no value (not aligned to the sequence, other chains, ligands, water)
# The PDB B-factor field is 6 characters with two decimals (columns 61-66).
BFACTOR_MIN, BFACTOR_MAX = -99.99, 999.99
REMARK = "REMARK flamino: "


def pdb_export_problem(
    parsed: ParsedStructure,
    alignment: ChainAlignment,
    values: np.ndarray,
    label: str,
    scale: float = 1.0,
    fill: float = UNALIGNED_BFACTOR,
    whole_model: bool = False,
) -> str | None:
    """Why ``pdb_with_track`` would refuse these arguments (its message), or None if it would not.

    Cheap (no PDB text is written): the app asks before offering the download.
    """
    per_residue = alignment.per_residue(values) * scale
    finite = per_residue[np.isfinite(per_residue)]
    if finite.size and (finite.min() < BFACTOR_MIN or finite.max() > BFACTOR_MAX):
        return (
            f"{label} x{scale:g} ranges from {finite.min():.4g} to {finite.max():.4g}; the PDB B-factor "
            f"column holds {BFACTOR_MIN} to {BFACTOR_MAX}: choose a smaller scale"
        )
    if not (BFACTOR_MIN <= fill <= BFACTOR_MAX) or math.isnan(fill):
        return f"the fill value {fill} does not fit the B-factor column"
    model = parsed.model(alignment.chain.model_index)
    for chain in list(model) if whole_model else [model[alignment.chain_id]]:
        if len(chain.id) > 1:
            return (
                f"chain {chain.id!r} has a {len(chain.id)}-character id, which the PDB format cannot hold"
                + ("; export only the aligned chain" if whole_model and chain.id != alignment.chain_id else "")
            )
    return None


def pdb_with_track(
    parsed: ParsedStructure,
    alignment: ChainAlignment,
    values: np.ndarray,
    label: str,
    scale: float = 1.0,
    fill: float = UNALIGNED_BFACTOR,
    whole_model: bool = False,
) -> str:
    """PDB text of the aligned chain (or its whole model) with ``values`` as B-factors.

    Args:
      parsed: the structure ``alignment`` was made from (it is not modified: a copy is written).
      alignment: the chosen chain aligned to the sequence.
      values: (L,) one value per sequence position; NaN = no value.
      label: what the values are; written in a REMARK line with the scale and the fill value.
      scale: multiplier so small values survive two decimals (attention x100).
      fill: B-factor for every atom that gets no value: residues not aligned to the sequence,
        positions whose value is NaN, and (with ``whole_model``) other chains, ligands, water.
      whole_model: write the whole model as the file has it (every chain, ligands, ions, water);
        by default only the aligned chain's amino acids are written.

    Raises:
      StructureError: a chain id longer than one character, or a value outside what the
        B-factor column holds (the message says the range and suggests a scale).
    """
    problem = pdb_export_problem(parsed, alignment, values, label, scale, fill, whole_model)
    if problem:
        raise StructureError(problem)
    model = _model_with_track(parsed, alignment, alignment.per_residue(values) * scale, fill, whole_model)
    writer = PDBIO()
    writer.set_structure(model if whole_model else model[alignment.chain_id])
    selection = Select() if whole_model else _Residues(set(alignment.chain.residue_ids))
    out = io.StringIO()
    out.write(_remarks(alignment, label, scale, fill))
    writer.save(out, select=selection)
    return out.getvalue()


def _model_with_track(
    parsed: ParsedStructure, alignment: ChainAlignment, per_residue: np.ndarray, fill: float, whole_model: bool
) -> Model:
    """A copy of the alignment's model: every atom of the chains to be written gets ``fill``,
    then the aligned chain's residues with a finite value get that value."""
    model = parsed.model(alignment.chain.model_index).copy()
    chains = list(model) if whole_model else [model[alignment.chain_id]]
    for chain in chains:
        for residue in chain.get_unpacked_list():  # unpacks residues with alternative identities
            for atom in residue.get_unpacked_list():  # and atoms with alternate locations
                atom.set_bfactor(fill)

    by_id = dict(zip(alignment.chain.residue_ids, per_residue))
    for residue in model[alignment.chain_id].get_unpacked_list():
        value = by_id.get(residue.id)
        if value is not None and np.isfinite(value):
            for atom in residue.get_unpacked_list():
                atom.set_bfactor(float(value))
    return model


def _remarks(alignment: ChainAlignment, label: str, scale: float, fill: float) -> str:
    """What the B-factor column holds, which chain, and the fill value, as REMARK lines."""
    scale_note = f" x{scale:g}" if scale != 1 else ""
    lines = []
    for remark in (
        f"B-factor column: {label}{scale_note}",
        f"chain {alignment.chain_id} of model {alignment.chain.model_index} aligned to the sequence",
        f"atoms without a value: {fill:.2f}",
    ):
        # Unnumbered free-text REMARK lines (the numbered ones have meanings in the PDB format),
        # wrapped to the format's 80 columns rather than cut.
        lines += [f"{REMARK}{line}\n" for line in textwrap.wrap(remark, width=80 - len(REMARK)) or [""]]
    return "".join(lines)


class _Residues(Select):
    """Only the chain's amino acids (the residues ``ChainResidues`` holds)."""

    def __init__(self, residue_ids: set):
        self.residue_ids = residue_ids

    def accept_residue(self, residue) -> bool:
        return residue.id in self.residue_ids


def precision_csv(table: pd.DataFrame) -> str:
    """The precision table as CSV text (no index; a precision that could not be computed is empty)."""
    return table.to_csv(index=False)
