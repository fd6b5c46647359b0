"""``make bench``: flamino vs HF transformers ``EsmForMaskedLM`` and esm.cpp on CPU, one table.

    .venv/bin/python benchmarks/run.py            # full run (t6, t12, t30, t33), writes docs/benchmarks.md
    .venv/bin/python benchmarks/run.py --quick    # t6 only, fewer repetitions, no doc update

Every measurement runs in its own process (``worker.py``) with the same thread count and the
same random weights, which this script writes once per shape as the Hub publishes ESM-2.
esm.cpp runs with the interpreter of its own environment (``--esmcpp-python``, default
``.venv-esmcpp/bin/python``, which ``make bench`` creates: esm-cpp pins numpy < 2, JAX needs
numpy >= 2); without it its rows are left out and the report says so. Results go to
``benchmarks/results/`` (JSON) and, for full runs, the table (``report.py``) goes between the
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
import accuracy  # noqa: E402
import common  # noqa: E402
import whole_process  # noqa: E402
from report import report  # noqa: E402

WORKER = Path(__file__).resolve().parent / "worker.py"
DOC = common.REPO / "docs" / "benchmarks.md"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"
ESMCPP_PYTHON = common.REPO / ".venv-esmcpp" / "bin" / "python"

# Repetitions per shape (median reported). Bigger shapes get fewer: a t30 varlen pass is ~1 min,
# a t33 one about four times that (and t33's varlen set is smaller: common.VARLEN_COUNTS).
REPS = {
    "t6": {"varlen": 3, "latency": 10, "scan": 1},
    "t12": {"varlen": 2, "latency": 5, "scan": 1},
    "t30": {"varlen": 1, "latency": 3, "scan": 1},
    "t33": {"varlen": 1, "latency": 2, "scan": 1},
}
QUICK_REPS = {"varlen": 1, "latency": 3, "scan": 1}
# Masked scan at t30/t33: time the first batches (t30: 4 = 64 of the 300 positions; t33: 1 = 16)
# and scale by FLOPs to all 300 (the other batches have the same shape); --full times every
# pass. The accuracy check uses the same timed positions.
SCAN_BATCHES = {"t30": 4, "t33": 1}
COLD_WARM_REPEATS = 2
# Latency: each system measured in this many rounds, alternating; the table keeps each
# system's better median. A single short measurement on a shared 2-core VM was sometimes
# 1.5x slower than the next one, for either system.
LATENCY_ROUNDS = 2
# t33: one round (its esm.cpp fp32 round alone is about 4 minutes on 2 cores), so that the shape
# fits in half an hour.
LATENCY_ROUNDS_AT = {"t33": 1}
# flamino with its fused kernel off (pure-JAX attention): at these shapes only (the kernel
# matters least at t33, whose run is long enough without a second flamino pass).
KERNEL_OFF_SHAPES = ("t6", "t12", "t30")
# flamino's opt-in fast precision ($FLAMINO_PRECISION): int8 (W8A8, any x86-64) at every shape,
# measured against esm.cpp's INT8 where that exists (common.INT8_SHAPES: its INT8 path is for 150M
# and larger). bf16 is measured by benchmarks/engine_paths.py, not here (time).
FAST_PRECISION = "int8"
# What one run measures: any subset (``--workloads``; ``make bench WORKLOADS=...``). "cold" is the
# start-up group: new process to the first embedding, and the whole-process runs (one protein
# against the JAX floor, 64 proteins). "gates": the fast precision against fp32 under esm.cpp's
# accuracy gates on the shared DMS assay (precision_gates.py), at GATE_SHAPES only by default
# (t30, where issue 40 measures them; at t33 they add about 5 minutes: `WORKLOADS=gates`).
WORKLOADS = ("cold", "latency", "varlen", "scan", "gates")
GATE_SHAPES = ("t30",)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="t6 only, fewer repetitions (development)")
    p.add_argument("--shapes", default=None, help=f"comma-separated subset of {','.join(common.SHAPES)}")
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                   help="threads for every system (default: all cores of this process)")
    p.add_argument("--workloads", default=",".join(WORKLOADS),
                   help=f"comma-separated subset of {','.join(WORKLOADS)} (default: all; gates at {','.join(GATE_SHAPES)})")
    p.add_argument("--full", action="store_true", help="time every masked-scan pass at every shape")
    p.add_argument("--esmcpp-python", default=str(ESMCPP_PYTHON),
                   help="interpreter of the environment with esm-cpp installed ('' leaves esm.cpp out)")
    p.add_argument("--write-doc", action=argparse.BooleanOptionalAction, default=None,
                   help="update docs/benchmarks.md (default: yes for full runs, no for --quick)")
    p.add_argument("--keep", action="store_true", help="keep the work folder (checkpoints, caches)")
    p.add_argument("--report", metavar="JSON", default=None,
                   help="only print the table of a saved results file (benchmarks/results/*.json)")
    return p.parse_args()


# --- running workers ---------------------------------------------------------------------------
class Runner:
    def __init__(self, root: Path, threads: int, esmcpp_python: str | None):
        self.root = root
        self.threads = threads
        self.esmcpp_python = esmcpp_python
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
        self.env.pop("ESM_NUM_THREADS", None)  # the worker sets it to --threads
        self.device = "cpu"  # where JAX runs: set from the first peak measurement

    def __call__(self, system: str, measurement: str, shape: str = "t6", *, reps: int = 3,
                 extra: list[str] | None = None, env: dict | None = None, tags: dict | None = None,
                 timeout: float = 3600) -> dict:
        python = self.esmcpp_python if system == "esmcpp" else sys.executable
        cmd = [python, str(WORKER), system, measurement, "--shape", shape, "--reps", str(reps),
               "--threads", str(self.threads), "--root", str(self.root), "--device", self.device,
               *(extra or [])]
        tags = dict(tags or {})
        label = f"{system} {measurement} {shape}" if system not in ("jax", "torch") else f"{system} {measurement}"
        label += "".join(f" [{tags[k]}]" for k in ("attention", "precision", "variant") if tags.get(k) not in (None, "auto"))
        if measurement in ("varlen", "scan"):  # kept for the accuracy check against HF
            outputs = self.root / "outputs" / (label.replace(" ", "-").replace("[", "").replace("]", "") + ".npz")
            cmd += ["--save-outputs", str(outputs)]
            tags["outputs"] = str(outputs)
        if system == "esmcpp":
            cmd += ["--variant", tags.get("variant", "fp32")]
        load = os.getloadavg()[0]
        print(f"[{time.strftime('%H:%M:%S')}] {label:40s} (load {load:.2f}) ...", end="", flush=True, file=sys.stderr)
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
                      load_at_start=load, **tags)
        self.records.append(result)
        print(f" {result['wall_s']:6.1f} s" + (f"  ERROR {result['error']}" if "error" in result else ""),
              file=sys.stderr, flush=True)
        return result


def systems(shape: str, esmcpp: bool) -> list[tuple[str, dict]]:
    """(system, tags) in the order they run at ``shape``: HF first (its outputs are the accuracy
    reference), flamino as users get it, esm.cpp FP32, then flamino with its kernel off, and
    where esm.cpp has INT8, flamino's opt-in fast precision and esm.cpp INT8."""
    out = [("hf", {}), ("flamino", {"attention": "auto"})]
    out += [("esmcpp", {"variant": "fp32"})] if esmcpp else []
    out += [("flamino", {"attention": "xla"})] if shape in KERNEL_OFF_SHAPES else []
    out += [("flamino", {"attention": "auto", "precision": FAST_PRECISION})]
    if shape in common.INT8_SHAPES:
        out += [("esmcpp", {"variant": "int8"})] if esmcpp else []
    return out


def _env(tags: dict) -> dict:
    """The environment of one flamino path (HF, esm.cpp: none)."""
    env = {}
    if tags.get("attention") not in (None, "auto"):
        env["FLAMINO_ATTENTION"] = tags["attention"]
    if tags.get("precision"):
        env["FLAMINO_PRECISION"] = tags["precision"]
    return env


def run_all(args: argparse.Namespace, root: Path) -> dict:
    shapes = ["t6"] if args.quick else (args.shapes.split(",") if args.shapes else list(common.SHAPES))
    workloads = set(args.workloads.split(","))
    if unknown := (set(shapes) - set(common.SHAPES)) | (workloads - set(WORKLOADS)):
        raise SystemExit(f"unknown shape or workload: {', '.join(sorted(unknown))} (shapes: {', '.join(common.SHAPES)}; "
                         f"workloads: {', '.join(WORKLOADS)})")
    esmcpp_python = args.esmcpp_python if args.esmcpp_python and Path(args.esmcpp_python).exists() else None
    run = Runner(root, args.threads, esmcpp_python)
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
        "workloads": sorted(workloads),
        "esmcpp": _esmcpp_version(esmcpp_python) if esmcpp_python else
        f"not run: no interpreter at {args.esmcpp_python or '(none given)'} (make bench creates .venv-esmcpp)",
    }
    started = time.time()
    common.write_workloads(root)
    jax_peak = run("jax", "peak", reps=5)
    run.device = "gpu" if jax_peak.get("platform") == "gpu" else "cpu"  # HF then uses the same GPU
    run("torch", "peak", reps=5)
    for shape in shapes:
        reps = QUICK_REPS if args.quick else REPS[shape]
        prep = run("prepare", "checkpoint", shape, reps=1)
        if "error" in prep:
            continue
        order = systems(shape, esmcpp_python is not None)
        if ("esmcpp", {"variant": "int8"}) in order and workloads & {"cold", "latency", "varlen", "scan"}:
            run("esmcpp", "quantize", shape, reps=1, tags={"variant": "int8"})
        if "cold" in workloads:
            _cold_starts(run, root, shape, order)
            if not args.quick or shape == "t6":
                run.records += whole_process.measure(shape, root, run.env, args.threads, esmcpp_python, _say)
        if "latency" in workloads:
            for round_ in range(LATENCY_ROUNDS_AT.get(shape, LATENCY_ROUNDS)):
                for system, tags in order:
                    run(system, "latency", shape, reps=reps["latency"], env=_env(tags), tags={**tags, "round": round_})
        if "varlen" in workloads:
            for system, tags in order:
                extra = ["--no-recompile-check"] if shape in ("t30", "t33") and system == "flamino" else []
                run(system, "varlen", shape, reps=reps["varlen"], extra=extra, env=_env(tags), tags=tags)
        if "scan" in workloads:
            # flamino's scan first: it tells the rows per batch, which HF and esm.cpp then use too.
            part = ["--scan-batches", str(0 if args.full else SCAN_BATCHES.get(shape, 0))]
            first = run("flamino", "scan", shape, reps=reps["scan"], extra=part, tags={"attention": "auto"})
            rows = ["--scan-rows", str(first.get("rows_per_batch", 16))]
            for system, tags in order:
                if (system, tags) != ("flamino", {"attention": "auto"}):
                    run(system, "scan", shape, reps=reps["scan"], extra=part + rows, env=_env(tags), tags=tags)
        asked = args.workloads != ",".join(WORKLOADS)  # gates named explicitly: at every shape asked
        if "gates" in workloads and (shape in GATE_SHAPES or asked):
            run.records.append(_gates(run, root, shape))
        _accuracy(run.records, shape, common.read_workloads(root)["scan"])
    run("jax", "peak", reps=5)
    run("torch", "peak", reps=5)
    info.update(loadavg_after=os.getloadavg(), total_s=time.time() - started, shapes=shapes)
    return {"info": info, "records": run.records}


def _gates(run: Runner, root: Path, shape: str) -> dict:
    """``precision_gates.py`` for the fast precision at ``shape``, on the run's checkpoint."""
    out = root / f"gates-{shape}.json"
    _say(f"gates {FAST_PRECISION} vs fp32 {shape} ...")
    t0 = time.time()
    proc = subprocess.run([sys.executable, str(Path(__file__).with_name("precision_gates.py")), "--shapes", shape,
                           "--precision", FAST_PRECISION, "--root", str(root), "--json", str(out)],
                          env=run.env, capture_output=True, text=True, cwd=common.REPO)
    if proc.returncode or not out.exists():
        return {"system": "flamino", "measurement": "gates", "shape": shape, "precision": FAST_PRECISION,
                "error": " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])}
    (row,) = json.loads(out.read_text())
    _say(f"gates {shape}: {'pass' if row['passes'] else 'FAIL'} ({time.time() - t0:.0f} s)")
    return {"system": "flamino", "measurement": "gates", "shape": shape, "precision": FAST_PRECISION, **row}


def _cold_starts(run: Runner, root: Path, shape: str, order: list[tuple[str, dict]]) -> None:
    """New process to the first embedding: flamino with an empty compile cache, then with that
    (now warm) cache; HF and esm.cpp (each of its variants) alternating."""
    cache = root / f"jax-cache-{shape}"
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    env = {"FLAMINO_JAX_CACHE": str(cache)}
    run("flamino", "cold", shape, env=env, tags={"cache": "empty"})
    peers = [(s, t) for s, t in order if s == "hf" or s == "esmcpp"]
    for _ in range(COLD_WARM_REPEATS):
        run("flamino", "cold", shape, env=env, tags={"cache": "warm"})
        for system, tags in peers:
            run(system, "cold", shape, tags=tags)


def _say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _accuracy(records: list[dict], shape: str, scan_sequence: str) -> None:
    """Every saved varlen and scan output of ``shape`` against HF's (``accuracy.compare``)."""
    for measurement in ("varlen", "scan"):
        ref = next((r for r in records if r["system"] == "hf" and r["measurement"] == measurement
                    and r["shape"] == shape and "error" not in r), None)
        if ref is None or not Path(ref["outputs"]).exists():
            continue
        for r in records:
            if (r["shape"] == shape and r["measurement"] == measurement and r["system"] != "hf"
                    and "error" not in r and Path(r.get("outputs", "")).is_file()):
                r["accuracy"] = accuracy.compare(Path(ref["outputs"]), Path(r["outputs"]), scan_sequence)


def _esmcpp_version(python: str) -> str:
    proc = subprocess.run([python, "-c", "import esm_cpp; print(esm_cpp.__version__, esm_cpp.current_isa())"],
                          capture_output=True, text=True)
    return proc.stdout.strip() or f"unusable: {proc.stderr.strip().splitlines()[-1:]}"


def heading(result: dict) -> str:
    """A recorded run's heading: the machine with its instruction sets first, so that runs from
    different machines, each its own table, are never read as one."""
    info, m = result["info"], result["info"]["machine"]
    return (f"### {m['cpu']} ({m['cpu_flags']}), {m['cores']} cores: {', '.join(info['shapes'])}, "
            f"{', '.join(info.get('workloads', WORKLOADS))} ({info['date'][:16].replace('T', ' ')})")


def write_doc(block: str) -> None:
    """Append one run's block at the end of the recorded runs (between the markers): each run
    keeps its own table and machine; earlier runs stay."""
    text = DOC.read_text() if DOC.exists() else f"# Benchmarks\n\n{START}\n{END}\n"
    if START not in text or END not in text:
        text += f"\n{START}\n{END}\n"
    head, rest = text.split(START, 1)
    runs, tail = rest.split(END, 1)
    DOC.write_text(f"{head}{START}{runs.rstrip()}\n\n{block}\n{END}{tail}")


def accelerator_platform() -> str | None:
    """The platform JAX runs on here when it is an accelerator (asked in a child process, so this
    one never opens the chip that ``accelerator.py`` then needs: one process may hold it)."""
    found = subprocess.run([sys.executable, "-c", "import jax; print(jax.default_backend())"],
                           capture_output=True, text=True)
    platform = found.stdout.strip().splitlines()[-1] if found.returncode == 0 and found.stdout.strip() else "cpu"
    return None if platform == "cpu" else platform


def run_on_accelerator(args) -> None:
    """``make bench`` on a TPU/GPU host: ``accelerator.py`` measures (every shape in both modes, a
    masked scan, the cached load, a whole process, HF on the host CPU) and its block, naming the
    chip, is written with the recorded runs (not with --quick: t6 alone, nothing written)."""
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = common.RESULTS / f"accelerator-{stamp}{'-quick' if args.quick else ''}.jsonl"
    shapes = "t6" if args.quick else "t6,t12,t30,t33,t36"
    extras = [] if args.quick else ["--extras", "start,hf"]
    subprocess.run([sys.executable, str(Path(__file__).parent / "accelerator.py"), "--shapes", shapes,
                    "--out", str(out), *extras], check=True)
    import accelerator

    block = (f"### Accelerator run {dt.datetime.now().isoformat(timespec='minutes')} "
             f"(git {common.git_revision()})\n\n{accelerator.report(out)}")
    print(block)
    if args.write_doc if args.write_doc is not None else not args.quick:
        write_doc(block)
        print(f"table written to {DOC.relative_to(common.REPO)}", file=sys.stderr)


def main() -> None:
    args = parse_args()
    if not args.report and accelerator_platform() is not None:
        common.RESULTS.mkdir(parents=True, exist_ok=True)
        run_on_accelerator(args)
        return
    if args.report:
        result = json.loads(Path(args.report).read_text())
        print(report(result))
        if args.write_doc:
            write_doc(heading(result) + "\n\n" + report(result))
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
    block = heading(result) + "\n\n" + report(result)
    print(block)
    print(f"\nraw results: {out.relative_to(common.REPO)}", file=sys.stderr)
    if args.write_doc if args.write_doc is not None else not args.quick:
        write_doc(block)
        print(f"table written to {DOC.relative_to(common.REPO)}", file=sys.stderr)


if __name__ == "__main__":
    main()
