"""A predicted complex (ESMFold2) as the app folds it: which model an identifier names and how it is
labelled, the hosted length limit, the fold's memory and time said before any work, and the fold
kept in the result store by model and chains (``complex_plan.py`` runs it as a background job).

The chains are the records the visitor picked, in order: the first is chain A, the second B, and
so on; a single record folds as one chain. The store keys a complex by its chains' sequences
joined with ':' (the ``A:B`` notation of ``flamino fold``), so the same chains in the same order
are folded once per model across sessions; another order is another complex (other chain letters).
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from flamino_core.model.esmfold2.folded import FoldedComplex
from flamino_core.model.model_id import RANDOM_FOLD_MODELS, ModelId
from flamino_core.options import Precision
from flamino_core.structure.folding.prediction import hosted_fold_limit
from flamino_core.wording import byte_size

RANDOM_MODEL2 = RANDOM_FOLD_MODELS["esmfold2"]
RANDOM_LABEL2 = "untrained test model (random weights): its structures, pLDDT, PAE and ipTM are not biology"
FIELDS = ("positions", "plddt_atoms", "plddt", "pae", "ptm", "iptm", "chain_pair_iptm", "complex_plddt", "sample",
          "samples")
FLOAT = 4  # bytes: flamino folds in fp32
# Seconds per GFLOP of ``complex_gflop`` as a first guess, before this machine's own folds correct it
# (jobs/rates, kind "fold", per model key): the tiny test model measured here (2-core CPU, two chains
# of 50 and 42 residues, warm) 1.2 s; other platforms take v1's figures (fold_time.py) until measured.
PRIOR_SECONDS_PER_GFLOP = {"cpu": 1 / 4.0, "tpu": 1 / 2600.0, "gpu": 1 / 2600.0}
# A new complex shape compiles once per process: the tiny model's first fold of 92 residues took 52 s
# on the loaded 2-core CPU (1.2 s warm); the TPU as v1's.
COMPILE_SECONDS = {"cpu": (20, 90), "tpu": (35, 60), "gpu": (35, 60)}
RATE_KIND = "fold"
_compiled: set[tuple[str, tuple[int, ...]]] = set()  # (model key, chain lengths) folded in this process
_lock = threading.Lock()


def is_random(model: ModelId) -> bool:
    return model.is_random and model.fold == "esmfold2"


def complex_label(model: ModelId, hosted: bool = False) -> str:
    """The model as every output of the fold names it (the test model always said untrained)."""
    if is_random(model):
        return f"{model.text}, an {RANDOM_LABEL2}"
    return "ESMFold2" if hosted else f"ESMFold2 from {model.text}"


def complex_config(model: ModelId):
    """The model's shape, without its weights where it is known (the test model, a preset); a
    folder's from its config.json. ValueError: not an ESMFold2."""
    from flamino_core.model.esmfold2.config import EsmFold2Config

    if is_random(model):
        return EsmFold2Config.tiny()
    if model.fold == "esmfold2":  # a preset: the full ESMFold2 runs its MSA encoder on the one-row MSA (the query)
        return EsmFold2Config.esmfold2() if model.fold_preset == "esmfold2" else EsmFold2Config.esmfold2_fast()
    if model.fold_family() != "esmfold2":
        raise ValueError(f"{model.text!r} is neither {RANDOM_MODEL2}[:seed], esmfold2, esmfold2-fast nor a folder "
                         "written by transformers' EsmFold2Model.save_pretrained (config.json with model_type "
                         "esmfold2)")
    from flamino_core.weights.esmfold2 import read_config

    return read_config(model.text)


def complex_key(model: ModelId, stem_precision: Precision = Precision.FP32) -> str:
    """The store's key of an ESMFold2 model: the test model by its seed, a preset by its Hub repository,
    a folder by its path and its files' sizes and modification times (saved again: a new model); a
    bf16 stem's folds under a key of their own (other numbers), fp32's as before."""
    from flamino_core.weights.esmfold2_hub import FOLD2_PRESETS

    stem = "" if stem_precision == Precision.FP32 else f"|stem={stem_precision}"
    if is_random(model):
        return f"esmfold2|{RANDOM_MODEL2}:{model.text[len(RANDOM_MODEL2) + 1:] or '0'}|seed=0{stem}"
    if model.fold == "esmfold2":
        return f"esmfold2|{FOLD2_PRESETS[model.fold_preset].repo}|seed=0{stem}"
    folder = Path(model.text).expanduser().resolve()
    stamp = ",".join(f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}"
                     for p in sorted(folder.glob("*")) if p.suffix in (".safetensors", ".json"))
    return f"esmfold2|{folder}|{stamp}|seed=0{stem}"


def complex_sequence(sequences: Sequence[str]) -> str:
    """The complex as the store (and ``flamino fold``'s ``A:B``) spells it: chains joined by ':'."""
    return ":".join(s.upper() for s in sequences)


def complex_refusal(lengths: Sequence[int], hosted: bool, limit: int | None = None) -> str | None:
    """Why a complex of chains of ``lengths`` residues is refused before any work, or None. Hosted:
    the whole complex within ``hosted_fold_limit()`` (``FLAMINO_MAX_FOLD_RESIDUES``, 400), as v1's fold."""
    if not lengths:
        return "pick at least one record to fold"
    total = sum(lengths)
    limit = hosted_fold_limit() if limit is None else limit
    if hosted and total > limit:
        return (f"{total:,} residues in the complex: this server folds {limit:,} at most. ESMFold2's trunk holds a "
                "pair state over every pair of residues of the whole complex (it grows as the total length squared, "
                "its triangular updates as the cube), and its confidence head one per diffusion sample, so one "
                "long fold would hold the memory every visitor shares; fold it on your own machine with "
                "`flamino fold -m esmfold2-fast`")
    return None


def complex_problem(sequences: Sequence[str], name: str) -> str | None:
    """Why the featuriser would refuse these chains (its words, naming the chain), or None: asked
    before any work, so a refusal costs nothing."""
    from flamino_core.model.esmfold2.features import check_chains

    try:
        check_chains(list(sequences), name)
    except ValueError as err:
        return str(err)
    return None


@dataclasses.dataclass(frozen=True)
class ComplexMemory:
    """An estimate of a fold's memory in bytes (fp32) from the model's shape: not a measurement."""

    length: int
    weights: int
    stem: int  # ESM C's hidden states (every layer is mixed by the trunk)
    pair: int  # the trunk's pair state and its triangular updates' projections
    samples: int  # the diffusion samples' atoms and the confidence head's pair per sample

    @property
    def total(self) -> int:
        return self.weights + self.stem + self.pair + self.samples

    def describe(self) -> str:
        return (f"about {byte_size(self.total)} for {self.length:,} residues: weights {byte_size(self.weights)}, "
                f"the pair state and its updates {byte_size(self.pair)} (grows as the complex's length squared), "
                f"the diffusion samples and their confidence {byte_size(self.samples)}, the language model's states "
                f"{byte_size(self.stem)}; an estimate from the model's shape in fp32, not a measurement")


@functools.lru_cache(maxsize=4)
def parameter_count(config) -> int:
    """The model's parameters, counted from its abstract state (no arrays are made)."""
    import jax
    from flax import nnx

    from flamino_core.model.esmfold2.model import EsmFold2

    abstract = nnx.eval_shape(lambda: EsmFold2(config, nnx.Rngs(0)))
    return sum(int(np.prod(leaf.shape)) for leaf in jax.tree.leaves(nnx.state(abstract, nnx.Param)))


def complex_memory(config, lengths: Sequence[int], parameters: int | None = None) -> ComplexMemory:
    """The memory one fold needs: 8 pair states (the state, its residual, the triangular updates'
    projections and gates), ESM C's every layer over the residues plus <cls>/<eos> per chain, each
    sample's atoms (23 atom slots per residue at the sliding window's width) and its confidence pair."""
    length = sum(lengths)
    tokens = length + 2 * len(lengths)
    pair = 8 * length * length * config.pairwise_hidden_size * FLOAT
    stem = (config.stem.num_layers + 1) * tokens * config.stem.embed_dim * FLOAT
    n = config.structure_head.num_diffusion_samples
    atoms = length * config.max_atoms_per_token
    samples = n * (atoms * config.sliding_window * FLOAT + 2 * length * length * config.pairwise_hidden_size * FLOAT)
    count = parameter_count(config) if parameters is None else parameters
    return ComplexMemory(length, count * FLOAT, stem, pair, samples)


_UNSET = object()


def stem_precision_plan(config, requested: str | None, memory=_UNSET) -> tuple[str, str]:
    """(the ESM C stem's precision, why when it is not the one asked) for a fold on this device:
    the language models' rule (``device_memory.fitting_precision``) applied to the stem, with the
    rest of the network (trunk, heads: fp32) counted as in use beside it. fp32 by default; where the
    fp32 stem cannot fit (ESM C 6B's 25 GB against a 16 GiB chip) and fp32 was not asked by name
    (``requested`` None), bf16 (12.7 GB), said; nothing fitting: ``ModelTooLargeError`` with the
    bytes, naming bf16 where it would fit. ``memory``: the device's (default ``device_memory()``;
    None on a CPU, where the host's memory is the fold's estimate's concern and nothing changes)."""
    from flamino_core.engine.device_memory import DeviceMemory, device_memory, fitting_precision, weights_bytes

    precision = requested or "fp32"
    memory = device_memory() if memory is _UNSET else memory
    if memory is None:
        return precision, ""
    rest = max(0, parameter_count(config) * FLOAT - weights_bytes(config.stem, "fp32"))
    beside = DeviceMemory(memory.device, memory.capacity, memory.in_use + rest)
    chosen, why = fitting_precision(config.stem, precision, requested is not None, beside)
    if why:
        why = (f"the ESM C stem in bf16 ({why} after the fold's other weights, {byte_size(rest)} in fp32); "
               "labelled in every output")
    return chosen, why


def complex_gflop(config, lengths: Sequence[int]) -> float:
    """A fold's arithmetic in GFLOP, roughly: ESM C's 24 D^2 per token and layer once; per trunk loop
    and layer the triangular updates (~8 L^3 c_z) and pair transitions; per diffusion step and
    sample the denoiser's transformer (24 L h^2 per layer) and atom layers."""
    length = sum(lengths)
    tokens = length + 2 * len(lengths)
    stem = 24 * config.stem.num_layers * config.stem.embed_dim ** 2 * tokens
    pair = config.pairwise_hidden_size
    trunk = config.num_loops * config.folding_trunk_num_hidden_layers * (
        8 * length ** 3 * pair + 4 * length ** 2 * pair * config.pair_transition_intermediate_size)
    head, diffusion = config.structure_head, config.diffusion
    atoms = length * config.max_atoms_per_token
    step = (diffusion.num_hidden_layers * 24 * length * diffusion.hidden_size ** 2
            + 24 * atoms * diffusion.atom_encoder.hidden_size ** 2)
    return (stem + trunk + head.inference_num_steps * head.num_diffusion_samples * step) / 1e9


@dataclasses.dataclass(frozen=True)
class ComplexSeconds:
    """As ``fold_time.FoldSeconds``: computation, compilation when this shape is new here."""

    compute: float
    compile: tuple[float, float] | None
    measured: bool

    @property
    def seconds(self) -> float:
        return self.compute + (sum(self.compile) / 2 if self.compile else 0.0)

    def describe(self) -> str:
        from flamino_core.jobs.status import about

        basis = ("this machine's rate over its earlier folds" if self.measured
                 else "a first guess from the model's shape")
        said = f"{about(self.compute) if self.compute >= 1 else 'under a second'} of computation ({basis})"
        if self.compile:
            low, high = self.compile
            said += f", plus {low:.0f}-{high:.0f} s to compile this complex's shape the first time"
        return said


def complex_time_estimate(config, lengths: Sequence[int], key: str, platform: str | None = None,
                          rates=None) -> ComplexSeconds:
    """The time one fold of chains of ``lengths`` takes here with the model ``key``."""
    if platform is None:
        from flamino_core.engine import hardware

        platform = hardware.detect().platform
    rates = _rates(rates)
    prior = PRIOR_SECONDS_PER_GFLOP.get(platform, PRIOR_SECONDS_PER_GFLOP["cpu"])
    compute = rates.robust_seconds(key, RATE_KIND, complex_gflop(config, lengths), prior)
    with _lock:
        compiled = (key, tuple(lengths)) in _compiled
    return ComplexSeconds(compute, None if compiled else COMPILE_SECONDS.get(platform, COMPILE_SECONDS["cpu"]),
                          rates.measured_samples(key, RATE_KIND))


def record_complex_time(config, lengths: Sequence[int], key: str, seconds: float, rates=None,
                        source: str = "") -> None:
    """Note a fold that took ``seconds``: its rate is kept only when this shape was compiled before."""
    shape = (key, tuple(lengths))
    with _lock:
        warm = shape in _compiled
        _compiled.add(shape)
    if warm:
        _rates(rates).record_sample(key, RATE_KIND, complex_gflop(config, lengths), seconds, source)


def _rates(rates):
    if rates is not None:
        return rates
    from flamino_core.jobs.rates import default_rates

    return default_rates()


def stored_complex(store, key: str, sequences: Sequence[str], names: Sequence[str], name: str):
    """The fold of the chains ``sequences`` under ``key`` if the store holds all of it, else None."""
    found = store.outputs(key, complex_sequence(sequences), [f"fold2.{field}" for field in FIELDS])
    if len(found) < len(FIELDS):
        return None
    get = {field: found[f"fold2.{field}"] for field in FIELDS}
    return FoldedComplex(
        name=name, chain_ids=tuple(chain_letters(len(sequences))), chain_names=tuple(names),
        sequences=tuple(s.upper() for s in sequences), positions=get["positions"], plddt_atoms=get["plddt_atoms"],
        plddt=get["plddt"], pae=get["pae"], ptm=float(get["ptm"]), iptm=float(get["iptm"]),
        chain_pair_iptm=get["chain_pair_iptm"], complex_plddt=float(get["complex_plddt"]),
        sample=int(get["sample"]), samples=int(get["samples"]))


def store_complex(store, key: str, folded: FoldedComplex) -> None:
    store.put_outputs(key, complex_sequence(folded.sequences),
                      {f"fold2.{field}": np.asarray(getattr(folded, field)) for field in FIELDS})


def chain_letters(n: int) -> str:
    """The letters of ``n`` chains, as ``flamino fold`` and the files name them: A, B, ..."""
    from flamino_core.model.esmfold2.features import CHAIN_IDS

    return CHAIN_IDS[:n]
