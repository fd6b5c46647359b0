"""One ESMFold2 fold of a complex as a plan (``jobs/plan.py``'s protocol), as ``fold_plan.FoldPlan``
is for ESMFold v1: one step that is no engine's model pass, held in the caller's heavy-job slot,
read back from the result store when it is there, timed into this machine's rate when computed.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Sequence

from flamino_core.jobs.plan import Needed
from flamino_core.model.esmfold2.folded import FoldedComplex
from flamino_core.model.model_id import ModelId
from flamino_core.structure.folding.complex_prediction import record_complex_time, store_complex, stored_complex
from flamino_core.structure.folding.fold_plan import fold_in_worker


def load_complex_model(identifier: ModelId, stem_precision: str = "fp32"):
    """The ESMFold2 an identifier names (``weights/esmfold2_hub.load_fold2_model``), for the app; its
    ESM C stem in ``stem_precision`` (bf16: opt-in, labelled)."""
    from flamino_core.weights.esmfold2_hub import load_fold2_model

    return load_fold2_model(identifier, stem_precision=stem_precision)[0]


def fold_complex_exact(model, sequences: Sequence[str], names: Sequence[str], name: str) -> FoldedComplex:
    """Fold the chains with ``model`` in fp32 on this machine (every product at the precision that
    makes fp32 fp32 here, as v1's ``prediction.fold``), seed 0: the same chains fold the same."""
    from flamino_core.engine import hardware
    from flamino_core.engine.fold import fold_complex

    precision = hardware.exact_matmul_precision(hardware.detect(), "fp32")
    return fold_complex(model, list(sequences), name=name, chain_names=list(names), seed=0,
                        matmul_precision=precision)


def predict_complex_stored(model, store, key: str, sequences: Sequence[str], names: Sequence[str], name: str,
                           folded_in: Callable[[float], None] | None = None) -> FoldedComplex:
    """The fold of the chains: read from the store, or folded by ``model`` and stored; ``folded_in``
    hears the seconds of a fold computed here (not of one read back)."""
    found = stored_complex(store, key, sequences, names, name)
    if found is not None:
        return found
    started = time.perf_counter()
    folded = fold_complex_exact(model, sequences, names, name)
    if folded_in is not None:
        folded_in(time.perf_counter() - started)
    store_complex(store, key, folded)
    return folded


@dataclasses.dataclass(frozen=True)
class ComplexRequest:
    """One ESMFold2 fold of a complex, run in the server's fold worker (``fold_worker.FoldRunner``
    calls it there, as it calls ESMFold's ``FoldRequest``): the model by its identifier (loaded once
    per worker), the chains in order and the records they are. Returns (FoldedComplex, seconds of
    the fold itself)."""

    identifier: ModelId
    sequences: tuple[str, ...]
    names: tuple[str, ...]
    name: str
    stem_precision: str = "fp32"

    @property
    def shape_key(self) -> tuple:
        """What one compiled program serves: the model, its stem's precision and every chain's
        length (ESMFold2 folds its shapes unpadded)."""
        return (self.identifier, self.stem_precision, tuple(len(s) for s in self.sequences))

    def __call__(self):
        from flamino_core.structure.folding.fold_worker import _MODELS

        key = (self.identifier, "esmfold2", self.stem_precision)
        if key not in _MODELS:
            _MODELS.clear()  # one model at a time, as for ESMFold
            _MODELS[key] = load_complex_model(self.identifier, self.stem_precision)
        started = time.perf_counter()
        folded = fold_complex_exact(_MODELS[key], self.sequences, self.names, self.name)
        return folded, time.perf_counter() - started


@dataclasses.dataclass(frozen=True)
class ComplexPlan:
    """Fold the chains ``sequences`` (chain A, B, ... in order; ``names``: the records they are) with
    the model ``load_model()`` returns (loaded in the job, not on the page), kept in ``store`` under
    ``key``. ``config``: the model's shape (for the rate); ``seconds``: the estimate said beside the
    button; ``how``: the model in words; ``visitor``: whose fold; ``request``, ``runner``, ``budget``:
    the fold in the server's worker, as ``FoldPlan``'s. The job's value: the ``FoldedComplex``."""

    load_model: Callable[[], object]
    store: object
    key: str
    sequences: tuple[str, ...]
    names: tuple[str, ...]
    name: str
    config: object
    seconds: float | None
    how: str
    visitor: str = ""
    request: Callable | None = None  # ``fold_worker.ComplexRequest``: fold in the server's worker
    runner: object | None = None
    budget: float | None = None
    unit = "structure"

    def needed(self) -> Needed:
        return Needed.of_steps(1, "fold", "folds", self.how, self.seconds)

    def run(self, job, engine, first_only: bool = False, stop: Callable[[], bool] | None = None):
        """The fold: its progress is 0, then 1 structure (``first_only`` and ``stop`` as FoldPlan's)."""
        job.progress(0, 1)
        with engine.slot():
            if self.request is None:
                folded = predict_complex_stored(self.load_model(), self.store, self.key, self.sequences, self.names,
                                                self.name, folded_in=self._timed)
            else:  # a server's fold: in its worker, stopped by Cancel, a closed tab or the budget
                folded = stored_complex(self.store, self.key, self.sequences, self.names, self.name)
                if folded is None:
                    folded, seconds, _ = fold_in_worker(job, self.request, stop or job.cancelled, self.budget,
                                                        self.runner)
                    store_complex(self.store, self.key, folded)
                    self._timed(seconds)
        job.progress(1, 1)
        return folded

    def _timed(self, seconds: float) -> None:
        record_complex_time(self.config, [len(s) for s in self.sequences], self.key, seconds, source=self.visitor)
