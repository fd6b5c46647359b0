"""The jitted inference backend: a loaded model and the compiled calls that run it.

The model is split once into (graphdef, state); a pure function of the state is jitted with
the output options as static arguments. ``planning`` pads inputs to a few length buckets and
batch sizes to powers of two, so a handful of compilations serve every input, and merges the
windows of long sequences; with the fused kernel ``packing`` puts several short sequences into
one row. Each row, and each sequence of a packed row, is computed independently of the others
(padding is masked in attention and zeroed in the embedding; a packed sequence attends only to
itself), so results for a sequence never depend on what else is in its batch (up to float
summation order).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
import os
from typing import Callable, Literal, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from . import hardware, packing, planning
from .alphabet import encode
from .config import MAX_RESIDUES, ESM2Config
from .convert import params_to_model
from .options import LONG_POLICIES
from .planning import LENGTH_BUCKETS, bucket_length, window_starts  # noqa: F401  (engine's public names)
from .weights import ModelWeights, cache_root

LongPolicy = Literal["window", "truncate", "full"]
ProgressFn = Callable[[int, int], None]
# How many times each jitted function has been traced (= compiled) in this process. Read by
# the tests (tests/test_engine.py, tests/test_app.py) and `make bench` to show that new
# lengths inside known buckets compile nothing.
TRACE_COUNTS: collections.Counter = collections.Counter()


def enable_compilation_cache(directory: str | os.PathLike | None = None) -> None:
    """Use JAX's persistent compilation cache so a new process skips recompiling."""
    directory = directory or os.environ.get("FLAMINO_JAX_CACHE") or cache_root() / "jax"
    jax.config.update("jax_compilation_cache_dir", str(directory))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


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


def _forward(graphdef, state, tokens, segments=None, *, repr_layers, attention_layers, need_logits, need_contacts):
    TRACE_COUNTS["forward"] += 1  # runs at trace time only
    model = nnx.merge(graphdef, state)
    return model(
        tokens,
        repr_layers=repr_layers,
        attention_layers=attention_layers,
        need_logits=need_logits,
        need_contacts=need_contacts,
        segments=segments,
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
                 precision: str | None = None, packing: str | None = None):
        self.weights = weights
        self.config: ESM2Config = weights.config
        model = params_to_model(weights.params, weights.config)
        # Attention path, matmul precision, token budget and sequence packing for this machine
        # (hardware.choose: the fused CPU kernel when built, with packing; dot_product_attention
        # on a GPU; fp32 unless asked).
        self.backend = hardware.configure(model, attention, precision, token_budget, packing)
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

    @functools.cached_property
    def fingerprint(self) -> str:
        """What this engine computes, as a key: its weights (their checksum) and its precision mode.

        Engines with equal fingerprints give the same numbers up to float summation order (the
        attention path, batching and packing only reorder sums), so the result store
        (``result_store``) serves one's results to the other; another precision mode changes the
        numbers well beyond rounding, so it is part of the key.
        """
        from .model_cache import params_checksum

        weights = self.weights.checksum or params_checksum(self.weights.params)
        # The window scheme of masked passes over long sequences changes their numbers too.
        key = f"{weights}\0{self.backend.precision}\0{planning.MASKED_WINDOWS}"
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
        self._check_memory(used, windowed, repr_layers, logits, attention_layers, contacts)

        options = dict(
            repr_layers=repr_layers,
            attention_layers=attention_layers,
            need_logits=logits,
            need_contacts=contacts,
        )
        windows = planning.windows(used, windowed)
        merge = planning.WindowMerge(used, windows)
        heavy = bool(attention_layers or contacts)
        passes = self._passes([w.residues for w in windows], heavy)
        for done, (tokens, segments, unpack) in enumerate(passes):
            # Segment ids only when rows share; omitted otherwise, so the call is the unpacked one
            # (same arguments, same compiled function).
            extra = () if segments is None else (jnp.asarray(segments),)
            out = self._forward(self.state, jnp.asarray(tokens), *extra, **options)
            for item, output in unpack(jax.device_get(out)):
                merge.add(item, output)
            if progress:
                progress(done + 1, len(passes))

        results = []
        for index, seq in enumerate(used):
            merged = merge.result(index)
            results.append(SequenceOutput(
                sequence=seq,
                representations=merged["representations"],
                final_layer=n,
                logits=merged.get("logits"),
                attentions=merged.get("attentions"),
                attention_layers=attention_layers,
                contacts=merged.get("contacts"),
            ))
        return results

    def _passes(self, residues: Sequence[str], heavy: bool) -> list[tuple[np.ndarray, np.ndarray | None, Callable]]:
        """The forward passes for these windows: (tokens, segment ids or None, unpack) each, where
        ``unpack(outputs)`` yields (window index, its outputs).

        With packing (``packing``: the fused kernel, no attention maps or contacts) several
        windows share a row; otherwise each window has a row of its own in length buckets
        (``planning``). Token arrays are small (int32, at most the token budget per pass)."""
        lengths = [len(r) for r in residues]
        if not (self.backend.packing and not heavy and len(residues) > 1):
            batches = planning.plan_batches(lengths, lambda width: self._max_rows(width, heavy))

            def unpack(rows):
                return lambda out: zip(rows, planning.unpack_rows(out, [lengths[r] for r in rows]))

            return [(planning.pack_rows([residues[r] for r in rows], width), None, unpack(rows)) for rows, width in batches]

        def unpack_packed(rows):
            return lambda out: packing.unpack_rows(out, rows, lengths)

        packed = packing.plan_rows(lengths)
        passes = []
        for indices, width in packing.plan_batches(packed, lambda width: self._max_rows(width, False)):
            rows = [packed[i] for i in indices]
            tokens, segments = packing.pack_rows(rows, residues, width)
            # Rows of one sequence each (a long one, a lone one): the ordinary pass, no segments.
            shared = any(len(row.items) > 1 for row in rows)
            passes.append((tokens, segments if shared else None, unpack_packed(rows)))
        return passes

    def _max_rows(self, width: int, heavy: bool) -> int:
        """The most rows of ``width`` tokens one forward pass may hold (the token budget)."""
        rows = self.token_budget // width
        if heavy:  # attention maps: keep (rows, layers, heads, T, T) floats under ~1 GB
            per_row = self.config.num_layers * self.config.attention_heads * width * width * 4
            rows = min(rows, (1 << 30) // per_row)
        return max(1, rows)

    def _check_memory(self, sequences, windowed, repr_layers, logits, attention_layers, contacts) -> None:
        """Refuse, before any forward pass, outputs that cannot fit in the memory available now.

        The outputs of all sequences are returned together, so they must fit at once; the
        model's own working memory comes on top, so passing this check does not promise the
        run fits, but failing it means the run would run out of memory after all its work.
        Only (L, L) outputs (contacts, attention maps) of long sequences come near the limit.
        """
        config = self.config
        lengths = [len(s) for s in sequences]
        per_residue = len(repr_layers) * config.embed_dim + (config.vocab_size if logits else 0)
        maps = len(attention_layers) * config.attention_heads
        sizes = planning.output_bytes(lengths, windowed=windowed, per_residue_floats=per_residue,
                                      attention_maps=maps, contacts=contacts)
        available = planning.available_memory()
        if available is None or sum(sizes) <= available:
            return
        longest = max(lengths)
        if contacts or attention_layers:
            what = " and ".join(name for name, asked in (("contacts", contacts), ("attention maps", maps)) if asked)
            lean = planning.output_bytes(lengths, windowed=windowed, per_residue_floats=per_residue)
            advice = (f"without the {what} they need {planning.gigabytes(sum(lean))}: leave them out, or analyse "
                      f"only the first {MAX_RESIDUES} residues of long sequences (--long truncate)")
        else:
            advice = "analyse fewer or shorter sequences at a time"
        raise ValueError(
            f"the requested outputs need about {planning.gigabytes(sum(sizes))} of memory (the longest "
            f"sequence has {longest:,} residues), more than the {planning.gigabytes(available)} "
            f"available now; {advice}"
        )

    # --- masked passes -------------------------------------------------------------------
    def masked_log_probs(
        self, sequence: str, positions: Sequence[int] | None = None, progress: ProgressFn | None = None
    ) -> np.ndarray:
        """log p(token | sequence with position i masked) for each position: (len(positions), vocab).

        One forward pass per masked position (batched). ``positions`` are 0-based residue
        indices (default: all). Sequences over 1022 residues use ProteinGym's 1,024-token
        window for each position (``planning.masked_window``).
        """
        positions = list(range(len(sequence))) if positions is None else list(positions)
        if not positions:
            return np.zeros((0, self.config.vocab_size), np.float32)
        for p in positions:
            if not 0 <= p < len(sequence):
                raise ValueError(f"position {p + 1} is outside the sequence (1..{len(sequence)})")
        width = bucket_length(min(len(sequence), MAX_RESIDUES) + 2)
        max_rows = planning.pow2_at_most(self._max_rows(width, heavy=False))
        sequence_tokens = encode(sequence)
        out = np.zeros((len(positions), self.config.vocab_size), np.float32)
        total = -(-len(positions) // max_rows)
        for batch_index, first in enumerate(range(0, len(positions), max_rows)):
            chunk = positions[first:first + max_rows]
            tokens, mask_at = planning.pack_masked_rows(sequence_tokens, chunk, width)
            log_probs = self._masked_log_probs(self.state, jnp.asarray(tokens), jnp.asarray(mask_at))
            out[first:first + len(chunk)] = np.asarray(log_probs)[: len(chunk)]
            if progress:
                progress(batch_index + 1, total)
        return out

    def joint_masked_log_probs(
        self, sequence: str, position_sets: Sequence[Sequence[int]], progress: ProgressFn | None = None
    ) -> list[np.ndarray]:
        """log p(token | sequence with every position of a set masked at once), one pass per set.

        Args:
          sequence: a validated residue string.
          position_sets: 0-based residue indices; each set is masked together in its own row.
          progress: called with (batches done, batches total).

        Returns:
          Per set, a (len(set), vocab) array of log-probabilities at its positions, in its order.
          Sequences over 1022 residues: each row is ProteinGym's 1,024-token window of the middle
          of its set's span, moved to hold the whole set (``planning.joint_window``); a set
          spanning more than one window raises ValueError.
        """
        for positions in position_sets:  # every set checked before the first pass
            planning.joint_window(positions, len(sequence) + 2)
        width = bucket_length(min(len(sequence), MAX_RESIDUES) + 2)
        max_rows = planning.pow2_at_most(self._max_rows(width, heavy=False))
        sequence_tokens = encode(sequence)
        options = dict(repr_layers=(), attention_layers=(), need_logits=True, need_contacts=False)
        out: list[np.ndarray] = []
        total = -(-len(position_sets) // max_rows)
        for batch_index, first in enumerate(range(0, len(position_sets), max_rows)):
            chunk = position_sets[first:first + max_rows]
            tokens, starts = planning.pack_jointly_masked_rows(sequence_tokens, chunk, width)
            logits = np.asarray(jax.device_get(self._forward(self.state, jnp.asarray(tokens), **options)["logits"]))
            for r, (positions, start) in enumerate(zip(chunk, starts)):
                at = logits[r, 1 + np.asarray(positions) - start].astype(np.float64)  # (K, vocab)
                at -= at.max(axis=-1, keepdims=True)
                out.append((at - np.log(np.exp(at).sum(axis=-1, keepdims=True))).astype(np.float32))
            if progress:
                progress(batch_index + 1, total)
        return out
