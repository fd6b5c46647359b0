"""Rigid frames (a rotation and a translation per residue, or per rigid group) for the structure
module: OpenFold's ``Rigid``/``Rotation`` (``openfold/utils/rigid_utils.py``, Apache License
2.0) reduced to what ESMFold's inference path calls, as plain functions on arrays.

The backbone frames are carried as unit quaternions (w, x, y, z) and turned into rotation matrices
where a point is moved, as the reference does; the side-chain frames are rotation matrices.
Products are written out per component, like OpenFold's ``rot_matmul`` and ``rot_vec_mul``, so
the float32 sums run in the reference's order.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct


@struct.dataclass
class Rigid:
    """rot: (..., 3, 3) rotation matrices; trans: (..., 3)."""

    rot: jax.Array
    trans: jax.Array

    def apply(self, points: jax.Array) -> jax.Array:
        return rot_vec_mul(self.rot, points) + self.trans

    def invert_apply(self, points: jax.Array) -> jax.Array:
        return rot_vec_mul(jnp.swapaxes(self.rot, -1, -2), points - self.trans)

    def compose(self, other: "Rigid") -> "Rigid":
        return Rigid(rot_matmul(self.rot, other.rot), rot_vec_mul(self.rot, other.trans) + self.trans)

    def expand(self, axis: int) -> "Rigid":
        """A new axis before the rotation/translation dims (``r[..., None]`` in OpenFold)."""
        return Rigid(jnp.expand_dims(self.rot, axis - 2), jnp.expand_dims(self.trans, axis - 1))


def rot_matmul(a: jax.Array, b: jax.Array) -> jax.Array:
    """(..., 3, 3) @ (..., 3, 3), each entry a0*b0 + a1*b1 + a2*b2 in this order."""
    rows = [jnp.stack([a[..., i, 0] * b[..., 0, j] + a[..., i, 1] * b[..., 1, j] + a[..., i, 2] * b[..., 2, j]
                       for j in range(3)], axis=-1) for i in range(3)]
    return jnp.stack(rows, axis=-2)


def rot_vec_mul(r: jax.Array, t: jax.Array) -> jax.Array:
    """(..., 3, 3) applied to (..., 3)."""
    x, y, z = t[..., 0], t[..., 1], t[..., 2]
    return jnp.stack([r[..., i, 0] * x + r[..., i, 1] * y + r[..., i, 2] * z for i in range(3)], axis=-1)


def quat_to_rot(q: jax.Array) -> jax.Array:
    """Unit quaternions (..., 4) (w, x, y, z) to rotation matrices (..., 3, 3)."""
    a, b, c, d = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    rows = [
        [a * a + b * b - c * c - d * d, 2 * (b * c - a * d), 2 * (b * d + a * c)],
        [2 * (b * c + a * d), a * a - b * b + c * c - d * d, 2 * (c * d - a * b)],
        [2 * (b * d - a * c), 2 * (c * d + a * b), a * a - b * b - c * c + d * d],
    ]
    return jnp.stack([jnp.stack(row, axis=-1) for row in rows], axis=-2)


def quat_multiply_by_vec(q: jax.Array, v: jax.Array) -> jax.Array:
    """The quaternion product q * (0, v) for q (..., 4) and v (..., 3)."""
    a, b, c, d = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    x, y, z = v[..., 0], v[..., 1], v[..., 2]
    return jnp.stack([-b * x - c * y - d * z, a * x + c * z - d * y,
                      a * y - b * z + d * x, a * z + b * y - c * x], axis=-1)


@struct.dataclass
class QuatRigid:
    """Backbone frames as the structure module updates them: quats (..., 4), trans (..., 3)."""

    quats: jax.Array
    trans: jax.Array

    @classmethod
    def identity(cls, shape: tuple[int, ...]) -> "QuatRigid":
        quats = jnp.zeros(shape + (4,), jnp.float32).at[..., 0].set(1.0)
        return cls(quats, jnp.zeros(shape + (3,), jnp.float32))

    def to_rigid(self) -> Rigid:
        return Rigid(quat_to_rot(self.quats), self.trans)

    def compose_update(self, update: jax.Array) -> "QuatRigid":
        """Compose with the backbone update (..., 6): a quaternion (1, x, y, z) (not unit) and a
        translation in the current frame (AlphaFold 2, Algorithm 23); the quaternion is
        renormalised, the translation turned by the frame before the update, as OpenFold."""
        quats = self.quats + quat_multiply_by_vec(self.quats, update[..., :3])
        quats = quats / jnp.linalg.norm(quats, axis=-1, keepdims=True)
        return QuatRigid(quats, self.trans + rot_vec_mul(quat_to_rot(self.quats), update[..., 3:]))
