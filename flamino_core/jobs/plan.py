"""Model work planned before it runs: for one request, the passes still needed given the result
store now, their seconds on this machine from the one cost model, and the work itself in chunks.

A plan is a value the front ends share instead of each re-deriving it (issue 49):

* ``needed()``: the passes still to run (``Needed``: masked or unmasked, (sequence length,
  passes) per sequence, which ones in words), read from the result store at the time asked;
  ``Needed.seconds(engine)`` is their time here (``pass_cost``: the engine's own batches at the
  measured rate, plus compilations).
* ``unit``: what the work's progress counts ("positions", "records", "rows").
* ``run(job, engine, first_only=False, stop=None)``: the work, in chunks, through the result
  store. It reports ``job.progress``, keeps what it has so far on ``job.value`` (a store that
  keeps nothing still shows it), stops between chunks when cancelled (``passes.Cancelled``:
  every finished chunk is stored), and with ``first_only`` runs one chunk only, which measures
  this machine's rate; the caller then knows what the rest costs. ``engine`` is the engine the
  calls go through (the app's metered one, holding a heavy-job slot per call); ``stop`` is polled
  by work that does not go through it (a Ray cluster's), ``job.cancelled`` by default.

The plans of the app's set and scan work are here; the variant scores' plan is
``variants/score_plan.py`` (it reads the variants' pass rule). The app's job panel runs any
plan (``jobs_panel.follow_plan``).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Protocol, Sequence

import numpy as np

from flamino_core.jobs import on_ray, pass_cost
from flamino_core.model.config import MAX_RESIDUES
from flamino_core.store import passes
from flamino_core.store.result_store import default_store

LONG = "window"  # records over 1022 residues: overlapping windows, as every page analyses them
MEASURE_POSITIONS = 16  # masked passes that measure this machine's rate: seconds, even on a large model


@dataclasses.dataclass(frozen=True)
class Needed:
    """The passes a plan still runs: masked ones or unmasked ones; ``runs``: (sequence length,
    passes over it) of each sequence (for unmasked passes the length is the whole sequence's,
    which the engine cuts into windows); ``how``: which passes, in words."""

    masked: bool
    runs: tuple[tuple[int, int], ...]
    how: str

    @property
    def passes(self) -> int:
        return sum(n for _, n in self.runs)

    @property
    def one(self) -> str:
        return "masked pass" if self.masked else "unmasked pass"

    @property
    def many(self) -> str:
        return "masked passes" if self.masked else "unmasked passes"

    def seconds(self, engine, rates=None) -> pass_cost.PassSeconds | None:
        """Their seconds on this machine (None: the model's rate never measured here)."""
        if self.masked:
            return pass_cost.masked_seconds(engine, self.runs, rates)
        return pass_cost.unmasked_seconds(engine, [length for length, _ in self.runs], rates)


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
