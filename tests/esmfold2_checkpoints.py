"""Random ESMFold2 checkpoints written by transformers' own ``EsmFold2Model.save_pretrained``
(``config.json`` + ``model.safetensors``), for the ESMFold2 port's parity and loading tests.

Two shapes: ``tiny_shape()`` (flamino's ``EsmFold2Config.tiny()``: every width small and
distinct, so that a transposed or mis-split axis shows) and ``REAL_WIDTHS``
(ESMFold2's published widths: the 384/256 trunk, the 2560-wide ESM C 6B stem with 40 heads, the
768-wide denoiser, at one layer per stack). Both leave out the MSA encoder, as
``biohub/ESMFold2-Fast`` does (``msa_encoder.enabled = False``); ``with_msa_encoder`` turns it on.

The weights are drawn away from the reference's initialisation (``randomize_esmfold2_``): it zeroes
the pLDDT/resolved weights, the LM layer mixture, adaLN gates and output projections, which
would leave whole paths untested; here every parameter is random at a scale that keeps the
activations of order one (LayerNorm gains 1 +- 0.3, projections 1.5 / sqrt(fan in), biases 0.2).
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch


def tiny_shape() -> dict:
    """flamino's ``EsmFold2Config.tiny()`` as the reference's config arguments: the shape of
    ``random:esmfold2-tiny`` (every width distinct, heads and layers above one where it counts)."""
    from flamino_core.model.esmfold2.config import EsmFold2Config

    return EsmFold2Config.tiny().to_hf_dict()


# ESMFold2's published widths (the reference config's defaults; ESM C 6B: 2560 wide, 40 heads,
# SwiGLU 6912) at one layer per stack and one trunk loop.
REAL_WIDTHS = dict(
    num_loops=1, folding_trunk_num_hidden_layers=1, parcae_num_coda_layers=1,
    atom_encoder=dict(num_hidden_layers=1),
    structure_head=dict(num_diffusion_samples=2, inference_num_steps=4,
                        diffusion_module=dict(num_hidden_layers=1, atom_encoder=dict(num_hidden_layers=1,
                                                                                     output_dim=768))),
    confidence_head=dict(num_hidden_layers=1),
    msa_encoder=dict(enabled=False, num_hidden_layers=2),
    lm_encoder=dict(num_hidden_layers=1),
    esmc_config=dict(hidden_size=2560, num_hidden_layers=1, num_attention_heads=40, intermediate_size=6912),
)


def with_msa_encoder(shape: dict, **sizes) -> dict:
    """``shape`` with the MSA encoder built (the full ESMFold2 rather than ESMFold2-Fast), at
    small widths unless ``sizes`` say otherwise (three layers: the last updates the pair only)."""
    shape = copy.deepcopy(shape)
    small = dict(hidden_size=20, outer_hidden_size=6, num_hidden_layers=3, num_attention_heads=2, head_dim=8,
                 intermediate_size=28)
    shape["msa_encoder"] = dict(shape.get("msa_encoder") or {}, **{**small, **sizes}, enabled=True)
    return shape


def hf_esmfold2_config(shape: dict | None = None):
    """The reference's ``EsmFold2Config`` of a shape (eager attention: the exact fp32 path)."""
    from transformers import EsmcConfig
    from transformers.models.esmfold2.configuration_esmfold2 import EsmFold2Config

    shape = copy.deepcopy(tiny_shape() if shape is None else shape)
    esmc_args = {k: v for k, v in shape.pop("esmc_config").items() if k != "model_type"}
    esmc = EsmcConfig(**{"vocab_size": 64, **esmc_args})
    config = EsmFold2Config(esmc_config=esmc, **shape)
    config._attn_implementation = "eager"
    config.esmc_config._attn_implementation = "eager"
    return config


def randomize_esmfold2_(model: torch.nn.Module, seed: int) -> None:
    """Fill every parameter of an ``EsmFold2Model`` with values well away from its initialisation."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=gen)
            leaf = name.rsplit(".", 1)[-1]
            owner = name.rsplit(".", 2)[-2] if "." in name else ""
            if "norm" in owner.lower() and param.ndim == 1:  # LayerNorm gains and biases
                param.copy_(1.0 + 0.3 * noise if leaf == "weight" else 0.3 * noise)
            elif leaf in ("layer_weights", "log_state_decay"):  # a softmax's logits; the decay's log-rate
                param.copy_(noise)
            elif leaf == "log_delta":  # softplus(delta) between ~0.3 and ~1.3: decays away from 0 and 1
                param.copy_(0.3 * noise)
            elif owner in ("embed_tokens", "dist_bin_pairwise_embed"):  # embedding tables (tokens, distance bins)
                param.copy_(0.5 * noise)
            elif leaf == "bias":
                param.copy_(0.2 * noise)
            elif "adaln_linear" in name or leaf == "weight" and owner in ("proj_emit", "down_proj"):
                # Modulations ((1 + scale), gates) and residual branches' last projections: at a third
                # of the others' scale, so the residual streams stay of order ten over the loops.
                param.copy_(noise * (0.5 / param.shape[-1] ** 0.5))
            elif leaf in ("plddt_weight", "resolved_weight"):  # (atoms, hidden, bins): contracted over hidden
                param.copy_(noise * (1.5 / param.shape[1] ** 0.5))
            else:
                fan_in = param.shape[-1] if param.ndim > 1 else param.shape[0]
                param.copy_(noise * (1.5 / fan_in**0.5))


def make_hf_esmfold2(seed: int = 0, shape: dict | None = None):
    """An ``EsmFold2Model`` in fp32, eval mode, with random weights fixed by ``seed``."""
    from transformers.models.esmfold2.modeling_esmfold2 import EsmFold2Model

    torch.manual_seed(seed)
    model = EsmFold2Model(hf_esmfold2_config(shape)).float().eval()
    randomize_esmfold2_(model, seed)
    return model


def write_hf_esmfold2(model, directory: Path) -> Path:
    """``save_pretrained`` into ``directory`` (config.json + model.safetensors), returned."""
    model.save_pretrained(directory)
    return Path(directory)


def write_esmfold2_checkpoint(directory: Path, seed: int = 0, shape: dict | None = None):
    """(the reference model, its save_pretrained folder) for a shape and seed."""
    model = make_hf_esmfold2(seed, shape)
    return model, write_hf_esmfold2(model, directory)


def protein_features(sequence: str) -> dict:
    """The reference featuriser's inputs for one chain (``protein_utils.prepare_protein_features``:
    batch of one, torch tensors), for tests that need the reference's own features."""
    from transformers.models.esmfold2.protein_utils import prepare_protein_features

    return prepare_protein_features(sequence)


def complex_features(sequences: list[str]) -> dict:
    """Features of several protein chains in one complex, built from the reference's per-chain
    features: tokens and atoms concatenated, ``asym_id``/``sym_id``/``entity_id`` per chain
    (identical sequences share an entity and count up ``sym_id``), ``token_index`` running on,
    ``residue_index`` restarting per chain. The reference ships no multi-chain featuriser."""
    from transformers.models.esmfold2.protein_utils import prepare_protein_features

    chains = [prepare_protein_features(s) for s in sequences]
    entities: dict[str, int] = {}
    copies: dict[str, int] = {}
    out: dict[str, list] = {}
    token_offset = 0
    for asym, (sequence, f) in enumerate(zip(sequences, chains)):
        length = f["token_index"].shape[1]
        real = f["atom_attention_mask"][0]
        entity = entities.setdefault(sequence, len(entities) + 1)
        copy_index = copies[sequence] = copies.get(sequence, -1) + 1
        per_token = dict(
            token_index=f["token_index"][0] + token_offset, residue_index=f["residue_index"][0],
            asym_id=torch.full((length,), asym), sym_id=torch.full((length,), copy_index),
            entity_id=torch.full((length,), entity), mol_type=f["mol_type"][0], res_type=f["res_type"][0],
            input_ids=f["input_ids"][0], attention_mask=f["attention_mask"][0], deletion_mean=f["deletion_mean"][0])
        atom_offset = sum(len(v) for v in out.get("ref_pos", []))
        per_atom = dict(
            ref_pos=f["ref_pos"][0][real], ref_element=f["ref_element"][0][real], ref_charge=f["ref_charge"][0][real],
            ref_atom_name_chars=f["ref_atom_name_chars"][0][real], atom_attention_mask=real[real],
            ref_space_uid=f["ref_space_uid"][0][real] + token_offset,
            atom_to_token=f["atom_to_token"][0][real] + token_offset)
        for key, value in {**per_token, **per_atom}.items():
            out.setdefault(key, []).append(value)
        out.setdefault("distogram_atom_idx", []).append(f["distogram_atom_idx"][0] + atom_offset)
        token_offset += length
    joined = {k: torch.cat(v) for k, v in out.items()}
    num_atoms = joined["ref_pos"].shape[0]
    pad = -num_atoms % 32  # the reference featuriser pads atoms to a multiple of 32
    for key in ("ref_pos", "ref_element", "ref_charge", "ref_atom_name_chars", "atom_attention_mask",
                "ref_space_uid", "atom_to_token"):
        value = joined[key]
        joined[key] = torch.cat([value, value.new_zeros((pad, *value.shape[1:]))])
    joined["token_bonds"] = torch.zeros(token_offset, token_offset, 1)
    return {k: v.unsqueeze(0) for k, v in joined.items()}


ATOM_KEYS = ("ref_pos", "ref_charge", "atom_attention_mask", "ref_element", "ref_atom_name_chars", "ref_space_uid",
             "atom_to_token")


def reference_noise(model, features: dict, seed: int = 1, num_loops: int | None = None):
    """(initial pair state (B, L, L, C), LM dropout multipliers (steps, B, L, L, C)) drawn with
    torch from ``seed``, in the shapes ``TrunkNoise`` takes: what ``reference_trunk`` feeds the
    reference in place of its own draws."""
    batch, length = features["res_type"].shape
    width = model.config.pairwise_hidden_size
    loops = model.config.num_loops if num_loops is None else num_loops
    steps = max(1, loops + 1)
    p = model.config.lm_encoder.lm_dropout
    gen = torch.Generator().manual_seed(seed)
    std = (2.0 / (5.0 * width)) ** 0.5
    pair = torch.nn.init.trunc_normal_(torch.empty(batch, length, length, width), 0.0, std, -3 * std, 3 * std,
                                       generator=gen)
    keep = (torch.rand(steps, batch, length, length, width, generator=gen) >= p).float()
    return pair, keep / (1.0 - p)


def reference_lm_states(model, features: dict) -> torch.Tensor:
    """The reference's ESM C hidden states for ``features`` (``_compute_lm_hidden_states``)."""
    with torch.no_grad():
        return model._compute_lm_hidden_states(*(features[k] for k in ("input_ids", "asym_id", "residue_index",
                                                                       "mol_type", "attention_mask")))


def reference_trunk(model, features: dict, pair_state: torch.Tensor, dropout: torch.Tensor | None,
                    lm_hidden_states: torch.Tensor | None, num_loops: int | None = None):
    """``EsmFold2Model.forward`` on the featuriser's dict with its randomness replaced: the initial
    pair state is ``pair_state`` and the k-th per-loop LM dropout multiplies by ``dropout[k]``
    (the reference's own draws happen inside; it runs ``F.dropout(..., training=True)`` even in eval).
    Every other dropout call (p = 0, or not training) is passed through."""
    from transformers.models.esmfold2 import modeling_esmfold2 as reference

    atoms = reference.EsmFold2AtomInputs(**{k: features[k] for k in ATOM_KEYS})
    inputs = {k: v for k, v in features.items() if k not in ATOM_KEYS + ("distogram_atom_idx", "input_ids")}
    original, calls = reference.F.dropout, []

    def fed_dropout(x, p=0.5, training=True, inplace=False):
        if not training or p == 0.0:
            return original(x, p, training, inplace)
        calls.append(len(calls))
        return x * dropout[len(calls) - 1]

    model._init_pair_state = lambda reference_tensor: pair_state.clone()
    reference.F.dropout = fed_dropout
    try:
        with torch.no_grad():
            out = model(atom_inputs=atoms, lm_hidden_states=lm_hidden_states, num_loops=num_loops, **inputs)
    finally:
        reference.F.dropout = original
        del model._init_pair_state
    expected_calls = 0 if lm_hidden_states is None or dropout is None else len(dropout)
    assert len(calls) == expected_calls, f"the reference drew LM dropout {len(calls)} times, not {expected_calls}"
    return out
