"""``flamino batch`` on one node and on two nodes of a local Ray cluster: residues/s per node.

    .venv/bin/python benchmarks/scale_nodes.py [--model random:esm2_t12_35M_UR50D] [--rounds 2]
    .venv/bin/python benchmarks/scale_nodes.py --probe --model random:esm2_t33_650M_UR50D --proteins 16

The nodes are ``ray start`` processes on this machine (``tests/local_cluster.py``), each on
cores of its own, one actor per core; the input is the 64 real proteins of ``make bench``'s
varlen set (``common.varlen_workload``), in shards of 4. Each configuration runs once untimed
(compiles, fills the caches) and then ``--rounds`` times; the numbers are read from the job's
manifest: per node, the residues it computed, its actors' seconds of computing them and their
CPU seconds (``runs[-1]["nodes"]``), and the compute stage's wall time. Residues per
CPU-second is the figure a shared machine disturbs least: on a node that has its cores to
itself, CPU seconds and wall seconds are the same. Prints one JSON line per run and a summary;
docs/scale.md quotes it.

``--probe`` measures what one single-core actor computes without Ray (for a model too large
to load twice on this machine): the engine in this process, pinned to one core, on the first
``--proteins`` proteins of the set, once to compile and then timed; residues/s and residues
per CPU-second.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
import common  # noqa: E402
from local_cluster import LocalCluster  # noqa: E402


def run_job(fasta: Path, out: Path, model: str, address: str, actors: int, env: dict) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "flamino_core.cli", "batch", "embed", str(fasta), "-m", model, "-o", str(out),
               "--shard-size", "4", "--include", "mean", "--ray-address", address, "--actors", str(actors)]
    start = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=7200)
    if proc.returncode != 0:
        raise SystemExit(f"flamino batch failed: {proc.stderr[-3000:]}")
    run = json.loads((out / "manifest.json").read_text())["runs"][-1]
    return {"command_s": time.monotonic() - start, "stage_s": run["seconds"], "residues": run["residues"],
            "nodes": run["nodes"], "load": os.getloadavg()[0]}


def probe(model: str, proteins: int, rounds: int) -> None:
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:1])  # before JAX sizes its thread pool
    from flamino_core import Engine, load_weights

    seqs = common.varlen_workload()[:proteins]
    residues = sum(len(s) for s in seqs)
    start = time.monotonic()
    engine = Engine(load_weights(model))
    engine.run(seqs, repr_layers=(-1,), logits=False)  # compiles every shape of this set
    print(f"{model}: loaded and compiled in {time.monotonic() - start:.0f} s", flush=True)
    for _ in range(rounds):
        wall, cpu = time.monotonic(), time.process_time()
        engine.run(seqs, repr_layers=(-1,), logits=False)
        wall, cpu = time.monotonic() - wall, time.process_time() - cpu
        print(json.dumps({"model": model, "proteins": proteins, "residues": residues, "seconds": wall,
                          "cpu_seconds": cpu, "residues_per_s": residues / wall,
                          "residues_per_cpu_s": residues / cpu, "load": os.getloadavg()[0]}), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="random:esm2_t12_35M_UR50D")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--probe", action="store_true", help="one single-core engine in this process, no Ray")
    p.add_argument("--proteins", type=int, default=64, help="--probe: the first N proteins of the set")
    args = p.parse_args()
    if args.probe:
        return probe(args.model, args.proteins, args.rounds)
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        raise SystemExit("needs two cores: one per node")
    work = Path(tempfile.mkdtemp(prefix="scale-", dir=common.RESULTS if common.RESULTS.is_dir() else None))
    fasta = work / "varlen-64.fa"
    fasta.write_text("".join(f">p{i}\n{s}\n" for i, s in enumerate(common.varlen_workload())))
    env = {**os.environ, "FLAMINO_CACHE": str(work / "cache"),
           # Both actors up before the first shard, so that each node gets its share from the start.
           "RAY_DATA_DEFAULT_WAIT_FOR_MIN_ACTORS_S": "1800"}
    results = {}
    try:
        for name, cpu_sets in (("1 node x 1 core", [cores[:1]]), ("2 nodes x 1 core", [cores[:1], cores[1:2]])):
            with LocalCluster(cpu_sets, env) as cluster:
                run_job(fasta, work / "out", args.model, cluster.address, len(cpu_sets), cluster.env)  # warm-up
                runs = []
                for _ in range(args.rounds):
                    runs.append(run_job(fasta, work / "out", args.model, cluster.address, len(cpu_sets), cluster.env))
                    print(json.dumps({"config": name, **runs[-1]}), flush=True)
            results[name] = runs
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nmodel {args.model}, {results['1 node x 1 core'][0]['residues']:,} residues per run")
    for name, runs in results.items():
        stage = statistics.median(r["residues"] / r["stage_s"] for r in runs)
        per_node = [n["residues"] / n["seconds"] for r in runs for n in r["nodes"].values()]
        per_cpu = [n["residues"] / n["cpu_seconds"] for r in runs for n in r["nodes"].values()]
        print(f"{name}: {stage:.0f} residues/s for the job; per node {statistics.median(per_node):.0f} residues/s "
              f"of computing, {statistics.median(per_cpu):.0f} residues per CPU-second "
              f"(load {min(r['load'] for r in runs):.1f} to {max(r['load'] for r in runs):.1f})")


if __name__ == "__main__":
    main()
