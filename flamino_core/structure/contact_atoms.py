"""The atom that stands for a residue in a contact: its C-beta, C-alpha for glycine, or a C-beta
placed from the backbone with ideal geometry (``virtual_cb``) where the file has none."""

from __future__ import annotations

import numpy as np

BACKBONE = ("N", "CA", "C")

# Ideal geometry to place a C-beta from N, CA and C (Engh & Huber values, as trRosetta and
# fair-esm's contact notebook use): CA-CB 1.522 A, angle N-CA-CB 1.927 rad (110.4 deg),
# dihedral C-N-CA-CB -2.143 rad (-122.8 deg).
CB_BOND, CB_ANGLE, CB_DIHEDRAL = 1.522, 1.927, -2.143

# How the atom that stands for a residue in a contact was chosen (``ChainResidues.contact_atom``).
CB, GLY_CA, VIRTUAL_CB, CA_ONLY = "CB", "CA (glycine)", "virtual CB", "CA (no CB, none placeable)"


def contact_atom(residue, letter: str) -> tuple[np.ndarray, str]:
    """The atom that stands for a residue in a contact, and which one it is."""
    if "CB" in residue:
        return residue["CB"].coord.astype(np.float64), CB
    if letter == "G":
        return residue["CA"].coord.astype(np.float64), GLY_CA
    if all(atom in residue for atom in BACKBONE):
        # Truncated side chains, or residues like AIB whose beta carbons are CB1/CB2.
        n, ca, c = (residue[atom].coord.astype(np.float64) for atom in BACKBONE)
        with np.errstate(invalid="ignore", divide="ignore"):
            placed = virtual_cb(n, ca, c)
        if np.isfinite(placed).all():  # not when N, CA, C coincide or are collinear (damaged files)
            return placed, VIRTUAL_CB
    return residue["CA"].coord.astype(np.float64), CA_ONLY


def virtual_cb(n: np.ndarray, ca: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Place C-beta from the backbone with ideal geometry (``CB_BOND``, ``CB_ANGLE``, ``CB_DIHEDRAL``).

    Standard internal-to-Cartesian placement of atom D from A=C, B=N, C=CA: D is ``CB_BOND``
    from CA, makes the angle N-CA-CB, and the dihedral C-N-CA-CB. Works on (3,) or (..., 3).
    """
    b_to_c = ca - n
    b_to_c = b_to_c / np.linalg.norm(b_to_c, axis=-1, keepdims=True)
    normal = np.cross(n - c, b_to_c)
    normal = normal / np.linalg.norm(normal, axis=-1, keepdims=True)
    in_plane = np.cross(normal, b_to_c)
    # Coordinates of CB in the frame (b_to_c, in_plane, normal) centred on CA; the first axis is
    # negative-cosine because the angle is measured at CA between CA->N and CA->CB.
    d = (
        -CB_BOND * np.cos(CB_ANGLE),
        CB_BOND * np.sin(CB_ANGLE) * np.cos(CB_DIHEDRAL),
        CB_BOND * np.sin(CB_ANGLE) * np.sin(CB_DIHEDRAL),
    )
    return ca + d[0] * b_to_c + d[1] * in_plane + d[2] * normal
