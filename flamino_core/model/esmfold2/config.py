"""ESMFold2's shape: frozen dataclasses mirroring transformers' ``EsmFold2Config`` and its
sub-configs (``configuration_esmfold2.py``), field for field and with the reference's defaults, read
from a ``save_pretrained`` ``config.json`` (``EsmFold2Config.from_dict``) and written back for the
reference (``to_hf_dict``, what the parity tests build the PyTorch model from).

The defaults are the class defaults of transformers 5.25, which are the released ``biohub/ESMFold2``
widths as far as the reference states them; the bundled language model is ESM C 6B (80 layers,
width 2560), flamino's ``ModelConfig`` of family ``esmc``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from flamino_core.model.config import ModelConfig


def _known(kind, values: dict[str, Any] | None) -> dict[str, Any]:
    """The entries of a config.json dict that are fields of ``kind`` (sub-configs excluded):
    ``save_pretrained`` writes transformers' bookkeeping (``id2label``, ``dtype``...) beside them."""
    names = {f.name for f in dataclasses.fields(kind)}
    return {k: v for k, v in (values or {}).items() if k in names and not isinstance(v, dict)}


@dataclasses.dataclass(frozen=True)
class AtomEncoderConfig:
    """``EsmFold2AtomEncoderConfig``: the sliding-window atom transformer with 3D rotary positions,
    used by the input embedder and (with ``output_dim`` the token width) by the denoiser."""

    hidden_size: int = 128
    output_dim: int = 384
    num_hidden_layers: int = 3
    num_attention_heads: int = 4
    head_dim: int | None = None  # hidden_size // num_attention_heads when unset, as the reference
    intermediate_size: int = 256
    spatial_rope_base_frequency: float = 20.0
    num_spatial_rope_pairs_per_axis: int = 2
    num_uid_rope_pairs: int = 10
    uid_rope_base_frequency: float = 10000.0

    def __post_init__(self) -> None:
        if self.head_dim is None:
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_attention_heads)
        pairs = 3 * self.num_spatial_rope_pairs_per_axis + self.num_uid_rope_pairs
        if pairs > self.head_dim // 2:
            raise ValueError(f"the atom encoder's 3D rotary embedding needs {pairs} frequency pairs, more than "
                             f"the {self.head_dim // 2} of a head of width {self.head_dim}")

    @classmethod
    def from_dict(cls, values: dict[str, Any] | None, **defaults: Any) -> "AtomEncoderConfig":
        return cls(**{**defaults, **_known(cls, values)})


@dataclasses.dataclass(frozen=True)
class DiffusionModuleConfig:
    """``EsmFold2DiffusionModuleConfig``: the denoiser (atom encoder, token transformer with pair
    bias, atom decoder) and its EDM ``sigma_data``."""

    sigma_data: float = 16.0
    hidden_size: int = 768
    fourier_dim: int = 256
    num_hidden_layers: int = 12
    num_attention_heads: int = 16
    head_dim: int | None = None
    intermediate_size: int = 1536
    pair_intermediate_size: int = 512
    atom_encoder: AtomEncoderConfig = AtomEncoderConfig(output_dim=768)

    def __post_init__(self) -> None:
        if self.head_dim is None:
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_attention_heads)
        if self.atom_encoder.output_dim != self.hidden_size:
            raise ValueError(f"the denoiser's atom_encoder.output_dim ({self.atom_encoder.output_dim}) is not its "
                             f"token width hidden_size ({self.hidden_size})")

    @classmethod
    def from_dict(cls, values: dict[str, Any] | None) -> "DiffusionModuleConfig":
        values = values or {}
        # The reference's sub-config default: an atom encoder scattering into the 768-wide tokens.
        atoms = AtomEncoderConfig.from_dict(values.get("atom_encoder"), output_dim=768)
        return cls(**_known(cls, values), atom_encoder=atoms)


@dataclasses.dataclass(frozen=True)
class StructureHeadConfig:
    """``EsmFold2StructureHeadConfig``: the distogram width and the sampler's Karras schedule."""

    diffusion_module: DiffusionModuleConfig = DiffusionModuleConfig()
    num_distogram_bins: int = 128
    num_diffusion_samples: int = 8
    gamma_0: float = 0.605
    gamma_min: float = 1.107
    noise_scale: float = 0.0
    step_scale: float = 1.0
    inference_sigma_max_ratio: float = 160.0
    inference_sigma_min_ratio: float = 4e-4
    inference_exponent: float = 8.0
    inference_num_steps: int = 68
    inference_sigma_cap: float | None = 256.0  # an absolute sigma, not a multiple of sigma_data

    @classmethod
    def from_dict(cls, values: dict[str, Any] | None) -> "StructureHeadConfig":
        values = values or {}
        diffusion = DiffusionModuleConfig.from_dict(values.get("diffusion_module"))
        return cls(**_known(cls, values), diffusion_module=diffusion)


@dataclasses.dataclass(frozen=True)
class ConfidenceHeadConfig:
    """``EsmFold2ConfidenceHeadConfig``: pLDDT, PAE, PDE, resolved and pTM/ipTM."""

    num_hidden_layers: int = 4
    num_plddt_bins: int = 50
    num_pde_bins: int = 64
    num_pae_bins: int = 64
    min_dist: float = 2.0
    max_dist: float = 52.0
    distogram_bins: int = 128
    eps: float = 1e-6

    @classmethod
    def from_dict(cls, values: dict[str, Any] | None) -> "ConfidenceHeadConfig":
        return cls(**_known(cls, values))


@dataclasses.dataclass(frozen=True)
class MsaEncoderConfig:
    """``EsmFold2MsaEncoderConfig``; ``enabled=False`` for checkpoints trained without MSAs
    (ESMFold2-Fast), whose module is then not built."""

    hidden_size: int = 128
    outer_hidden_size: int = 32
    num_hidden_layers: int = 4
    num_attention_heads: int = 8
    head_dim: int = 32
    intermediate_size: int = 512
    outer_product_chunk_size: int | None = None
    enabled: bool = True

    @classmethod
    def from_dict(cls, values: dict[str, Any] | None) -> "MsaEncoderConfig":
        return cls(**_known(cls, values))


@dataclasses.dataclass(frozen=True)
class LmEncoderConfig:
    """``EsmFold2LmEncoderConfig``: the pair-update blocks over the projected ESM C states."""

    num_hidden_layers: int = 4
    lm_dropout: float = 0.25
    per_loop_lm_dropout: bool = True

    @classmethod
    def from_dict(cls, values: dict[str, Any] | None) -> "LmEncoderConfig":
        return cls(**_known(cls, values))


def _esmc_6b(name: str = "custom") -> ModelConfig:
    """transformers' ``EsmcConfig`` defaults, the ESM C 6B that ESMFold2 bundles (named
    ``<ESMFold2 name>-esmc``, as ``from_dict`` names the one it reads)."""
    return dataclasses.replace(ModelConfig.esmc(80, 2560, 40, name=f"{name}-esmc"), ffn_dim=6912)


@dataclasses.dataclass(frozen=True)
class EsmFold2Config:
    """``EsmFold2Config``: trunk widths, the featurisation sizes and the sub-configs above."""

    hidden_size: int = 384
    pairwise_hidden_size: int = 256
    single_inputs_size: int = 451  # atom_encoder.output_dim + 2 residue-type one-hots + deletion mean
    pair_transition_intermediate_size: int = 1024
    sliding_window: int = 128  # the atom attention's total window width, not its radius
    chunk_size: int | None = 64
    num_relative_residx_bins: int = 32
    num_relative_chain_bins: int = 2
    num_loops: int = 10
    num_res_types: int = 33
    max_atomic_number: int = 128
    char_vocab_size: int = 64
    max_chars: int = 4
    max_atoms_per_token: int = 23
    atom_feature_dim: int | None = None  # xyz, charge, mask, element and name-char one-hots when unset
    folding_trunk_num_hidden_layers: int = 24
    parcae_num_coda_layers: int = 2
    atom_encoder: AtomEncoderConfig = AtomEncoderConfig()
    structure_head: StructureHeadConfig = StructureHeadConfig()
    confidence_head: ConfidenceHeadConfig = ConfidenceHeadConfig()
    msa_encoder: MsaEncoderConfig = MsaEncoderConfig()
    lm_encoder: LmEncoderConfig = LmEncoderConfig()
    esmc: ModelConfig = dataclasses.field(default_factory=_esmc_6b)
    name: str = "custom"

    def __post_init__(self) -> None:
        if self.atom_feature_dim is None:
            dim = 3 + 1 + 1 + self.max_atomic_number + self.char_vocab_size * self.max_chars
            object.__setattr__(self, "atom_feature_dim", dim)
        expected = self.single_inputs_size - (2 * self.num_res_types + 1)
        if self.atom_encoder.output_dim != expected:
            raise ValueError(f"atom_encoder.output_dim ({self.atom_encoder.output_dim}) is not single_inputs_size "
                             f"({self.single_inputs_size}) - (2 * num_res_types + 1) = {expected}")

    @property
    def stem(self) -> ModelConfig:
        """The language model's shape by its role (``esmc``: by the checkpoint's key), as ESMFold's
        ``FoldConfig.stem``: the layers above model/ and weights/ name no family."""
        return self.esmc

    @property
    def diffusion(self) -> DiffusionModuleConfig:
        return self.structure_head.diffusion_module

    # --- presets ---------------------------------------------------------------------------------
    @classmethod
    def esmfold2(cls) -> "EsmFold2Config":
        """biohub/ESMFold2 as the reference's defaults state it (MSA encoder built)."""
        return cls(esmc=_esmc_6b("esmfold2"), name="esmfold2")

    @classmethod
    def esmfold2_fast(cls) -> "EsmFold2Config":
        """biohub/ESMFold2-Fast: the same network trained without MSAs (no MSA encoder)."""
        return cls(msa_encoder=MsaEncoderConfig(enabled=False), esmc=_esmc_6b("esmfold2-fast"), name="esmfold2-fast")

    @classmethod
    def tiny(cls) -> "EsmFold2Config":
        """A small ESMFold2 for tests and ``random:esmfold2-tiny``: every width distinct so a
        transposed weight shows, more than one head and layer everywhere, a rotary head with
        inactive channels (16-wide heads: 3 spatial + 4 UID pairs of 8) and a sliding window (8)
        shorter than a few residues' atoms. The featurisation sizes stay the reference's, since
        the features come from the real residue and atom vocabularies."""
        atoms = AtomEncoderConfig(hidden_size=32, output_dim=40, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=48, num_spatial_rope_pairs_per_axis=1, num_uid_rope_pairs=4)
        denoiser_atoms = dataclasses.replace(atoms, output_dim=48, intermediate_size=56)
        diffusion = DiffusionModuleConfig(hidden_size=48, fourier_dim=16, num_hidden_layers=2, num_attention_heads=3,
                                          intermediate_size=64, pair_intermediate_size=40, atom_encoder=denoiser_atoms)
        return cls(
            hidden_size=36, pairwise_hidden_size=24, single_inputs_size=40 + 67, pair_transition_intermediate_size=44,
            sliding_window=8, chunk_size=None, num_relative_residx_bins=4, num_relative_chain_bins=2, num_loops=2,
            folding_trunk_num_hidden_layers=2, parcae_num_coda_layers=1, atom_encoder=atoms,
            structure_head=StructureHeadConfig(diffusion_module=diffusion, num_distogram_bins=20,
                                               num_diffusion_samples=2, inference_num_steps=6),
            confidence_head=ConfidenceHeadConfig(num_hidden_layers=1, num_plddt_bins=10, num_pde_bins=12,
                                                 num_pae_bins=14, distogram_bins=16),
            msa_encoder=MsaEncoderConfig(enabled=False),
            lm_encoder=LmEncoderConfig(num_hidden_layers=1),
            esmc=dataclasses.replace(ModelConfig.tiny("esmc"), name="esmfold2-tiny-esmc"), name="esmfold2-tiny")

    # --- config.json -----------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, config_json: dict[str, Any], name: str = "custom") -> "EsmFold2Config":
        """Read a ``save_pretrained`` ``config.json`` (as a dict); absent fields take the reference's
        defaults, as transformers does.

        Raises:
          ValueError: a config that is not ESMFold2's, or shapes the reference would refuse.
        """
        if config_json.get("model_type") not in (None, "esmfold2"):
            raise ValueError(f"{name}: config.json is a {config_json.get('model_type')!r} model, not ESMFold2")
        esmc_json = config_json.get("esmc_config")
        esmc = ModelConfig.from_hf_config({"model_type": "esmc", **esmc_json}, name=f"{name}-esmc") if esmc_json \
            else _esmc_6b(name)
        return cls(
            **_known(cls, config_json),
            atom_encoder=AtomEncoderConfig.from_dict(config_json.get("atom_encoder")),
            structure_head=StructureHeadConfig.from_dict(config_json.get("structure_head")),
            confidence_head=ConfidenceHeadConfig.from_dict(config_json.get("confidence_head")),
            msa_encoder=MsaEncoderConfig.from_dict(config_json.get("msa_encoder")),
            lm_encoder=LmEncoderConfig.from_dict(config_json.get("lm_encoder")),
            esmc=esmc, name=name)

    def to_hf_dict(self) -> dict[str, Any]:
        """The keyword arguments of transformers' ``EsmFold2Config`` for this shape (nested dicts,
        ``esmc_config`` an ``EsmcConfig`` dict), what the parity tests build the reference from."""
        out = dataclasses.asdict(self)
        esmc = out.pop("esmc")
        out.pop("name")
        out["esmc_config"] = {
            "model_type": "esmc", "num_hidden_layers": esmc["num_layers"], "hidden_size": esmc["embed_dim"],
            "num_attention_heads": esmc["attention_heads"], "intermediate_size": esmc["ffn_dim"],
            "vocab_size": esmc["vocab_size"], "rope_parameters": {"rope_theta": esmc["rotary_base"],
                                                                  "rope_type": "default"}}
        return out
