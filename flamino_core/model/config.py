"""Model configuration: one frozen dataclass for every family (``families.py`` declares what
differs between them), built from presets, Hugging Face ``config.json`` files or saved JSON."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from flamino_core.model.families import (
    MAX_RESIDUES, PRESETS, families_sentence, family, family_from_name, rotary_esm_family,
)

__all__ = ["MAX_RESIDUES", "PRESETS", "ModelConfig", "ModelConfig"]


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Shape and numerics of a model of any family (``family``: a ``families.FAMILIES`` id).

    Defaults are those of every published ESM-2 checkpoint; only the sizes differ. What a family
    changes beyond the sizes (positions, heads, output width) is its ``families.Family``.
    """

    num_layers: int
    embed_dim: int
    attention_heads: int
    ffn_dim: int
    vocab_size: int = 33
    token_dropout: bool = True
    layer_norm_eps: float = 1e-5  # nnx.LayerNorm defaults to 1e-6: breaks parity
    rotary_base: float = 10000.0
    name: str = "custom"
    family: str = "esm2"  # configs saved before families existed are ESM-2's

    def __post_init__(self) -> None:
        family(self.family)  # an unknown family is refused here, with the known ones named
        if self.embed_dim % self.attention_heads:
            raise ValueError(
                f"embed_dim {self.embed_dim} is not divisible by attention_heads {self.attention_heads}"
            )

    @property
    def head_dim(self) -> int:
        return self.embed_dim // self.attention_heads

    @classmethod
    def preset(cls, name: str) -> "ModelConfig":
        """The configuration of a published checkpoint, e.g. ``esm2_t6_8M_UR50D``."""
        try:
            p = PRESETS[name]
        except KeyError:
            known = ", ".join(PRESETS)
            raise ValueError(f"unknown preset {name!r}; known presets: {known}") from None
        if p.family == "esmc":
            return cls.esmc(p.layers, p.dim, p.heads, name=name)
        return cls(num_layers=p.layers, embed_dim=p.dim, attention_heads=p.heads, ffn_dim=4 * p.dim, name=name,
                   family=p.family, vocab_size=family(p.family).output_width)

    @classmethod
    def esmc(cls, layers: int, dim: int, heads: int, name: str = "custom") -> "ModelConfig":
        """An ESM C shape: SwiGLU hidden width 8/3 of ``dim`` rounded up to a multiple of 256
        (esm 3.x ``swiglu_correction_fn``), a 64-wide output, no token dropout."""
        hidden = int((8 / 3 * dim + 255) // 256 * 256)
        return cls(num_layers=layers, embed_dim=dim, attention_heads=heads, ffn_dim=hidden, vocab_size=64,
                   token_dropout=False, name=name, family="esmc")

    @classmethod
    def tiny(cls, family_id: str = "esm2") -> "ModelConfig":
        """A two-layer model for fast tests and the offline "untrained test model"."""
        if family_id == "esmc":
            return cls.esmc(2, 32, 4, name="tiny-esmc")
        return cls(num_layers=2, embed_dim=32, attention_heads=4, ffn_dim=64, name="tiny", family=family_id,
                   vocab_size=family(family_id).output_width)

    # --- serialisation -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ModelConfig":
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in fields})

    def save(self, path: Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> "ModelConfig":
        return cls.from_dict(json.loads(Path(path).read_text()))

    @classmethod
    def from_hf_config(cls, hf: dict[str, Any], name: str = "custom") -> "ModelConfig":
        """Read a transformers ``config.json`` (as a dict): ``EsmConfig`` (ESM-2 with rotary
        positions; ESM-1b/ESM-1v with absolute ones, told apart by ``name``) or ``EsmcConfig``.

        Raises:
          ValueError: one sentence naming the families flamino reads, for any other model.
        """
        model_type = hf.get("model_type")
        if model_type == "esmc":
            rope = hf.get("rope_parameters") or {}
            sizes = (int(hf["num_hidden_layers"]), int(hf["hidden_size"]), int(hf["num_attention_heads"]))
            config = cls.esmc(*sizes, name=name)
            return dataclasses.replace(config, ffn_dim=int(hf.get("intermediate_size", config.ffn_dim)),
                                       vocab_size=int(hf.get("vocab_size", 64)),
                                       rotary_base=float(rope.get("rope_theta", 10000.0)))
        if model_type != "esm" or hf.get("is_folding_model"):
            what = "an ESMFold checkpoint" if hf.get("is_folding_model") else f"model type {model_type!r}"
            raise ValueError(f"{what} is not a language model flamino reads; it reads {families_sentence()}")
        positions = hf.get("position_embedding_type", "rotary")
        if positions == "absolute" and hf.get("emb_layer_norm_before"):
            family_id = family_from_name(name, "esm1b")  # ESM-1b and ESM-1v share config.json
        elif positions == "rotary" and not hf.get("emb_layer_norm_before"):
            family_id = rotary_esm_family(int(hf.get("vocab_size", 33)))  # ESM-2, or SaProt's 446 tokens
        else:
            raise ValueError(f"an ESM model with {positions!r} positions and emb_layer_norm_before="
                             f"{hf.get('emb_layer_norm_before')} is none of those flamino reads; "
                             f"it reads {families_sentence()}")
        return cls(
            num_layers=int(hf["num_hidden_layers"]),
            embed_dim=int(hf["hidden_size"]),
            attention_heads=int(hf["num_attention_heads"]),
            ffn_dim=int(hf.get("intermediate_size", 4 * int(hf["hidden_size"]))),
            vocab_size=int(hf.get("vocab_size", 33)),
            token_dropout=bool(hf.get("token_dropout", True)),
            layer_norm_eps=float(hf.get("layer_norm_eps", 1e-5)),
            name=name,
            family=family_id,
        )

    def to_hf_config(self) -> dict[str, Any]:
        """The ``config.json`` transformers writes for an ESM-2, ESM-1b or ESM-1v model of this shape."""
        learned = family(self.family).positions == "learned"
        if family(self.family).network != family("esm2").network:
            raise ValueError(f"{family(self.family).title} has no EsmConfig")
        return {
            "architectures": ["EsmForMaskedLM"],
            "model_type": "esm",
            "attention_probs_dropout_prob": 0.0,
            "hidden_dropout_prob": 0.0,
            "hidden_act": "gelu",
            "emb_layer_norm_before": learned,
            "hidden_size": self.embed_dim,
            "intermediate_size": self.ffn_dim,
            "num_attention_heads": self.attention_heads,
            "num_hidden_layers": self.num_layers,
            "layer_norm_eps": self.layer_norm_eps,
            "max_position_embeddings": 1026,
            "position_embedding_type": "absolute" if learned else "rotary",
            "token_dropout": self.token_dropout,
            "vocab_size": self.vocab_size,
            "mask_token_id": family(self.family).mask_token,
            "pad_token_id": 1,
            "cls_token_id": 0,
            "eos_token_id": 2,
            "initializer_range": 0.02,
            "use_cache": True,
            "is_folding_model": False,
            "torch_dtype": "float32",
        }



ESM2Config = ModelConfig  # the name of earlier versions, when ESM-2 was the only family
