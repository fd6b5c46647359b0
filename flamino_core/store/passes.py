"""The model's passes through the result store: each masked position and each record's unmasked
outputs computed at most once per model, whoever asks (app, command line, batch).

* ``masked_log_probs`` is the one way to get masked passes: it reads what ``result_store`` holds,
  runs only the missing positions, in chunks of ``CHUNK``, and stores each chunk as it finishes,
  so an interruption loses at most the chunk in flight and the next call resumes.
* ``joint_masked_log_probs`` does the same for passes masking a set of positions together in one
  row (joint-masked scores of multi-mutants), each set stored under its own key (``joint_key``).
* ``record_outputs`` is the one way to get what an unmasked pass says of a whole record (a mean
  embedding at every layer, per-residue entropy, logits when asked): one pass per record gives
  everything the set's pages need, stored together.

Both report progress in their own unit (positions, records) counting what was already stored,
and stop between chunks when ``cancelled()`` says so, raising ``Cancelled`` after storing what
finished.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Callable, Sequence

import numpy as np

from flamino_core.progress import ProgressFn
from flamino_core.analysis.outputs import residue_entropy
from flamino_core.model.config import MAX_RESIDUES
from flamino_core.store.result_store import ResultStore, default_store

CHUNK = 64  # masked positions per engine call: the most an interruption loses
# Residues per unmasked group: bounds the host memory of every layer's (L, D) states before they
# are reduced to means (~256 MB), and is the step at which records arrive.
GROUP_BYTES = 256 << 20


class Cancelled(Exception):
    """The caller's ``cancelled()`` said stop; everything finished before it is stored."""


# --- masked passes -----------------------------------------------------------------------------
def masked_log_probs(
    engine,
    sequence: str,
    positions: Sequence[int] | None = None,
    *,
    store: ResultStore | None = None,
    progress: ProgressFn | None = None,
    cancelled: Callable[[], bool] | None = None,
    chunk: int = CHUNK,
    structure: str | None = None,
) -> np.ndarray:
    """log p(token | sequence with position i masked) for each of ``positions``: (n, vocab).

    Args:
      engine: an ``engine.Engine`` (its ``fingerprint`` keys the store).
      sequence: a validated protein sequence.
      positions: 0-based residue indices (default: every position).
      store: where passes are kept (default: ``result_store.default_store()``).
      progress: called with (positions done, positions asked), stored ones counted as done.
      cancelled: polled between chunks; True stops with ``Cancelled``.
      chunk: positions per engine call.
      structure: a structure-aware model's 3Di letters, one per residue (``Engine.compute_masked``);
        part of the store's key (``model_key``): another structure is another entry.

    Returns:
      float32 (len(positions), vocab), rows in the order asked (repeats allowed).
    """
    store = default_store() if store is None else store
    positions = list(range(len(sequence))) if positions is None else [int(p) for p in positions]
    model = model_key(engine, structure)
    stored = store.masked(model, sequence, positions)
    missing = [p for p in dict.fromkeys(positions) if p not in stored]
    asked = len(set(positions))
    done = asked - len(missing)
    if progress and positions:
        progress(done, asked)
    for first in range(0, len(missing), chunk):
        if cancelled is not None and cancelled():
            raise Cancelled(f"stopped after {done:,} of {asked:,} masked positions (kept)")
        part = missing[first:first + chunk]
        log_probs = engine.compute_masked(sequence, part, **({"structure": structure} if structure else {}))
        store.put_masked(model, sequence, part, log_probs)
        stored.update(zip(part, np.asarray(log_probs, np.float32)))
        done += len(part)
        if progress:
            progress(done, asked)
    if not positions:
        return np.zeros((0, engine.family.masked_width), np.float32)
    return np.stack([stored[p] for p in positions]).astype(np.float32, copy=False)


def model_key(engine, structure: str | None = None) -> str:
    """The store's model key of masked passes: the engine's fingerprint, and for a structure-aware
    model the structure letters' SHA-256 beside it (all ``#``, no structure, keys as none)."""
    if not structure or set(structure) == {"#"}:
        return engine.fingerprint
    return f"{engine.fingerprint}+3di:{hashlib.sha256(structure.encode()).hexdigest()[:32]}"


# --- passes masking a set of positions together -----------------------------------------------------
def joint_key(model: str, positions: Sequence[int]) -> str:
    """The store's model key of the pass masking ``positions`` (0-based) together: the masked key
    (``model_key``) and the set, so each set's rows are kept apart from single-position passes."""
    return f"{model}+joint:{','.join(str(int(p)) for p in positions)}"


def held_joint_sets(model: str, sequence: str, position_sets: Sequence[Sequence[int]],
                    store: ResultStore | None = None) -> set[tuple[int, ...]]:
    """The sets among ``position_sets`` whose joint pass the store holds (``model``: ``model_key``'s)."""
    store = default_store() if store is None else store
    return {tuple(s) for s in position_sets if len(store.held_positions(joint_key(model, s), sequence)) == len(set(s))}


def joint_masked_log_probs(
    engine,
    sequence: str,
    position_sets: Sequence[Sequence[int]],
    *,
    store: ResultStore | None = None,
    progress: ProgressFn | None = None,
    cancelled: Callable[[], bool] | None = None,
    structure: str | None = None,
) -> list[np.ndarray]:
    """Per set, log p(token | sequence with every position of the set masked at once), (len(set),
    vocab) float32: the stored ones read, the missing ones run in one ``Engine.compute_joint_masked``
    call (its batches as they were before the store held any) and stored. ``progress``: (sets done,
    sets asked) after each batch, stored ones counted as done; ``cancelled``: polled before the
    engine runs."""
    store = default_store() if store is None else store
    model = model_key(engine, structure)
    found: dict[tuple[int, ...], np.ndarray] = {}
    for positions in dict.fromkeys(tuple(int(p) for p in s) for s in position_sets):
        held = store.masked(joint_key(model, positions), sequence, positions)
        if len(held) == len(set(positions)):
            found[positions] = np.stack([held[p] for p in positions])
    missing = [s for s in dict.fromkeys(tuple(int(p) for p in s) for s in position_sets) if s not in found]
    asked = len(found) + len(missing)
    if progress and found:  # (nothing stored: the engine's first batch is the first news, as before the store)
        progress(len(found), asked)
    if missing:
        if cancelled is not None and cancelled():
            raise Cancelled(f"stopped after {len(found):,} of {asked:,} joint-masked sets (kept)")
        before = len(found)
        report = (lambda batch, batches: progress(before + round(len(missing) * batch / max(batches, 1)), asked)
                  ) if progress else None
        ran = engine.compute_joint_masked(sequence, missing, progress=report,
                                          **({"structure": structure} if structure else {}))
        for positions, log_probs in zip(missing, ran):
            store.put_masked(joint_key(model, positions), sequence, positions, log_probs)
            found[positions] = np.asarray(log_probs, np.float32)
    return [found[tuple(int(p) for p in s)] for s in position_sets]


# --- one unmasked pass per record --------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class RecordOutputs:
    """What one unmasked pass says of a whole record.

    ``means[layer]`` is the hidden state after ``layer`` (0 = embeddings, fair-esm numbering)
    averaged over residues; ``entropy`` the per-residue entropy (bits) of the predicted amino
    acids; ``logits`` (L, vocab) when asked.
    """

    sequence: str  # as analysed (the first 1022 residues under long="truncate")
    means: dict[int, np.ndarray]
    entropy: np.ndarray
    logits: np.ndarray | None = None

    @property
    def mean_entropy(self) -> float:
        """The record's mean entropy (bits): 0 when the model is sure of every residue."""
        return float(self.entropy.mean())


def output_names(num_layers: int, length: int, long: str, logits: bool) -> list[str]:
    """The store's names for a record's outputs. The long-sequence policy only changes results
    over 1022 residues, so only there does it join the name."""
    suffix = f"@{long}" if length > MAX_RESIDUES and long != "window" else ""
    names = [f"mean/{layer}" for layer in range(num_layers + 1)] + ["entropy"] + (["logits"] if logits else [])
    return [name + suffix for name in names]


def record_outputs(
    engine,
    sequences: Sequence[str],
    *,
    logits: bool = False,
    long: str = "window",
    store: ResultStore | None = None,
    progress: ProgressFn | None = None,
    on_record: Callable[[int, RecordOutputs], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> list[RecordOutputs]:
    """Each record's ``RecordOutputs``, from the store or from one unmasked pass per record.

    Records are run in groups (a bounded amount of hidden states at once); each group is stored
    as it finishes. Repeated sequences run once.

    Args:
      engine: an ``engine.Engine``.
      sequences: validated protein sequences.
      logits: also return (and store) the (L, vocab) logits.
      long: sequences over 1022 residues (``Engine.run``).
      store: where outputs are kept (default: ``result_store.default_store()``).
      progress: called with (records done, records), stored ones counted as done; within a
        group, as its batches finish (in proportion: the group is stored when it ends).
      on_record: called with (index, outputs) for every record as soon as its outputs exist
        (stored ones first), for pages that show results as they arrive.
      cancelled: polled between groups; True stops with ``Cancelled``.

    Returns:
      One ``RecordOutputs`` per input sequence, in input order.
    """
    store = default_store() if store is None else store
    model, n = engine.fingerprint, engine.config.num_layers
    results = _stored_outputs(store, model, n, sequences, long, logits)
    total = len(sequences)
    arrivals = _Arrivals(sequences, on_record)
    done = arrivals.announce(results)
    if progress and total:
        progress(done, total)
    missing = [s for s in dict.fromkeys(sequences) if s not in results]
    for group in record_groups(engine, missing):
        if cancelled is not None and cancelled():
            raise Cancelled(f"stopped after {done:,} of {total:,} records (kept)")
        # The group's batches report as they finish (issue 50: 200 records of a Predict fit were one
        # group, and its progress said "0 of 200" for the 13 s the group took): its records count
        # done in proportion; they are stored, and their count made exact, when the group ends.
        def batch_done(ran: int, batches: int, before: int = done, size: int = len(group)) -> None:
            if ran < batches:  # (the group's end reports below, exact)
                progress(min(before + size * ran // batches, total), total)

        outs = engine.run(group, repr_layers=tuple(range(n + 1)), logits=True, long=long,
                          progress=batch_done if progress else None)
        for sequence, out in zip(group, outs):
            record = _record_from_run(out, logits)
            store.put_outputs(model, sequence, _pack(record, len(sequence), long, n))
            results[sequence] = record
        done = arrivals.announce(results)
        if progress:
            progress(done, total)
    return [results[s] for s in sequences]


def _stored_outputs(store: ResultStore, model: str, num_layers: int, sequences: Sequence[str], long: str,
                    logits: bool) -> dict[str, RecordOutputs]:
    """Per distinct sequence, the outputs the store holds in full (a partial set is run again)."""
    results = {}
    for sequence in dict.fromkeys(sequences):
        names = output_names(num_layers, len(sequence), long, logits)
        found = store.outputs(model, sequence, names)
        if len(found) == len(names):
            results[sequence] = _unpack(sequence, long, num_layers, found, logits)
    return results


class _Arrivals:
    """Counts the records whose outputs exist, and hands each record to ``on_record`` once, the
    first time its outputs do (a repeated sequence's records arrive together)."""

    def __init__(self, sequences: Sequence[str], on_record: Callable[[int, RecordOutputs], None] | None):
        self.sequences, self.on_record = sequences, on_record
        self.announced: set[int] = set()

    def announce(self, results: dict[str, RecordOutputs]) -> int:
        """The number of records with outputs in ``results``, after announcing the new ones."""
        count = 0
        for index, sequence in enumerate(self.sequences):
            if sequence in results:
                count += 1
                if self.on_record is not None and index not in self.announced:
                    self.announced.add(index)
                    self.on_record(index, results[sequence])
        return count


def _record_from_run(out, logits: bool) -> RecordOutputs:
    """A record's outputs from its unmasked run (an ``engine.SequenceOutput`` with every layer's
    representations and the logits)."""
    return RecordOutputs(
        sequence=out.sequence,
        means={layer: rep.mean(axis=0).astype(np.float32) for layer, rep in out.representations.items()},
        entropy=residue_entropy(out.logits).astype(np.float32),
        logits=out.logits.astype(np.float32) if logits else None,
    )


def keep_record_outputs(store: ResultStore, model: str, num_layers: int, sequence: str, record: RecordOutputs,
                        long: str = "window") -> None:
    """Store ``record``, the outputs of ``sequence`` computed elsewhere (a Ray worker), under the
    model fingerprint ``model``, as ``record_outputs`` would have stored them."""
    store.put_outputs(model, sequence, _pack(record, len(sequence), long, num_layers))


def _group_residues(engine) -> int:
    """Residues per group, so that every layer's (L, D) float32 states stay under GROUP_BYTES."""
    config = engine.config
    return max(MAX_RESIDUES, GROUP_BYTES // ((config.num_layers + 1) * config.embed_dim * 4))


def record_groups(engine, sequences: list[str]) -> list[list[str]]:
    """The groups ``record_outputs`` runs ``sequences`` in, one ``Engine.run`` call each (what a
    job's cost plans too, ``jobs/pass_cost.py``)."""
    return _groups(sequences, _group_residues(engine))


def _groups(sequences: list[str], residues: int) -> list[list[str]]:
    groups, current, size = [], [], 0
    for sequence in sequences:
        if current and size + len(sequence) > residues:
            groups.append(current)
            current, size = [], 0
        current.append(sequence)
        size += len(sequence)
    return groups + ([current] if current else [])


def _pack(record: RecordOutputs, length: int, long: str, num_layers: int) -> dict[str, np.ndarray]:
    names = output_names(num_layers, length, long, record.logits is not None)
    values = [record.means[layer] for layer in range(num_layers + 1)] + [record.entropy]
    if record.logits is not None:
        values.append(record.logits)
    return dict(zip(names, values))


def _unpack(sequence: str, long: str, num_layers: int, found: dict[str, np.ndarray], logits: bool) -> RecordOutputs:
    names = output_names(num_layers, len(sequence), long, logits)
    analysed = sequence[:MAX_RESIDUES] if long == "truncate" else sequence
    return RecordOutputs(
        sequence=analysed,
        means={layer: found[names[layer]] for layer in range(num_layers + 1)},
        entropy=found[names[num_layers + 1]],
        logits=found[names[num_layers + 2]] if logits else None,
    )
