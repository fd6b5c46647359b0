"""One protein's dense GEMMs through each fp32 GEMM this machine can run (issue #52, item 2, gate 1).

    .venv/bin/python benchmarks/gemm_micro.py [--shapes t6,t30,t33] [--length 300] [--rounds 5]
        [--libs xla,torch,mkl,openblas] [--mkl-lib /path/to/libmkl_rt.so.3] [--cpus 0]

The shapes are exactly those of ``Engine.run([protein])`` for one protein of ``--length``
residues (``<cls>`` and ``<eos>`` added, padded to the planner's length bucket): per layer the
q/k/v/out projections (T x D x D, four of them), fc1 (T x D x F) and fc2 (T x F x D), each
``x @ W + b`` as ``nnx.Linear`` computes it (the LM head's dense layer, once per pass, is the
q/k/v/out shape). Candidates:

- ``xla``: ``jnp.dot`` at precision highest plus the bias, jitted (what the engine runs today);
- ``torch``: ``torch.addmm`` (torch's CPU build: MKL's sgemm for fp32);
- ``mkl``: ``cblas_sgemm`` of the ``mkl`` wheel (``pip install mkl``; libmkl_rt, GNU OpenMP
  threading), C prefilled with the bias and beta = 1, as a custom call would run it;
- ``openblas``: ``cblas_sgemm`` of the OpenBLAS that numpy's wheel bundles (no new dependency),
  the same way;
- ``blis``: BLIS's gemm through spaCy's ``blis`` wheel (``pip install blis``; on PYTHONPATH),
  single-threaded as that wheel is built.

Each library runs in its own process (two OpenMP or thread pools spinning in one process would
take each other's cores on a 2-core machine), all with every core of the process; the processes
alternate library by library, round after round, so a shared machine's drift falls on all of
them alike. Each process prints, per shape, the median of ``--reps`` timed calls after a warm-up;
the table is the median over rounds, and each library's ratio to XLA is the median of the
per-round ratios (each round's pair ran back to back). The last column is the process's CPU time
per call (median), the fairer figure on a shared
machine, where a thread waiting for a core counts in the wall time. ``--cpus 0`` pins every
library to one core: the kernels' own speed, without their threading.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PRESETS = {"t6": "esm2_t6_8M_UR50D", "t12": "esm2_t12_35M_UR50D", "t30": "esm2_t30_150M_UR50D",
           "t33": "esm2_t33_650M_UR50D"}
CBLAS_ROW_MAJOR, CBLAS_NO_TRANS = 101, 111


def gemm_cases(shape: str, length: int) -> tuple[dict[str, tuple[int, int, int]], int]:
    """{name: (M, K, N)} of one layer's dense layers plus the LM head's, and the layer count."""
    from flamino_core.model.config import ESM2Config
    from flamino_core.engine.planner import bucket_length

    cfg = ESM2Config.preset(PRESETS[shape])
    m, d, f = bucket_length(length + 2), cfg.embed_dim, cfg.ffn_dim
    return {"qkvo": (m, d, d), "fc1": (m, d, f), "fc2": (m, f, d)}, cfg.num_layers


def _cblas(lib: ctypes.CDLL, symbol: str):
    fn = getattr(lib, symbol)
    c_int, c_float, ptr = ctypes.c_int, ctypes.c_float, ctypes.c_void_p
    fn.argtypes = [c_int, c_int, c_int, c_int, c_int, c_int, c_float, ptr, c_int, ptr, c_int, c_float, ptr, c_int]
    fn.restype = None
    return fn


def _sgemm_bias(sgemm, x, w, b, out):
    """out = x @ w + b through a cblas_sgemm: out prefilled with the bias rows, beta = 1."""
    import numpy as np

    (m, k), n = x.shape, w.shape[1]
    np.copyto(out, b)
    sgemm(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_NO_TRANS, m, n, k, 1.0, x.ctypes.data, k,
          w.ctypes.data, n, 1.0, out.ctypes.data, n)
    return out


def library(name: str, mkl_lib: str | None):
    """A function (x, w, b, out) -> x @ w + b on NumPy fp32 arrays, ready to time."""
    import numpy as np

    threads = len(os.sched_getaffinity(0))
    if name == "xla":
        import jax
        import jax.numpy as jnp

        f = jax.jit(lambda x, w, b: jnp.dot(x, w, precision=jax.lax.Precision.HIGHEST) + b)
        cache: dict = {}

        def run(x, w, b, out):  # arrays put on the device once, as the engine's weights are
            key = (id(x), id(w), id(b))
            if key not in cache:
                cache[key] = tuple(jnp.asarray(a) for a in (x, w, b))
            return f(*cache[key]).block_until_ready()
        return run
    if name == "torch":
        import torch

        torch.set_num_threads(threads)

        def run(x, w, b, out):
            with torch.inference_mode():
                return torch.addmm(torch.from_numpy(b), torch.from_numpy(x), torch.from_numpy(w), out=torch.from_numpy(out))
        return run
    if name == "mkl":
        path = mkl_lib or next(iter(glob.glob(os.path.join(sys.prefix, "lib", "libmkl_rt.so*"))), None)
        if not path:
            raise SystemExit("mkl: no libmkl_rt (pip install mkl, or --mkl-lib PATH)")
        lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        lib.MKL_Set_Threading_Layer(ctypes.c_int(1))  # MKL_THREADING_GNU: libgomp, no intel-openmp wheel
        lib.MKL_Set_Num_Threads(ctypes.c_int(threads))
        sgemm = _cblas(lib, "cblas_sgemm")
        return lambda x, w, b, out: _sgemm_bias(sgemm, x, w, b, out)
    if name == "openblas":
        import numpy

        libs = glob.glob(os.path.join(os.path.dirname(numpy.__file__) + ".libs", "libscipy_openblas64_*.so"))
        lib = ctypes.CDLL(libs[0])
        lib.scipy_openblas_set_num_threads64_(ctypes.c_int(threads))
        sgemm = getattr(lib, "scipy_cblas_sgemm64_")  # ILP64: int64 sizes
        c_i, c_f, p = ctypes.c_int, ctypes.c_float, ctypes.c_void_p
        i64 = ctypes.c_int64
        sgemm.argtypes = [c_i, c_i, c_i, i64, i64, i64, c_f, p, i64, p, i64, c_f, p, i64]
        return lambda x, w, b, out: _sgemm_bias(sgemm, x, w, b, out)
    if name == "blis":  # spaCy's cython-blis wheel (pip install blis): BLIS's own kernels (AMD's BLAS)
        from blis.py import gemm

        def run(x, w, b, out):
            np.copyto(out, b)
            return gemm(x, w, out=out, beta=1.0)
        return run
    raise SystemExit(f"unknown library {name!r}")


def _cpu_seconds() -> float:
    """The process's CPU time, every thread's (getrusage: microseconds, where os.times ticks at 10 ms)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def worker(lib_name: str, shapes: list[str], length: int, reps: int, mkl_lib: str | None) -> dict:
    """{shape: {case: median seconds}} for one library, in this process."""
    import numpy as np

    run = library(lib_name, mkl_lib)
    rng = np.random.default_rng(0)
    result: dict = {}
    for shape in shapes:
        cases, _ = gemm_cases(shape, length)
        result[shape] = {}
        for case, (m, k, n) in cases.items():
            x = (rng.normal(size=(m, k)) * 0.05).astype(np.float32)
            w = (rng.normal(size=(k, n)) * 0.05).astype(np.float32)
            b = (rng.normal(size=(n,)) * 0.05).astype(np.float32)
            out = np.empty((m, n), np.float32)
            for _ in range(3):
                run(x, w, b, out)
            walls, cpus = [], []
            for _ in range(reps):
                c0, t0 = _cpu_seconds(), time.perf_counter()
                run(x, w, b, out)
                walls.append(time.perf_counter() - t0)
                cpus.append(_cpu_seconds() - c0)
            result[shape][case] = statistics.median(walls)
            result[shape][case + " cpu"] = statistics.median(cpus)
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default="t6,t30,t33")
    p.add_argument("--length", type=int, default=300)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--libs", default="xla,torch,mkl,openblas")
    p.add_argument("--mkl-lib", default=None, help="libmkl_rt.so path (default: the venv's lib/)")
    p.add_argument("--cpus", default=None, help="run each library on these CPUs only (0: one thread)")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    shapes = args.shapes.split(",")
    if args.worker:
        if args.cpus:  # before any library starts its threads: they size their pools by the affinity
            os.sched_setaffinity(0, {int(c) for c in args.cpus.split(",")})
        print(json.dumps(worker(args.worker, shapes, args.length, args.reps, args.mkl_lib)))
        return
    libs = args.libs.split(",")
    rounds: list[dict] = []
    for r in range(args.rounds):
        order = libs[r % len(libs):] + libs[:r % len(libs)]  # rotate who goes first
        this = {}
        for lib in order:
            cmd = [sys.executable, __file__, "--worker", lib, "--shapes", args.shapes, "--length", str(args.length),
                   "--reps", str(args.reps)] + (["--mkl-lib", args.mkl_lib] if args.mkl_lib else []) \
                + (["--cpus", args.cpus] if args.cpus else [])
            this[lib] = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        rounds.append(this)
        print(f"round {r + 1}/{args.rounds} done, load {os.getloadavg()[0]:.2f}", file=sys.stderr, flush=True)
    threads = len(args.cpus.split(",")) if args.cpus else len(os.sched_getaffinity(0))
    print(f"one protein of {args.length} residues, {threads} threads, {args.rounds} rounds "
          f"x {args.reps} calls, load average now {os.getloadavg()[0]:.2f}")
    print("| shape | case (M x K x N) | " + " | ".join(f"{lib} ms" for lib in libs) + " | "
          + " | ".join(f"xla / {lib}" for lib in libs if lib != "xla") + " | CPU ms per call: "
          + ", ".join(libs) + " |")
    print("|---|---|" + "---:|" * (2 * len(libs) - 1) + "---|")
    for shape in shapes:
        cases, _ = gemm_cases(shape, args.length)
        rows = [(case, f"{case} ({'x'.join(map(str, mkn))})") for case, mkn in cases.items()]
        for key, label in rows + [("layer", "one layer (4 qkvo + fc1 + fc2)")]:
            def t(rnd, lib, suffix=""):
                res = rnd[lib][shape]
                if key == "layer":
                    return 4 * res["qkvo" + suffix] + res["fc1" + suffix] + res["fc2" + suffix]
                return res[key + suffix]
            ms = [f"{statistics.median(t(rnd, lib) for rnd in rounds) * 1e3:.2f}" for lib in libs]
            ratios = [f"{statistics.median(t(rnd, 'xla') / t(rnd, lib) for rnd in rounds):.2f}"
                      for lib in libs if lib != "xla"] if "xla" in libs else []
            cpu = ", ".join(f"{statistics.median(t(rnd, lib, ' cpu') for rnd in rounds) * 1e3:.1f}" for lib in libs)
            print(f"| {shape} | {label} | " + " | ".join(ms + ratios) + f" | {cpu} |")

if __name__ == "__main__":
    main()
