"""How fast this machine runs a model, and how right the estimates were: seconds per unit of work
of masked and unmasked passes (and per operation of a fit, per compilation), measured per model and
batch class (a full batch or a narrow one, ``pass_cost.is_narrow``) as a running average (``Rates``;
per MFLOP of a pass's matmul work, its plan's, ``jobs/pass_cost.py``;
a fit's as a median of recent jobs, one per visitor, that one job cannot poison: ``robust_seconds``),
the shapes compiled into the persistent cache, and each job's predicted and actual times
(``Rates.record_job``), all in ``FLAMINO_CACHE/pass_rates.json`` so a restarted server knows them.
``jobs/background.py`` re-exports these names.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Iterable

from flamino_core import settings


LOG = logging.getLogger("flamino")


# --- how fast this machine runs a model ---------------------------------------------------------------
class Rates:
    """Seconds per unit of work of masked and unmasked passes (``pass_cost.batch_work``: MFLOP and
    a cost per token and layer), measured on this machine per model (its fingerprint) and batch
    class (full or narrow batches: ``NARROW``), as a running average; kept in
    ``FLAMINO_CACHE/pass_rates.json`` so a restarted server still knows them. Thread-safe."""

    # fit: seconds per operation of a scikit-learn fit (predictors/cost.py); masked compile, unmasked
    # compile, cached compile: seconds per compilation of a new shape of that pass kind, or of one in
    # the persistent cache (jobs/pass_cost.compile_kind), keyed by architecture. (A file's old
    # "compile" entries, from before the kinds were apart, are kept and no longer read.)
    # fold: seconds per GFLOP of one ESMFold fold, its compilation left out (structure/folding/fold_time.py).
    # masked narrow, unmasked narrow: the same passes' rates measured on narrow batches (under half the
    # rows their width allows, ``pass_cost.is_narrow``), kept apart from full batches' (issue 50: see
    # ``NARROW``).
    KINDS = ("masked", "unmasked", "fit", "masked compile", "unmasked compile", "cached compile", "fold",
             "masked narrow", "unmasked narrow")

    def __init__(self, path: str | os.PathLike | None = None, weight: float = 0.3):
        self.path = Path(path) if path is not None else _default_rates_path()
        self.weight = weight  # of each new measurement in the running average
        self._lock = threading.Lock()
        self._rates: dict[str, float] | None = None  # "model kind" -> seconds per token
        self._history: list[dict] = []  # jobs' predicted and actual times (``record_job``)
        self._shapes: dict[str, list[str]] = {}  # architecture -> shapes compiled into the persistent cache
        # "model kind" -> [[seconds per unit, source tag]] (``record_sample``)
        self._samples: dict[str, list[list]] = {}
        self._sizes: dict[str, float] = {}  # "model kind" -> the model's size (``record``)
        # "model kind" -> the machine's load share (``load_share``) while it was measured, averaged
        # as the rate is: ``seconds`` scales the rate by the load now over it (#66 D1).
        self._loads: dict[str, float] = {}

    def record(self, model: str, kind: str, amount: float, seconds: float, size: float | None = None) -> None:
        """``seconds`` measured for ``amount`` of ``kind``: MFLOP of passes, operations of a fit,
        compilations; ``size``: the model's (``pass_cost.token_layer_share``), kept for ``sized``."""
        if amount <= 0 or seconds <= 0 or kind not in self.KINDS:
            return
        rate = seconds / amount
        with self._lock:
            rates = self._load()
            key = f"{model} {kind}"
            old, load, old_load = rates.get(key), load_share(), self._loads.get(key)
            rates[key] = rate if old is None else (1 - self.weight) * old + self.weight * rate
            # (a rate kept from a file without loads: its load unknown, taken as now's)
            self._loads[key] = load if old is None or old_load is None else (
                (1 - self.weight) * old_load + self.weight * load)
            if size is not None and size > 0:
                self._sizes[key] = float(size)
            self._save(rates)

    def sized(self, kind: str, exclude: str = "") -> list[tuple[float, float]]:
        """(rate, size) of each model but ``exclude`` whose ``kind`` was timed here with its size
        (``record``): what a never-timed model's first guess is fitted on (``pass_cost.sized_guess``)."""
        with self._lock:
            rates = self._load()
            return [(v, self._sizes[k]) for k, v in rates.items()
                    if k.endswith(f" {kind}") and k in self._sizes and not k.startswith(f"{exclude} ")]

    def seconds(self, model: str, kind: str, amount: float) -> float | None:
        """Estimated seconds for ``amount`` more of ``kind`` (None: never measured): MFLOP of passes.
        A pass kind never measured for this model borrows a rate, a first guess
        (``PassSeconds.borrowed``; the job's own rate replaces it as it runs): the median of the
        same kind's time per unit over the other models measured here (per unit of
        ``pass_cost.batch_work``, which counts a narrow model's per-token cost: masked passes of
        random:tiny and of the 8M model took 8.0e-6 and 7.5e-6 s, 2.2e-5 and 7.8e-6 per MFLOP
        alone, on the AMD EPYC), else
        this model's other kind (an unmasked pass of the result store keeps every layer: for
        random:tiny 2-6x a masked pass's time per MFLOP, issue 50's pseudo-perplexity 6-13x long).
        The rate is scaled from the load it was measured at to the load now (``load_scale``)."""
        with self._lock:
            rates = self._load()
            loads = dict(self._loads)
        key = f"{model} {kind}"
        if key not in rates and kind in PASS_KINDS:
            others = sorted((v, k) for k, v in rates.items()
                            if k.endswith(f" {kind}") and not k.startswith(f"{model} "))
            other = PASS_KINDS[1 - PASS_KINDS.index(kind)]
            # (the other kind's full batches, else its narrow ones: a set of a few records runs
            # only narrow unmasked batches)
            key = (others[(len(others) - 1) // 2][1] if others
                   else f"{model} {other}" if f"{model} {other}" in rates else f"{model} {other} {NARROW}")
        rate = rates.get(key)
        return None if rate is None else rate * amount * load_scale(loads.get(key))

    def typical(self, kind: str) -> float | None:
        """The median rate of ``kind`` over every model (or architecture) measured here, None if
        none was: a first guess for one never measured that is this machine's, not a constant's."""
        with self._lock:
            found = sorted(v for k, v in self._load().items() if k.endswith(f" {kind}"))
        return found[len(found) // 2] if found else None

    def record_sample(self, model: str, kind: str, amount: float, seconds: float, source: str = "") -> None:
        """One whole job's measurement (a fit), kept among the newest ``RECENT`` of its key, for
        ``robust_seconds``; ``source`` (the visitor) keeps one sample: its newer one replaces its
        older, so one visitor's jobs count once however many it runs."""
        if amount <= 0 or seconds <= 0 or kind not in self.KINDS:
            return
        tag = hashlib.sha256(source.encode()).hexdigest()[:12] if source else ""  # no address in the file
        with self._lock:
            self._load()
            kept = [s for s in self._samples.get(f"{model} {kind}", []) if not (tag and s[1] == tag)]
            self._samples[f"{model} {kind}"] = (kept + [[seconds / amount, tag]])[-RECENT:]
            self._save(self._rates)

    def robust_seconds(self, model: str, kind: str, amount: float, prior: float) -> float:
        """Seconds for ``amount`` of ``kind`` at a rate no one job can poison: the lower median of
        ``PRIOR_SAMPLES`` copies of ``prior`` (seconds per unit) and the key's recent samples
        (``record_sample``), held within ``CLAMP`` times ``prior`` either way. One outlier moves it
        not at all; three consistent samples move it (a machine slower than the prior), at most
        ``CLAMP``-fold (issue #53: one 15-class fit measured 45x its estimate and the shared rate,
        a running average, became 14.6x the default for every visitor, still after a restart)."""
        with self._lock:
            self._load()
            recent = [s[0] for s in self._samples.get(f"{model} {kind}", [])]
        values = sorted([prior] * PRIOR_SAMPLES + recent)
        rate = min(max(values[(len(values) - 1) // 2], prior / CLAMP), prior * CLAMP)
        return rate * amount

    def measured_samples(self, model: str, kind: str) -> bool:
        """Whether ``record_sample`` kept any sample of ``kind`` for ``model`` (``robust_seconds`` then
        leans on this machine's jobs, not on its prior alone)."""
        with self._lock:
            self._load()
            return bool(self._samples.get(f"{model} {kind}"))

    def measured(self, model: str, kind: str) -> bool:
        """Whether ``kind`` passes of ``model`` were timed here (not borrowed from the other kind)."""
        with self._lock:
            return f"{model} {kind}" in self._load()

    def record_job(self, outcome: dict) -> None:
        """Keep a job's predicted and actual times (``Job.expect``'s log) in the same file, the
        newest ``MAX_HISTORY``, with the machine they ran on."""
        entry = {**outcome, "machine": machine(), "at": time.strftime("%Y-%m-%dT%H:%M:%S")}
        with self._lock:
            self._load()
            self._history = (self._history + [entry])[-MAX_HISTORY:]
            self._save(self._rates)

    def compiled(self, architecture: str) -> set[str]:
        """Shapes (``planner.shape_key``) compiled on this machine for ``architecture``, so held
        by JAX's persistent compilation cache when it is on (``jobs/pass_cost.py``)."""
        with self._lock:
            self._load()
            return set(self._shapes.get(architecture, ()))

    def add_compiled(self, architecture: str, keys: Iterable[str]) -> None:
        with self._lock:
            self._load()
            known = self._shapes.setdefault(architecture, [])
            new = [k for k in keys if k not in known]
            if new:
                known.extend(new)
                self._save(self._rates)

    def history(self) -> list[dict]:
        """The jobs' predicted and actual times, oldest first."""
        with self._lock:
            self._load()
            return list(self._history)

    def _load(self) -> dict[str, float]:
        if self._rates is None:
            try:
                found = json.loads(self.path.read_text())
                self._rates = {k: float(v) for k, v in found.items() if isinstance(v, (int, float)) and v > 0}
                if found.get(PASS_UNIT) != PASS_UNIT_NOW:  # a file of per-token rates: those are not per MFLOP
                    self._rates = {k: v for k, v in self._rates.items()
                                   if not any(k.endswith(f" {kind}") for kind in PASS_KINDS + NARROW_KINDS)}
                jobs = found.get(HISTORY)
                self._history = [e for e in jobs if isinstance(e, dict)] if isinstance(jobs, list) else []
                samples = found.get(SAMPLES)
                samples = samples if isinstance(samples, dict) else {}
                self._samples = {k: [[float(x[0]), str(x[1])] for x in v if _sample(x)][-RECENT:]
                                 for k, v in samples.items() if isinstance(v, list)}
                loads = found.get(LOADS)
                self._loads = {k: float(v) for k, v in loads.items() if isinstance(v, (int, float)) and v > 0
                               and k in self._rates} if isinstance(loads, dict) else {}
                sizes = found.get(SIZES)
                self._sizes = {k: float(v) for k, v in sizes.items() if isinstance(v, (int, float)) and v > 0
                               and k in self._rates} if isinstance(sizes, dict) else {}
                shapes = found.get(SHAPES)
                self._shapes = {k: [x for x in v if isinstance(x, str)] for k, v in shapes.items()
                                if isinstance(v, list)} if isinstance(shapes, dict) else {}
            except (OSError, ValueError, AttributeError):
                self._rates = {}
        return self._rates

    def _save(self, rates: dict[str, float]) -> None:
        from flamino_core.atomic import written_atomically

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with written_atomically(self.path) as tmp:
                tmp.write_text(json.dumps({**rates, PASS_UNIT: PASS_UNIT_NOW, HISTORY: self._history,
                                           SHAPES: self._shapes, SAMPLES: self._samples, SIZES: self._sizes,
                                           LOADS: self._loads}, indent=0,
                                          sort_keys=True))
        except OSError as err:  # a read-only cache: the rates live in memory only
            LOG.debug("pass rates not saved (%s)", err)


PASS_KINDS = ("masked", "unmasked")
# A pass kind's rate on narrow batches is its own key, "<model> <kind> narrow"; "<model> <kind>" is
# its full batches' (and, in a file written before 2026-12-07, every batch's: read as the full
# batches', which the next full batches correct). Why apart: a narrow batch is a few dozen MFLOP, so
# a millisecond of jitter moves its measured rate several-fold, and the running average weighs each
# call alike whatever its work: random:tiny's 1-row masked batches (a DMS pll's and a fit's, one
# call in three) moved its one masked rate from 5.8e-6 to 1.7e-5 s per unit, and the warm
# pseudo-perplexity after them, almost all full batches, was said 9.3 s for 4.8 s (issue 50; the
# measurements: ``pass_cost``'s docstring). Older code reads none of these keys (they end in " narrow").
NARROW = "narrow"
NARROW_KINDS = tuple(f"{kind} {NARROW}" for kind in PASS_KINDS)
SAMPLES = "samples"  # the pass-rate file's whole jobs' rates per key (``Rates.record_sample``)
SIZES = "sizes"  # the pass-rate file's model sizes per pass-rate key (``Rates.record``)
LOADS = "loads"  # the pass-rate file's load share per rate key when it was measured (``Rates.record``)
RECENT = 9  # samples a key keeps
PRIOR_SAMPLES = 2  # copies of the prior among them: a median that one outlier cannot move
CLAMP = 4.0  # a robust rate stays within this factor of its prior either way


def _sample(x) -> bool:
    return (isinstance(x, list) and len(x) == 2 and isinstance(x[0], (int, float)) and x[0] > 0
            and isinstance(x[1], str))
HISTORY = "jobs"  # the pass-rate file's list of jobs' predicted and actual times
MAX_HISTORY = 500
SHAPES = "shapes"  # the pass-rate file's shapes compiled into the persistent cache, per architecture
# What a pass rate is per: seconds per MFLOP of a pass's work (``pass_cost.batch_work``) with each
# token-layer's own cost counted in MFLOP since 2026-12-06 ("MFLOP+token-layers"; matmul MFLOP
# alone from 2026-12-05, seconds per token before); a file without this marker keeps its other
# rates, not its pass rates (random:tiny's per MFLOP alone are 2.4-4.7x its rates now).
PASS_UNIT, PASS_UNIT_NOW = "pass_unit", "MFLOP+token-layers"


# A rate measured at one load is scaled to another at most this much either way (``load_scale``): the
# load average counts threads waiting on disk too, and another agent's burst may end in seconds.
LOAD_CLAMP = 4.0


def load_share(starting: bool = False) -> float:
    """How many times slower than alone a CPU-bound job runs here now: runnable threads per core,
    the 1-minute load average over the cores, at least 1 (a quiet machine). ``starting``: for a job
    about to start, counted as one more thread (a rate was measured while its own job ran, in the
    load average it was recorded with: without it, a job estimated at load 5 on 2 cores from a rate
    measured at load 6, its own included, is said a sixth short). **Off unless asked**
    (``FLAMINO_LOAD_SHARE=auto``; a number fixes it; unset: 1): measured on the 186 targets it did not
    see two busy loops against a shared machine's load (2.35x short still), and in the test suite it
    said 1.6-1.8x too long when the load fell between a rate's recording and a job (docs/reliability.md)."""
    fixed = settings.LOAD_SHARE.get()
    if fixed is None:
        return 1.0
    if fixed != "auto":
        return max(fixed, 1.0)
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):  # (no load average on this platform: taken as quiet)
        return 1.0
    cores = _cores()
    return max(load + (1.0 if starting else 0.0), cores) / cores


def load_scale(measured_at: float | None) -> float:
    """What a rate measured at load share ``measured_at`` (``Rates.record``) is multiplied by for a
    job starting now (``load_share``), within ``LOAD_CLAMP`` either way (None: a rate kept from a file
    without loads, unscaled). Why: a rate is a running average of the jobs run here, at their
    load; #66 D1's first estimate, a set's entropies on a machine at load 8-9, was said 89 s for
    171.7 s from rates measured while the machine was quieter. The 1-minute average lags a load
    that just changed; the job's own pace takes over as it runs (``time_left``)."""
    if measured_at is None or measured_at <= 0:
        return 1.0
    return min(max(load_share(starting=True) / measured_at, 1 / LOAD_CLAMP), LOAD_CLAMP)


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def machine() -> str:
    """This machine in a few words: ``AMD EPYC 9R14, 2 cores``."""
    name = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{name or 'unknown CPU'}, {_cores()} cores"


def _default_rates_path() -> Path:
    from flamino_core.weights.model_cache import cache_root

    return cache_root() / "pass_rates.json"


_RATES: Rates | None = None
_RATES_LOCK = threading.Lock()


def default_rates() -> Rates:
    """The process's rates, kept under ``FLAMINO_CACHE`` (one per cache folder)."""
    global _RATES
    with _RATES_LOCK:
        path = _default_rates_path()
        if _RATES is None or _RATES.path != path:
            _RATES = Rates(path)
        return _RATES
