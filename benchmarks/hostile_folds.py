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
* ``prior``: the page's time estimate before any fold was timed here (``fold_time_estimate`` with
  no rates: the platform's prior and its compilation range) against folds at 60, 200 and 400
  residues in a worker at the hosted share (``fold_share``), cold (a new length) and warm, each
  row with the load (issue #67: the prior within 1.5x).
* ``queue``: the issue's first row without a browser: five visitors' 400-residue folds through the
  server's heavy queue (``HeavyJobQueue``, the hosted sizes, each fold's estimate as the page says
  it from the prior) and one fold worker at the hosted share, then a sixth visitor's 60-residue fold
  5 s after the first press: its seconds from click to done against the first fold's, the order the
  folds started in; the folds still waiting are then cancelled (their order is the queue's rule).
  A fold of at most ``express_residues`` (128) goes, as on the server, to the express lane: its
  own queue (1 slot, 4 waiting, 1 per visitor) and its own worker (``FLAMINO_FOLD_EXPRESS_RESIDUES=0``:
  no lane, the victim in the heavy queue as before); the express worker's RSS after its fold. The
  express worker is warmed first (64 and 128 compiled, as ``warm_express`` when a page offers a
  fold; ``FLAMINO_FOLD_EXPRESS_WARM=0``: cold, started at the victim's click).

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


PRIOR_LENGTHS = (60, 200, 400)


def cpu_seconds(pid: int) -> float:
    """A process's CPU seconds so far (user and system): what a fold costs an idle core, whatever
    else the machine runs (its wall seconds stretch with the load; this barely does)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed_fold(runner: FoldRunner, request: FoldRequest) -> tuple[float, float]:
    """(wall seconds in the worker, the worker's CPU seconds) of one fold by a worker already up."""
    before = cpu_seconds(runner.pid)
    seconds = runner.fold(request)[1]
    return seconds, cpu_seconds(runner.pid) - before


def prior(model: str) -> dict:
    import tempfile

    from flamino_core.jobs.rates import Rates
    from flamino_core.model import FoldConfig
    from flamino_core.structure import folding
    from flamino_core.structure.folding.fold_time import COMPILE_SECONDS
    from flamino_core.weights import FOLD_PRESETS

    preset = model.fold_preset
    config = FOLD_PRESETS[preset].expect() if preset else FoldConfig.tiny()
    key = folding.model_key(model, config.trunk.max_recycles)
    empty = Rates(Path(tempfile.mkdtemp()) / "rates.json")  # no fold timed: the prior alone
    runner, rows = FoldRunner(fold_share(), max_lengths=99, max_rss_mib=1 << 20), []
    runner.fold(FoldRequest(model, "fp32", protein(130)))  # the worker started, the model loaded (192 padded: no row's)
    for length in PRIOR_LENGTHS:
        said = folding.fold_time_estimate(config, length, key, platform="cpu", rates=empty, compiled=True)
        cold_load = load()
        cold, cold_cpu = timed_fold(runner, FoldRequest(model, "fp32", protein(length)))
        warm, warm_cpu = timed_fold(runner, FoldRequest(model, "fp32", protein(length, 1)))
        rows.append({"length": length, "gflop": round(folding.fold_gflop(config, length), 2),
                     "prior_s": round(said.compute, 2), "warm_s": round(warm, 2), "warm_cpu_s": round(warm_cpu, 2),
                     "warm_cpu_over_prior": round(warm_cpu / said.compute, 2), "cold_s": round(cold, 1),
                     "compile_said_s": list(COMPILE_SECONDS["cpu"]), "compile_cpu_s": round(cold_cpu - warm_cpu, 1),
                     "load_before": cold_load, "load": load()})
        print(rows[-1], flush=True)
    runner.close()
    return {"rows": rows, "share": f"nice {runner.share.nice}, cores {runner.share.cores or 'all'}"}


def fold_queue(model: str) -> dict:
    import tempfile

    from flamino_core.jobs.heavy_queue import HeavyJobQueue
    from flamino_core.jobs.rates import Rates
    from flamino_core.model import FoldConfig
    from flamino_core.store.passes import Cancelled
    from flamino_core.structure import folding
    from flamino_core.weights import FOLD_PRESETS

    preset = model.fold_preset
    config = FOLD_PRESETS[preset].expect() if preset else FoldConfig.tiny()
    key = folding.model_key(model, config.trunk.max_recycles)
    rates = Rates(Path(tempfile.mkdtemp()) / "rates.json")  # a fresh server: the prior alone
    from flamino_core.structure.folding.fold_worker import is_express

    runner, queue = FoldRunner(), HeavyJobQueue(workers=1, max_waiting=4, per_visitor=2)
    express, express_queue = FoldRunner(), HeavyJobQueue(workers=1, max_waiting=4, per_visitor=1)
    runner.fold(FoldRequest(model, "fp32", protein(130)))  # a server that folded before: the worker up
    warmed = os.environ.get("FLAMINO_FOLD_EXPRESS_WARM", "1") != "0"
    for length in (64, 128) if warmed else ():  # as ``warm_express`` when the pages offered their folds
        express.fold(FoldRequest(model, "fp32", "A" * length))
    measured, done, running = {}, threading.Event(), set()
    origin = time.monotonic()

    def visitor(name: str, length: int) -> None:
        request = FoldRequest(model, "fp32", protein(length, len(measured) + 3))
        lane, its_queue = (express, express_queue) if is_express(request) else (runner, queue)
        said = folding.fold_time_estimate(config, length, key, platform="cpu", rates=rates,
                                          compiled=lane.compiled(request.shape_key))
        clicked = time.monotonic()
        row = measured.setdefault(name, {"length": length, "estimate_s": round(said.seconds, 1),
                                         "clicked_s": round(clicked - origin, 1),
                                         "lane": "express" if lane is express else "heavy"})

        def check():  # once the victim is done, the folds still waiting stop; the running one ends its fold
            if done.is_set() and name not in running:
                raise Cancelled("the row is measured")

        try:
            with its_queue.slot(timeout=None, visitor=name, work=said.seconds):
                row["started_s"] = round(time.monotonic() - origin, 1)
                lane.fold(request, check)
                row["worker_rss_mib"] = round((lane._worker.rss_bytes() or 0) / MiB)
                row["done_s"] = round(time.monotonic() - origin, 1)
                row["click_to_done_s"] = round(time.monotonic() - clicked, 1)
        except Cancelled:
            row["cancelled"] = True

    threads = []
    for index in range(5):
        threads.append(threading.Thread(target=visitor, args=(f"visitor {index + 1}", 400)))
        threads[-1].start()
        time.sleep(0.5)
    time.sleep(5.0 - 2.5)  # the victim clicks 5 s after the first press
    victim = threading.Thread(target=visitor, args=("victim", 60))
    victim.start()
    victim.join()
    victim_load = load()
    running.update(n for n, row in measured.items() if "started_s" in row and "done_s" not in row)
    done.set()
    for thread in threads:
        thread.join()
    runner.close()
    express.close()
    first = measured["visitor 1"]
    started = sorted((row["started_s"], name) for name, row in measured.items() if "started_s" in row)
    return {"rows": measured, "started_in_order": [name for _, name in started],
            "victim_click_to_done_s": measured["victim"].get("click_to_done_s"),
            "first_fold_s": round(first["done_s"] - first["started_s"], 1) if "done_s" in first else None,
            "first_fold_running_s_at_victim_done": round(measured["victim"].get("done_s", 0) - first["started_s"], 1)
            if "started_s" in first else None,
            "load_at_victim_done": victim_load, "load": load(), "express_warmed": warmed}


PARTS = {"share": share, "close": close, "lengths": lengths, "memory": memory, "prior": prior, "queue": fold_queue}


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
