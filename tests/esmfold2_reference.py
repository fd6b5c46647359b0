"""Helpers for comparing ESMFold2's NNX modules with transformers' on the same weights: copy a
reference submodule's ``state_dict`` into ours by the checkpoint key map (a ``Linear``'s
``weight`` is our ``kernel`` transposed, a LayerNorm's ``weight`` our ``scale``, every other name
the same, ``layers.N`` our ``nnx.List`` index), strictly; and the reference's featurised atom and
token inputs as the trunk hands them to its embedder (``EsmFold2Model._prepare_features``).
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
import torch
from flax import nnx

from flamino_core.model.esmfold2.atoms import AtomInputs
from flamino_core.model.esmfold2.config import EsmFold2Config


def flamino_config(hf_model) -> EsmFold2Config:
    """Our config read from the reference model's config.json dict, as the loader reads it."""
    return EsmFold2Config.from_dict(hf_model.config.to_dict())


def load_torch_into(module: nnx.Module, state_dict: dict[str, torch.Tensor], prefix: str = "") -> None:
    """Copy every ``prefix``-ed torch tensor into ``module``; every key of either side unmatched,
    or misshapen, is listed in one AssertionError (so a missing or misnamed attribute fails)."""
    ours = nnx.to_flat_state(nnx.state(module, nnx.Param))
    leaves = {tuple(path): var for path, var in ours}
    filled, problems = set(), []
    for key, tensor in state_dict.items():
        if not key.startswith(prefix):
            continue
        parts = tuple(int(p) if p.isdigit() else p for p in key[len(prefix):].split("."))
        value = tensor.detach().float().numpy()
        path = parts
        if parts[-1] == "weight":
            if parts[:-1] + ("kernel",) in leaves:
                path, value = parts[:-1] + ("kernel",), value.T
            else:
                path = parts[:-1] + ("scale",)
        if path not in leaves:
            problems.append(f"unexpected {key}")
            continue
        if leaves[path].value.shape != value.shape:
            problems.append(f"misshapen {key}: {value.shape} vs ours {leaves[path].value.shape}")
            continue
        leaves[path].value = jnp.asarray(value)
        filled.add(path)
    problems += [f"missing {'.'.join(map(str, p))}" for p in leaves if p not in filled]
    assert not problems, "; ".join(problems)
    nnx.update(module, nnx.from_flat_state([(p, leaves[p]) for p in leaves]))


def jnp_of(tensor: torch.Tensor) -> jnp.ndarray:
    return jnp.asarray(tensor.detach().numpy())


def prepared_inputs(hf_model, features: dict) -> dict:
    """The reference's embedder inputs for a featurised batch: (torch kwargs, our kwargs), the
    atom features one-hot and zeroed at padding by the reference's own ``_prepare_features``."""
    from transformers.models.esmfold2.modeling_esmfold2 import EsmFold2AtomInputs

    f = features
    deletion = f.get("deletion_mean")
    res_type_oh, profile, deletion, element, chars, atom_to_token = hf_model._prepare_features(
        res_type=f["res_type"], attention_mask=f["attention_mask"], msa=None, msa_attention_mask=None,
        deletion_mean=deletion, ref_element=f["ref_element"], ref_atom_name_chars=f["ref_atom_name_chars"],
        atom_attention_mask=f["atom_attention_mask"], atom_to_token=f["atom_to_token"])
    atoms = EsmFold2AtomInputs(ref_pos=f["ref_pos"].float(), ref_charge=f["ref_charge"].float(),
                               atom_attention_mask=f["atom_attention_mask"], ref_element=element,
                               ref_atom_name_chars=chars, ref_space_uid=f["ref_space_uid"],
                               atom_to_token=atom_to_token)
    tokens = dict(res_type_one_hot=res_type_oh, profile=profile, deletion_mean=deletion,
                  token_index=f["token_index"], residue_index=f["residue_index"], asym_id=f["asym_id"],
                  sym_id=f["sym_id"], entity_id=f["entity_id"], token_bonds=f["token_bonds"].float())
    ours = AtomInputs(**{field.name: jnp_of(getattr(atoms, field.name)) for field in dataclasses.fields(atoms)})
    return dict(torch_atoms=atoms, torch_tokens=tokens, atoms=ours,
                tokens={k: jnp_of(v) for k, v in tokens.items()})


def max_abs(ours, theirs: torch.Tensor) -> float:
    return float(np.max(np.abs(np.asarray(ours, dtype=np.float64) - theirs.detach().double().numpy())))
