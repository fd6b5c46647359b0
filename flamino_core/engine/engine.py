"""The jitted inference backend: a loaded model and the compiled calls that run it.

The model is split once into (graphdef, state); a pure function of the state is jitted with
the graph definition and the attention implementation closed over and what the pass keeps
(``stack.Capture``, one frozen declaration) as its static argument: one compilation per
combination used, per shape. The compiled functions are shared by every engine of equal graph definition
and implementation (``compiled``): a second engine on the same architecture, the same weights
loaded again or another checkpoint of the same shape, compiles nothing for shapes the first
already ran. ``planner`` pads inputs to a few length buckets and batch sizes to powers of two,
so a handful of compilations serve every input (and, with the fused kernel, packs several short
sequences into one row); ``windows`` cuts long sequences and merges them back. Each row, and
each sequence of a packed row, is computed independently of the others (padding is never a key
and is zeroed in the embedding; a packed sequence attends only to itself), so results for a
sequence never depend on what else is in its batch (up to float summation order).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
import os
from typing import Callable, Literal, Sequence

import jax
import numpy as np
from flax import nnx

from flamino_core.progress import ProgressFn
from flamino_core import settings
from flamino_core.engine import device_memory, hardware, memory, planner, run_checks, sharding, windows
from flamino_core.analysis.outputs import log_softmax
from flamino_core.model.attention import AttentionImpl
from flamino_core.model.config import ModelConfig
from flamino_core.model.families import family_of
from flamino_core.model.stack import Capture, ModelOutput
from flamino_core.weights.convert import params_to_model
from flamino_core.weights.loading import ModelWeights, cache_root
from flamino_core.weights.model_cache import params_checksum

LongPolicy = Literal["window", "truncate", "full"]
# How many times each jitted function has been traced (= compiled) in this process (tests and
# `make bench`: new lengths inside known buckets, new engines on known shapes, compile nothing).
TRACE_COUNTS: collections.Counter = collections.Counter()
# Distinct (graph definition, attention implementation) pairs whose compiled functions are kept
# after their last engine is gone: a process switching between a few models (the app keeps two
# engines) finds them again; more would only hold memory.
SHARED_COMPILATIONS = 8


def to_device(array: np.ndarray) -> jax.Array:
    """A host array on the default device, for a compiled function's argument.

    ``jax.device_put``, not ``jnp.asarray``: under JAX 0.10 ``jnp.asarray`` of a NumPy array
    binds ``lax.stage``, an XLA program compiled once per shape and process (too quick to be
    kept in the persistent cache), 10-30 ms of every start and of every new batch shape.
    The same array either way (dtype canonicalized as ``jnp.asarray`` does)."""
    return jax.device_put(array)


def enable_compilation_cache(directory: str | os.PathLike | None = None) -> None:
    """Use JAX's persistent compilation cache so a new process skips recompiling."""
    directory = directory or settings.JAX_CACHE.get() or cache_root() / "jax"
    jax.config.update("jax_compilation_cache_dir", str(directory))
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:  # JAX's own setting wins
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)


@dataclasses.dataclass
class SequenceOutput:
    """Model outputs for one sequence, special tokens removed except in ``attentions``."""

    sequence: str  # as analysed (truncated under --long truncate)
    representations: dict[int, np.ndarray]  # layer (fair-esm numbering) -> (L, D)
    final_layer: int
    logits: np.ndarray | None = None  # (L, vocab)
    attentions: np.ndarray | None = None  # (len(attention_layers), H, L+2, L+2), with <cls>/<eos>
    attention_layers: tuple[int, ...] = ()
    contacts: np.ndarray | None = None  # (L, L); windowed: NaN for pairs no window held (not predicted)

    @property
    def final(self) -> np.ndarray:
        return self.representations[self.final_layer]

    @property
    def mean(self) -> np.ndarray:
        """Per-sequence embedding: the final representation averaged over residues."""
        return self.final.mean(axis=0)


def _forward(graphdef, attention: AttentionImpl, matmul_precision, state, tokens, segments=None, *,
             capture: Capture) -> ModelOutput:
    """The model's forward pass keeping what ``capture`` declares (static: one compilation per
    combination used, per shape). Traced under the backend's matmul precision: every product
    of the model (attention's included) is then computed at it (``hardware.exact_matmul_precision``)."""
    TRACE_COUNTS["forward"] += 1  # runs at trace time only
    model = nnx.merge(graphdef, state)
    with jax.default_matmul_precision(matmul_precision):
        return model(tokens, capture, segments=segments, attention=attention)


def _masked_log_probs(graphdef, attention: AttentionImpl, matmul_precision, state, tokens, positions):
    """Log-probabilities at one masked position per row: (B, vocab).

    The last layer, the final LayerNorm and the LM head run only at the masked position of each
    row (``stack.LayerStack.masked_logits``), not at all T positions.
    """
    TRACE_COUNTS["masked"] += 1  # runs at trace time only
    model = nnx.merge(graphdef, state)
    with jax.default_matmul_precision(matmul_precision):
        return jax.nn.log_softmax(model.masked_logits(tokens, positions, attention), axis=-1)


@dataclasses.dataclass(frozen=True)
class CompiledPasses:
    """The jitted entry points of one graph definition and attention implementation."""

    forward: Callable  # (state, tokens, segments=None, *, capture) -> ModelOutput
    masked_log_probs: Callable  # (state, tokens, mask positions) -> (B, vocab)
    # The shapes these functions compiled in this process (``planner.shape_key``): what a job's
    # cost counts as compiled already (``jobs/pass_cost.py``).
    seen: set = dataclasses.field(default_factory=set, compare=False)


@functools.lru_cache(maxsize=SHARED_COMPILATIONS)
def compiled(graphdef, attention: AttentionImpl, matmul_precision: str | None = None) -> CompiledPasses:
    """The jitted passes for this graph definition, attention implementation and matmul
    precision, one set per process: engines with equal ones share them, and so share every
    compiled shape (the weights are an argument, not a constant). The graph definition is closed
    over rather than passed as a static argument: jit would otherwise hash and compare it on
    every call (about 0.2 ms each); here it is hashed once per engine."""
    closed = (graphdef, attention, matmul_precision)
    forward = jax.jit(functools.partial(_forward, *closed), static_argnames=("capture",))
    return CompiledPasses(forward, jax.jit(functools.partial(_masked_log_probs, *closed)))


class Engine:
    """A loaded model with cached, jitted passes. Thread-safe; share one per process."""

    def __init__(self, weights: ModelWeights, token_budget: int | None = None, attention: str | None = None,
                 precision: str | None = None, packing: str | None = None):
        self.config: ModelConfig = weights.config
        model = params_to_model(weights.params, weights.config)
        # Its weights' description without their arrays: the state holds them (the same memory
        # when read from the cache, ``param_files``); the arrays kept a converted copy alive.
        self.weights = dataclasses.replace(weights, params=None,
                                           checksum=weights.checksum or params_checksum(weights.params))
        # Attention, precision, token budget and packing for this machine (hardware.choose: the
        # fused CPU kernel when built, with packing; dot_product_attention on an accelerator, fp32
        # products there, a budget from its memory; fp32 unless asked).
        # Several devices: rows split over them, or the weights sharded where one cannot hold them.
        self.devices = sharding.plan_devices(self.config, hardware.requested_precision(precision)[0])
        self.backend = hardware.configure(model, attention, precision, token_budget, packing, self.devices)
        self.token_budget = self.backend.token_budget  # halved on a device's out-of-memory (device_memory)
        self.graphdef, self.state = nnx.split(model)
        self.state = self.devices.place(self.state)  # each array straight into its sharding
        passes = compiled(self.graphdef, self.backend.implementation, self.backend.matmul_precision)
        self._forward, self._masked_log_probs = map(self.devices.wrap, (passes.forward, passes.masked_log_probs))
        self.compiled_shapes = passes.seen

    @functools.cached_property
    def fingerprint(self) -> str:
        """What this engine computes, as a key: its weights (their checksum) and its precision mode.

        Engines with equal fingerprints give the same numbers up to float summation order (the
        attention path, batching and packing only reorder sums), so the result store
        (``result_store``) serves one's results to the other; another precision mode changes the
        numbers well beyond rounding, so it is part of the key.
        """
        weights = self.weights.checksum
        # The masked windows change numbers too, and an accelerator's 3-pass products (3e-4 off).
        mode = self.backend.precision + ("@high" if self.backend.matmul_precision == "high" else "")
        # Pallas flash (TPU) and cuDNN (GPU) round attention's inputs to bf16: other numbers again.
        mode += "@bf16-attention" if self.backend.implementation.dtype == "bfloat16" else ""
        key = f"{weights}\0{mode}\0{windows.MASKED_WINDOWS}"
        return hashlib.sha256(key.encode()).hexdigest()[:32]

    @property
    def is_random(self) -> bool:
        return self.weights.is_random

    @property
    def attention_path(self) -> str:
        """"fused", "xla" or "dot-product-attention" (see ``hardware``); ``backend.describe()`` says why."""
        return self.backend.attention

    def normalize_layers(self, layers: Sequence[int]) -> tuple[int, ...]:
        """fair-esm layer numbering with negatives counted from the end (-1 = final)."""
        n = self.config.num_layers
        out = []
        for layer in layers:
            if not -(n + 1) <= layer <= n:
                raise ValueError(f"layer {layer} does not exist: this model has layers 0..{n}")
            out.append(layer % (n + 1))
        return tuple(dict.fromkeys(out))

    # --- plain forward passes ------------------------------------------------------------
    @device_memory.retry_smaller_batches
    def run(
        self,
        sequences: Sequence[str],
        *,
        repr_layers: Sequence[int] = (-1,),
        logits: bool = True,
        attention_layers: Sequence[int] = (),
        contacts: bool = False,
        long: LongPolicy = "window",
        progress: ProgressFn | None = None,
        structures: Sequence[str | None] | None = None,
    ) -> list[SequenceOutput]:
        """Run the model on validated protein sequences.

        Args:
          sequences: uppercase residue strings (see ``fasta``), any number, any lengths.
          repr_layers: hidden states to return (0 = embeddings, -1 or N = final representation).
          logits: return the LM logits at residue positions.
          attention_layers: 1-based layers whose attention maps to return (negatives from the end).
          contacts: return the contact head's (L, L) map.
          long: sequences over 1022 residues: ``window`` (overlapping windows averaged where they
            overlap), ``truncate`` (first 1022 residues) or ``full`` (one pass, beyond the
            training length).
          progress: called with (batches done, batches total).
          structures: a structure-aware family's 3Di letters, one string (or None: all ``#``) per
            sequence, cut into the same windows.

        Returns:
          One ``SequenceOutput`` per input sequence, in input order.
        """
        used, repr_layers, attention_layers = run_checks.checked_run(self, sequences, repr_layers, attention_layers,
                                                                     long, contacts)
        windowed = long == "window"
        memory.check_outputs_fit(self.config, [len(s) for s in used], windowed=windowed, repr_layers=repr_layers,
                                 logits=logits, attention_layers=attention_layers, contacts=contacts)
        capture = Capture(hidden=repr_layers, attention=attention_layers, logits=logits, contacts=contacts)
        cut = windows.windows(used, windowed)
        merge = windows.WindowMerge(used, cut)
        residues = [w.residues for w in cut]
        lengths = [len(r) for r in residues]
        encoded = self._window_tokens(cut, sequences, structures)
        heavy = bool(attention_layers or contacts)
        batches = planner.plan(lengths, lambda width: self.max_rows(width, heavy),
                               pack=self.backend.packing and not heavy)
        ahead = self.backend.batches_ahead if not heavy and len(repr_layers) <= 2 else 1  # small outputs only
        in_flight: collections.deque = collections.deque()
        for number, batch in enumerate(batches, 1):
            tokens, segments = planner.pack(batch, encoded, lambda ids: ids)  # each window encoded once
            # Segment ids only when rows share; omitted otherwise, so the call is the unpacked one
            # (same arguments, same compiled function).
            extra = () if segments is None else (to_device(segments),)
            in_flight.append((number, batch, self._forward(self.state, to_device(tokens), *extra, capture=capture)))
            self.compiled_shapes.add(planner.shape_key("forward", tokens.shape, bool(extra), capture))
            while len(in_flight) >= ahead or (in_flight and number == len(batches)):
                fetched, done_batch, out = in_flight.popleft()
                for item, output in planner.unpack(jax.device_get(out), done_batch, lengths):
                    merge.add(item, output)
                if progress:
                    progress(fetched, len(batches))
        return [self._output(seq, merge.result(index), attention_layers) for index, seq in enumerate(used)]

    def _window_tokens(self, cut, sequences: Sequence[str], structures) -> list[np.ndarray]:
        """Each window's token ids (``Family.encode``: a sequence family refuses letters), with its
        slice of its sequence's 3Di letters (each string as long as its sequence, or None: all #)."""
        lengths = list(map(len, sequences))
        if structures is not None and [len(s or q) for s, q in zip(structures, sequences)] != lengths:
            raise ValueError("structures: one string of 3Di letters (or None) per sequence, as long as it")
        return [self.family.encode(w.residues, None if structures is None or structures[w.sequence] is None
                                   else structures[w.sequence][w.start:w.start + len(w.residues)]) for w in cut]

    @property
    def family(self):
        """The model's ``families.Family``: what the pages and scores read about it."""
        return family_of(self.config)

    def _output(self, sequence: str, merged: dict, attention_layers: tuple[int, ...]) -> SequenceOutput:
        return SequenceOutput(
            sequence=sequence,
            representations=merged["representations"],
            final_layer=self.config.num_layers,
            logits=self._logits_view(merged.get("logits")),
            attentions=merged.get("attentions"),
            attention_layers=attention_layers,
            contacts=merged.get("contacts"),
        )

    def _logits_view(self, logits: np.ndarray | None) -> np.ndarray | None:
        """Logits as the analyses read them (alphabet's columns): a structure-aware family's are
        each amino acid's log-probability summed over its 3Di letters (``Family.amino_acid_view``
        of the log-softmax), so the entropy, wt-marginals and maps read amino acids."""
        if logits is None or not self.family.structure_aware:
            return logits
        return self.family.amino_acid_view(log_softmax(np.asarray(logits, np.float64)))

    def max_rows(self, width: int, heavy: bool = False) -> int:
        """The most rows of ``width`` tokens one forward pass may hold (the token budget)."""
        rows = self.token_budget // width
        if heavy:  # attention maps: keep (rows, layers, heads, T, T) floats under ~1 GB
            per_row = self.config.num_layers * self.config.attention_heads * width * width * 4
            rows = min(rows, (1 << 30) // per_row)
        return max(1, rows)

    # --- masked passes -------------------------------------------------------------------
    def masked_pass_shape(self, length: int) -> tuple[int, int]:
        """(rows, width) of each masked pass over a sequence of ``length`` residues: one masked
        window per row (the sequence, or ``MAX_RESIDUES`` residues of a longer one), padded to
        ``width`` tokens, at most ``rows`` rows a pass (fewer positions: the next power of two)."""
        width = planner.masked_width(length)
        return planner.pow2_at_most(self.max_rows(width)), width

    @device_memory.retry_smaller_batches
    def compute_masked(
        self, sequence: str, positions: Sequence[int] | None = None, progress: ProgressFn | None = None,
        structure: str | None = None,
    ) -> np.ndarray:
        """log p(token | sequence with position i masked) for each position: (len(positions), vocab),
        computed now. Callers ask ``store.passes.masked_log_probs`` (``flamino_core.masked_log_probs``)
        instead: it reads the result store first and runs only what is missing through this.

        One forward pass per masked position (batched). ``positions`` are 0-based residue
        indices (default: all). Sequences over 1022 residues use ProteinGym's 1,024-token
        window for each position (``windows.masked_window``).

        A structure-aware family (``Family.structure_aware``) reads ``structure``, one 3Di letter
        per residue (None: all ``#``), masks a position's amino acid keeping its letter, and
        returns each amino acid's probability summed over the letters (``Family.amino_acid_view``).
        """
        positions = list(range(len(sequence))) if positions is None else list(positions)
        width_out = self.family.masked_width
        if not positions:
            return np.zeros((0, width_out), np.float32)
        for p in positions:
            if not 0 <= p < len(sequence):
                raise ValueError(f"position {p + 1} is outside the sequence (1..{len(sequence)})")
        max_rows, width = self.masked_pass_shape(len(sequence))
        sequence_tokens = self.family.encode(sequence, structure)
        mask_ids = np.concatenate([[0], self.family.mask_ids(len(sequence), structure), [0]])  # by token index
        out = np.zeros((len(positions), width_out), np.float32)
        total = -(-len(positions) // max_rows)
        for batch_index, first in enumerate(range(0, len(positions), max_rows)):
            chunk = positions[first:first + max_rows]
            spans = [windows.masked_window(p + 1, len(sequence_tokens)) for p in chunk]
            tokens = planner.masked_rows(sequence_tokens, spans, [[p + 1] for p in chunk], width, mask_ids)
            mask_at = np.ones(len(tokens), np.int32)  # filler rows: any token, their output is dropped
            mask_at[:len(chunk)] = [p + 1 - start for p, (start, _) in zip(chunk, spans)]
            log_probs = self._masked_log_probs(self.state, to_device(tokens), to_device(mask_at))
            self.compiled_shapes.add(planner.shape_key("masked", tokens.shape))
            out[first:first + len(chunk)] = self.family.amino_acid_view(np.asarray(log_probs)[: len(chunk)])
            if progress:
                progress(batch_index + 1, total)
        return out

    def forward_tokens(self, tokens: np.ndarray, repr_layers: Sequence[int] = (-1,),
                       attention_layers: Sequence[int] = ()) -> ModelOutput:
        """One forward pass of token rows as they are (``Family.encode`` of each sequence, padded
        with ``<pad>``; at most 1,022 residues a row): the model's outputs as NumPy. For a
        family whose tokens carry more than residues (SaProt's 3Di letters), where ``run``'s
        residue strings cannot say them."""
        n = self.config.num_layers
        capture = Capture(hidden=self.normalize_layers(tuple(repr_layers) + (n,)),
                          attention=self.normalize_layers(attention_layers))
        return jax.device_get(self._forward(self.state, to_device(np.asarray(tokens, np.int32)), capture=capture))

    @device_memory.retry_smaller_batches
    def compute_joint_masked(
        self, sequence: str, position_sets: Sequence[Sequence[int]], progress: ProgressFn | None = None,
        structure: str | None = None,
    ) -> list[np.ndarray]:
        """log p(token | sequence with every position of a set masked at once), one pass per set.

        Args:
          sequence: a validated residue string.
          position_sets: 0-based residue indices; each set is masked together in its own row.
          progress: called with (batches done, batches total).
          structure: a structure-aware family's 3Di letters, as ``compute_masked`` reads them.

        Returns:
          Per set, a (len(set), vocab) array of log-probabilities at its positions, in its order.
          Sequences over 1022 residues: each row is ProteinGym's 1,024-token window of the middle
          of its set's span, moved to hold the whole set (``windows.joint_window``); a set
          spanning more than one window raises ValueError.
        """
        spans = [windows.joint_window(positions, len(sequence) + 2) for positions in position_sets]  # all checked first
        max_rows, width = self.masked_pass_shape(len(sequence))
        sequence_tokens = self.family.encode(sequence, structure)
        mask_ids = np.concatenate([[0], self.family.mask_ids(len(sequence), structure), [0]])  # by token index
        out: list[np.ndarray] = []
        total = -(-len(position_sets) // max_rows)
        for batch_index, first in enumerate(range(0, len(position_sets), max_rows)):
            chunk, chunk_spans = position_sets[first:first + max_rows], spans[first:first + max_rows]
            masked = [np.asarray(positions) + 1 for positions in chunk]  # residue i is token i + 1
            tokens = planner.masked_rows(sequence_tokens, chunk_spans, masked, width, mask_ids)
            logits = np.asarray(jax.device_get(self._forward(self.state, to_device(tokens), capture=Capture()).logits))
            for r, (at_tokens, (start, _)) in enumerate(zip(masked, chunk_spans)):
                at = logits[r, at_tokens - start].astype(np.float64)  # (K, vocab)
                out.append(self.family.amino_acid_view(log_softmax(at)).astype(np.float32))
            if progress:
                progress(batch_index + 1, total)
        return out
