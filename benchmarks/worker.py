"""One benchmark measurement in a fresh process; prints one ``BENCH_JSON {...}`` line.

    worker.py SYSTEM MEASUREMENT [--shape t6] [--reps N] [--threads N] [--root DIR] ...

SYSTEM is ``flamino`` (``flamino_jobs.py``), ``hf`` (transformers ``EsmForMaskedLM``,
``hf_jobs.py``), ``esmcpp`` (esm.cpp, ``esmcpp_jobs.py``: run with the interpreter of its own
environment, see ``run.py``), ``jax``/``torch`` (matmul peak) or ``prepare`` (checkpoints).
Each call measures one thing so that its peak RSS (``ru_maxrss``) belongs to it alone. The
thread count is fixed before numpy, JAX, torch or esm.cpp are imported.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

T_PROCESS = time.time()  # as early as possible, for the cold-start breakdown

# (system, measurement) -> (module, function)
JOBS = {
    ("flamino", "varlen"): ("flamino_jobs", "flamino_varlen"),
    ("flamino", "latency"): ("flamino_jobs", "flamino_latency"),
    ("flamino", "scan"): ("flamino_jobs", "flamino_scan"),
    ("flamino", "cold"): ("flamino_jobs", "flamino_cold"),
    ("hf", "varlen"): ("hf_jobs", "hf_varlen"),
    ("hf", "latency"): ("hf_jobs", "hf_latency"),
    ("hf", "scan"): ("hf_jobs", "hf_scan"),
    ("hf", "cold"): ("hf_jobs", "hf_cold"),
    ("esmcpp", "varlen"): ("esmcpp_jobs", "esmcpp_varlen"),
    ("esmcpp", "latency"): ("esmcpp_jobs", "esmcpp_latency"),
    ("esmcpp", "scan"): ("esmcpp_jobs", "esmcpp_scan"),
    ("esmcpp", "cold"): ("esmcpp_jobs", "esmcpp_cold"),
    ("esmcpp", "quantize"): ("esmcpp_jobs", "esmcpp_quantize"),
    ("jax", "peak"): ("hf_jobs", "jax_peak"),
    ("torch", "peak"): ("hf_jobs", "torch_peak"),
    ("prepare", "checkpoint"): ("flamino_jobs", "prepare_checkpoint"),
}


def _pin_threads(threads: int) -> None:
    cpus = sorted(os.sched_getaffinity(0))[:threads]
    os.sched_setaffinity(0, cpus)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "ESM_NUM_THREADS"):
        os.environ[var] = str(threads)


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("system", choices=sorted({s for s, _ in JOBS}))
    p.add_argument("measurement", choices=sorted({m for _, m in JOBS}))
    p.add_argument("--shape", default="t6")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--root", default=None, help="benchmark work folder (checkpoints, caches)")
    p.add_argument("--t0", type=float, default=None, help="cold start: parent's clock at spawn")
    p.add_argument("--scan-batches", type=int, default=0,
                   help="masked scan: time only the first N batches and scale the time by FLOPs to "
                        "the full scan; 0 = time the full scan")
    p.add_argument("--scan-rows", type=int, default=16,
                   help="HF and esm.cpp masked scan: rows per batch (run.py passes flamino's)")
    p.add_argument("--no-recompile-check", action="store_true", help="varlen: skip the extra pass")
    p.add_argument("--device", default="cpu", choices=["cpu", "gpu"],
                   help="where flamino runs (run.py passes JAX's platform); HF uses the same")
    p.add_argument("--variant", default="fp32", choices=["fp32", "int8"],
                   help="esm.cpp: its FP32 weights or its W8A8 INT8 (SmoothQuant) GGUF")
    p.add_argument("--save-outputs", default=None, metavar="NPZ",
                   help="varlen and scan: keep the logits / log-probabilities for the accuracy check")
    return p.parse_args()


def main() -> None:
    args = _parse()
    if (args.system, args.measurement) not in JOBS:
        raise SystemExit(f"no such measurement: {args.system} {args.measurement}")
    _pin_threads(args.threads)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    sys.path.insert(1, os.path.dirname(here))  # the repo root
    import common
    import measure

    measure.ARGS = args
    measure.T_PROCESS = T_PROCESS
    module, name = JOBS[(args.system, args.measurement)]
    result = getattr(importlib.import_module(module), name)()
    result.update(
        **measure.BACKEND,
        system=args.system,
        measurement=args.measurement,
        shape=args.shape,
        threads=args.threads,
        cpus=sorted(os.sched_getaffinity(0)),
        peak_rss_mib=measure.peak_rss_mib(),
        cpu_share=measure.cpu_share(),
    )
    common.emit(result)


if __name__ == "__main__":
    main()
