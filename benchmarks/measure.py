"""What every measurement process shares: its arguments, the timing loop, peak memory, and
where it saves the outputs that ``run.py`` checks for accuracy against HF.

``worker.py`` parses the arguments into ``ARGS`` before it imports a system's job module
(``flamino_jobs``, ``hf_jobs``, ``esmcpp_jobs``), so those modules read them at import time.
Imports nothing heavy: the esm.cpp workers run in an environment without JAX or torch.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from typing import Callable
from pathlib import Path

import numpy as np

ARGS: argparse.Namespace  # set by worker.py before any job module is imported
T_PROCESS: float  # when the worker process started (time.time()), for the cold-start breakdown
BACKEND: dict = {}  # what the system ran with (path, precision, ISA), merged into its record

CPU_SHARE: list[float] = []  # per timed call: process CPU time / (wall time x threads)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def timed(fn, reps: int) -> list[float]:
    times = []
    for _ in range(reps):
        cpu0, start = _cpu_seconds(), time.perf_counter()
        fn()
        wall = time.perf_counter() - start
        times.append(wall)
        CPU_SHARE.append((_cpu_seconds() - cpu0) / (wall * ARGS.threads))
    return times


def _cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def summary(times: list[float]) -> dict:
    return {"median_s": statistics.median(times), "min_s": min(times), "times_s": times}


def cpu_share() -> float | None:
    """Median CPU share of the timed calls; well below 1: the threads waited for cores (a
    shared machine) or idled."""
    return statistics.median(CPU_SHARE) if CPU_SHARE else None


def save_outputs(**arrays: np.ndarray) -> None:
    """Keep what a measurement computed for ``run.py``'s accuracy check (``accuracy.py``):
    ``--save-outputs FILE`` names the NPZ; without it nothing is written."""
    if ARGS.save_outputs:
        path = Path(ARGS.save_outputs)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, **arrays)


def varlen_logits(logits: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Per-protein residue logits (L, 33), special tokens removed, as ``save_outputs`` keys."""
    return {f"logits/{i}": np.asarray(l, np.float32) for i, l in enumerate(logits)}


def peer_scan(scan: Callable[[list[int]], np.ndarray], rows: int, length: int, flops: Callable[[int], float]) -> dict:
    """The masked-scan protocol of HF and esm.cpp: one batch as warm-up, then the timed
    positions (``--scan-batches`` batches, or all), their log-probabilities saved for the
    accuracy check, the times scaled by FLOPs to all ``length`` positions."""
    start = time.perf_counter()
    scan(list(range(rows)))
    warmup_s = time.perf_counter() - start
    timed_positions = min(ARGS.scan_batches * rows, length) if ARGS.scan_batches else length
    holder = {}
    times = timed(lambda: holder.update(lp=scan(list(range(timed_positions)))), ARGS.reps)
    assert holder["lp"].shape[0] == timed_positions
    save_outputs(scan=np.asarray(holder["lp"], np.float32))
    scale = flops(length) / flops(timed_positions)
    return {**summary([t * scale for t in times]), "timed_positions": timed_positions, "scale": scale,
            "measured_times_s": times, "warmup_s": warmup_s, "flops": flops(length), "rows_per_batch": rows}


def cold_result(t_spawned: float, t_import: float, t_load: float, t_done: float, sequence_length: int) -> dict:
    """A cold start's breakdown: spawn to interpreter, imports, weights, first run."""
    return {"first_embedding_s": t_done - t_spawned, "interpreter_s": T_PROCESS - t_spawned,
            "import_s": t_import - T_PROCESS, "load_weights_s": t_load - t_import, "first_run_s": t_done - t_load,
            "sequence_length": sequence_length}
