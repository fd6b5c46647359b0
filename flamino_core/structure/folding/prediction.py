"""A predicted structure (ESMFold) as the app and the command line use it: its memory and time
said before any work, the hosted length limit, the fold stored and read back by model and
sequence, and the predicted structure as PDB and mmCIF text.

Where a fold is kept: the result store's per-record outputs (``store/result_store.py``), under a
model key of the ESMFold model and its pass count and the sequence's digest. The store holds
named numeric arrays, which is all a fold is (atom37 positions, which atoms exist, pLDDT, PAE,
pTM), so no other cache is needed: a fold is computed once per model and sequence, across
sessions, processes and restarts, checked by its CRC on every read and evicted with the rest.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import time
from pathlib import Path
from typing import Callable

import numpy as np

from flamino_core import settings
from flamino_core.model.esmfold import residue_constants as rc
from flamino_core.wording import byte_size
from flamino_core.model.esmfold.config import FoldConfig
from flamino_core.model.esmfold.folded import PAD_TO, FoldedProtein, padded_length
from flamino_core.model.model_id import RANDOM_FOLD_MODELS, ModelId
from flamino_core.options import FoldPrecision, Precision

RANDOM_MODEL = RANDOM_FOLD_MODELS["esmfold"]
RANDOM_LABEL = "untrained test model (random weights): its structures are not biology"
# The ESM-2 stem was trained on 1,022 residues at most: the app folds no longer; `flamino fold` folds
# longer records where the device's memory allows (``device_fold_limit``), each flagged as past it.
MAX_FOLD_RESIDUES = TRAINED_RESIDUES = 1022
PAST_TRAINED_NOTE = ("past the ESM-2 stem's trained length (it was trained on 1,022 residues at most): "
                     "read this structure with care")
# Hosted: the pair state and the triangular updates' projections grow as L^2 and the triangular
# attention's logits as L^3 / chunks; at 400 residues esmfold_v1's trunk needs ~0.9 GiB (fold_memory;
# XLA plans 0.4 GiB at 448) besides ~13 GiB of weights, at 1,022 ~4.6 GiB: one
# visitor's fold must leave the server room.
HOSTED_FOLD_RESIDUES = 400  # FLAMINO_MAX_FOLD_RESIDUES overrides (read at each check)
FLOAT = 4  # bytes: flamino folds in fp32
FIELDS = ("atom37", "atom37_exists", "plddt", "pae", "ptm")
# What a fold's process holds beyond the buffers ``fold_memory`` counts from the shape, measured in a
# fold worker with benchmarks/hostile_folds.py (the untrained test model on the 2-core CPU server,
# load 9-10, 2026-12-07; issue #67: the page said "about 386 MiB" at 400 residues for +1.30 GiB cold):
# - the process itself: Python, JAX's CPU client and the model's code, 471 MiB resident with the test
#   model loaded before any fold (its weights apart: 1 MiB);
# - XLA's compilation of a length new to the process: the cold fold's peak above the warm one's,
#   365-396 MiB at 128-448 padded residues (400 said);
# - the fold's own buffers: the warm fold's peak over its resident memory was 1.30x the shape's sum at
#   256 padded residues and 1.83x at 448 (XLA's allocator and the fused triangular attention hold more
#   than one chunk of logits): twice the sum is said, an upper bound at every length measured.
# Not measured at esmfold_v1's shape (13 GiB of weights, 2-4 min of compilation on this machine), nor on
# an accelerator, whose memory holds the weights and the buffers, not the process (there: the shape's sum).
PROCESS_BYTES = 470 << 20
COMPILE_BYTES = 400 << 20
WORK_FACTOR = 2


@dataclasses.dataclass(frozen=True)
class FoldMemory:
    """An estimate of a fold's memory in bytes (fp32), from the model's shape and the length:
    not a measurement (XLA may fuse some buffers away and keep others)."""

    length: int
    padded: int
    weights: int  # every parameter, 4 bytes each (2 for the stem's dense kernels in a bf16 stem)
    stem: int  # the stem's hidden states (every layer is kept for the trunk's mix) and one layer's attention
    pair: int  # the trunk's pair state with what a block holds beside it
    chunk: int  # the triangular attention's logits and the pair MLP for one chunk of rows
    stem_precision: str = "fp32"
    process: int = PROCESS_BYTES  # the fold's process: Python, JAX's client, the model's code (measured)
    compile: int = COMPILE_BYTES  # XLA compiling this length (0: compiled already in that process)
    factor: int = WORK_FACTOR  # what XLA holds per byte of the shape's buffers (measured on the CPU)

    @property
    def work(self) -> int:
        """What the fold itself holds: the shape's buffers, times what XLA was measured to hold beside them."""
        return self.factor * (self.stem + self.pair + self.chunk)

    @property
    def total(self) -> int:
        return self.weights + self.process + self.compile + self.work

    def describe(self) -> str:
        compiling = f", compiling this length {byte_size(self.compile)}" if self.compile else ""
        return (f"about {byte_size(self.total)} for {self.length:,} residues (padded to {self.padded:,}): "
                f"weights {byte_size(self.weights)}, the pair state and a block's work on it "
                f"{byte_size(self.factor * (self.pair + self.chunk))} (grows as the length squared), the language "
                f"model's states {byte_size(self.factor * self.stem)}"
                f"{f', the fold process {byte_size(self.process)}' if self.process else ''}{compiling}; "
                "an estimate from the model's shape in fp32"
                f"{' (the stem: bf16 dense kernels)' if self.stem_precision == Precision.BF16 else ''} and this "
                "server's measured overheads, not a measurement")


@functools.lru_cache(maxsize=8)
def parameter_count(config: FoldConfig) -> int:
    """The model's parameters, counted from its abstract state (no arrays are made)."""
    return _count(None, config)


def _count(path: tuple[str, ...] | None, config: FoldConfig) -> int:
    import jax

    from flamino_core.weights.esmfold import expected_params

    tree = expected_params(config)
    for key in path or ():
        tree = tree[key]
    return sum(int(np.prod(leaf.shape)) for leaf in jax.tree.leaves(tree))


@functools.lru_cache(maxsize=8)
def stem_dense_count(config: FoldConfig) -> int:
    """The stem's dense-layer kernels (what a bf16 stem stores in 2 bytes: every ``nnx.Linear``
    kernel of the ESM-2 stem, ``weights.esmfold.with_stem_precision``)."""
    import jax

    from flamino_core.weights.esmfold import expected_params

    kernels = jax.tree_util.tree_leaves_with_path(expected_params(config)["esm"])
    return sum(int(np.prod(leaf.shape)) for path, leaf in kernels if getattr(path[-1], "key", None) == "kernel")


def fold_memory(config: FoldConfig, length: int, chunk_size: int | None = 64, pad_to: int | None = PAD_TO,
                parameters: int | None = None, stem_precision: str = "fp32", compiled: bool = False,
                platform: str = "cpu") -> FoldMemory:
    """The memory one fold of ``length`` residues needs (``fold_sequence``'s padding and chunks).
    On the CPU (``platform``), the host's: in a process of its own (the fold worker's:
    ``PROCESS_BYTES``), compiling the length unless ``compiled`` (``COMPILE_BYTES``), its buffers
    ``WORK_FACTOR`` times their sum (measured); on an accelerator, its memory's: the weights and the
    shape's buffers.

    The pair state is L x L x c_z; a block holds it, its residual and the triangular
    multiplicative updates' projections (a, b and their gates, and the output gate: five more
    of the same size), so 7 pair states at once. The triangular attention's logits are
    rows x L x L x heads for ``chunk_size`` rows (all L without chunks), the pair MLP's
    rows x L x 4 c_z. The stem keeps every layer's hidden state (the trunk mixes them all) and
    one layer's attention (L x L x heads). ``parameters``: the count, when known (else counted).

    XLA's own plan of the compiled forward (``memory_analysis``, nothing run) at esmfold_v1's
    shape held a copy of the stem's layer weights among its temporaries (10,827 MiB at 128
    residues, 10,806 MiB of it the stem's layers: the layer stack was sliced for each kept
    hidden state); since the stack is read layer by layer (``model/stack.py``) there is none.
    """
    if length < 1:
        raise ValueError("a fold needs at least one residue")
    trunk, stem = config.trunk, config.stem
    padded = padded_length(length, pad_to)
    tokens = padded + 2  # the stem reads <cls> and <eos> around the residues
    rows = padded if not chunk_size else min(chunk_size, padded)
    pair_heads = trunk.pairwise_state_dim // trunk.pairwise_head_width
    pair = 7 * padded * padded * trunk.pairwise_state_dim * FLOAT
    chunk = rows * padded * (padded * pair_heads + 4 * trunk.pairwise_state_dim) * FLOAT
    states = (stem.num_layers + 1) * tokens * stem.embed_dim * FLOAT
    attention = tokens * tokens * stem.attention_heads * FLOAT
    count = parameter_count(config) if parameters is None else parameters
    weights = count * FLOAT - (stem_dense_count(config) * (FLOAT - 2) if stem_precision == Precision.BF16 else 0)
    if platform != "cpu":
        return FoldMemory(length, padded, weights, states + attention, pair, chunk, stem_precision, 0, 0, 1)
    return FoldMemory(length, padded, weights, states + attention, pair, chunk, stem_precision,
                      compile=0 if compiled else COMPILE_BYTES)


def device_fold_limit(config: FoldConfig, room: int, chunk_size: int | None = 64,
                      stem_precision: str = "fp32", platform: str = "cpu") -> int:
    """The longest length (a multiple of ``PAD_TO``, at least one bucket) whose ``fold_memory`` on
    ``platform`` fits in ``room`` bytes: the weights, the stem's states and the pair state with a
    block's work (on the CPU with the process's measured overheads too)."""
    parameters = parameter_count(config)
    longest = PAD_TO
    while fold_memory(config, longest + PAD_TO, chunk_size, parameters=parameters,
                      stem_precision=stem_precision, platform=platform).total <= room:
        longest += PAD_TO
    return longest


def fold_length_limit(config: FoldConfig, room: int | None, where: str, chunk_size: int | None = 64,
                      stem_precision: str = "fp32", platform: str = "cpu") -> tuple[int, str]:
    """(the longest fold done here, why in words) for a device with ``room`` bytes (``memory_room``,
    said as ``where``): ``device_fold_limit``, never below the stem's trained length (what folded
    before still does: the estimate is an upper bound, XLA fuses part of the trunk's work; a
    device the estimate finds short is said)."""
    fits = device_fold_limit(config, room, chunk_size, stem_precision, platform) if room else None
    if fits is None:
        return TRAINED_RESIDUES, "(the stem's trained length: this device's memory is not known)"
    if fits >= TRAINED_RESIDUES:
        return fits, f"on this device (the memory estimate in {where}, docs/esmfold.md)"
    return TRAINED_RESIDUES, (f"(the stem's trained length; by the memory estimate {where} hold {fits:,}: a longer "
                              "fold may run out of memory)")


def memory_room() -> tuple[int | None, str]:
    """(bytes one fold may take here, where they are in words): the accelerator's free memory
    (``engine.device_memory``), else the host's available memory; None when neither is known."""
    from flamino_core.engine.device_memory import device_memory
    from flamino_core.engine.memory import available_memory

    device = device_memory()
    if device is not None:
        return device.free, f"the {device.device}'s {byte_size(device.free)} free"
    room = available_memory()
    return room, ("the host's memory (unknown)" if room is None else f"the host's {byte_size(room)} available")


def hosted_fold_limit() -> int:
    """The longest sequence a hosted server folds (``FLAMINO_MAX_FOLD_RESIDUES``, else 400)."""
    limit = settings.MAX_FOLD_RESIDUES.get()
    return HOSTED_FOLD_RESIDUES if limit is None else limit


def length_refusal(length: int, hosted: bool, limit: int | None = None, longest: int = MAX_FOLD_RESIDUES,
                   where: str = "") -> str | None:
    """Why a fold of ``length`` residues is refused before any work, or None (``limit``: the
    hosted one, else ``hosted_fold_limit()``; ``longest``: the most folded here, by default the
    stem's trained length, or the device's ``device_fold_limit`` said as ``where``)."""
    limit = hosted_fold_limit() if limit is None else limit
    if length > longest and where:
        return f"{length:,} residues: {longest:,} at most {where} (the pair state grows as the length squared)"
    if length > longest:
        return (f"{length:,} residues: ESMFold folds {longest:,} at most in one pass (its language "
                "model's trained length; the pair state grows as the length squared)")
    if hosted and length > limit:
        return (f"{length:,} residues: this server folds {limit:,} at most. The trunk's pair state and the "
                "triangular updates beside it grow as the length squared (and the triangular attention as its "
                "cube), so one long fold would hold the memory every visitor shares; fold it on your own machine "
                "with `flamino fold`")
    return None


def time_refusal(seconds: float, budget: float | None) -> str | None:
    """Why a fold estimated at ``seconds`` is refused before any work on a server giving one fold
    ``budget`` seconds (None: no budget), or None. A fold that starts is still killed at twice the
    budget (the estimate may be short: a busy machine)."""
    if budget is None or seconds <= budget:
        return None
    return (f"this fold is estimated at {seconds:,.0f} s, over the {budget:,.0f} s this server gives one fold; "
            "fold it on your own machine with `flamino fold`")


def model_key(model: ModelId, passes: int, stem_precision: Precision = Precision.FP32,
              fold_precision: FoldPrecision = FoldPrecision.FP32) -> str:
    """The store's key of an ESMFold model: the test model by its seed, esmfold_v1 by its Hub
    repository, a folder by its path and its weight files' sizes and modification times (a folder
    saved again is a new model); a bf16 stem's folds apart from the fp32 ones (other numbers), and
    the fast mode's apart from both (its stem is bf16 too: one key for it)."""
    key = _model_key(model, passes)
    if fold_precision == FoldPrecision.FAST:
        return f"{key}|fold={fold_precision}"
    return key if stem_precision == Precision.FP32 else f"{key}|stem={stem_precision}"


def _model_key(model: ModelId, passes: int) -> str:
    from flamino_core.weights.esmfold_hub import FOLD_PRESETS

    if model.is_random and model.fold == "esmfold":
        seed = model.text[len(RANDOM_MODEL) + 1:] or "0"
        return f"esmfold|{RANDOM_MODEL}:{seed}|passes={passes}"
    if model.fold_preset in FOLD_PRESETS:  # the published weights, by their Hub repository
        return f"esmfold|{FOLD_PRESETS[model.fold_preset].repo}|passes={passes}"
    folder = Path(model.text).expanduser().resolve()
    stamp = ",".join(f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}"
                     for p in sorted(folder.glob("*")) if p.suffix in (".safetensors", ".bin", ".json"))
    return f"esmfold|{folder}|{stamp}|passes={passes}"


def stored_fold(store, key: str, sequence: str) -> FoldedProtein | None:
    """The fold of ``sequence`` under ``key`` if the store holds all of it, else None."""
    found = store.outputs(key, sequence, [f"fold.{name}" for name in FIELDS])
    if len(found) < len(FIELDS):
        return None
    get = {name: found[f"fold.{name}"] for name in FIELDS}
    return FoldedProtein(sequence, rc.aatype(sequence), get["atom37"], get["atom37_exists"], get["plddt"],
                         get["pae"], float(get["ptm"]))


def store_fold(store, key: str, folded: FoldedProtein) -> None:
    store.put_outputs(key, folded.sequence, {f"fold.{name}": np.asarray(getattr(folded, name)) for name in FIELDS})


def fold(model, sequence: str, passes: int | None = None, chunk_size: int | None = 64) -> FoldedProtein:
    """Fold ``sequence`` with ``model`` in fp32 on this machine: every product at the precision
    that makes fp32 fp32 here (float32 arithmetic on a TPU/GPU, where JAX's default is one bf16
    pass; the CPU's default otherwise), as the language-model engine runs (docs/accelerators.md).
    The app, the CLI and ``predict_stored`` fold through this."""
    from flamino_core.engine import hardware
    from flamino_core.engine.fold import fold_sequence

    precision = hardware.exact_matmul_precision(hardware.detect(), "fp32")
    return fold_sequence(model, sequence, passes=passes, chunk_size=chunk_size, matmul_precision=precision)


def predict_stored(model, store, key: str, sequence: str, passes: int | None = None,
                   chunk_size: int | None = 64, folded_in: Callable[[float], None] | None = None) -> FoldedProtein:
    """The fold of ``sequence``: read from the store, or folded by ``model`` (``fold``) and stored;
    ``folded_in`` hears the seconds of a fold computed here (not of one read back)."""
    sequence = sequence.upper()
    found = stored_fold(store, key, sequence)
    if found is not None:
        return found
    started = time.perf_counter()
    folded = fold(model, sequence, passes=passes, chunk_size=chunk_size)
    if folded_in is not None:
        folded_in(time.perf_counter() - started)
    store_fold(store, key, folded)
    return folded


def prediction_pdb(folded: FoldedProtein, model_label: str, name: str) -> str:
    """The PDB text (``model/esmfold/pdb.py``: pLDDT 0-100 in the B-factors) with a TITLE saying it
    is an ESMFold prediction and by which model: Biopython keeps the title as the header's name,
    so the page and SaProt read its B-factors as pLDDT (``three_di.is_predicted``)."""
    from flamino_core.model.esmfold.pdb import to_pdb

    title = f"TITLE     ESMFOLD PREDICTION OF {name} ({model_label})"[:80]
    return title + "\n" + to_pdb(folded, remark=f"flamino ESMFold ({model_label}): {name}"[:73])


def prediction_mmcif(pdb_text: str, name: str) -> str:
    """The same structure as mmCIF (Biopython's MMCIFIO; B-factors, pLDDT 0-100, kept)."""
    from Bio.PDB import MMCIFIO, PDBParser

    from flamino_core.structure.files.reading import block_name

    structure = PDBParser(QUIET=True).get_structure(block_name(name or "prediction"), io.StringIO(pdb_text))
    out = io.StringIO()
    writer = MMCIFIO()
    writer.set_structure(structure)
    writer.save(out)
    return out.getvalue()
