"""The structure module (AlphaFold 2, Algorithm 20) as ESMFold runs it: invariant point attention
(Algorithm 22), a transition, the backbone update (Algorithm 23) and the torsion-angle resnet,
iterated ``num_blocks`` times with one set of weights; after each iteration the frames and angles
are turned into atoms (``atoms.py``). OpenFold's code and transformers' ``EsmFoldStructureModule``
are the reference; attribute names are its checkpoint keys.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx, struct

from flamino_core.model.esmfold.atoms import atom14_positions, torsion_angles_to_frames
from flamino_core.model.esmfold.config import StructureModuleConfig
from flamino_core.model.esmfold.pair import layer_norm, linear
from flamino_core.model.esmfold.rigid import QuatRigid, Rigid


def _points(flat: jax.Array, frames: Rigid, heads: int) -> jax.Array:
    """(B, L, H*P*3) as the reference reads it (three blocks x | y | z), each residue's points
    moved from its frame to global coordinates: (B, L, H, P, 3)."""
    local = jnp.stack(jnp.split(flat, 3, axis=-1), axis=-1)  # (B, L, H*P, 3)
    return frames.expand(-1).apply(local).reshape(flat.shape[:2] + (heads, -1, 3))


class InvariantPointAttention(nnx.Module):
    def __init__(self, c: StructureModuleConfig, rngs: nnx.Rngs):
        self.c = c
        hidden = c.ipa_dim * c.num_heads_ipa
        self.linear_q = linear(c.sequence_dim, hidden, rngs)
        self.linear_kv = linear(c.sequence_dim, 2 * hidden, rngs)
        self.linear_q_points = linear(c.sequence_dim, c.num_heads_ipa * c.num_qk_points * 3, rngs)
        self.linear_kv_points = linear(c.sequence_dim, c.num_heads_ipa * (c.num_qk_points + c.num_v_points) * 3, rngs)
        self.linear_b = linear(c.pairwise_dim, c.num_heads_ipa, rngs)
        self.head_weights = nnx.Param(jnp.zeros((c.num_heads_ipa,), jnp.float32))
        concat = c.num_heads_ipa * (c.pairwise_dim + c.ipa_dim + c.num_v_points * 4)
        self.linear_out = linear(concat, c.sequence_dim, rngs)

    def _logits(self, s, z, frames: Rigid, mask):
        """(B, H, L, L) attention logits: scalar, pair and point terms, padding masked."""
        c, heads = self.c, self.c.num_heads_ipa
        q = self.linear_q(s).reshape(s.shape[:2] + (heads, -1))  # (B, L, H, c)
        k, v = jnp.split(self.linear_kv(s).reshape(s.shape[:2] + (heads, -1)), 2, axis=-1)
        q_pts = _points(self.linear_q_points(s), frames, heads)  # (B, L, H, Pq, 3)
        kv_pts = _points(self.linear_kv_points(s), frames, heads)  # (B, L, H, Pq + Pv, 3)
        k_pts, v_pts = kv_pts[..., :c.num_qk_points, :], kv_pts[..., c.num_qk_points:, :]
        a = jnp.einsum("bihc,bjhc->bhij", q, k) * math.sqrt(1.0 / (3 * c.ipa_dim))
        a = a + math.sqrt(1.0 / 3) * jnp.transpose(self.linear_b(z), (0, 3, 1, 2))
        distance = jnp.sum((q_pts[:, :, None] - k_pts[:, None, :]) ** 2, axis=-1)  # (B, L, L, H, P)
        weights = jax.nn.softplus(self.head_weights[...]) * math.sqrt(1.0 / (3 * (c.num_qk_points * 9.0 / 2)))
        points = jnp.sum(distance * weights[:, None], axis=-1) * (-0.5)  # (B, L, L, H)
        square_mask = c.inf * (mask[:, :, None] * mask[:, None, :] - 1)
        return a + jnp.transpose(points, (0, 3, 1, 2)) + square_mask[:, None], v, v_pts

    def __call__(self, s: jax.Array, z: jax.Array, frames: Rigid, mask: jax.Array) -> jax.Array:
        """s (B, L, C), z (B, L, L, Cz), frames (B, L), mask (B, L) float -> update (B, L, C)."""
        a, v, v_pts = self._logits(s, z, frames, mask)
        a = jax.nn.softmax(a, axis=-1)  # (B, H, L, L)
        o = jnp.einsum("bhij,bjhc->bihc", a, v).reshape(s.shape[:2] + (-1,))
        o_pt = jnp.einsum("bhij,bjhpx->bihpx", a, v_pts)  # (B, L, H, Pv, 3), global frame
        o_pt = frames.expand(-1).expand(-1).invert_apply(o_pt)  # into each residue's frame
        o_pt_norm = jnp.sqrt(jnp.sum(o_pt**2, axis=-1) + self.c.epsilon).reshape(s.shape[:2] + (-1,))
        o_pt = o_pt.reshape(s.shape[:2] + (-1, 3))
        o_pair = jnp.einsum("bhij,bijc->bihc", a, z).reshape(s.shape[:2] + (-1,))
        parts = [o, o_pt[..., 0], o_pt[..., 1], o_pt[..., 2], o_pt_norm, o_pair]
        return self.linear_out(jnp.concatenate(parts, axis=-1))


class TransitionLayer(nnx.Module):
    def __init__(self, dim: int, rngs: nnx.Rngs):
        self.linear_1, self.linear_2, self.linear_3 = (linear(dim, dim, rngs) for _ in range(3))

    def __call__(self, s: jax.Array) -> jax.Array:
        return s + self.linear_3(jax.nn.relu(self.linear_2(jax.nn.relu(self.linear_1(s)))))


class Transition(nnx.Module):
    def __init__(self, c: StructureModuleConfig, rngs: nnx.Rngs):
        self.layers = nnx.List([TransitionLayer(c.sequence_dim, rngs) for _ in range(c.num_transition_layers)])
        self.layer_norm = layer_norm(c.sequence_dim, rngs)

    def __call__(self, s: jax.Array) -> jax.Array:
        for layer in self.layers:
            s = layer(s)
        return self.layer_norm(s)


class BackboneUpdate(nnx.Module):
    def __init__(self, c: StructureModuleConfig, rngs: nnx.Rngs):
        self.linear = linear(c.sequence_dim, 6, rngs)

    def __call__(self, s: jax.Array) -> jax.Array:
        return self.linear(s)


class AngleResnetBlock(nnx.Module):
    def __init__(self, dim: int, rngs: nnx.Rngs):
        self.linear_1, self.linear_2 = linear(dim, dim, rngs), linear(dim, dim, rngs)

    def __call__(self, a: jax.Array) -> jax.Array:
        return a + self.linear_2(jax.nn.relu(self.linear_1(jax.nn.relu(a))))


class AngleResnet(nnx.Module):
    """Seven torsion angles as (sin, cos) from the state and the module's initial state (with the
    ReLUs on the inputs that OpenFold's source has and the supplement's pseudocode lacks)."""

    def __init__(self, c: StructureModuleConfig, rngs: nnx.Rngs):
        self.epsilon = c.epsilon
        self.linear_in = linear(c.sequence_dim, c.resnet_dim, rngs)
        self.linear_initial = linear(c.sequence_dim, c.resnet_dim, rngs)
        self.layers = nnx.List([AngleResnetBlock(c.resnet_dim, rngs) for _ in range(c.num_resnet_blocks)])
        self.linear_out = linear(c.resnet_dim, c.num_angles * 2, rngs)

    def __call__(self, s: jax.Array, s_initial: jax.Array) -> tuple[jax.Array, jax.Array]:
        a = self.linear_in(jax.nn.relu(s)) + self.linear_initial(jax.nn.relu(s_initial))
        for layer in self.layers:
            a = layer(a)
        raw = self.linear_out(jax.nn.relu(a)).reshape(a.shape[:-1] + (-1, 2))  # (B, L, 7, 2)
        norm = jnp.sqrt(jnp.maximum(jnp.sum(raw**2, axis=-1, keepdims=True), self.epsilon))
        return raw, raw / norm


@struct.dataclass
class StructureOutput:
    """Per iteration (the last is the prediction): ``positions`` (N, B, L, 14, 3) Angstrom,
    ``frames`` (N, B, L, 7) backbone quaternion + translation in Angstrom, ``angles`` and
    ``unnormalized_angles`` (N, B, L, 7, 2), ``states`` (N, B, L, C) the module's state."""

    positions: jax.Array
    frames: jax.Array
    angles: jax.Array
    unnormalized_angles: jax.Array
    states: jax.Array

    @classmethod
    def zeros(cls, iterations: int, shape: tuple[int, int], dim: int) -> "StructureOutput":
        """All zeros, the shapes of ``iterations`` iterations on (B, L) residues of state width ``dim``."""
        lead = (iterations,) + tuple(shape)
        return cls(jnp.zeros(lead + (14, 3)), jnp.zeros(lead + (7,)), jnp.zeros(lead + (7, 2)),
                   jnp.zeros(lead + (7, 2)), jnp.zeros(lead + (dim,)))


class StructureModule(nnx.Module):
    def __init__(self, c: StructureModuleConfig, rngs: nnx.Rngs):
        self.c = c
        self.layer_norm_s = layer_norm(c.sequence_dim, rngs)
        self.layer_norm_z = layer_norm(c.pairwise_dim, rngs)
        self.linear_in = linear(c.sequence_dim, c.sequence_dim, rngs)
        self.ipa = InvariantPointAttention(c, rngs)
        self.layer_norm_ipa = layer_norm(c.sequence_dim, rngs)
        self.transition = Transition(c, rngs)
        self.bb_update = BackboneUpdate(c, rngs)
        self.angle_resnet = AngleResnet(c, rngs)

    def __call__(self, s: jax.Array, z: jax.Array, aatype: jax.Array, mask: jax.Array) -> StructureOutput:
        """s (B, L, C) and z (B, L, L, Cz) from the trunk, aatype (B, L), mask (B, L) float."""
        s = self.layer_norm_s(s)
        z = self.layer_norm_z(z)
        s_initial = s
        s = self.linear_in(s)
        graphdef, state = nnx.split(self)

        def iteration(carry, _):
            # One set of weights applied num_blocks times: one compiled body (lax.scan), the
            # module rebuilt from its arrays inside it (an NNX module may not cross traces).
            module = nnx.merge(graphdef, state, copy=True)
            s, rigids = carry
            s = module.layer_norm_ipa(s + module.ipa(s, z, rigids.to_rigid(), mask))
            s = module.transition(s)
            rigids = rigids.compose_update(module.bb_update(s))
            scale = self.c.trans_scale_factor  # frames in nm-like units inside, Angstrom outside
            backbone = Rigid(rigids.to_rigid().rot, rigids.trans * scale)
            raw, angles = module.angle_resnet(s, s_initial)
            positions = atom14_positions(torsion_angles_to_frames(backbone, angles, aatype), aatype)
            frames = jnp.concatenate([rigids.quats, rigids.trans * scale], axis=-1)
            return (s, rigids), StructureOutput(positions, frames, angles, raw, s)

        _, steps = jax.lax.scan(iteration, (s, QuatRigid.identity(s.shape[:-1])), None, length=self.c.num_blocks)
        return steps
