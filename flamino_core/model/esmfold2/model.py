"""The ESMFold2 network (transformers' ``EsmFold2Model``): the input embedder, the language-model
encoder over ESM C's hidden states, the folding trunk's loops with the parcae recurrence, the
distogram head, and the denoiser and confidence head that the sampler and ``predict`` drive.
Attribute names are the checkpoint's top-level keys.

The trunk is deterministic given its noise, which is drawn outside (``TrunkNoise``): the initial
pair state (the reference's ``_init_pair_state``, a truncated normal) and the language model's
per-loop dropout, which the reference applies even at inference (``F.dropout(..., training=True)``
on every loop when ``lm_encoder.per_loop_lm_dropout``): as explicit multipliers per loop (the
parity tests feed the reference the same) or as a key drawn from inside the loop.

With ``msa_encoder.enabled`` (biohub/ESMFold2) the MSA encoder (``msa.py``) updates the initial
pair state when the features carry an MSA (a one-row MSA of the query without an alignment, as
``infer_protein``); an MSA also sets the profile features, as ``_prepare_features`` does. It runs
on the same inputs every loop in the reference, so it runs once here: the same numbers.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from flax import nnx, struct

from flamino_core.model.esmc import ESMC
from flamino_core.model.esmfold2.atoms import AtomInputs
from flamino_core.model.esmfold2.confidence import ConfidenceHead
from flamino_core.model.esmfold2.config import EsmFold2Config
from flamino_core.model.esmfold2.diffusion import DiffusionModule
from flamino_core.model.esmfold2.embedder import InputEmbedder
from flamino_core.model.esmfold2.language_model import LanguageModelEncoder
from flamino_core.model.esmfold2.layers import linear
from flamino_core.model.esmfold2.msa import MsaEncoder
from flamino_core.model.esmfold2.pair import PairUpdateStack
from flamino_core.model.esmfold2.parcae import Parcae


@struct.dataclass
class TrunkNoise:
    """The trunk's randomness. ``pair_state``: (B, L, L, C) initial pair state. ``lm_dropout``:
    None (no language model, or no per-loop dropout), (steps, B, L, L, C) float multipliers
    (``keep / (1 - p)``, what ``F.dropout`` multiplies by), or a PRNG key drawn from per loop."""

    pair_state: jax.Array
    lm_dropout: jax.Array | None = None


@struct.dataclass
class TrunkOutput:
    """``EsmFold2TrunkOutput``: distogram_logits (B, L, L, bins), pair_states (B, L, L, C),
    single_inputs (B, L, S), relative_position_encoding and token_bonds_encoding (B, L, L, C),
    atom_inputs (the featurised atoms the denoiser reuses; ``atom_to_token`` zeroed at padding)."""

    distogram_logits: jax.Array
    pair_states: jax.Array
    single_inputs: jax.Array
    relative_position_encoding: jax.Array
    token_bonds_encoding: jax.Array
    atom_inputs: AtomInputs


def trunk_steps(config: EsmFold2Config, num_loops: int | None = None) -> int:
    """How many times the trunk body runs: ``num_loops + 1`` (at least once), as the reference."""
    return max(1, (config.num_loops if num_loops is None else num_loops) + 1)


def draw_trunk_noise(key: jax.Array, config: EsmFold2Config, batch: int, length: int,
                     num_loops: int | None = None, explicit_dropout: bool = False) -> TrunkNoise:
    """Noise for a trunk pass: the initial pair state as ``_init_pair_state`` draws it (truncated
    normal at +-3 std, std sqrt(2 / (5 C))), and the LM dropout as a key (or, ``explicit_dropout``,
    as every loop's multipliers: (steps, B, L, L, C) floats, only for small inputs)."""
    width = config.pairwise_hidden_size
    std = math.sqrt(2.0 / (5.0 * width))
    state_key, dropout_key = jax.random.split(key)
    pair_state = std * jax.random.truncated_normal(state_key, -3.0, 3.0, (batch, length, length, width), jnp.float32)
    p = config.lm_encoder.lm_dropout
    if not (config.lm_encoder.per_loop_lm_dropout and p > 0.0):
        return TrunkNoise(pair_state)
    if not explicit_dropout:
        return TrunkNoise(pair_state, dropout_key)
    shape = (trunk_steps(config, num_loops), batch, length, length, width)
    return TrunkNoise(pair_state, jax.random.bernoulli(dropout_key, 1.0 - p, shape) / jnp.float32(1.0 - p))


def one_hot_features(features: dict, config: EsmFold2Config):
    """``_prepare_features``: (res_type one-hot, profile, deletion_mean, AtomInputs), the one-hots
    zeroed at padding, ``atom_to_token`` 0 there."""
    mask = jnp.asarray(features["attention_mask"]).astype(jnp.float32)
    res_type = jax.nn.one_hot(features["res_type"], config.num_res_types) * mask[..., None]
    msa = features.get("msa")
    if msa is None:
        profile = res_type
    else:
        profile = jax.nn.one_hot(msa, config.num_res_types)
        msa_mask = features.get("msa_attention_mask")
        if msa_mask is None:
            profile = jnp.mean(profile, axis=1)
        else:
            msa_mask = jnp.asarray(msa_mask).astype(jnp.float32)
            count = jnp.maximum(jnp.sum(msa_mask, axis=1), 1.0)
            profile = jnp.sum(profile * msa_mask[..., None], axis=1) / count[..., None]
    deletion_mean = features.get("deletion_mean")
    if deletion_mean is None:
        deletion_mean = jnp.zeros(mask.shape, jnp.float32)
    atom_mask = jnp.asarray(features["atom_attention_mask"]).astype(bool)
    atom_float = atom_mask.astype(jnp.float32)
    atoms = AtomInputs(
        ref_pos=jnp.asarray(features["ref_pos"], jnp.float32),
        ref_charge=jnp.asarray(features["ref_charge"]).astype(jnp.float32),
        atom_attention_mask=atom_mask,
        ref_element=jax.nn.one_hot(features["ref_element"], config.max_atomic_number) * atom_float[..., None],
        ref_atom_name_chars=(jax.nn.one_hot(features["ref_atom_name_chars"], config.char_vocab_size)
                             * atom_float[..., None, None]),
        ref_space_uid=jnp.asarray(features["ref_space_uid"]),
        atom_to_token=jnp.asarray(features["atom_to_token"]) * atom_mask)
    return res_type, profile, jnp.asarray(deletion_mean, jnp.float32), atoms


class EsmFold2(nnx.Module):
    def __init__(self, config: EsmFold2Config, rngs: nnx.Rngs):
        self.config = config
        # The ESM C stem's precision mode, as its engine runs it (``engine/fold.py``): "fp32", or
        # "bf16" (``weights.esmfold.with_stem_precision``, as ESMFold's: its dense kernels stored rounded).
        self.stem_precision = "fp32"
        self.input_embedder = InputEmbedder(config, rngs)
        self.language_model = LanguageModelEncoder(config, rngs)
        self.esmc = ESMC(config.esmc, rngs)
        self.folding_trunk = PairUpdateStack(config, config.folding_trunk_num_hidden_layers, rngs)
        self.lm_encoder = PairUpdateStack(config, config.lm_encoder.num_hidden_layers, rngs)
        self.parcae = Parcae(config, rngs)
        self.structure_head = DiffusionModule(config, rngs)
        self.distogram_head = linear(config.pairwise_hidden_size, config.structure_head.num_distogram_bins, rngs,
                                     bias=True)
        self.confidence_head = ConfidenceHead(config, rngs)
        # Checkpoints trained without MSAs (ESMFold2-Fast) have no MSA encoder.
        self.msa_encoder = MsaEncoder(config, rngs) if config.msa_encoder.enabled else None

    def language_model_states(self, features: dict, stem) -> jax.Array:
        """ESM C's hidden states per structure token, as the reference's ``_compute_lm_hidden_states``
        (``model/esmc_chains.py``; eager: its rows' length depends on the data). ``stem``: the
        engine's pass (``engine/fold.StemPass``: (state, tokens, layout) -> every hidden state), run
        on this network's ESM C weights."""
        from flamino_core.model.esmc_chains import lm_hidden_states

        state = nnx.state(self.esmc)
        return jnp.asarray(lm_hidden_states(lambda tokens, rows: stem(state, tokens, rows), *(features[k] for k in (
            "input_ids", "asym_id", "residue_index", "mol_type", "attention_mask"))))

    def trunk(self, features: dict, noise: TrunkNoise, lm_hidden_states: jax.Array | None = None,
              num_loops: int | None = None) -> TrunkOutput:
        """``EsmFold2Model.forward``: the featuriser's dict (batched, as ``prepare_protein_features``
        names its arrays) and the trunk's noise; ``lm_hidden_states`` (B, L, layers + 1, D) from
        ``language_model_states`` (None: no language model, as the reference without ``input_ids``).
        Jittable (``num_loops`` static).

        Raises:
          ValueError: LM states without the dropout noise the reference draws for them, or with
            fewer loops' multipliers than the trunk runs.
        """
        config = self.config
        res_type, profile, deletion_mean, atoms = one_hot_features(features, config)
        single_inputs, initial_pair, relative, bonds = self.input_embedder(
            atoms, res_type, profile, deletion_mean, *(jnp.asarray(features[k]) for k in (
                "token_index", "residue_index", "asym_id", "sym_id", "entity_id", "token_bonds")))
        mask = jnp.asarray(features["attention_mask"]).astype(jnp.float32)
        pair_mask = mask[:, :, None] * mask[:, None, :]
        if self.msa_encoder is not None and features.get("msa") is not None:
            initial_pair = self.msa_encoder(initial_pair, single_inputs, features)
        lm_pair = None if lm_hidden_states is None else self.language_model(lm_hidden_states)
        p = config.lm_encoder.lm_dropout
        dropout = lm_pair is not None and config.lm_encoder.per_loop_lm_dropout and p > 0.0
        if dropout and noise.lm_dropout is None:
            raise ValueError("the reference drops out the language model's pair states on every trunk loop, even "
                             "at inference: give TrunkNoise.lm_dropout (draw_trunk_noise)")
        explicit = dropout and jnp.issubdtype(noise.lm_dropout.dtype, jnp.floating)
        steps = trunk_steps(config, num_loops)
        if explicit and noise.lm_dropout.shape[0] < steps:
            raise ValueError(f"TrunkNoise.lm_dropout holds {noise.lm_dropout.shape[0]} loops' multipliers; "
                             f"this trunk runs {steps} (num_loops + 1)")
        decay, input_matrix = self.parcae.discretize()
        graphdef, state = nnx.split(self)

        def one_loop(pair, step_and_multiplier):
            step, multiplier = step_and_multiplier
            model = nnx.merge(graphdef, state, copy=True)  # an NNX module may not cross traces
            injected = initial_pair
            if lm_pair is not None:
                lm = lm_pair
                if dropout and explicit:
                    lm = lm * multiplier
                elif dropout:
                    keep = jax.random.bernoulli(jax.random.fold_in(noise.lm_dropout, step), 1.0 - p, lm.shape)
                    lm = lm * (keep / jnp.float32(1.0 - p))
                injected = injected + model.lm_encoder(lm, pair_mask)
            pair = model.parcae(pair, injected, decay, input_matrix)
            return model.folding_trunk(pair, pair_mask), None

        multipliers = noise.lm_dropout[:steps] if explicit else jnp.zeros((steps,))
        pair, _ = jax.lax.scan(one_loop, noise.pair_state.astype(jnp.float32), (jnp.arange(steps), multipliers))
        pair = self.parcae.decode_state(pair, pair_mask)
        distogram = self.distogram_head(pair + jnp.swapaxes(pair, 1, 2))
        return TrunkOutput(distogram, pair, single_inputs, relative, bonds, atoms)

    def confidence(self, trunk: TrunkOutput, features: dict, coords: jax.Array, num_diffusion_samples: int,
                   num_chains: int) -> dict:
        """The confidence head on sampled coordinates (B * K, A, 3), as ``fold`` calls it."""
        return self.confidence_head(
            trunk.single_inputs, trunk.pair_states, coords, jnp.asarray(features["distogram_atom_idx"]),
            jnp.asarray(features["attention_mask"]), trunk.atom_inputs.atom_to_token,
            trunk.atom_inputs.atom_attention_mask, jnp.asarray(features["asym_id"]),
            jnp.asarray(features["mol_type"]), trunk.relative_position_encoding, trunk.token_bonds_encoding,
            num_diffusion_samples=num_diffusion_samples, num_chains=num_chains)


@functools.partial(jax.jit, static_argnames=("graphdef", "num_loops", "matmul_precision"))
def _trunk_jit(graphdef, state, features, noise, lm_hidden_states, num_loops, matmul_precision):
    with jax.default_matmul_precision(matmul_precision):
        return nnx.merge(graphdef, state).trunk(features, noise, lm_hidden_states, num_loops)


def run_trunk(model: EsmFold2, features: dict, noise: TrunkNoise, lm_hidden_states: jax.Array | None = None,
              num_loops: int | None = None, matmul_precision: str | None = "highest") -> TrunkOutput:
    """``model.trunk`` compiled (once per shape and loop count), in exact fp32 matmuls by default
    (``matmul_precision``: JAX's name, as ESMFold's ``predict``; a TPU's default rounds to bf16)."""
    graphdef, state = nnx.split(model)
    arrays = {k: jnp.asarray(v) for k, v in features.items() if v is not None}
    return _trunk_jit(graphdef, state, arrays, noise, lm_hidden_states, num_loops, matmul_precision)
