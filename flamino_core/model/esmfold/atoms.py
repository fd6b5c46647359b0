"""From backbone frames and torsion angles to atoms: AlphaFold 2's Algorithm 24
(``torsion_angles_to_frames``: the eight rigid groups of each residue), the atoms of each group
at their literature positions (atom14), and the atom37 layout PDB files are written from.
OpenFold's ``openfold/utils/feats.py`` (Apache License 2.0), on ``residue_constants``' tables.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from flamino_core.model.esmfold import residue_constants as rc
from flamino_core.model.esmfold.rigid import Rigid, rot_matmul


def torsion_angles_to_frames(backbone: Rigid, angles: jax.Array, aatype: jax.Array) -> Rigid:
    """The eight rigid groups of every residue in global coordinates.

    Args:
      backbone: (B, L) backbone frames (Angstrom).
      angles: (B, L, 7, 2) (sin, cos) of omega, phi, psi, chi1..chi4.
      aatype: (B, L) AlphaFold residue indices.

    Returns:
      (B, L, 8) frames: backbone, pre-omega, phi, psi, chi1..chi4.
    """
    default = jnp.asarray(rc.DEFAULT_FRAMES)[aatype]  # (B, L, 8, 4, 4)
    # The backbone group turns by no angle: (sin, cos) = (0, 1) in front of the seven.
    identity = jnp.broadcast_to(jnp.array([0.0, 1.0], angles.dtype), angles.shape[:-2] + (1, 2))
    alpha = jnp.concatenate([identity, angles], axis=-2)  # (B, L, 8, 2)
    sin, cos = alpha[..., 0], alpha[..., 1]
    zero, one = jnp.zeros_like(sin), jnp.ones_like(sin)
    # A rotation about x: [[1, 0, 0], [0, cos, -sin], [0, sin, cos]] (OpenFold's original-code form).
    turn = jnp.stack([jnp.stack([one, zero, zero], -1), jnp.stack([zero, cos, -sin], -1),
                      jnp.stack([zero, sin, cos], -1)], axis=-2)
    # default.compose(Rigid(turn, None)): the turn has no translation, so the group keeps its
    # default origin (the reference adds default_rot @ 0, an exact zero).
    frames = Rigid(rot_matmul(default[..., :3, :3], turn), default[..., :3, 3])
    # chi2..chi4 hang from the previous chi group: chain them back to the backbone.
    chain = [_take(frames, 4)]
    for group in (5, 6, 7):
        chain.append(chain[-1].compose(_take(frames, group)))
    rotations = [frames.rot[..., :5, :, :]] + [c.rot[..., None, :, :] for c in chain[1:]]
    translations = [frames.trans[..., :5, :]] + [c.trans[..., None, :] for c in chain[1:]]
    to_backbone = Rigid(jnp.concatenate(rotations, axis=-3), jnp.concatenate(translations, axis=-2))
    return backbone.expand(-1).compose(to_backbone)


def _take(frames: Rigid, group: int) -> Rigid:
    return Rigid(frames.rot[..., group, :, :], frames.trans[..., group, :])


def atom14_positions(groups: Rigid, aatype: jax.Array) -> jax.Array:
    """(B, L, 14, 3): each atom placed by its rigid group (``groups``: (B, L, 8)) at its
    literature position; absent atoms at 0."""
    group_of = jnp.asarray(rc.ATOM14_GROUP)[aatype]  # (B, L, 14)
    # The reference selects each atom's frame by a one-hot product summed over the 8 groups;
    # the terms it adds are exact zeros, so a gather is the same number.
    rot = jnp.take_along_axis(groups.rot, group_of[..., None, None], axis=-3)  # (B, L, 14, 3, 3)
    trans = jnp.take_along_axis(groups.trans, group_of[..., None], axis=-2)  # (B, L, 14, 3)
    literature = jnp.asarray(rc.ATOM14_POSITIONS)[aatype]
    exists = jnp.asarray(rc.ATOM14_MASK)[aatype][..., None]
    return Rigid(rot, trans).apply(literature) * exists


def atom14_to_atom37(atom14: jax.Array, aatype: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(atom37 positions (..., L, 37, 3), which atom37 slots exist (..., L, 37))."""
    column = jnp.asarray(rc.ATOM37_TO_ATOM14)[aatype]  # (..., L, 37)
    exists = jnp.asarray(rc.ATOM37_MASK)[aatype]
    positions = jnp.take_along_axis(atom14, column[..., None], axis=-2)
    return positions * exists[..., None], exists
