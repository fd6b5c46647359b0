"""How long one fold takes here, said before the work: its arithmetic counted from the model's
shape (``fold_gflop``) at a rate per GFLOP, first a figure measured on this project's machines for
the platform (``PRIOR_SECONDS_PER_GFLOP``), then this machine's own warm folds of that model
(``Rates.robust_seconds``: a median that one odd fold cannot move, as issue #53 asks of every shared
rate); a length this process has not compiled yet adds its compilation (``COMPILE_SECONDS``).
"""

from __future__ import annotations

import dataclasses
import threading

from flamino_core.model.esmfold.config import FoldConfig
from flamino_core.model.esmfold.folded import PAD_TO, padded_length

# Seconds per GFLOP of ``fold_gflop``, measured with benchmarks/esmfold_speed.py (2026-12-06; docs/esmfold.md):
# - cpu: the 2-core AMD EPYC at load 4.5-5, esmfold_v1's widths at one block: 100 residues 10.7 GFLOP/s,
#   300 residues 4.5, 1,000 residues 4.9 (load 2-7). The hosted fold model (the untrained
#   random:esmfold-tiny, narrow) in the fold worker on one core (benchmarks/hostile_folds.py --only prior,
#   2026-12-07, recorded/hostile-folds-prior-2026-12-07.json): warm folds of 60, 200 and 400 residues
#   cost 0.11, 5.4 and 54 CPU seconds, 4.0, 4.8 and 2.5 GFLOP/s of a core of its own (its wall seconds
#   at the machine's load of 13-17 were 2.7-7x that: this machine's own folds correct a busy host's,
#   ``Rates.robust_seconds``). 4 GFLOP/s said the 400-residue fold 1.57x short (the issue asks 1.5x);
#   3.5 says the three at 0.87x, 0.72x and 1.38x of their cost, esmfold_v1's widths at 300 residues 1.3x.
# - tpu: one TPU v5e chip, fp32 at `highest`, esmfold_v1's 48-block trunk: 1.6 TFLOP/s at 100 residues,
#   2.6 at 300, 4.0 at 1,000.
# - gpu: not measured on any GPU; the TPU's figure stands in (both run the fold as one XLA program).
PRIOR_SECONDS_PER_GFLOP = {"cpu": 1 / 3.5, "tpu": 1 / 2600.0, "gpu": 1 / 2600.0}
# A new padded length compiles once per process (the first calls above less the second): the CPU
# 9-19 s at 100-128 residues, 19-55 s at 300; the TPU 34-40 s at 100-300, 47 s at 1,000.
COMPILE_SECONDS = {"cpu": (10, 60), "tpu": (35, 50), "gpu": (35, 50)}
RATE_KIND = "fold"  # jobs/rates.Rates.KINDS

_compiled: set[tuple[str, int]] = set()  # (model key, padded length) folded in this process
_lock = threading.Lock()


def fold_gflop(config: FoldConfig, length: int, passes: int | None = None) -> float:
    """A fold's arithmetic in GFLOP: the stem's 2 x 12 D^2 per token and layer once, and each trunk
    pass's triangular updates and attention (~8 L^3 c_z) and sequence layers (24 L c_s^2) per
    block, at the padded length. The structure module and the heads are left out (a few percent at
    esmfold_v1's widths)."""
    trunk, stem = config.trunk, config.stem
    padded = padded_length(length, PAD_TO)
    passes = passes or trunk.max_recycles
    stem_flops = 2 * 12 * stem.num_layers * stem.embed_dim ** 2 * (padded + 2)
    block = 8 * padded ** 3 * trunk.pairwise_state_dim + 24 * padded * trunk.sequence_state_dim ** 2
    return (stem_flops + passes * trunk.num_blocks * block) / 1e9


@dataclasses.dataclass(frozen=True)
class FoldSeconds:
    """The estimate of one fold: ``compute`` seconds of arithmetic, ``compile`` (low, high) seconds
    when this process has not compiled the length yet (else None), and whether ``compute`` rests on
    this machine's own folds of the model (``measured``) or the platform's first guess."""

    compute: float
    compile: tuple[float, float] | None
    measured: bool

    @property
    def seconds(self) -> float:
        """The job's expected seconds: the compilation's middle figure counted in."""
        return self.compute + (sum(self.compile) / 2 if self.compile else 0.0)

    def describe(self) -> str:
        from flamino_core.jobs.status import about

        basis = ("this machine's rate over its earlier folds" if self.measured
                 else "a first guess from the model's shape")
        said = f"{about(self.compute) if self.compute >= 1 else 'under a second'} of computation ({basis})"
        if self.compile:
            said += f", plus {self.compile[0]:.0f}-{self.compile[1]:.0f} s to compile this length the first time"
        return said


def fold_platform() -> str:
    """This process's JAX platform (cpu, tpu, gpu): a fold's memory is the host's on the CPU."""
    from flamino_core.engine import hardware  # JAX: imported when asked, not with the page

    return hardware.detect().platform


def fold_time_estimate(config: FoldConfig, length: int, model_key: str, platform: str | None = None, rates=None,
                       passes: int | None = None, compiled: bool | None = None) -> FoldSeconds:
    """The time one fold of ``length`` residues will take with the model ``model_key`` here
    (``platform``: cpu, tpu or gpu; None: this process's JAX backend; ``compiled``: whether the
    process that folds has compiled the length, None: this process, as its folds have marked)."""
    if platform is None:
        from flamino_core.engine import hardware  # JAX: imported when an estimate is asked, not with the page

        platform = hardware.detect().platform
    rates = _rates(rates)
    work = fold_gflop(config, length, passes)
    prior = PRIOR_SECONDS_PER_GFLOP.get(platform, PRIOR_SECONDS_PER_GFLOP["cpu"])
    compute = rates.robust_seconds(model_key, RATE_KIND, work, prior)
    if compiled is None:
        with _lock:
            compiled = (model_key, padded_length(length, PAD_TO)) in _compiled
    return FoldSeconds(compute, None if compiled else COMPILE_SECONDS.get(platform, COMPILE_SECONDS["cpu"]),
                       rates.measured_samples(model_key, RATE_KIND))


def record_fold_time(config: FoldConfig, length: int, model_key: str, seconds: float, rates=None, source: str = "",
           passes: int | None = None, warm: bool | None = None) -> None:
    """Note a fold that took ``seconds``: its rate is kept (one sample per ``source``, the visitor)
    only when this process had compiled its length before (``warm``: whether the process that
    folded had, a worker's), so a compilation never counts as arithmetic; the first fold of a
    length marks it compiled."""
    key = (model_key, padded_length(length, PAD_TO))
    with _lock:
        warm = key in _compiled if warm is None else warm
        _compiled.add(key)
    if warm:
        _rates(rates).record_sample(model_key, RATE_KIND, fold_gflop(config, length, passes), seconds, source)


def _rates(rates):
    if rates is not None:
        return rates
    from flamino_core.jobs.rates import default_rates

    return default_rates()
