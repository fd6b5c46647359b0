"""The model families flamino runs, each declared once: its network, positions, vocabulary,
heads, reference, licence and published checkpoints.

Everything outside ``model/`` and ``weights/`` reads these declarations (through a model's
``ModelConfig.family``) and never names a family: the engine asks ``family_of(config)`` whether
the contact head exists and how far positions reach, the picker and the docs read titles, sizes
and licences from ``PRESETS``. Adding a family is one ``Family`` here, its network in ``model/``
and its key map in ``weights/`` (``tests/unit/test_families.py`` checks that nothing else names one).
Light: no JAX at import, so the picker and the command line read it for free.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Literal

# The 1,022-residue window every family runs in (ESM-2, ESM-1b and ESM-1v were trained on crops
# of 1,024 tokens: 1,022 residues plus <cls> and <eos>; see ``Family.trained_tokens`` for ESM C).
MAX_RESIDUES = 1022


@dataclasses.dataclass(frozen=True)
class Family:
    """One network design and what flamino offers for it."""

    id: str  # the value of ModelConfig.family
    title: str  # what people call it: "ESM-2"
    network: str  # "module:Class" of its Flax NNX module, imported on first use
    positions: Literal["rotary", "learned"]  # learned: a table of 1,026 rows, so 1,022 residues at most
    contact_head: bool  # a published contact regression exists (attention maps always do)
    tied_lm_head: bool  # the LM decoder is the token embedding (ESM-2, ESM-1b) or a Linear of its own
    output_width: int  # logits per token; the tokens are alphabet.TOKENS (33) in every family
    chain_break: str | None  # the token between chains of a complex, if the vocabulary has one
    trained_tokens: int  # the longest crop it was trained on, <cls> and <eos> included
    reference: str  # the implementation its numbers are checked against
    paper: str
    licence: str  # of the weights, as published
    mask_token: int = 32  # <mask>'s id, which token dropout counts (alphabet.MASK_IDX; SaProt's is 4)
    # The module of a vocabulary other than alphabet's (SaProt's residue + 3Di tokens): its TOKENS,
    # encode(sequence, structure), masked_residue_ids(structure), amino_acid_log_probs(log_probs, letters)
    vocabulary: str | None = None
    structure_aware: bool = False  # its tokens carry a structure letter per residue (SaProt)

    def network_class(self):
        module, name = self.network.split(":")
        return getattr(importlib.import_module(module), name)

    def tokens(self) -> tuple[str, ...]:
        """Its vocabulary: ``alphabet.TOKENS`` (ESM C's 64 outputs start with them) or its own."""
        return importlib.import_module(self.vocabulary or "flamino_core.alphabet").TOKENS

    def encode(self, sequence: str, structure: str | None = None):
        """Token ids of ``sequence`` (``<cls>`` ... ``<eos>``); ``structure`` (one 3Di letter per
        residue) only for a structure-aware family, whose residues are all ``#`` without one."""
        if not self.structure_aware:
            if structure is not None:
                raise ValueError(f"{self.title} reads sequences only; structure letters are for "
                                 f"{' and '.join(f.title for f in FAMILIES.values() if f.structure_aware)}")
            return importlib.import_module("flamino_core.alphabet").encode(sequence)
        return importlib.import_module(self.vocabulary).encode(sequence, structure)

    def mask_ids(self, length: int, structure: str | None = None):
        """Per residue, the token a masked pass puts there: ``<mask>``, or in a structure-aware
        family ``#`` + the residue's 3Di letter (its amino acid masked, its structure kept)."""
        import numpy as np

        if not self.structure_aware:
            return np.full(length, self.mask_token, np.int32)
        return importlib.import_module(self.vocabulary).masked_residue_ids(structure or "#" * length)

    def amino_acid_view(self, log_probs):
        """A masked pass's log-probabilities in alphabet's columns (the scores read those): as
        they are, or for a structure-aware family each amino acid's log of its tokens' summed
        probabilities over every 3Di letter (ProteinGym's SaProt marginal), -inf elsewhere."""
        if not self.structure_aware:
            return log_probs
        import numpy as np

        alphabet = importlib.import_module("flamino_core.alphabet")
        letters = alphabet.STANDARD_AMINO_ACIDS
        out = np.full(np.shape(log_probs)[:-1] + (len(alphabet.TOKENS),), -np.inf, np.float32)
        out[..., [alphabet.AA_TO_IDX[a] for a in letters]] = importlib.import_module(
            self.vocabulary).amino_acid_log_probs(log_probs, letters)
        return out

    @property
    def masked_width(self) -> int:
        """Columns of a masked pass as the scores read it (``amino_acid_view``)."""
        return 33 if self.structure_aware else self.output_width

    @property
    def position_limit(self) -> int | None:
        """Residues one pass may hold (learned positions end there), None for rotary."""
        return MAX_RESIDUES if self.positions == "learned" else None


_ESM_NETWORK = "flamino_core.model.esm2:ESM2"
_FAIR_ESM = "fair-esm 2.0 and transformers' EsmForMaskedLM"
FAMILIES: dict[str, Family] = {f.id: f for f in (
    Family("esm2", "ESM-2", _ESM_NETWORK, "rotary", contact_head=True, tied_lm_head=True, output_width=33,
           chain_break=None, trained_tokens=1024, reference=_FAIR_ESM,
           paper="Lin et al., Science 2023", licence="MIT"),
    Family("esm1b", "ESM-1b", _ESM_NETWORK, "learned", contact_head=True, tied_lm_head=True, output_width=33,
           chain_break=None, trained_tokens=1024, reference=_FAIR_ESM,
           paper="Rives et al., PNAS 2021", licence="MIT"),
    # ESM-1v is ESM-1b's network trained on UniRef90; fair-esm ships no contact regression for it.
    Family("esm1v", "ESM-1v", _ESM_NETWORK, "learned", contact_head=False, tied_lm_head=True, output_width=33,
           chain_break=None, trained_tokens=1024, reference=_FAIR_ESM,
           paper="Meier et al., NeurIPS 2021", licence="MIT"),
    Family("esmc", "ESM C", "flamino_core.model.esmc:ESMC", "rotary", contact_head=False, tied_lm_head=False,
           output_width=64, chain_break="|", trained_tokens=2048,
           reference="transformers' EsmcForMaskedLM (EvolutionaryScale's esm 3.x .pth key names)",
           paper="ESM Team, EvolutionaryScale 2024; Candido et al., Biohub 2026 (6B and the 2026 weights)",
           licence=("per checkpoint: the 2024-12 .pth weights' cards name EvolutionaryScale's Cambrian Open "
                    "(300M) and Cambrian Non-Commercial (600M) licences; Biohub's 2026 weights (ESMC-300M, "
                    "-600M, -6B) are MIT (docs/models.md)")),
    # SaProt: ESM-2's network over 446 tokens pairing each residue with a Foldseek 3Di letter
    # (model/saprot.py); its published folders are transformers' EsmForMaskedLM with that vocab.txt.
    Family("saprot", "SaProt", _ESM_NETWORK, "rotary", contact_head=False, tied_lm_head=True, output_width=446,
           chain_break=None, trained_tokens=1024,
           reference="transformers' EsmForMaskedLM with SaProt's vocab.txt (westlake-repl/SaProt)",
           paper="Su et al., ICLR 2024", licence="MIT", mask_token=4,
           vocabulary="flamino_core.model.saprot", structure_aware=True),
)}


def family(family_id: str) -> Family:
    try:
        return FAMILIES[family_id]
    except KeyError:
        raise ValueError(f"unknown model family {family_id!r}; flamino reads {families_sentence()}") from None


def rotary_esm_family(vocab_size: int) -> str:
    """The family of a rotary ``EsmConfig`` (ESM-2's network), told by its vocabulary's size:
    446 is SaProt's, anything else ESM-2's (whose size a mismatch then reports)."""
    own = [f.id for f in FAMILIES.values() if f.vocabulary and f.network == _ESM_NETWORK
           and f.positions == "rotary" and f.output_width == vocab_size]
    return own[0] if own else "esm2"


def family_of(config) -> Family:
    """The family of a ``ModelConfig`` (what the engine and the pages read)."""
    return family(config.family)


def families_sentence() -> str:
    """The families flamino reads, in words, for messages: "ESM-2, ESM-1b, ESM-1v and ESM C"."""
    titles = [f.title for f in FAMILIES.values()]
    return ", ".join(titles[:-1]) + " and " + titles[-1]


@dataclasses.dataclass(frozen=True)
class Preset:
    """A published checkpoint: its family, shape and where it is downloaded from."""

    family: str
    layers: int
    dim: int
    heads: int
    size: str  # parameter count in words
    repo: str  # Hugging Face Hub repository
    file: str | None = None  # a single weights file in it (EvolutionaryScale's .pth); None: an HF folder
    licence: str = "MIT"
    # What tells it from a preset of the same family and size in a short label ("2024-12",
    # "2026"); None: the name's last part ("_1" .. "_5", "AF2"/"PDB"), as the picker reads it.
    variant: str | None = None

    @property
    def title(self) -> str:
        return FAMILIES[self.family].title

    @property
    def context(self) -> int:
        """Residues per pass (longer sequences run in windows of this many)."""
        return MAX_RESIDUES


def _esm(family_id: str, layers: int, dim: int, heads: int, size: str, name: str) -> tuple[str, Preset]:
    return name, Preset(family_id, layers, dim, heads, size, f"facebook/{name}")


def _esmc(size: str, layers: int, dim: int, heads: int, licence: str) -> tuple[str, Preset]:
    name = f"esmc_{size.lower()}_2024_12_v0"
    repo = f"EvolutionaryScale/esmc-{size.lower()}-2024-12"  # now biohub/esmc-...-2024-12 (the Hub redirects)
    return name, Preset("esmc", layers, dim, heads, size, repo, f"data/weights/{name}.pth", licence, "2024-12")


def _esmc_2026(size: str, layers: int, dim: int, heads: int, licence: str) -> tuple[str, Preset]:
    # Biohub's 2026 releases: transformers' EsmcForMaskedLM folders (config.json + safetensors,
    # sharded where model.safetensors.index.json says so), named as their Hub repositories.
    name = f"ESMC-{size}"
    return name, Preset("esmc", layers, dim, heads, size, f"biohub/{name}", None, licence, "2026")


def _saprot(size: str, layers: int, dim: int, structures: str) -> tuple[str, Preset]:
    name = f"SaProt_{size}_{structures}"  # westlake-repl's Hub folders (an HF EsmForMaskedLM each)
    # The picker tells the 650M twins apart by the name's last part (model_picker.model_label).
    return name, Preset("saprot", layers, dim, 20, size, f"westlake-repl/{name}")


# name -> published checkpoint. ESM C's shapes are EvolutionaryScale's (esm 3.1 esm/pretrained.py).
PRESETS: dict[str, Preset] = dict([
    _esm("esm2", 6, 320, 20, "8M", "esm2_t6_8M_UR50D"),
    _esm("esm2", 12, 480, 20, "35M", "esm2_t12_35M_UR50D"),
    _esm("esm2", 30, 640, 20, "150M", "esm2_t30_150M_UR50D"),
    _esm("esm2", 33, 1280, 20, "650M", "esm2_t33_650M_UR50D"),
    _esm("esm2", 36, 2560, 40, "3B", "esm2_t36_3B_UR50D"),
    _esm("esm2", 48, 5120, 40, "15B", "esm2_t48_15B_UR50D"),
    _esm("esm1b", 33, 1280, 20, "650M", "esm1b_t33_650M_UR50S"),
    *(_esm("esm1v", 33, 1280, 20, "650M", f"esm1v_t33_650M_UR90S_{i}") for i in range(1, 6)),
    # The licences these cards named when last read (EvolutionaryScale's org, 2025); the repositories
    # moved to Biohub's org in 2026, whose README says its models are MIT: the app says both.
    _esmc("300M", 30, 960, 15, "EvolutionaryScale Cambrian Open License (its 2024-12 card); Biohub's "
          "2026 re-release ESMC-300M is MIT"),
    _esmc("600M", 36, 1152, 18, "EvolutionaryScale Cambrian Non-Commercial License (its 2024-12 card); "
          "Biohub's 2026 re-release ESMC-600M is MIT"),
    # Biohub's 2026 weights (6B, and 300M and 600M "overtrained" variants, as its card says): the same
    # network (transformers 5.25 EsmcConfig: 6B is 80 layers, width 2,560, 40 heads of 64, SwiGLU
    # 6,912; 6,352,005,184 parameters). Licences: docs/models.md gives each card read.
    _esmc_2026("300M", 30, 960, 15, "MIT (Biohub's esm README and LICENSE.md, 2026)"),
    _esmc_2026("600M", 36, 1152, 18, "MIT (Biohub's esm README and LICENSE.md, 2026)"),
    _esmc_2026("6B", 80, 2560, 40, "MIT and \"other\" (its card lists both, linking Biohub's "
               "THIRD_PARTY_NOTICE.md)"),
    # SaProt's shapes are ESM-2 35M's and 650M's (their config.json); AF2: trained on AlphaFold
    # DB structures, PDB: on experimental ones.
    _saprot("35M", 12, 480, "AF2"),
    _saprot("650M", 33, 1280, "AF2"),
    _saprot("650M", 33, 1280, "PDB"),
])


def family_from_name(name: str, default: str) -> str:
    """A checkpoint's family from its name where its files cannot tell (ESM-1v and ESM-1b share
    their network and config.json): a published name's family, else ``default``."""
    stem = name.rstrip("/").rsplit("/", 1)[-1].lower()
    if stem in PRESETS:
        return PRESETS[stem].family
    return "esm1v" if "esm1v" in stem and default == "esm1b" else default


def preset_name(identifier: str) -> str | None:
    """The preset an identifier names: its name (``esm2_t6_8M_UR50D``), the name with its Hub
    organisation (``facebook/esm2_t6_8M_UR50D``) or its repository; None for anything else."""
    identifier = identifier.strip()
    if identifier in PRESETS:
        return identifier
    for name, preset in PRESETS.items():
        if identifier in (preset.repo, f"{preset.repo.split('/')[0]}/{name}"):
            return name
    for name, preset in PRESETS.items():  # the Hub's organisations ignore case: Biohub/ESMC-6B
        organisation, _, repo_name = identifier.partition("/")
        if repo_name == name and f"{organisation.lower()}/{repo_name}" == preset.repo:
            return name
    return None


@dataclasses.dataclass(frozen=True)
class Ensemble:
    """Several checkpoints offered as one model choice: variant scores are the mean of the
    members' scores (each member's masked-marginals, then the mean: Meier et al. 2021, and
    ProteinGym's ESM-1v figure), each member's score kept beside it."""

    title: str
    members: tuple[str, ...]  # model identifiers, in the order their columns are written
    paper: str

    @property
    def family(self) -> str:
        return PRESETS[self.members[0]].family


ENSEMBLE_PREFIX = "ensemble:"  # ensemble:<model>,<model>,...: an ensemble of the caller's own checkpoints
ENSEMBLES: dict[str, Ensemble] = {
    "esm1v_ensemble": Ensemble("ESM-1v ensemble (5 models)", tuple(f"esm1v_t33_650M_UR90S_{i}" for i in range(1, 6)),
                               "Meier et al., NeurIPS 2021"),
}


def ensemble_members(identifier: str) -> tuple[str, ...] | None:
    """The member identifiers of an ensemble choice (``esm1v_ensemble``, or ``ensemble:`` and a
    comma-separated list), None for a single model."""
    identifier = identifier.strip()
    if identifier in ENSEMBLES:
        return ENSEMBLES[identifier].members
    if identifier.startswith(ENSEMBLE_PREFIX):
        members = tuple(m.strip() for m in identifier[len(ENSEMBLE_PREFIX):].split(",") if m.strip())
        if len(members) < 2:
            raise ValueError(f"{identifier!r}: an ensemble names two models or more, separated by commas")
        return members
    return None


def contact_families() -> str:
    """The families with a contact head, in words: "ESM-2 and ESM-1b"."""
    return " and ".join(f.title for f in FAMILIES.values() if f.contact_head)
