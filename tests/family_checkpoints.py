"""Random checkpoints of ESM-1b / ESM-1v and ESM C written by the references' own code, in the
published layouts (tests/reference_checkpoints.py does the same for ESM-2):

- ESM-1b / ESM-1v: transformers' ``EsmForMaskedLM`` with absolute positions and
  ``emb_layer_norm_before`` (written by ``save_pretrained``, and in the 2022 Hub key names of the
  published folders); fair-esm's ``ProteinBertModel`` (arch ``roberta_large``) saved as fair-esm's
  ``.pt`` files are laid out (keys under ``encoder.sentence_encoder.``, an ``args`` Namespace with
  ``encoder_`` prefixes), read back by fair-esm's own loader as the reference.
- ESM C: transformers' ``EsmcForMaskedLM`` (``save_pretrained``), and the same tensors under
  EvolutionaryScale's ``.pth`` key names. The ``esm`` 3.x package cannot be installed beside
  fair-esm (both are the ``esm`` module), so those names are written here from its published
  code (esm 3.1: ``esm/models/esmc.py``, ``esm/layers/{blocks,attention,transformer_stack,
  regression_head}.py``), independently of flamino's ``weights/key_maps.py``.

Weights are drawn as reference_checkpoints.randomize_ does: well away from the identity.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from flamino_core.model.config import ModelConfig
from reference_checkpoints import EMBEDDING_STD, randomize_


def esm1b_config(family: str = "esm1b", layers: int = 2, dim: int = 32, heads: int = 4) -> ModelConfig:
    return ModelConfig(num_layers=layers, embed_dim=dim, attention_heads=heads, ffn_dim=4 * dim,
                       name=f"{family}-t{layers}-{dim}", family=family)


def make_hf_esm1b(config: ModelConfig, seed: int):
    """An ``EsmForMaskedLM`` with learned positions (the ESM-1b/1v config.json), eager attention."""
    from transformers import EsmConfig, EsmForMaskedLM

    hf = config.to_hf_config()
    assert hf["position_embedding_type"] == "absolute" and hf["emb_layer_norm_before"]
    torch.manual_seed(seed)
    cfg = EsmConfig(**hf)
    cfg._attn_implementation = "eager"  # SDPA returns no attention maps
    model = EsmForMaskedLM(cfg).eval()
    randomize_(model, seed)
    with torch.no_grad():  # positions drawn like the token embeddings, not as Linear weights
        table = model.esm.embeddings.position_embeddings.weight
        table.copy_(EMBEDDING_STD * torch.randn(table.shape, generator=torch.Generator().manual_seed(seed + 1)))
    return model


def write_hf_esm1b_2022(model, config: ModelConfig, directory: Path) -> Path:
    """The key names of the published 2022 folders (facebook/esm1b_t33_650M_UR50S): LayerNorm
    weight/bias, a stored copy of the tied decoder, the position_ids buffer, no rotary buffers;
    the config.json transformers 4.2x wrote."""
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    out = {k.replace(".gamma", ".weight").replace(".beta", ".bias"): v.detach().clone().contiguous()
           for k, v in model.state_dict().items()}
    out["lm_head.decoder.weight"] = out["esm.embeddings.word_embeddings.weight"].clone()
    out["esm.embeddings.position_ids"] = torch.arange(1026)[None]
    save_file(out, str(directory / "model.safetensors"), metadata={"format": "pt"})
    hf = config.to_hf_config()
    hf["transformers_version"] = "4.25.0.dev0"
    (directory / "config.json").write_text(json.dumps(hf, indent=2))
    return directory


def make_fair_esm1b(config: ModelConfig, seed: int):
    """fair-esm's ``ProteinBertModel`` in its ESM-1b form (``arch='roberta_large'``)."""
    import esm

    args = argparse.Namespace(arch="roberta_large", layers=config.num_layers, embed_dim=config.embed_dim,
                              ffn_embed_dim=config.ffn_dim, attention_heads=config.attention_heads,
                              max_positions=1024, token_dropout=config.token_dropout, emb_layer_norm_before=True,
                              dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
    alphabet = esm.data.Alphabet.from_architecture("roberta_large")
    model = esm.model.esm1.ProteinBertModel(args, alphabet).eval()
    randomize_(model, seed)
    return model, args


def write_fair_esm1b_pt(model, args, path: Path, regression: bool = True) -> Path:
    """``<name>.pt`` as fair-esm distributes ESM-1b / ESM-1v: the model under
    ``encoder.sentence_encoder.`` (the LM head under ``encoder.lm_head.``), its args with
    ``encoder_`` prefixes; the contact regression in ``<name>-contact-regression.pt``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body, head = {}, {}
    for k, v in model.state_dict().items():
        v = v.detach()  # not cloned: the tied decoder keeps sharing the embedding's storage, as published
        if k.startswith("contact_head."):
            head[k] = v
        elif k.startswith("lm_head."):
            body["encoder." + k] = v
        else:
            body["encoder.sentence_encoder." + k] = v
    stored = argparse.Namespace(arch="roberta_large", encoder_layers=args.layers, encoder_embed_dim=args.embed_dim,
                                encoder_ffn_embed_dim=args.ffn_embed_dim,
                                encoder_attention_heads=args.attention_heads, max_positions=args.max_positions,
                                token_dropout=args.token_dropout, dropout=0.0, attention_dropout=0.0,
                                activation_dropout=0.0)
    torch.save({"model": body, "args": stored}, path)
    if regression:
        torch.save({"model": head}, path.with_name(path.stem + "-contact-regression.pt"))
    return path


def fair_esm_reference(path: Path):
    """The model fair-esm's own loader builds from the files (its <mask> row zeroed on load)."""
    import esm

    # fair-esm 2.0 calls torch.load without weights_only; torch 2.6+ then refuses its Namespace.
    with torch.serialization.safe_globals([argparse.Namespace]):
        model, alphabet = esm.pretrained.load_model_and_alphabet_local(str(path))
    return model.eval(), alphabet


# --- ESM C -------------------------------------------------------------------------------------
def make_hf_esmc(config: ModelConfig, seed: int):
    from transformers import EsmcConfig, EsmcForMaskedLM

    cfg = EsmcConfig(vocab_size=config.vocab_size, hidden_size=config.embed_dim, intermediate_size=config.ffn_dim,
                     num_hidden_layers=config.num_layers, num_attention_heads=config.attention_heads)
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = EsmcForMaskedLM(cfg).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=gen)
            if "norm" in name.rsplit(".", 2)[-2]:  # every LayerNorm: q_norm, input_layernorm, norm, ...
                param.copy_(1.0 + 0.3 * noise if name.endswith("weight") else 0.3 * noise)
            elif "embed" in name:
                param.copy_(noise)  # not tied: the LM head has a decoder of its own
            elif name.endswith("bias"):
                param.copy_(0.2 * noise)
            else:
                param.copy_(noise * (1.5 / param.shape[-1] ** 0.5))
    return model


def evolutionaryscale_state_dict(model) -> dict[str, torch.Tensor]:
    """The HF model's tensors under esm 3.1's ESMC names (fused q/k/v and gate/up rows)."""
    sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
    out = {"embed.weight": sd.pop("esmc.embed_tokens.weight"), "transformer.norm.weight": sd.pop("esmc.norm.weight")}
    for ours, theirs in (("dense", "0"), ("layer_norm", "2"), ("decoder", "3")):
        for leaf in ("weight", "bias"):
            out[f"sequence_head.{theirs}.{leaf}"] = sd.pop(f"lm_head.{ours}.{leaf}")
    for i in range(model.config.num_hidden_layers):
        p, b = f"esmc.layers.{i}.", f"transformer.blocks.{i}."
        take = lambda name: sd.pop(p + name)  # noqa: E731
        out[b + "attn.layernorm_qkv.0.weight"] = take("input_layernorm.weight")
        out[b + "attn.layernorm_qkv.0.bias"] = take("input_layernorm.bias")
        out[b + "attn.layernorm_qkv.1.weight"] = torch.cat(
            [take("self_attn.q_proj.weight"), take("self_attn.k_proj.weight"), take("self_attn.v_proj.weight")])
        out[b + "attn.out_proj.weight"] = take("self_attn.o_proj.weight")
        out[b + "attn.q_ln.weight"] = take("self_attn.q_norm.weight")
        out[b + "attn.k_ln.weight"] = take("self_attn.k_norm.weight")
        out[b + "ffn.0.weight"] = take("post_attention_layernorm.weight")
        out[b + "ffn.0.bias"] = take("post_attention_layernorm.bias")
        out[b + "ffn.1.weight"] = torch.cat([take("mlp.gate_proj.weight"), take("mlp.up_proj.weight")])
        out[b + "ffn.3.weight"] = take("mlp.down_proj.weight")
    assert not sd, f"tensors left unmapped: {sorted(sd)}"
    return out


def windowed_reference(run_window, length: int, starts: list[int], window: int) -> np.ndarray:
    """Per-residue outputs of a long sequence from the reference run window by window
    (``run_window(start) -> (window residues, ...)``), averaged where windows overlap."""
    total, count = None, np.zeros(length)
    for start in starts:
        values = np.asarray(run_window(start), np.float64)
        if total is None:
            total = np.zeros((length,) + values.shape[1:])
        total[start:start + len(values)] += values
        count[start:start + len(values)] += 1
    return total / count.reshape((-1,) + (1,) * (total.ndim - 1))
