"""Model work planned before it runs: for one request, the passes still needed given the result
store now, their seconds on this machine from the one cost model, and the work itself in chunks.

A plan is a value the front ends share instead of each re-deriving it (issue 49):

* ``needed()``: the passes still to run (``Needed``: masked or unmasked, (sequence length,
  passes) per sequence, which ones in words), read from the result store at the time asked;
  ``Needed.seconds(engine)`` is their time here (``pass_cost``: the engine's own batches at the
  measured rate, plus compilations). Work that is not model passes (a predictor's scikit-learn
  fits, a fold) says its own count, names and seconds (``Steps``): the cost model prices passes only.
* ``unit``: what the work's progress counts ("positions", "records", "rows").
* ``run(job, engine, first_only=False, stop=None)``: the work, in chunks, through the result
  store. It reports ``job.progress``, keeps what it has so far on ``job.value`` (a store that
  keeps nothing still shows it), stops between chunks when cancelled (``passes.Cancelled``:
  every finished chunk is stored), and with ``first_only`` runs one chunk only, which measures
  this machine's rate; the caller then knows what the rest costs. ``engine`` is the engine the
  calls go through (the app's metered one, holding a heavy-job slot per call; a step that is not
  an engine call holds ``engine.slot()``, ``MeteredEngine.slot``); ``stop`` is polled by work that
  does not go through it (a Ray cluster's, a fit's worker), ``job.cancelled`` by default.

The plans of the app's set and scan work are here; the variant scores' plan is
``variants/score_plan.py`` (it reads the variants' pass rule), a labelled table's fit's
``predictors/fit_plan.py``. The app's job panel runs any plan (``jobs_panel.follow_plan``).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Protocol

import numpy as np

from flamino_core.jobs import on_ray, pass_cost
from flamino_core.model.config import MAX_RESIDUES
from flamino_core.options import STRATEGIES
from flamino_core.store import passes
from flamino_core.store.result_store import default_store

LONG = "window"  # records over 1022 residues: overlapping windows, as every page analyses them
MEASURE_POSITIONS = 16  # masked passes that measure this machine's rate: seconds, even on a large model


@dataclasses.dataclass(frozen=True)
class Steps:
    """Work that is not model passes (a predictor's ``count`` scikit-learn fits, a fold), named
    ``one``/``many`` ("scikit-learn fit", "scikit-learn fits"), ``seconds`` said by its plan (None:
    not known before it runs): the cost model (``pass_cost``) prices model passes only."""

    count: int
    one: str
    many: str
    seconds: float | None


@dataclasses.dataclass(frozen=True)
class Needed:
    """The passes a plan still runs: masked ones or unmasked ones; ``runs``: (sequence length,
    passes over it) of each sequence (for unmasked passes the length is the whole sequence's,
    which the engine cuts into windows); ``how``: which passes, in words. ``steps``: the work
    counts steps of its own instead (``Needed.of_steps``), its passes inside their seconds."""

    masked: bool
    runs: tuple[tuple[int, int], ...]
    how: str
    # Unmasked passes run in chunks of about this many residues, the first record alone
    # (``SetOutputs.run``): the engine's batches, so the shapes compiled, are each chunk's. None:
    # one call. Planned as one call, a set's 12 records were one shape its job never ran, and
    # the rerun of an all-compiled job was said at 1.3 s for 0.2 s (issue 50).
    chunk_residues: int | None = None
    steps: Steps | None = None

    @classmethod
    def of_steps(cls, count: int, one: str, many: str, how: str, seconds: float | None) -> Needed:
        """``count`` steps that are not model passes (``Steps``), ``how``: which ones, in words."""
        return cls(False, (), how, steps=Steps(count, one, many, seconds))

    @property
    def passes(self) -> int:
        """How many units of work: model passes, or the plan's own steps."""
        return self.steps.count if self.steps else sum(n for _, n in self.runs)

    @property
    def one(self) -> str:
        if self.steps:
            return self.steps.one
        return "masked pass" if self.masked else "unmasked pass"

    @property
    def many(self) -> str:
        if self.steps:
            return self.steps.many
        return "masked passes" if self.masked else "unmasked passes"

    def describe(self) -> str:
        """``1,234 masked passes (one per mutated position)``."""
        return f"{self.passes:,} {self.one if self.passes == 1 else self.many} ({self.how})"

    def seconds(self, engine, rates=None) -> pass_cost.PassSeconds | None:
        """Their seconds on this machine (None: the model's rate never measured here; steps: their plan's)."""
        if self.steps:
            return self.steps.seconds
        if self.masked:
            return pass_cost.masked_seconds(engine, self.runs, rates)
        lengths = [length for length, _ in self.runs]
        chunks = None
        if self.chunk_residues:
            chunks = [[len(s) for s in chunk] for chunk in residue_chunks(["A" * n for n in lengths],
                                                                         self.chunk_residues, first=1)]
        return pass_cost.unmasked_seconds(engine, lengths, rates, chunks=chunks)


class Plan(Protocol):
    """What every plan offers its caller (see the module's docstring)."""

    unit: str

    def needed(self) -> Needed: ...

    def run(self, job, engine, first_only: bool = False, stop: Callable[[], bool] | None = None): ...


# --- a masked scan of one sequence ----------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class MaskedScan:
    """Every one of ``positions`` (0-based) of ``sequence`` masked once, through the store;
    ``structure``: a structure-aware model's 3Di letters (stored under them too). ``private``:
    the estimate counts every position, stored or not (a hosted server: "236 masked passes" for
    a 300-residue range told a visitor that someone else had analysed this sequence, issue #26)."""

    engine: object
    sequence: str
    positions: tuple[int, ...]
    structure: str | None = None
    private: bool = False
    unit = "positions"

    @property
    def _model(self) -> str:
        return passes.model_key(self.engine, self.structure)

    @property
    def _with_structure(self) -> dict:
        return {"structure": self.structure} if self.structure else {}

    def stored(self):
        """(len(positions), vocab) log-probabilities when the store holds every position (read
        back: a damaged value re-runs), else None."""
        store = default_store()
        held = store.held_positions(self._model, self.sequence)
        if all(p in held for p in self.positions):
            return passes.masked_log_probs(self.engine, self.sequence, list(self.positions), store=store,
                                           **self._with_structure)
        return None

    def needed(self) -> Needed:
        held = default_store().held_positions(self._model, self.sequence)
        missing = len(self.positions) if self.private else sum(p not in held for p in self.positions)
        return Needed(True, ((len(self.sequence), missing),), "one per position")

    def run(self, job, engine, first_only: bool = False, stop: Callable[[], bool] | None = None):
        store, positions = default_store(), list(self.positions)
        if first_only:  # one chunk measures this machine's rate; the caller then knows the rest's cost
            held = store.held_positions(self._model, self.sequence)
            missing = [p for p in positions if p not in held]
            if len(missing) > passes.CHUNK:
                before = len(positions) - len(missing)
                passes.masked_log_probs(engine, self.sequence, missing[:passes.CHUNK], store=store,
                                        progress=lambda done, _: job.progress(before + done, len(positions)),
                                        **self._with_structure)
                return None
        return passes.masked_log_probs(engine, self.sequence, positions, store=store, progress=job.progress,
                                       cancelled=job.cancelled, **self._with_structure)


def unmasked_passes(sequences) -> Needed:
    """One unmasked pass over each of ``sequences`` (``flamino embed``, a wt-marginals ``flamino
    score``), the engine cutting long ones into windows: what such a command runs, said before it."""
    return Needed(False, tuple((len(s), 1) for s in sequences), "one per record")


def map_passes(engine, sequences, strategy: str) -> Needed:
    """The passes ``substitution_map`` by ``strategy`` still runs over ``sequences`` (``flamino
    score``, a masked track of ``flamino contacts``): every position masked once through the store
    (``MaskedSet``'s count), or one unmasked pass each."""
    if STRATEGIES[strategy].masked:
        return MaskedSet(engine, "", tuple(sequences), value=None).needed()
    return unmasked_passes(sequences)


# --- a set's per-record outputs ---------------------------------------------------------------
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


@dataclasses.dataclass(frozen=True)
class SetOutputs:
    """One unmasked pass per record of ``sequences`` (every layer's mean embedding and the
    per-residue entropy together, ``passes.record_outputs``), ``chunk_residues`` residues an
    engine call (the step at which records arrive; the first record alone: a row within
    seconds), on a Ray cluster when ``FLAMINO_RAY_ADDRESS`` is set (``model``: the identifier a
    worker loads). ``known``: records whose outputs the caller holds already (a job's, with a
    store that keeps nothing), left out of the estimate. Partial results: ``job.value``, a dict
    sequence -> ``passes.RecordOutputs`` growing as records arrive."""

    engine: object
    model: str
    sequences: tuple[str, ...]
    chunk_residues: int
    known: frozenset[str] = frozenset()
    unit = "records"

    def needed(self) -> Needed:
        unique = [s for s in dict.fromkeys(self.sequences) if s not in self.known]
        stored = stored_outputs(self.engine, unique, "entropy")
        return Needed(False, tuple((len(s), 1) for s in unique if s not in stored), "one per record",
                      self.chunk_residues)

    def run(self, job, engine, first_only: bool = False, stop: Callable[[], bool] | None = None):
        store, unique = default_store(), list(dict.fromkeys(self.sequences))
        held: dict[str, passes.RecordOutputs] = {}
        job.value = held  # read by the pages as records arrive (a dict grows safely under the GIL)
        stored = stored_outputs(self.engine, unique, "entropy")
        missing = [s for s in unique if s not in stored]
        done = len(unique) - len(missing)
        # What a record costs, by its length (pass_cost.record_work): the job's rate is per unit of
        # work, so the first tenth of a set in file order (ProteinGym's: 852 to 3,423 residues first)
        # says nothing wrong of the rest (186 records on t6: 48 s said at a tenth for 27 s).
        cost = {s: pass_cost.record_work(self.engine, len(s)) for s in unique}
        total_work = sum(cost.values())
        done_work = total_work - sum(cost[s] for s in missing)
        job.progress(done, len(unique), (done_work, total_work))
        if on_ray.ray_address() and missing:  # the cluster computes; this process stores as they arrive

            def arrived(sequence: str, outputs: passes.RecordOutputs) -> None:
                nonlocal done_work
                held[sequence] = outputs
                done_work += cost[sequence]
                job.progress(len(unique) - len(missing) + len(held), len(unique), (done_work, total_work))

            on_ray.record_outputs_on_ray(self.model, self.engine.fingerprint, self.engine.config.num_layers, missing,
                                         store=store, on_record=arrived, cancelled=stop or job.cancelled)
            return held
        for chunk in residue_chunks(missing, self.chunk_residues, first=1):
            for sequence, outputs in zip(chunk, passes.record_outputs(engine, chunk, long=LONG, store=store)):
                held[sequence] = outputs
            done += len(chunk)
            done_work += sum(cost[s] for s in chunk)
            job.progress(done, len(unique), (done_work, total_work))
            if first_only:
                break
        return held


def residue_chunks(sequences: list[str], residues: int, first: int = 0) -> list[list[str]]:
    """Records in chunks of about ``residues`` residues, the first ``first`` records a chunk of their own."""
    chunks, current, size = ([sequences[:first]] if first and sequences else []), [], 0
    for sequence in sequences[first:] if first else sequences:
        if current and size + min(len(sequence), MAX_RESIDUES) > residues:
            chunks.append(current)
            current, size = [], 0
        current.append(sequence)
        size += min(len(sequence), MAX_RESIDUES)
    return chunks + ([current] if current else [])


# --- every position of each record of a set masked ------------------------------------------------
@dataclasses.dataclass(frozen=True)
class MaskedSet:
    """Every position of each record of ``sequences`` masked once, through the store (on a Ray
    cluster when ``FLAMINO_RAY_ADDRESS`` is set), and ``value(log_probs, sequence)`` of each
    record once all its positions are in (``pseudo_perplexity``, read by the caller from the store
    for the records the store completes). ``known``: as ``SetOutputs``. Partial results:
    ``job.value``, a dict sequence -> value."""

    engine: object
    model: str
    sequences: tuple[str, ...]
    value: Callable[[np.ndarray, str], object]
    known: frozenset[str] = frozenset()
    unit = "positions"

    def needed(self, how: str = "one per position of each record") -> Needed:
        store, model = default_store(), self.engine.fingerprint
        unique = [s for s in dict.fromkeys(self.sequences) if s not in self.known]
        return Needed(True, tuple((len(s), len(s) - len(store.held_positions(model, s))) for s in unique), how)

    def run(self, job, engine, first_only: bool = False, stop: Callable[[], bool] | None = None):
        store, fingerprint = default_store(), self.engine.fingerprint
        unique = list(dict.fromkeys(self.sequences))
        values: dict[str, object] = {}
        job.value = values
        held = {s: store.held_positions(fingerprint, s) for s in unique}
        total = sum(len(s) for s in unique)
        done = sum(len(h) for h in held.values())
        # What a position costs, by its record's length (pass_cost.masked_position_work): the job's
        # rate is per unit of work, so records of 150 residues done first say nothing wrong of those of 400.
        cost = {s: pass_cost.masked_position_work(self.engine, len(s)) for s in unique}
        total_work = sum(len(s) * cost[s] for s in unique)
        done_work = [sum(len(held[s]) * cost[s] for s in unique)]

        def report(positions: int, work: float) -> None:
            job.progress(positions, total, (work, total_work))

        report(done, done_work[0])
        if on_ray.ray_address():  # the cluster masks; this process stores each chunk as it arrives
            count = [done]

            def arrived(sequence: str, positions: list[int]) -> None:
                count[0] += len(positions)
                done_work[0] += len(positions) * cost[sequence]
                report(count[0], done_work[0])

            work_items = [(s, [p for p in range(len(s)) if p not in held[s]]) for s in unique]
            on_ray.masked_on_ray(self.model, fingerprint, [w for w in work_items if w[1]], store=store,
                                 on_chunk=arrived, cancelled=stop or job.cancelled)
            return values  # the caller reads each record's value from the store
        for sequence in unique:
            if len(held[sequence]) == len(sequence):
                continue  # the caller reads it from the store
            if first_only:  # one chunk: enough to measure this machine's rate
                part = [p for p in range(len(sequence)) if p not in held[sequence]][:MEASURE_POSITIONS]
                passes.masked_log_probs(engine, sequence, part, store=store)
                report(done + len(part), done_work[0] + len(part) * cost[sequence])
                return values

            def step(finished: int, _asked: int, start: int = done - len(held[sequence]),
                     before: float = done_work[0] - len(held[sequence]) * cost[sequence],
                     each: float = cost[sequence]) -> None:
                report(start + finished, before + finished * each)

            log_probs = passes.masked_log_probs(engine, sequence, store=store, progress=step, cancelled=job.cancelled)
            values[sequence] = self.value(log_probs, sequence)
            done += len(sequence) - len(held[sequence])
            done_work[0] += (len(sequence) - len(held[sequence])) * cost[sequence]
            report(done, done_work[0])
        return values
