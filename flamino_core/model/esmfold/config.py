"""ESMFold's shape: the ESM-2 stem (a ``ModelConfig``), the folding trunk and the structure
module, as frozen dataclasses read from transformers' ``EsmConfig(is_folding_model=True)``
``config.json`` (its ``esmfold_config.trunk.structure_module`` nesting) and compared field by
field when a checkpoint must have a given shape.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from flamino_core.model.config import ModelConfig
from flamino_core.options import Precision

# The stem's precision: fp32 (the reference's numbers) or bf16, the language-model engine's opt-in
# mode for the stem's dense layers alone (kernels stored bf16, products accumulated in fp32; the
# trunk and the structure module stay fp32). esmfold_v1's stem is 2.8 of its 3.5 billion weights:
# in bf16 its dense kernels take 5.6 GB less, what lets a long fold fit a 16 GiB chip. The esm
# repository itself runs the stem in fp16. Not reference numbers: labelled wherever a fold is shown.
STEM_PRECISIONS = (Precision.FP32.value, Precision.BF16.value)


@dataclasses.dataclass(frozen=True)
class StructureModuleConfig:
    """The structure module (AlphaFold 2's Algorithm 20); defaults are esmfold_v1's."""

    sequence_dim: int = 384
    pairwise_dim: int = 128
    ipa_dim: int = 16  # per head
    resnet_dim: int = 128
    num_heads_ipa: int = 12
    num_qk_points: int = 4
    num_v_points: int = 8
    num_blocks: int = 8  # iterations sharing one set of weights
    num_transition_layers: int = 1
    num_resnet_blocks: int = 2
    num_angles: int = 7
    trans_scale_factor: float = 10.0  # the module works in nm-ish units; positions are x10 Angstrom
    epsilon: float = 1e-8
    inf: float = 1e5


@dataclasses.dataclass(frozen=True)
class TrunkConfig:
    """The folding trunk: ``num_blocks`` triangular self-attention blocks; defaults are esmfold_v1's."""

    num_blocks: int = 48
    sequence_state_dim: int = 1024
    pairwise_state_dim: int = 128
    sequence_head_width: int = 32
    pairwise_head_width: int = 32
    position_bins: int = 32
    max_recycles: int = 4  # passes through the trunk when no count is asked for
    structure_module: StructureModuleConfig = StructureModuleConfig()

    def __post_init__(self) -> None:
        for width, head in (("sequence_state_dim", "sequence_head_width"),
                            ("pairwise_state_dim", "pairwise_head_width")):
            if getattr(self, width) % getattr(self, head):
                raise ValueError(f"{width} {getattr(self, width)} is not a multiple of {head} {getattr(self, head)}")


@dataclasses.dataclass(frozen=True)
class FoldConfig:
    """ESMFold: an ESM-2 stem, the trunk and the heads."""

    stem: ModelConfig
    trunk: TrunkConfig = TrunkConfig()
    lddt_head_hid_dim: int = 128
    embed_aa: bool = True  # the trunk's input adds an embedding of the residue type
    name: str = "custom"

    @classmethod
    def esmfold_v1(cls) -> "FoldConfig":
        """facebook/esmfold_v1: ESM-2 3B (36 layers, width 2560, 40 heads) and the defaults above."""
        return cls(stem=ModelConfig.preset("esm2_t36_3B_UR50D"), name="esmfold_v1")

    @classmethod
    def tiny(cls) -> "FoldConfig":
        """A small ESMFold for tests and the untrained test model (``random:esmfold-tiny``):
        every head and point count above one, two trunk blocks, three passes."""
        return cls(stem=ModelConfig.tiny(), lddt_head_hid_dim=16, name="esmfold-tiny", trunk=TrunkConfig(
            num_blocks=2, sequence_state_dim=64, pairwise_state_dim=32, sequence_head_width=16, pairwise_head_width=8,
            position_bins=8, max_recycles=3, structure_module=StructureModuleConfig(
                sequence_dim=48, pairwise_dim=24, ipa_dim=8, resnet_dim=16, num_heads_ipa=3, num_qk_points=2,
                num_v_points=3, num_blocks=3)))

    @classmethod
    def from_hf_config(cls, hf: dict[str, Any], name: str = "custom") -> "FoldConfig":
        """Read transformers' ``config.json`` of an ``EsmForProteinFolding`` (as a dict).

        Raises:
          ValueError: a config that is not ESMFold's, or one asking for what the reference does
            not run either (the attention-map input, a bypassed language model).
        """
        fold = hf.get("esmfold_config")
        if not hf.get("is_folding_model") or not isinstance(fold, dict):
            raise ValueError(f"{name}: not an ESMFold checkpoint (config.json has no esmfold_config)")
        for flag in ("use_esm_attn_map", "bypass_lm", "esm_ablate_sequence", "esm_ablate_pairwise"):
            if fold.get(flag):
                raise ValueError(f"{name}: esmfold_config.{flag} is set; no published ESMFold uses it "
                                 "and flamino does not run it")
        trunk = dict(fold.get("trunk") or {})
        structure = _known(StructureModuleConfig, trunk.pop("structure_module", None) or {})
        stem = ModelConfig.from_hf_config({**hf, "is_folding_model": False}, name=f"{name}-stem")
        trunk_config = TrunkConfig(**_known(TrunkConfig, trunk), structure_module=StructureModuleConfig(**structure))
        return cls(stem=stem, trunk=trunk_config,
                   lddt_head_hid_dim=int(fold.get("lddt_head_hid_dim", 128)), embed_aa=bool(fold.get("embed_aa", True)),
                   name=name)

    def differences(self, checkpoint: "FoldConfig") -> list[str]:
        """Each field where a checkpoint's shape differs from this one, names aside:
        'trunk.num_blocks: the checkpoint has 2, esmfold_v1 48'."""
        mine, theirs = _flat(dataclasses.asdict(self)), _flat(dataclasses.asdict(checkpoint))
        return [f"{key}: the checkpoint has {theirs.get(key)}, {self.name} {mine[key]}" for key in mine
                if key.rsplit(".", 1)[-1] != "name" and mine[key] != theirs.get(key)]


def _known(kind, values: dict) -> dict:
    names = {f.name for f in dataclasses.fields(kind)}
    return {k: v for k, v in values.items() if k in names and k != "structure_module"}


def _flat(tree: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
