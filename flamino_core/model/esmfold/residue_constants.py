"""The arrays ESMFold's structure module and outputs index by residue type, built once from the
tables of ``residue_tables.py`` as OpenFold builds them (``openfold/np/residue_constants.py``'s
``_make_rigid_group_constants`` and ``openfold/data/data_transforms.py``'s
``make_atom14_masks``; Apache License 2.0, Copyright 2021 AlQuraishi Laboratory and DeepMind
Technologies Limited). NumPy only; row 20 of every table is the unknown residue ``X``, which has
no atoms.
"""

from __future__ import annotations

import numpy as np

from flamino_core.model.esmfold.residue_tables import (
    atom_types, chi_angles_atoms, chi_angles_mask, restype_1to3, restype_name_to_atom14_names, restypes,
    rigid_group_atom_positions,
)

RESTYPES_WITH_X = restypes + ["X"]
RESTYPE_ORDER_WITH_X = {letter: i for i, letter in enumerate(RESTYPES_WITH_X)}
UNKNOWN = len(restypes)  # 20: 'X', and any letter outside the twenty
ATOM_ORDER = {name: i for i, name in enumerate(atom_types)}


def _rigid_transformation_4x4(ex: np.ndarray, ey: np.ndarray, translation: np.ndarray) -> np.ndarray:
    """A frame whose x axis is along ``ex``, its xy plane holding ``ey``, at ``translation``."""
    ex = ex / np.linalg.norm(ex)
    ey = ey - np.dot(ey, ex) * ex
    ey /= np.linalg.norm(ey)
    ez = np.cross(ex, ey)
    m = np.stack([ex, ey, ez, translation]).transpose()
    return np.concatenate([m, [[0.0, 0.0, 0.0, 1.0]]], axis=0)


def _atom14_groups() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(group of each atom14 column (21, 14), whether it exists (21, 14), its position in its
    group (21, 14, 3))."""
    group = np.zeros([21, 14], dtype=np.int64)
    mask = np.zeros([21, 14], dtype=np.float32)
    positions = np.zeros([21, 14, 3], dtype=np.float32)
    for restype, letter in enumerate(restypes):
        resname = restype_1to3[letter]
        for atom_name, group_idx, position in rigid_group_atom_positions[resname]:
            column = restype_name_to_atom14_names[resname].index(atom_name)
            group[restype, column] = group_idx
            mask[restype, column] = 1
            positions[restype, column, :] = position
    return group, mask, positions


def _default_frames() -> np.ndarray:
    """(21, 8, 4, 4): each rigid group's frame in its parent's (backbone, pre-omega, phi, psi,
    chi1..chi4), before its torsion angle turns it."""
    frames = np.zeros([21, 8, 4, 4], dtype=np.float32)
    for restype, letter in enumerate(restypes):
        resname = restype_1to3[letter]
        at = {name: np.array(pos) for name, _, pos in rigid_group_atom_positions[resname]}
        frames[restype, 0] = np.eye(4)  # backbone to backbone
        frames[restype, 1] = np.eye(4)  # pre-omega (a dummy identity, as AlphaFold)
        frames[restype, 2] = _rigid_transformation_4x4(at["N"] - at["CA"], np.array([1.0, 0.0, 0.0]), at["N"])
        frames[restype, 3] = _rigid_transformation_4x4(at["C"] - at["CA"], at["CA"] - at["N"], at["C"])
        if chi_angles_mask[restype][0]:
            a, b, c = (at[name] for name in chi_angles_atoms[resname][0][:3])
            frames[restype, 4] = _rigid_transformation_4x4(c - b, a - b, c)
        for chi in range(1, 4):  # chi2..4 in the previous chi frame: its axis starts at its origin
            if chi_angles_mask[restype][chi]:
                end = at[chi_angles_atoms[resname][chi][2]]
                frames[restype, 4 + chi] = _rigid_transformation_4x4(end, np.array([-1.0, 0.0, 0.0]), end)
    return frames


def _atom37_maps() -> tuple[np.ndarray, np.ndarray]:
    """(atom14 column of each atom37 slot (21, 37), whether the atom37 slot exists (21, 37))."""
    to14 = np.zeros([21, 37], dtype=np.int64)
    exists = np.zeros([21, 37], dtype=np.float32)
    for restype, letter in enumerate(restypes):
        names = restype_name_to_atom14_names[restype_1to3[letter]]
        column = {name: i for i, name in enumerate(names) if name}
        to14[restype] = [column.get(name, 0) for name in atom_types]
        exists[restype] = [name in column for name in atom_types]
    return to14, exists


ATOM14_GROUP, ATOM14_MASK, ATOM14_POSITIONS = _atom14_groups()
DEFAULT_FRAMES = _default_frames()
ATOM37_TO_ATOM14, ATOM37_MASK = _atom37_maps()


def aatype(sequence: str) -> np.ndarray:
    """AlphaFold residue indices of ``sequence`` (uppercase letters): any letter outside the
    twenty is 20, 'X', as the reference's ``sequence_to_onehot(map_unknown_to_x=True)``."""
    return np.array([RESTYPE_ORDER_WITH_X.get(letter, UNKNOWN) for letter in sequence], dtype=np.int32)


def three_letter(restype: int) -> str:
    """The residue name a PDB file gives an AlphaFold index ('UNK' for 20)."""
    return restype_1to3.get(RESTYPES_WITH_X[restype], "UNK")
