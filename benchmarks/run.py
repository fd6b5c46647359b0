"""``make bench``: flamino vs HF transformers ``EsmForMaskedLM`` on CPU, one table.

    .venv/bin/python benchmarks/run.py            # full run (t6, t12, t30), writes docs/benchmarks.md
    .venv/bin/python benchmarks/run.py --quick    # t6 only, fewer repetitions, no doc update

Every measurement runs in its own process (``worker.py``) with the same thread count and the
same random weights, which this script writes once per shape in the HF 5.x format. Results go
to ``benchmarks/results/`` (JSON) and, for full runs, the table (``report.py``) goes between the
markers in ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
from report import report  # noqa: E402

WORKER = Path(__file__).resolve().parent / "worker.py"
DOC = common.REPO / "docs" / "benchmarks.md"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"

# Repetitions per shape (median reported). Bigger shapes get fewer: a t30 varlen pass is ~1 min.
REPS = {
    "t6": {"varlen": 3, "latency": 10, "scan": 1},
    "t12": {"varlen": 2, "latency": 5, "scan": 1},
    "t30": {"varlen": 1, "latency": 3, "scan": 1},
}
QUICK_REPS = {"varlen": 1, "latency": 3, "scan": 1}
# t30 masked scan: time the first 4 batches (64 of the 300 positions; the other batches have
# the same shape) and scale by FLOPs to all 300; --full times every pass. Keeps `make bench`
# near 20 minutes on 2 cores.
SCAN_BATCHES = {"t30": 4}
COLD_WARM_REPEATS = 2
# Latency: each system measured in this many rounds, alternating (flamino, HF, flamino, HF);
# the table keeps each system's better median. A single short measurement on this shared
# 2-core VM was sometimes 1.5x slower than the next one, for either system.
LATENCY_ROUNDS = 2
def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="t6 only, fewer repetitions (development)")
    p.add_argument("--shapes", default=None, help="comma-separated subset of t6,t12,t30")
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                   help="threads for both systems (default: all cores of this process)")
    p.add_argument("--full", action="store_true", help="time every masked-scan pass at every shape")
    p.add_argument("--write-doc", action=argparse.BooleanOptionalAction, default=None,
                   help="update docs/benchmarks.md (default: yes for full runs, no for --quick)")
    p.add_argument("--keep", action="store_true", help="keep the work folder (checkpoints, caches)")
    p.add_argument("--report", metavar="JSON", default=None,
                   help="only print the table of a saved results file (benchmarks/results/*.json)")
    return p.parse_args()


# --- running workers ---------------------------------------------------------------------------
class Runner:
    def __init__(self, root: Path, threads: int):
        self.root = root
        self.threads = threads
        self.records: list[dict] = []
        self.env = dict(os.environ)
        self.env.update(
            FLAMINO_CACHE=str(root / "flamino-cache"),  # converted weights, written by `prepare`
            HF_HOME=str(root / "hf-home"),
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_VERBOSITY="error",
            TF_CPP_MIN_LOG_LEVEL="2",
            PYTHONPATH=os.pathsep.join(filter(None, [str(common.REPO), os.environ.get("PYTHONPATH")])),
        )
        self.env.pop("FLAMINO_JAX_CACHE", None)  # only the cold-start runs use a compile cache
        self.env.pop("FLAMINO_MODEL", None)
        # flamino's own choice (the fused kernel when built) unless a row asks for pure JAX.
        self.env.pop("FLAMINO_ATTENTION", None)
        self.env.pop("FLAMINO_PRECISION", None)
        self.device = "cpu"  # where JAX runs: set from the first peak measurement

    def __call__(self, system: str, measurement: str, shape: str = "t6", *, reps: int = 3,
                 extra: list[str] | None = None, env: dict | None = None, tags: dict | None = None,
                 timeout: float = 3600) -> dict:
        cmd = [sys.executable, str(WORKER), system, measurement, "--shape", shape, "--reps", str(reps),
               "--threads", str(self.threads), "--root", str(self.root), "--device", self.device,
               *(extra or [])]
        label = f"{system} {measurement} {shape}" if system not in ("jax", "torch") else f"{system} {measurement}"
        if (tags or {}).get("attention") == "xla":
            label += " (kernel off)"
        load = os.getloadavg()[0]
        print(f"[{time.strftime('%H:%M:%S')}] {label:28s} (load {load:.2f}) ...", end="", flush=True, file=sys.stderr)
        t0 = time.time()
        if measurement == "cold":
            cmd += ["--t0", repr(t0)]
        try:
            proc = subprocess.run(cmd, env={**self.env, **(env or {})}, capture_output=True, text=True,
                                  timeout=timeout, cwd=common.REPO)
            lines = [l for l in proc.stdout.splitlines() if l.startswith("BENCH_JSON ")]
            if proc.returncode == 0 and lines:
                result = json.loads(lines[-1][len("BENCH_JSON "):])
            else:
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
                result = {"error": f"exit {proc.returncode}: " + " | ".join(tail)}
        except subprocess.TimeoutExpired:
            result = {"error": f"timed out after {timeout:.0f} s"}
        result.update(system=system, measurement=measurement, shape=shape, wall_s=time.time() - t0,
                      load_at_start=load, **(tags or {}))
        self.records.append(result)
        print(f" {result['wall_s']:6.1f} s" + (f"  ERROR {result['error']}" if "error" in result else ""),
              file=sys.stderr, flush=True)
        return result


def run_all(args: argparse.Namespace, root: Path) -> dict:
    shapes = ["t6"] if args.quick else (args.shapes.split(",") if args.shapes else list(common.SHAPES))
    run = Runner(root, args.threads)
    info = {
        "machine": common.machine_info(),
        "threads": args.threads,
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "git": common.git_revision(),
        "command": " ".join([Path(sys.executable).relative_to(common.REPO).as_posix()
                             if Path(sys.executable).is_relative_to(common.REPO) else sys.executable,
                             "benchmarks/run.py", *sys.argv[1:]]),
        "loadavg_before": os.getloadavg(),
        "quick": args.quick,
    }
    started = time.time()
    jax_peak = run("jax", "peak", reps=5)
    run.device = "gpu" if jax_peak.get("platform") == "gpu" else "cpu"  # HF then uses the same GPU
    peaks = [jax_peak, run("torch", "peak", reps=5)]
    for shape in shapes:
        reps = QUICK_REPS if args.quick else REPS[shape]
        prep = run("prepare", "checkpoint", shape, reps=1)
        if "error" in prep:
            continue
        # Cold start: an empty compile cache, then the same cache warm.
        cache = root / f"jax-cache-{shape}"
        shutil.rmtree(cache, ignore_errors=True)
        cache.mkdir(parents=True)
        env = {"FLAMINO_JAX_CACHE": str(cache)}
        run("flamino", "cold", shape, env=env, tags={"cache": "empty"})
        for _ in range(COLD_WARM_REPEATS):
            run("flamino", "cold", shape, env=env, tags={"cache": "warm"})
        for _ in range(COLD_WARM_REPEATS):
            run("hf", "cold", shape)
        # flamino twice per measurement: its default attention path (the fused kernel when
        # built) and the pure-JAX attention (kernel off), alternating with HF.
        for round_ in range(LATENCY_ROUNDS):
            for system, attention in SYSTEMS:
                run(system, "latency", shape, reps=reps["latency"], **_attention(attention, round=round_))
        for system, attention in SYSTEMS:
            extra = ["--no-recompile-check"] if shape == "t30" and system == "flamino" else []
            run(system, "varlen", shape, reps=reps["varlen"], extra=extra, **_attention(attention))
        part = ["--scan-batches", str(0 if args.full else SCAN_BATCHES.get(shape, 0))]
        rows = 16
        for system, attention in SYSTEMS:
            if system == "hf":  # HF gets the same rows per batch as flamino
                run(system, "scan", shape, reps=reps["scan"], extra=part + ["--scan-rows", str(rows)])
                continue
            flamino_scan = run(system, "scan", shape, reps=reps["scan"], extra=part, **_attention(attention))
            rows = flamino_scan.get("rows_per_batch", rows)
    peaks += [run("jax", "peak", reps=5), run("torch", "peak", reps=5)]
    info.update(loadavg_after=os.getloadavg(), total_s=time.time() - started, shapes=shapes)
    return {"info": info, "records": run.records}


# (system, attention path): flamino's default path, HF, flamino with the kernel off.
SYSTEMS = (("flamino", "auto"), ("hf", None), ("flamino", "xla"))


def _attention(attention: str | None, **tags) -> dict:
    """Runner keyword arguments for one flamino attention path (HF: tags only)."""
    if attention is None:
        return {"tags": tags} if tags else {}
    env = {} if attention == "auto" else {"FLAMINO_ATTENTION": attention}
    return {"env": env, "tags": {"attention": attention, **tags}}


def write_doc(block: str) -> None:
    text = DOC.read_text() if DOC.exists() else f"# Benchmarks\n\n{START}\n{END}\n"
    if START not in text or END not in text:
        text += f"\n{START}\n{END}\n"
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(f"{head}{START}\n{block}\n{END}{tail}")


def main() -> None:
    args = parse_args()
    if args.report:
        result = json.loads(Path(args.report).read_text())
        print(report(result))
        if args.write_doc:
            write_doc(report(result))
        return
    common.RESULTS.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="work-", dir=common.RESULTS))
    try:
        result = run_all(args, root)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = common.RESULTS / f"bench-{stamp}{'-quick' if args.quick else ''}.json"
    out.write_text(json.dumps(result, indent=1))
    block = report(result)
    print(block)
    print(f"\nraw results: {out.relative_to(common.REPO)}", file=sys.stderr)
    if args.write_doc if args.write_doc is not None else not args.quick:
        write_doc(block)
        print(f"table written to {DOC.relative_to(common.REPO)}", file=sys.stderr)


if __name__ == "__main__":
    main()
