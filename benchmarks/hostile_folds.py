"""Issue #67's fold rows measured on the server's side, without a browser: what a running fold
leaves the server's other sessions, how fast a closed tab's fold gives its CPU and memory back,
the server's and the fold worker's memory after folds at the issue's seven lengths, and a fold's
peak memory against the page's estimate (``folding.fold_memory``).

    .venv/bin/python benchmarks/hostile_folds.py [--model random:esmfold-tiny] [--only NAME ...] [--json OUT]

Parts (``--only``):

* ``share``: a fixed piece of a session's work (``probe``: Python and NumPy on one thread, ~0.5 s
  idle) timed alone, then while a 400-residue fold runs (a) in the fold worker at its share
  (``fold_share``: nice 10, every core but one), (b) in a worker at the server's priority on every
  core, (c) in the server's own process (a thread, as folds ran before issue #67).
* ``close``: a 400-residue fold in the worker, its tab "closed" (the stop check raises) 5 s in:
  seconds until the worker's process is gone (its CPU and memory with it).
* ``lengths``: folds at 400, 330, 100, 180, 250, 300, 50 residues through one ``FoldRunner`` with
  the hosted defaults: the server's RSS, the worker's RSS after each fold, the recycles.
* ``memory``: each fold's peak resident memory in a fresh worker over its RSS before it (the peak
  reset with ``/proc/self/clear_refs``), cold (compiling) and warm, against ``fold_memory``.

The machine is shared with other agents' work: each part prints the load average beside its
numbers; the quiet rerun is the lead's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "benchmarks"), os.environ.get("PYTHONPATH")]))

from flamino_core.jobs.process_worker import Share  # noqa: E402
from flamino_core.structure.folding.fold_worker import FoldRequest, FoldRunner, fold_share  # noqa: E402

LENGTHS = (400, 330, 100, 180, 250, 300, 50)
AMINO = "ACDEFGHIKLMNPQRSTVWY"
MiB = 1 << 20


def protein(length: int, seed: int = 0) -> str:
    import random

    return "".join(random.Random(seed * 1_000 + length).choices(AMINO, k=length))


def status_mib(field: str, pid: int | str = "self") -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def load() -> float:
    return round(os.getloadavg()[0], 1)


class MeasuredFold(FoldRequest):
    """A ``FoldRequest`` that also says its peak memory: (folded, seconds, RSS MiB before, peak MiB)."""

    def __call__(self):
        from flamino_core.structure.folding import fold_worker
        from flamino_core.weights import load_fold_model

        key = (self.identifier, self.stem_precision)
        if key not in fold_worker._MODELS:
            fold_worker._MODELS[key] = load_fold_model(self.identifier, self.stem_precision)[0]
        Path("/proc/self/clear_refs").write_text("5")  # the peak (VmHWM) restarts from now
        before = status_mib("VmRSS")
        folded, seconds = super().__call__()
        return folded, seconds, before, status_mib("VmHWM")


def loaded_rss(model: str = "random:esmfold-tiny") -> dict:
    """In a worker: its resident MiB started, then with JAX's CPU client up and the model loaded (no fold yet)."""
    started = status_mib("VmRSS")
    import jax

    jax.numpy.zeros(1).block_until_ready()
    client = status_mib("VmRSS")
    from flamino_core.weights import load_fold_model

    from flamino_core.model import ModelId

    load_fold_model(ModelId.parse(model))
    return {"started_mib": started, "jax_client_mib": client, "model_loaded_mib": status_mib("VmRSS")}


def probe() -> float:
    """Seconds of a fixed piece of a session's work: Python (a page's script) and NumPy."""
    import numpy as np

    started = time.perf_counter()
    total = sum(i * i for i in range(600_000))
    matrix = np.random.default_rng(0).random((160, 160))
    for _ in range(20):
        matrix = np.linalg.qr(matrix)[0]
    json.dumps([{"i": i, "t": str(total)} for i in range(30_000)])
    return time.perf_counter() - started


def probes_while(start_fold, n: int = 4) -> dict:
    """The probe's seconds while a fold runs (started by ``start_fold()``, returning its thread)."""
    thread = start_fold()
    time.sleep(3.0)  # past the worker's start: the fold itself is running
    seconds = []
    while thread.is_alive() and len(seconds) < n:
        seconds.append(probe())
    thread.join()
    return {"probe_s": [round(s, 2) for s in seconds], "median_s": round(statistics.median(seconds), 2)
            if seconds else None, "load": load()}


SHARE_LENGTH = int(os.environ.get("HOSTILE_FOLDS_SHARE_LENGTH", "400"))  # shorter on a busy machine


def share(model: str) -> dict:
    sequence = protein(SHARE_LENGTH)
    idle = [probe() for _ in range(4)]
    result = {"idle": {"probe_s": [round(s, 2) for s in idle], "median_s": round(statistics.median(idle), 2),
                       "load": load()}}
    for name, runner_share in (("worker at its share", fold_share()), ("worker at the server's share", Share())):
        runner = FoldRunner(runner_share)
        runner.fold(FoldRequest(model, "fp32", protein(SHARE_LENGTH, 1)))  # compiled: the measured fold is warm

        def start(runner=runner):
            thread = threading.Thread(target=runner.fold, args=(FoldRequest(model, "fp32", sequence),))
            thread.start()
            return thread

        result[name] = probes_while(start)
        result[name]["share"] = f"nice {runner_share.nice}, cores {runner_share.cores or 'all'}"
        runner.close()
    FoldRequest(model, "fp32", protein(SHARE_LENGTH, 1))()  # the model loaded and the length compiled in this process

    def start_here():
        thread = threading.Thread(target=FoldRequest(model, "fp32", sequence))
        thread.start()
        return thread

    result["in the server's process"] = probes_while(start_here)
    return result


def close(model: str) -> dict:
    from flamino_core.store.passes import Cancelled

    runner = FoldRunner()
    runner.fold(FoldRequest(model, "fp32", protein(400, 1)))
    pid, closed = runner.pid, {}
    rss = status_mib("VmRSS", pid)

    def check():
        if closed.get("at") is None and time.monotonic() - started > 5.0:
            closed["at"] = time.monotonic()
            raise Cancelled("tab closed")

    started = time.monotonic()
    try:
        runner.fold(FoldRequest(model, "fp32", protein(400, 2)), check)
    except Cancelled:
        pass
    while Path(f"/proc/{pid}").exists():
        time.sleep(0.01)
    return {"worker_rss_mib_before": round(rss or 0), "gone_after_s": round(time.monotonic() - closed["at"], 2),
            "load": load()}


def lengths(model: str) -> dict:
    runner = FoldRunner()
    rows = []
    for length in LENGTHS:
        started = time.monotonic()
        runner.fold(FoldRequest(model, "fp32", protein(length)))
        rows.append({"length": length, "seconds": round(time.monotonic() - started, 1),
                     "server_rss_mib": round(status_mib("VmRSS")),
                     "worker_rss_mib": round(status_mib("VmRSS", runner.pid) or 0) if runner.pid else 0,
                     "recycled": runner.recycled, "load": load()})
        print(rows[-1], flush=True)
    runner.close()
    return {"rows": rows, "max_rss_mib": runner.max_rss // MiB, "max_lengths": runner.max_lengths}


def memory(model: str) -> dict:
    from flamino_core.model import FoldConfig
    from flamino_core.structure import folding
    from flamino_core.weights import FOLD_PRESETS

    preset = model.fold_preset
    config = FOLD_PRESETS[preset].expect() if preset else FoldConfig.tiny()
    import hostile_folds  # the worker unpickles it by this module's name, not as __main__

    measured = hostile_folds.MeasuredFold
    rows = []
    for length in (100, 250, 400):
        runner = FoldRunner(max_lengths=99, max_rss_mib=1 << 20)
        cold = runner.fold(measured(model, "fp32", protein(length)))
        warm = runner.fold(measured(model, "fp32", protein(length, 1)))
        runner.close()
        estimate = folding.fold_memory(config, length)
        rows.append({"length": length, "estimate_mib": round(estimate.total / MiB),
                     "estimate_work_mib": round((estimate.total - estimate.weights) / MiB),
                     "cold_peak_over_rss_mib": round(cold[3] - cold[2]), "warm_peak_over_rss_mib":
                     round(warm[3] - warm[2]), "rss_before_mib": round(warm[2]), "warm_s": round(warm[1], 1),
                     "load": load()})
        print(rows[-1], flush=True)
    return {"rows": rows}


PARTS = {"share": share, "close": close, "lengths": lengths, "memory": memory}


def _model_id(text: str):
    from flamino_core.model import ModelId

    return ModelId.parse(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="random:esmfold-tiny", type=_model_id)
    parser.add_argument("--only", nargs="*", choices=list(PARTS), default=list(PARTS))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = {"model": args.model.text, "cores": os.cpu_count(), "started": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                                     time.gmtime())}
    for name in args.only:
        results[name] = PARTS[name](args.model)
        print(name, json.dumps(results[name]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
