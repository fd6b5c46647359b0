"""Model configuration: one frozen dataclass, one preset per published ESM-2 checkpoint."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

# Maximum residues per window: ESM-2 was trained on crops of 1024 tokens, i.e. 1022 residues
# plus <cls> and <eos>.
MAX_RESIDUES = 1022


@dataclasses.dataclass(frozen=True)
class ESM2Config:
    """Shape and numerics of an ESM-2 model.

    Defaults are those of every published ESM-2 checkpoint; only the sizes differ.
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

    def __post_init__(self) -> None:
        if self.embed_dim % self.attention_heads:
            raise ValueError(
                f"embed_dim {self.embed_dim} is not divisible by attention_heads {self.attention_heads}"
            )

    @property
    def head_dim(self) -> int:
        return self.embed_dim // self.attention_heads

    @classmethod
    def preset(cls, name: str) -> "ESM2Config":
        """The configuration of a published checkpoint, e.g. ``esm2_t6_8M_UR50D``."""
        try:
            layers, dim, heads, _ = PRESETS[name]
        except KeyError:
            known = ", ".join(PRESETS)
            raise ValueError(f"unknown ESM-2 preset {name!r}; known presets: {known}") from None
        return cls(num_layers=layers, embed_dim=dim, attention_heads=heads, ffn_dim=4 * dim, name=name)

    @classmethod
    def tiny(cls) -> "ESM2Config":
        """A two-layer model for fast tests and the offline "untrained test model"."""
        return cls(num_layers=2, embed_dim=32, attention_heads=4, ffn_dim=64, name="tiny")

    # --- serialisation -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ESM2Config":
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in fields})

    def save(self, path: Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> "ESM2Config":
        return cls.from_dict(json.loads(Path(path).read_text()))

    @classmethod
    def from_hf_config(cls, hf: dict[str, Any], name: str = "custom") -> "ESM2Config":
        """Read a transformers ``EsmConfig`` ``config.json`` (as a dict)."""
        if hf.get("position_embedding_type", "rotary") != "rotary":
            raise ValueError(
                "only ESM-2 models (rotary position embeddings) are supported; this config uses "
                f"{hf.get('position_embedding_type')!r} positions (ESM-1b/ESM-1v?)"
            )
        if hf.get("emb_layer_norm_before"):
            raise ValueError("emb_layer_norm_before=True is an ESM-1b feature, not ESM-2")
        if hf.get("is_folding_model"):
            raise ValueError("ESMFold checkpoints are not supported; use an ESM-2 language model")
        return cls(
            num_layers=int(hf["num_hidden_layers"]),
            embed_dim=int(hf["hidden_size"]),
            attention_heads=int(hf["num_attention_heads"]),
            ffn_dim=int(hf.get("intermediate_size", 4 * int(hf["hidden_size"]))),
            vocab_size=int(hf.get("vocab_size", 33)),
            token_dropout=bool(hf.get("token_dropout", True)),
            layer_norm_eps=float(hf.get("layer_norm_eps", 1e-5)),
            name=name,
        )

    def to_hf_config(self) -> dict[str, Any]:
        """The ``config.json`` transformers writes for an ESM-2 model of this shape."""
        return {
            "architectures": ["EsmForMaskedLM"],
            "model_type": "esm",
            "attention_probs_dropout_prob": 0.0,
            "hidden_dropout_prob": 0.0,
            "hidden_act": "gelu",
            "emb_layer_norm_before": False,
            "hidden_size": self.embed_dim,
            "intermediate_size": self.ffn_dim,
            "num_attention_heads": self.attention_heads,
            "num_hidden_layers": self.num_layers,
            "layer_norm_eps": self.layer_norm_eps,
            "max_position_embeddings": 1026,
            "position_embedding_type": "rotary",
            "token_dropout": self.token_dropout,
            "vocab_size": self.vocab_size,
            "mask_token_id": 32,
            "pad_token_id": 1,
            "cls_token_id": 0,
            "eos_token_id": 2,
            "initializer_range": 0.02,
            "use_cache": True,
            "is_folding_model": False,
            "torch_dtype": "float32",
        }


# name -> (layers, embed dim, heads, parameter count in words)
PRESETS: dict[str, tuple[int, int, int, str]] = {
    "esm2_t6_8M_UR50D": (6, 320, 20, "8M"),
    "esm2_t12_35M_UR50D": (12, 480, 20, "35M"),
    "esm2_t30_150M_UR50D": (30, 640, 20, "150M"),
    "esm2_t33_650M_UR50D": (33, 1280, 20, "650M"),
    "esm2_t36_3B_UR50D": (36, 2560, 40, "3B"),
    "esm2_t48_15B_UR50D": (48, 5120, 40, "15B"),
}
