"""Random-weight checkpoints written in the exact published formats, plus their PyTorch models.

No pretrained weights reach the test machines, so the tests write their own checkpoints the
way the Hub and fair-esm ship them. Weights are drawn larger than the default initialisation
(std 0.02 makes every layer nearly the identity and hides errors) so that any mismatch in
token dropout, rotary, LayerNorm or attention shows up in the outputs.

The scale is chosen for the 1e-4 parity bound to mean something in both directions (see
``EMBEDDING_STD`` and ``tests/parity/test_parity.py::test_bound_separates_rounding_from_modelling_errors``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from flamino_core.model.config import ESM2Config

# The rotary inv_freq as the published ESM-2 checkpoints store it: computed, then kept in fp16.
def published_inv_freq(head_dim: int) -> torch.Tensor:
    inv = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
    return inv.half().float()


def hf_config(config: ESM2Config):
    from transformers import EsmConfig

    return EsmConfig(**config.to_hf_config())


# Standard deviation of the token embeddings (which are also the tied LM decoder).
# Logits are sums of D products of a normalised hidden state with these rows, so fp32 rounding
# in those sums (XLA and PyTorch add in different orders) grows with this scale. At 1.0 (50x
# the default init) t6 logits reach ~70 and XLA-vs-PyTorch differences reach 1.3e-4: the 1e-4
# bound was then a coin toss on the seed. At 0.1 logits reach ~8 (a trained ESM-2's range:
# log-probabilities spanning ~10 nats), and over 20 seeds the worst difference was 1.2e-5 at
# t6, 9.6e-6 at tiny, while each modelling error the suite guards against (tanh GELU, LayerNorm
# eps 1e-6, recomputed inv_freq, no token-dropout scaling) still moves some logit by 4.5e-4 or
# more. The other scales (1.5/sqrt(fan_in) gains, 0.3 LayerNorm noise) keep every block far
# from the identity.
EMBEDDING_STD = 0.1


def randomize_(model: torch.nn.Module, seed: int, embedding_std: float = EMBEDDING_STD) -> None:
    """Fill every parameter with values well away from the defaults (fixed by ``seed``)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=gen)
            if "LayerNorm" in name or "layer_norm" in name or "layernorm" in name.lower():
                param.copy_(1.0 + 0.3 * noise if name.endswith(("weight", "gamma")) else 0.3 * noise)
            elif "embed" in name:
                param.copy_(embedding_std * noise)
            elif name.endswith("bias"):
                param.copy_(0.2 * noise)
            else:
                fan_in = param.shape[-1]
                param.copy_(noise * (1.5 / fan_in**0.5))


def make_hf_model(config: ESM2Config, seed: int = 0, embedding_std: float = EMBEDDING_STD):
    """An ``EsmForMaskedLM`` with large random weights and the published fp16 ``inv_freq``."""
    from transformers import EsmForMaskedLM

    torch.manual_seed(seed)
    model = EsmForMaskedLM(hf_config(config)).eval()
    randomize_(model, seed, embedding_std)
    with torch.no_grad():
        for name, buf in model.named_buffers():
            if name.endswith("inv_freq"):
                buf.copy_(published_inv_freq(config.head_dim))
    return model


def write_hf_2022(model, config: ESM2Config, directory: Path, fmt: str = "safetensors") -> Path:
    """Write the 2022 Hub layout: per-layer inv_freq, LayerNorm weight/bias, a stored copy of
    the tied decoder weight, the position_ids buffer, and the config transformers wrote then."""
    directory.mkdir(parents=True, exist_ok=True)
    sd = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    inv = sd.pop("esm.rotary_embeddings.inv_freq", None)
    if inv is None:
        inv = published_inv_freq(config.head_dim)
    out = {}
    for k, v in sd.items():
        k = k.replace(".gamma", ".weight").replace(".beta", ".bias")
        out[k] = v
    for i in range(config.num_layers):
        out[f"esm.encoder.layer.{i}.attention.self.rotary_embeddings.inv_freq"] = inv.clone()
    out["lm_head.decoder.weight"] = out["esm.embeddings.word_embeddings.weight"].clone()
    out["esm.embeddings.position_ids"] = torch.arange(1026)[None]
    if fmt == "safetensors":
        from safetensors.torch import save_file

        save_file(out, str(directory / "model.safetensors"), metadata={"format": "pt"})
    else:
        torch.save(out, directory / "pytorch_model.bin")
    hf = config.to_hf_config()
    hf["transformers_version"] = "4.25.0.dev0"
    (directory / "config.json").write_text(json.dumps(hf, indent=2))
    return directory


def write_hf_5x(model, directory: Path) -> Path:
    """Let transformers 5.x's own save_pretrained write the files."""
    model.save_pretrained(directory)
    return directory


def make_fair_esm_model(config: ESM2Config, seed: int = 0):
    import esm

    alphabet = esm.data.Alphabet.from_architecture("ESM-1b")
    model = esm.model.esm2.ESM2(
        num_layers=config.num_layers,
        embed_dim=config.embed_dim,
        attention_heads=config.attention_heads,
        alphabet=alphabet,
        token_dropout=config.token_dropout,
    ).eval()
    randomize_(model, seed)
    with torch.no_grad():
        for name, buf in model.named_buffers():
            if name.endswith("inv_freq"):
                buf.copy_(published_inv_freq(config.head_dim))
    return model, alphabet


def write_fair_esm_pt(model, config: ESM2Config, path: Path) -> Path:
    """Write ``<name>.pt`` and ``<name>-contact-regression.pt`` as fair-esm distributes them:
    keys under ``encoder.sentence_encoder.`` / ``encoder.lm_head.``, the config as an
    ``argparse.Namespace`` under ``cfg['model']``, contact regression in its own file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body, regression = {}, {}
    for k, v in model.state_dict().items():
        v = v.detach().clone()
        if k.startswith("contact_head."):
            regression[k] = v
        elif k.startswith("lm_head."):
            body["encoder." + k] = v
        else:
            body["encoder.sentence_encoder." + k] = v
    cfg = argparse.Namespace(
        encoder_layers=config.num_layers,
        encoder_embed_dim=config.embed_dim,
        encoder_ffn_embed_dim=config.ffn_dim,
        encoder_attention_heads=config.attention_heads,
        token_dropout=config.token_dropout,
        arch="esm2",
    )
    torch.save({"model": body, "cfg": {"model": cfg}, "args": None}, path)
    torch.save({"model": regression}, path.with_name(path.stem + "-contact-regression.pt"))
    return path


def hf_forward(model, tokens: np.ndarray, **kwargs):
    with torch.no_grad():
        t = torch.as_tensor(tokens, dtype=torch.long)
        return model(input_ids=t, attention_mask=(t != 1).long(), **kwargs)
