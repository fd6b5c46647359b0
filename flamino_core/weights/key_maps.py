"""EvolutionaryScale's ESM C ``.pth`` state dicts in transformers' ``EsmcForMaskedLM`` names.

The key names are those of the published code (esm 3.1, ``esm/models/esmc.py`` and the layers
it builds: ``nn.Embedding`` ``embed``; ``TransformerStack`` ``transformer.blocks.N`` and
``transformer.norm``; ``RegressionHead`` ``sequence_head.0/2/3``). In each block the attention's
LayerNorm and fused q/k/v projection are ``attn.layernorm_qkv.0`` and ``.1`` (the projection's
rows: q, then k, then v, as ``torch.chunk(qkv, 3, dim=-1)`` splits its output), and the
feed-forward is ``ffn.0`` (LayerNorm), ``ffn.1`` (one Linear to twice the hidden width: the
SwiGLU gate's half first, as ``SwiGLU.forward``'s ``x.chunk(2)`` takes ``silu(x1) * x2``) and
``ffn.3`` (down). transformers' converter splits the same tensors the same way.
"""

from __future__ import annotations

import re
from typing import Mapping

import numpy as np

_BLOCK = re.compile(r"transformer\.blocks\.(\d+)\.(.+)")
# Renames within a block (no split) and outside the blocks.
_BLOCK_RENAMES = {
    "attn.layernorm_qkv.0.weight": "input_layernorm.weight",
    "attn.layernorm_qkv.0.bias": "input_layernorm.bias",
    "attn.out_proj.weight": "self_attn.o_proj.weight",
    "attn.q_ln.weight": "self_attn.q_norm.weight",
    "attn.k_ln.weight": "self_attn.k_norm.weight",
    "ffn.0.weight": "post_attention_layernorm.weight",
    "ffn.0.bias": "post_attention_layernorm.bias",
    "ffn.3.weight": "mlp.down_proj.weight",
}
_SPLITS = {
    "attn.layernorm_qkv.1.weight": ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"),
    "ffn.1.weight": ("mlp.gate_proj.weight", "mlp.up_proj.weight"),
}
_TOP = {
    "embed.weight": "embed_tokens.weight",
    "transformer.norm.weight": "norm.weight",
    "sequence_head.0.weight": "lm_head.dense.weight",
    "sequence_head.0.bias": "lm_head.dense.bias",
    "sequence_head.2.weight": "lm_head.layer_norm.weight",
    "sequence_head.2.bias": "lm_head.layer_norm.bias",
    "sequence_head.3.weight": "lm_head.decoder.weight",
    "sequence_head.3.bias": "lm_head.decoder.bias",
}


def is_evolutionaryscale(state_dict: Mapping[str, np.ndarray]) -> bool:
    return any(key.startswith("transformer.blocks.") for key in state_dict)


def esmc_from_evolutionaryscale(state_dict: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The same tensors under transformers' names; keys it does not know are kept as they are
    (the conversion then lists them as unexpected)."""
    out: dict[str, np.ndarray] = {}
    for key, value in state_dict.items():
        block = _BLOCK.fullmatch(key)
        if block is None:
            out[_TOP.get(key, key)] = value
            continue
        layer, inner = block.groups()
        if inner in _SPLITS:
            parts = _SPLITS[inner]
            for name, piece in zip(parts, np.split(np.asarray(value), len(parts), axis=0)):
                out[f"layers.{layer}.{name}"] = piece
        else:
            out[f"layers.{layer}.{_BLOCK_RENAMES.get(inner, inner)}"] = value
    return out


def evolutionaryscale_shape(state_dict: Mapping[str, np.ndarray]) -> tuple[int, int, int]:
    """(layers, width, heads) of an EvolutionaryScale ``.pth``, which stores no config: layers
    counted, width from the embedding, heads from a head width of 64 (every published ESM C:
    960 / 15, 1152 / 18, 2560 / 40)."""
    layers = len({m.group(1) for key in state_dict if (m := _BLOCK.fullmatch(key))})
    width = int(np.shape(state_dict["embed.weight"])[1])
    return layers, width, width // 64
