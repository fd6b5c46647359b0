"""The jitted inference backend: bucketing, token-budget batching, long-sequence windows.

The model is split once into (graphdef, state); a pure function of the state is jitted with
the output options as static arguments. Inputs are padded to a few length buckets and batch
sizes to powers of two, so a handful of compilations serve every input. Each row is computed
independently of the others (padding is masked in attention and zeroed in the embedding),
so results for a sequence never depend on what else is in its batch.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import os
import threading
from typing import Callable, Literal, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from . import hardware
from .alphabet import CLS_IDX, EOS_IDX, MASK_IDX, PAD_IDX, batch_encode, encode
from .config import MAX_RESIDUES, ESM2Config
from .convert import params_to_model
from .weights import ModelWeights, cache_root

LongPolicy = Literal["window", "truncate", "full"]
LONG_POLICIES = ("window", "truncate", "full")
# Token lengths (residues + <cls> + <eos>) that inputs are padded up to: every multiple of 16.
# Finer buckets mean more shapes to compile (about a second each, once, and kept by the
# persistent compilation cache) but at most 15 padding tokens per row: with the earlier coarse
# buckets (..., 256, 384, ...) a 300-residue protein paid for 27% padding in every pass.
BUCKET_STEP = 16
LENGTH_BUCKETS = tuple(range(BUCKET_STEP, 1024 + 1, BUCKET_STEP))
DEFAULT_TOKEN_BUDGET = hardware.TOKEN_BUDGET["cpu"]
WINDOW_STEP = MAX_RESIDUES // 2  # windows overlap by half their length
ProgressFn = Callable[[int, int], None]
# How many times each jitted function has been traced (= compiled) in this process.
TRACE_COUNTS: collections.Counter = collections.Counter()


def enable_compilation_cache(directory: str | os.PathLike | None = None) -> None:
    """Use JAX's persistent compilation cache so a new process skips recompiling."""
    directory = directory or os.environ.get("FLAMINO_JAX_CACHE") or cache_root() / "jax"
    jax.config.update("jax_compilation_cache_dir", str(directory))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def bucket_length(tokens: int) -> int:
    """The padded token length for a row of ``tokens`` tokens."""
    if tokens <= LENGTH_BUCKETS[-1]:
        return max(BUCKET_STEP, -(-tokens // BUCKET_STEP) * BUCKET_STEP)
    return -(-tokens // 256) * 256  # --long full beyond the training length


def _pow2_at_most(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


def _pow2_at_least(n: int) -> int:
    return 1 << (max(1, n) - 1).bit_length()


@dataclasses.dataclass
class SequenceOutput:
    """Model outputs for one sequence, special tokens removed except in ``attentions``."""

    sequence: str  # as analysed (truncated under --long truncate)
    representations: dict[int, np.ndarray]  # layer (fair-esm numbering) -> (L, D)
    final_layer: int
    logits: np.ndarray | None = None  # (L, vocab)
    attentions: np.ndarray | None = None  # (len(attention_layers), H, L+2, L+2), with <cls>/<eos>
    attention_layers: tuple[int, ...] = ()
    contacts: np.ndarray | None = None  # (L, L)

    @property
    def final(self) -> np.ndarray:
        return self.representations[self.final_layer]

    @property
    def mean(self) -> np.ndarray:
        """Per-sequence embedding: the final representation averaged over residues."""
        return self.final.mean(axis=0)


def window_starts(length: int, window: int = MAX_RESIDUES, step: int = WINDOW_STEP) -> list[int]:
    """Start offsets of overlapping windows covering ``length`` residues (last one flush right)."""
    if length <= window:
        return [0]
    starts = list(range(0, length - window, step))
    return starts + [length - window]


def _forward(graphdef, state, tokens, *, repr_layers, attention_layers, need_logits, need_contacts):
    TRACE_COUNTS["forward"] += 1  # runs at trace time only
    model = nnx.merge(graphdef, state)
    return model(
        tokens,
        repr_layers=repr_layers,
        attention_layers=attention_layers,
        need_logits=need_logits,
        need_contacts=need_contacts,
    )


def _masked_log_probs(graphdef, state, tokens, positions):
    """Log-probabilities at one masked position per row: (B, vocab).

    The last layer, the final LayerNorm and the LM head run only at the masked position of each
    row (``ESM2.masked_logits``), not at all T positions.
    """
    TRACE_COUNTS["masked"] += 1  # runs at trace time only
    model = nnx.merge(graphdef, state)
    return jax.nn.log_softmax(model.masked_logits(tokens, positions), axis=-1)


class Engine:
    """A loaded model with a cached, jitted forward pass. Thread-safe; share one per process."""

    def __init__(self, weights: ModelWeights, token_budget: int | None = None, attention: str | None = None,
                 precision: str | None = None):
        self.weights = weights
        self.config: ESM2Config = weights.config
        model = params_to_model(weights.params, weights.config)
        # Attention path, matmul precision and token budget for this machine (hardware.choose:
        # the fused CPU kernel when built, dot_product_attention on a GPU; fp32 unless asked).
        self.backend = hardware.configure(model, attention, precision, token_budget)
        self.token_budget = self.backend.token_budget
        self.graphdef, self.state = nnx.split(model)
        self.state = jax.device_put(self.state)
        # The graph definition is closed over rather than passed as a static argument: jit would
        # otherwise hash and compare it on every call (about 0.2 ms each).
        self._forward = jax.jit(
            functools.partial(_forward, self.graphdef),
            static_argnames=("repr_layers", "attention_layers", "need_logits", "need_contacts"),
        )
        self._masked_log_probs = jax.jit(functools.partial(_masked_log_probs, self.graphdef))
        self._compiled: set[tuple] = set()
        self._lock = threading.Lock()

    @property
    def is_random(self) -> bool:
        return self.weights.is_random

    @property
    def attention_path(self) -> str:
        """"fused", "xla" or "dot-product-attention" (see ``hardware``); ``backend.describe()`` says why."""
        return self.backend.attention

    @property
    def compilations(self) -> int:
        """Distinct (shape, options) combinations compiled so far by this engine."""
        return len(self._compiled)

    def _note_shape(self, key: tuple) -> None:
        with self._lock:
            self._compiled.add(key)

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

        Returns:
          One ``SequenceOutput`` per input sequence, in input order.
        """
        if long not in LONG_POLICIES:
            raise ValueError(f"long must be one of {LONG_POLICIES}, not {long!r}")
        n = self.config.num_layers
        repr_layers = tuple(sorted(set(self.normalize_layers(repr_layers)) | {n}))
        if any(a == 0 or a < -n for a in attention_layers):
            raise ValueError(f"attention layers are numbered 1..{n} (or -1 for the last); layer 0 is the embedding")
        attention_layers = self.normalize_layers(attention_layers)
        used = [s[:MAX_RESIDUES] if long == "truncate" else s for s in sequences]
        windowed = long == "window"
        if windowed and attention_layers and any(len(s) > MAX_RESIDUES for s in used):
            raise ValueError(
                "attention maps of sequences longer than 1022 residues cannot be stitched from "
                "windows; choose long='truncate' or long='full' for them"
            )

        # Chunks: (sequence index, start offset, residues); one per window.
        chunks = []
        for index, seq in enumerate(used):
            starts = window_starts(len(seq)) if windowed else [0]
            width = MAX_RESIDUES if windowed else len(seq)
            chunks += [(index, start, seq[start:start + width]) for start in starts]

        options = dict(
            repr_layers=repr_layers,
            attention_layers=attention_layers,
            need_logits=logits,
            need_contacts=contacts,
        )
        chunk_outputs: list[dict | None] = [None] * len(chunks)
        batches = self._plan_batches([len(c[2]) for c in chunks], heavy=bool(attention_layers or contacts))
        for done, (rows, width) in enumerate(batches):
            outs = self._run_batch([chunks[r][2] for r in rows], width, options)
            for r, out in zip(rows, outs):
                chunk_outputs[r] = out
            if progress:
                progress(done + 1, len(batches))

        results = []
        for index, seq in enumerate(used):
            parts = [(c[1], o) for c, o in zip(chunks, chunk_outputs) if c[0] == index]
            results.append(_merge_windows(seq, parts, repr_layers, n, attention_layers))
        return results

    def _plan_batches(self, lengths: list[int], heavy: bool) -> list[tuple[list[int], int]]:
        """Batches of rows and their padded width, within the token budget.

        Sorted by length and filled greedily, as transformers users batch by hand, so a batch
        is padded to its longest row's bucket. A batch holds at most a power of two rows (the
        most the budget allows at its width), and one that ends up with fewer is split into
        power-of-two pieces (13 rows -> 8 + 4 + 1) rather than padded with filler rows, so
        few shapes are compiled.
        """
        order = sorted(range(len(lengths)), key=lambda i: lengths[i])
        batches: list[tuple[list[int], int]] = []
        current: list[int] = []
        width = 0
        for i in order:
            wider = bucket_length(lengths[i] + 2)
            if current and len(current) + 1 > _pow2_at_most(self._max_rows(wider, heavy)):
                batches += _split_pow2(current, width)
                current = []
            current.append(i)
            width = wider
        if current:
            batches += _split_pow2(current, width)
        return batches

    def _max_rows(self, width: int, heavy: bool) -> int:
        rows = self.token_budget // width
        if heavy:  # attention maps: keep (rows, layers, heads, T, T) floats under ~1 GB
            per_row = self.config.num_layers * self.config.attention_heads * width * width * 4
            rows = min(rows, (1 << 30) // per_row)
        return max(1, rows)

    def _run_batch(self, seqs: list[str], width: int, options: dict) -> list[dict]:
        rows = _pow2_at_least(len(seqs))
        # Filler rows are a minimal real sequence (<cls><eos>), never all-padding: an all-pad
        # row would divide by zero in token dropout.
        tokens = np.full((rows, width), PAD_IDX, np.int32)
        tokens[:, 0], tokens[:, 1] = CLS_IDX, EOS_IDX
        tokens[: len(seqs)] = batch_encode(seqs, pad_to=width)
        self._note_shape(("forward", rows, width, tuple(sorted(options.items()))))
        out = self._forward(self.state, jnp.asarray(tokens), **options)
        out = jax.device_get(out)
        results = []
        for row, seq in enumerate(seqs):
            length = len(seq)
            item = {"representations": {k: v[row, 1:length + 1] for k, v in out["representations"].items()}}
            if "logits" in out:
                item["logits"] = out["logits"][row, 1:length + 1]
            if "attentions" in out:
                item["attentions"] = out["attentions"][row, :, :, : length + 2, : length + 2]
            if "contacts" in out:
                item["contacts"] = out["contacts"][row, :length, :length]
            results.append(item)
        return results

    # --- masked passes -------------------------------------------------------------------
    def masked_log_probs(
        self, sequence: str, positions: Sequence[int] | None = None, progress: ProgressFn | None = None
    ) -> np.ndarray:
        """log p(token | sequence with position i masked) for each position: (len(positions), vocab).

        One forward pass per masked position (batched). ``positions`` are 0-based residue
        indices (default: all). Sequences over 1022 residues use the window centred nearest
        each position.
        """
        positions = list(range(len(sequence))) if positions is None else list(positions)
        if not positions:
            return np.zeros((0, self.config.vocab_size), np.float32)
        for p in positions:
            if not 0 <= p < len(sequence):
                raise ValueError(f"position {p + 1} is outside the sequence (1..{len(sequence)})")
        length = len(sequence)
        window = min(length, MAX_RESIDUES)
        width = bucket_length(window + 2)
        max_rows = _pow2_at_most(self._max_rows(width, heavy=False))
        base = encode(sequence)
        out = np.zeros((len(positions), self.config.vocab_size), np.float32)
        total = -(-len(positions) // max_rows)
        for batch_index, first in enumerate(range(0, len(positions), max_rows)):
            chunk = positions[first:first + max_rows]
            rows = _pow2_at_least(len(chunk))
            tokens = np.full((rows, width), PAD_IDX, np.int32)
            tokens[:, 0], tokens[:, 1] = CLS_IDX, EOS_IDX
            mask_at = np.ones(rows, np.int32)
            for r, p in enumerate(chunk):
                start = min(max(p - window // 2, 0), length - window)
                row = np.concatenate([[CLS_IDX], base[1 + start:1 + start + window], [EOS_IDX]])
                row[1 + p - start] = MASK_IDX
                tokens[r, : window + 2] = row
                mask_at[r] = 1 + p - start
            self._note_shape(("masked", rows, width))
            log_probs = self._masked_log_probs(self.state, jnp.asarray(tokens), jnp.asarray(mask_at))
            out[first:first + len(chunk)] = np.asarray(log_probs)[: len(chunk)]
            if progress:
                progress(batch_index + 1, total)
        return out


def _split_pow2(rows: list[int], width: int) -> list[tuple[list[int], int]]:
    """Rows in power-of-two pieces, largest first (13 rows -> 8 + 4 + 1): no filler rows."""
    pieces, start = [], 0
    for bit in reversed(range(len(rows).bit_length())):
        if len(rows) >> bit & 1:
            pieces.append((rows[start:start + (1 << bit)], width))
            start += 1 << bit
    return pieces


def _merge_windows(seq, parts, repr_layers, n, attention_layers) -> SequenceOutput:
    """Average per-residue outputs over overlapping windows; contacts over covered pairs."""
    length = len(seq)
    if len(parts) == 1:
        (_, out), = parts
        return SequenceOutput(
            sequence=seq,
            representations=out["representations"],
            final_layer=n,
            logits=out.get("logits"),
            attentions=out.get("attentions"),
            attention_layers=attention_layers,
            contacts=out.get("contacts"),
        )
    coverage = np.zeros((length, 1), np.float32)
    reps = {k: 0.0 for k in repr_layers}
    logits = 0.0
    contacts = np.zeros((length, length), np.float32)
    pair_coverage = np.zeros((length, length), np.float32)
    for start, out in parts:
        span = slice(start, start + len(out["representations"][n]))
        coverage[span] += 1
        for k in repr_layers:
            reps[k] = reps[k] + _place(out["representations"][k], span, length)
        if "logits" in out:
            logits = logits + _place(out["logits"], span, length)
        if "contacts" in out:
            contacts[span, span] += out["contacts"]
            pair_coverage[span, span] += 1
    has_contacts = "contacts" in parts[0][1]
    return SequenceOutput(
        sequence=seq,
        representations={k: (v / coverage).astype(np.float32) for k, v in reps.items()},
        final_layer=n,
        logits=(logits / coverage).astype(np.float32) if "logits" in parts[0][1] else None,
        attention_layers=attention_layers,
        # Pairs never inside one window get 0: the model saw no evidence for them.
        contacts=np.divide(contacts, pair_coverage, out=np.zeros_like(contacts), where=pair_coverage > 0)
        if has_contacts
        else None,
    )


def _place(values: np.ndarray, span: slice, length: int) -> np.ndarray:
    full = np.zeros((length,) + values.shape[1:], np.float32)
    full[span] = values
    return full
