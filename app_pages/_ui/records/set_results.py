"""What the model says of each record of a set, through the result store, as it arrives.

The Records table (mean entropy, pseudo-perplexity) and the Embeddings page's map (mean
embeddings) read what the store holds at once; the rest is one background job per kind of work
(``background.py``), drawn by ``jobs_panel.py``:

* **per-record outputs**: one unmasked pass per record gives every layer's mean embedding and
  the per-residue entropy together (``passes.record_outputs``), so Records then Embeddings (or
  the reverse) runs each record once. The job sends a few records per engine call
  (``CHUNK_RESIDUES``), so rows fill in and the map gains points as it goes.
* **pseudo-perplexity**: every position of each record masked once (``passes.masked_log_probs``),
  in chunks of 64 positions; a record's value appears when its last chunk is in.

Values a job computed are also kept on the job (``Job.value`` holds them as they arrive), so a
store that keeps nothing (``FLAMINO_STORE=off``) still shows them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading

import numpy as np

from flamino_core.jobs import background as jobs, on_ray as jobs_ray
from flamino_core.jobs import pass_cost

from flamino_core.store import passes
from flamino_core.model.config import MAX_RESIDUES
from flamino_core.store.result_store import default_store
from flamino_core.variants.substitution_maps import pseudo_perplexity

from app_pages._ui.server import background, jobs_panel

CHUNK_RESIDUES = 2_000  # residues per engine call of a set's unmasked passes: the step of arrival
MEASURE_POSITIONS = 16  # masked passes that measure this machine's rate: seconds, even on a large model
LONG = "window"  # records over 1022 residues: overlapping windows, as every page analyses them
_pppl_memo: dict[tuple[str, str], float] = {}  # (model, sequence) -> pseudo-perplexity, once complete
_memo_lock = threading.Lock()


@dataclasses.dataclass(frozen=True)
class SetValues:
    """Values for some records of a set (by sequence) and the job computing the rest (or None)."""

    values: dict[str, object]
    job: jobs.Job | None
    missing: int  # records without a value yet


def set_digest(sequences) -> str:
    return hashlib.sha256("\n".join(sequences).encode()).hexdigest()[:24]


# --- per-record outputs -------------------------------------------------------------------------------
def _output_name(engine, sequence: str, which: str) -> str:
    """The store's name of one output of ``sequence``: ``entropy`` or ``mean/<layer>``."""
    n = engine.config.num_layers
    names = passes.output_names(n, len(sequence), LONG, False)
    return names[n + 1] if which == "entropy" else names[int(which.removeprefix("mean/"))]


def stored_outputs(engine, sequences, which: str) -> dict[str, np.ndarray]:
    """The stored ``which`` output (``entropy`` or ``mean/<layer>``) of each of ``sequences``
    that has one (a record's outputs are stored together, in one transaction)."""
    store, model, found = default_store(), engine.fingerprint, {}
    for sequence in dict.fromkeys(sequences):
        name = _output_name(engine, sequence, which)
        value = store.outputs(model, sequence, [name]).get(name)
        if value is not None:
            found[sequence] = value
    return found


def _pick(record: passes.RecordOutputs, which: str):
    return record.entropy if which == "entropy" else record.means[int(which.removeprefix("mean/"))]


def record_outputs(engine, model: str, sequences: tuple[str, ...], which: str, what: str) -> SetValues:
    """Each record's ``which`` output: stored ones now, the rest from the set's job (started
    when quick, or once asked for after its cost was shown; ``what`` names the page's use).
    ``model``: the model's identifier (what a Ray worker loads)."""
    key = ("outputs", engine.fingerprint, set_digest(sequences))
    job = background.find(key)
    held: dict[str, passes.RecordOutputs] = dict(job.value or {}) if job is not None else {}
    values = {s: _pick(r, which) for s, r in held.items()}
    missing_here = [s for s in dict.fromkeys(sequences) if s not in values]
    values.update(stored_outputs(engine, missing_here, which))
    missing = [s for s in dict.fromkeys(sequences) if s not in values]
    if missing or (job is not None and not job.finished):
        def cost() -> jobs_panel.Cost:
            return jobs_panel.Cost(len(missing), "unmasked pass", "unmasked passes", "one per record",
                                   pass_cost.unmasked_seconds(engine, [len(s) for s in missing]))

        job = jobs_panel.follow(key, f"Unmasked passes of {len(set(sequences)):,} records", "records",
                                _outputs_work(engine, model, sequences), cost, what=what,
                                model=jobs_panel.engine_name(engine))
    return SetValues(values, job, len(missing))


def _outputs_work(engine, model: str, sequences: tuple[str, ...]):
    def work(job: jobs.Job, first_only: bool = False):
        metered, store = background.metered(engine, job), default_store()
        unique = list(dict.fromkeys(sequences))
        held: dict[str, passes.RecordOutputs] = {}
        job.value = held  # read by the pages as records arrive (a dict grows safely under the GIL)
        stored = stored_outputs(engine, unique, "entropy")
        missing = [s for s in unique if s not in stored]
        done = len(unique) - len(missing)
        job.progress(done, len(unique))
        if jobs_ray.ray_address() and missing:  # the cluster computes; this process stores as they arrive

            def arrived(sequence: str, outputs: passes.RecordOutputs) -> None:
                held[sequence] = outputs
                job.progress(len(unique) - len(missing) + len(held), len(unique))

            jobs_ray.record_outputs_on_ray(model, engine.fingerprint, engine.config.num_layers, missing, store=store,
                                           on_record=arrived, cancelled=lambda: background.should_stop(job))
            return held
        for chunk in _chunks(missing, CHUNK_RESIDUES, first=1):  # one record first: a row within seconds
            for sequence, outputs in zip(chunk, passes.record_outputs(metered, chunk, long=LONG, store=store)):
                held[sequence] = outputs
            done += len(chunk)
            job.progress(done, len(unique))
            if first_only:
                break
        return held

    return work


def _chunks(sequences: list[str], residues: int, first: int = 0) -> list[list[str]]:
    """Records in chunks of about ``residues`` residues, the first ``first`` records a chunk of their own."""
    chunks, current, size = ([sequences[:first]] if first and sequences else []), [], 0
    for sequence in sequences[first:] if first else sequences:
        if current and size + min(len(sequence), MAX_RESIDUES) > residues:
            chunks.append(current)
            current, size = [], 0
        current.append(sequence)
        size += min(len(sequence), MAX_RESIDUES)
    return chunks + ([current] if current else [])


def mean_entropies(engine, model: str, sequences: tuple[str, ...]) -> SetValues:
    found = record_outputs(engine, model, sequences, "entropy", "the mean entropy column")
    return dataclasses.replace(found, values={s: float(np.mean(v)) for s, v in found.values.items()})


# --- pseudo-perplexity ----------------------------------------------------------------------------------
def stored_pseudo_perplexities(engine, sequences) -> dict[str, float]:
    """Each record's pseudo-perplexity when every position's masked pass is stored."""
    store, model, found = default_store(), engine.fingerprint, {}
    for sequence in dict.fromkeys(sequences):
        with _memo_lock:
            known = _pppl_memo.get((model, sequence))
        if known is None:
            held = store.masked(model, sequence, range(len(sequence)))
            if len(held) < len(sequence):
                continue
            known = pseudo_perplexity(np.stack([held[p] for p in range(len(sequence))]), sequence)
            with _memo_lock:
                _pppl_memo[(model, sequence)] = known
        found[sequence] = known
    return found


def pseudo_perplexities(engine, model: str, sequences: tuple[str, ...], asked: bool) -> SetValues:
    """Each record's pseudo-perplexity: stored ones now; the rest from the set's job once
    ``asked`` (its cost is shown first when it is long)."""
    key = pppl_key(engine, sequences)
    job = background.find(key)
    values = dict(job.value or {}) if job is not None else {}
    values.update(stored_pseudo_perplexities(engine, [s for s in dict.fromkeys(sequences) if s not in values]))
    missing = [s for s in dict.fromkeys(sequences) if s not in values]
    if (missing and asked) or (job is not None and not job.finished):
        job = jobs_panel.follow(key, f"Pseudo-perplexity of {len(set(sequences)):,} records", "positions",
                                _pppl_work(engine, model, sequences), lambda: masked_cost(engine, missing),
                                what="the pseudo-perplexity column", model=jobs_panel.engine_name(engine))
    return SetValues(values, job, len(missing))


def pppl_key(engine, sequences) -> tuple[str, str, str]:
    return "pppl", engine.fingerprint, set_digest(sequences)


def masked_cost(engine, sequences, what: str = "one per position of each record") -> jobs_panel.Cost:
    """The masked passes every position of ``sequences`` still needs, and their time here."""
    store, model = default_store(), engine.fingerprint
    left = {s: len(s) - len(store.held_positions(model, s)) for s in dict.fromkeys(sequences)}
    return jobs_panel.Cost(sum(left.values()), "masked pass", "masked passes", what,
                           pass_cost.masked_seconds(engine, [(len(s), n) for s, n in left.items()]))


def _pppl_work(engine, model: str, sequences: tuple[str, ...]):
    def work(job: jobs.Job, first_only: bool = False):
        metered, store, fingerprint = background.metered(engine, job), default_store(), engine.fingerprint
        unique = list(dict.fromkeys(sequences))
        values: dict[str, float] = {}
        job.value = values
        held = {s: store.held_positions(fingerprint, s) for s in unique}
        total = sum(len(s) for s in unique)
        done = sum(len(h) for h in held.values())
        # What a position costs, by its record's length (pass_cost.masked_position_work): the job's
        # rate is per MFLOP, so records of 150 residues done first say nothing wrong of those of 400.
        cost = {s: pass_cost.masked_position_work(engine, len(s)) for s in unique}
        total_work = sum(len(s) * cost[s] for s in unique)
        done_work = [sum(len(held[s]) * cost[s] for s in unique)]

        def report(positions: int, work: float) -> None:
            job.progress(positions, total, (work, total_work))

        report(done, done_work[0])
        if jobs_ray.ray_address():  # the cluster masks; this process stores each chunk as it arrives
            count = [done]

            def arrived(sequence: str, positions: list[int]) -> None:
                count[0] += len(positions)
                done_work[0] += len(positions) * cost[sequence]
                report(count[0], done_work[0])

            work_items = [(s, [p for p in range(len(s)) if p not in held[s]]) for s in unique]
            jobs_ray.masked_on_ray(model, fingerprint, [w for w in work_items if w[1]], store=store,
                                   on_chunk=arrived, cancelled=lambda: background.should_stop(job))
            return values  # the page reads each record's pseudo-perplexity from the store
        for sequence in unique:
            if len(held[sequence]) == len(sequence):
                continue  # the page reads it from the store
            if first_only:  # one chunk: enough to measure this machine's rate
                part = [p for p in range(len(sequence)) if p not in held[sequence]][:MEASURE_POSITIONS]
                passes.masked_log_probs(metered, sequence, part, store=store)
                report(done + len(part), done_work[0] + len(part) * cost[sequence])
                return values

            def step(finished: int, _asked: int, start: int = done - len(held[sequence]),
                     before: float = done_work[0] - len(held[sequence]) * cost[sequence], each: float = cost[sequence]) -> None:
                report(start + finished, before + finished * each)

            log_probs = passes.masked_log_probs(metered, sequence, store=store, progress=step, cancelled=job.cancelled)
            values[sequence] = pseudo_perplexity(log_probs, sequence)
            done += len(sequence) - len(held[sequence])
            done_work[0] += (len(sequence) - len(held[sequence])) * cost[sequence]
            report(done, done_work[0])
        return values

    return work
