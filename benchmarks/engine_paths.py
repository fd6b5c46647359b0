"""Engine-level A/B of attention paths (and precisions) in one process, alternating rounds.

    .venv/bin/python benchmarks/engine_paths.py --shape t6 [--paths fused,xla] [--rounds 5]

Two or more engines on the same random weights (``random:<preset>``), each timed on the same
calls in turn, round after round (this machine is shared: compare within a round, not across
runs). An engine is ``path[:precision[:packing[:stored]]]``, e.g. ``fused``, ``fused:bf16``,
``fused:fp32:off`` (sequence packing off), ``fused:bf16::stored`` (the CPU's bf16 mode with its
dense kernels stored as bf16 once, as an accelerator's are, instead of rounded in every call).
Prints median and spread (min-max) of the per-round medians, in ms, then in brackets the median
CPU time per call (all threads, ms: less disturbed than wall time when other work shares the
cores, though a busy machine slows that too), and the CPU share of the timed calls (process CPU
time / (wall time x cores): about 1 when the process had the machine to itself). A development
tool; ``make bench`` is the measurement of record.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

from flamino_core import Engine, load_weights  # noqa: E402
from flamino_core.engine import hardware  # noqa: E402


@contextlib.contextmanager
def stored_bf16(on: bool):
    """While an engine is built: its bf16 kernels stored rounded (``store_bf16=True``, the
    accelerator's way) whatever the platform, to time that against the CPU's per-call rounding."""
    if not on:
        yield
        return
    original = hardware.use_bf16_matmuls
    hardware.use_bf16_matmuls = lambda model, store_bf16=False, **kw: original(model, store_bf16=True, **kw)
    try:
        yield
    finally:
        hardware.use_bf16_matmuls = original


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", default="t6", choices=list(common.SHAPES))
    p.add_argument("--paths", default="fused,xla", help="comma-separated attention paths, or path:bf16")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--work", default="latency,scan", help="comma-separated: latency, scan, varlen")
    p.add_argument("--lengths", default=",".join(map(str, common.LATENCY_LENGTHS)), help="latency: residues")
    p.add_argument("--varlen-count", type=int, help="varlen: proteins (default: make bench's count for the shape)")
    args = p.parse_args()
    weights = load_weights(f"random:{common.SHAPES[args.shape]}")
    engines = {}
    for spec in args.paths.split(","):
        path, precision, packing, stored = (spec.split(":") + ["", "", ""])[:4]
        with stored_bf16(stored == "stored"):
            engines[spec] = Engine(weights, attention=path, precision=precision or "fp32", packing=packing or None)
        print(f"{spec}: {engines[spec].backend.describe()}", file=sys.stderr)
    calls = {}
    work = args.work.split(",")
    if "latency" in work:
        for length in map(int, args.lengths.split(",")):
            seq = common.fixed_protein(length)
            calls[f"latency {length}"] = lambda e, seq=seq: e.run([seq])
    if "scan" in work:
        seq = common.fixed_protein(common.SCAN_LENGTH)
        calls["scan batch 16x304"] = lambda e, seq=seq: e.compute_masked(seq, positions=range(16))
    if "varlen" in work:
        count = args.varlen_count or common.varlen_count(args.shape)
        seqs = common.varlen_workload(count)
        calls[f"varlen {count} proteins ({sum(map(len, seqs))} residues)"] = lambda e: e.run(seqs)
    for fn in calls.values():  # compile everything first
        for engine in engines.values():
            fn(engine)
            fn(engine)
    print(f"load average {os.getloadavg()}", file=sys.stderr)
    names = list(engines)
    cores = len(os.sched_getaffinity(0))
    print("| call | " + " | ".join(f"{n} (ms)" for n in names) + f" | {names[-1]} / {names[0]} | CPU share |")
    print("|---|" + "---|" * (len(names) + 2))
    for label, fn in calls.items():
        medians = {n: [] for n in names}
        cpu_times = {n: [] for n in names}
        wall = cpu = 0.0
        for _ in range(args.rounds):
            for n in names:
                times = []
                for _ in range(args.reps):
                    start, start_cpu = time.perf_counter(), time.process_time()
                    fn(engines[n])
                    times.append(time.perf_counter() - start)
                    cpu_times[n].append((time.process_time() - start_cpu) * 1e3)
                    cpu += cpu_times[n][-1] / 1e3
                    wall += times[-1]
                medians[n].append(statistics.median(times) * 1e3)
        cells = [f"{statistics.median(medians[n]):.1f} ({min(medians[n]):.1f}-{max(medians[n]):.1f}) "
                 f"[{statistics.median(cpu_times[n]):.0f}]" for n in names]
        ratio = statistics.median(medians[names[-1]]) / statistics.median(medians[names[0]])
        print(f"| {label} | " + " | ".join(cells) + f" | {ratio:.2f}x | {cpu / (wall * cores):.2f} |", flush=True)
    print(f"load average after {os.getloadavg()}", file=sys.stderr)


if __name__ == "__main__":
    main()
