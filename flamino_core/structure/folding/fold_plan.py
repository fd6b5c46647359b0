"""One ESMFold fold as a plan (``jobs/plan.py``'s protocol), as the Structure page runs it in the
background: one step that is not a model pass of an engine (``Needed.of_steps``), held in the
caller's heavy-job slot (``engine.slot()``: the metered engine's, with no engine behind it), read
back from the result store when it is there, and timed into this machine's fold rate
(``fold_time.record_fold_time``) when it was computed.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from flamino_core.jobs.plan import Needed
from flamino_core.model.esmfold.config import FoldConfig
from flamino_core.structure.folding.fold_time import record_fold_time
from flamino_core.structure.folding.prediction import predict_stored


@dataclasses.dataclass(frozen=True)
class FoldPlan:
    """Fold ``sequence`` with the model ``load_model()`` returns (loaded in the job, not on the
    page: a model of 13 GiB takes its time), kept in ``store`` under ``key``. ``config``: the
    model's shape (for the rate); ``seconds``: the estimate said beside the button
    (``fold_time.fold_time_estimate``); ``how``: the model in words; ``visitor``: whose fold, one
    rate sample each. The job's value: the ``FoldedProtein``."""

    load_model: Callable[[], object]
    store: object
    key: str
    sequence: str
    config: FoldConfig
    seconds: float | None
    how: str
    visitor: str = ""
    unit = "structure"

    def needed(self) -> Needed:
        return Needed.of_steps(1, "fold", "folds", self.how, self.seconds)

    def run(self, job, engine, first_only: bool = False, stop: Callable[[], bool] | None = None):
        """The fold in one compiled call: its progress is 0, then 1 structure. ``first_only`` is
        not read (one step is its own first chunk); ``stop`` is the slot's (it refuses a cancelled
        job before the fold starts; a fold, once started, runs to its end)."""
        job.progress(0, 1)
        with engine.slot():
            folded = predict_stored(self.load_model(), self.store, self.key, self.sequence, folded_in=self._timed)
        job.progress(1, 1)
        return folded

    def _timed(self, seconds: float) -> None:
        record_fold_time(self.config, len(self.sequence), self.key, seconds, source=self.visitor)
