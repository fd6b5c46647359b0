"""Whole-process rows of ``make bench``: a command from start to exit, as a user waits for it.

- **one protein**: ``flamino embed`` of the shortest real protein of ../shared/fasta (37
  residues), from warm caches (converted weights and compiled code from an untimed first run),
  beside the **JAX floor** (a new Python process that imports JAX and runs one operation: what
  no JAX program can start faster than; also ended with ``os._exit`` as ``flamino`` ends, so
  that skipping the teardown is seen apart), HF transformers' and esm.cpp's scripts for the
  same job (``peers/``);
- **64 proteins**: the varlen set with ``--include mean,per_tok,logits`` (flamino and HF).

The commands run in turn, round after round (so a slower minute of a shared machine hits all of
them), each as a child of this process; ``os.wait4`` gives its wall time, CPU time and peak
RSS. The medians go in the table.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import common

PEERS = Path(__file__).resolve().parent / "peers"
FLOOR = "import jax, jax.numpy as jnp; jnp.ones(3).block_until_ready()"
# The floor ended as the flamino command ends (os._exit, no interpreter teardown): beside the
# floor itself, so that the saving of skipping the teardown is not credited to the rest.
FLOOR_NO_TEARDOWN = "import os, jax, jax.numpy as jnp; jnp.ones(3).block_until_ready(); os._exit(0)"
ROUNDS = {"one": 5, "64": 3}
JOBS_AT = {"t6": ("one", "64"), "t12": ("one",)}  # shapes with whole-process rows


def fasta_files(root: Path) -> dict[str, Path]:
    """The one-protein and 64-protein inputs, as FASTA files in the work folder."""
    records = common.real_records()
    shortest = min(records, key=lambda r: len(r[1])) if records else ("random", common.fixed_protein(40))
    one = root / "one-protein.fa"
    one.write_text(f">{shortest[0]}\n{shortest[1]}\n")
    many = root / "varlen-64.fa"
    many.write_text("".join(f">p{i}\n{s}\n" for i, s in enumerate(common.varlen_proteins(root, common.VARLEN_COUNT))))
    return {"one": one, "64": many}


def commands(job: str, fasta: Path, checkpoint: Path, out: Path, esmcpp_python: str | None) -> dict[str, list[str]]:
    include = "mean,per_tok" if job == "one" else "mean,per_tok,logits"
    cmds = {
        "flamino": [str(Path(sys.executable).with_name("flamino")), "embed", str(fasta), "-m", str(checkpoint),
                    "-o", str(out / "flamino.npz"), "--include", include],
        "hf": [sys.executable, str(PEERS / "hf_embed.py"), str(fasta), str(checkpoint), str(out / "hf.npz"),
               "--include", include],
    }
    if job == "one":
        cmds["floor"] = [sys.executable, "-c", FLOOR]
        cmds["floor_no_teardown"] = [sys.executable, "-c", FLOOR_NO_TEARDOWN]
        if esmcpp_python:
            cmds["esmcpp"] = [esmcpp_python, str(PEERS / "esmcpp_embed.py"), str(fasta), str(checkpoint),
                              str(out / "esmcpp.npz"), "--include", include]
    return cmds


def run_once(cmd: list[str], env: dict, cpus: list[int]) -> dict:
    """One run of ``cmd`` on ``cpus`` (as ``worker.py`` pins itself): wall and CPU time, peak RSS."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=lambda: os.sched_setaffinity(0, cpus))
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    proc.stderr.close()
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mib": usage.ru_maxrss / 1024,
            "exit": proc.returncode, "stderr_tail": err.strip().splitlines()[-2:]}


def measure(shape: str, root: Path, env: dict, threads: int, esmcpp_python: str | None, say) -> list[dict]:
    """Every whole-process job of ``shape``: one untimed run of each command (fills the caches),
    then the timed rounds. Returns one record per (system, job)."""
    records = []
    inputs = fasta_files(root)
    checkpoint = common.checkpoint_dir(shape, root)
    out = root / "whole-process"
    out.mkdir(exist_ok=True)
    cpus = sorted(os.sched_getaffinity(0))[:threads]
    env = {**env, "FLAMINO_JAX_CACHE": str(root / f"jax-cache-whole-{shape}"),
           **{var: str(threads) for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "ESM_NUM_THREADS")}}
    for job in JOBS_AT.get(shape, ()):
        cmds = commands(job, inputs[job], checkpoint, out, esmcpp_python)
        runs: dict[str, list[dict]] = {name: [] for name in cmds}
        for name, cmd in cmds.items():
            warm = run_once(cmd, env, cpus)  # untimed: compiles and caches what later runs reuse
            if warm["exit"] != 0:
                runs[name] = [warm]
        load = os.getloadavg()[0]
        say(f"whole process {shape} {job}: {', '.join(cmds)} x {ROUNDS[job]} rounds (load {load:.2f})")
        for _ in range(ROUNDS[job]):
            for name, cmd in cmds.items():
                if not runs[name] or runs[name][-1]["exit"] == 0:
                    runs[name].append(run_once(cmd, env, cpus))
        for name, done in runs.items():
            ok = [r for r in done if r["exit"] == 0]
            record = {"system": name, "measurement": "process", "shape": shape, "job": job, "threads": threads,
                      "load_at_start": load, "proteins": inputs[job].read_text().count(">"),
                      "residues": sum(len(line) for line in inputs[job].read_text().splitlines() if line[:1] != ">")}
            if len(ok) < len(done) or not ok:
                record["error"] = f"exit {done[-1]['exit']}: " + " | ".join(done[-1]["stderr_tail"])
            else:
                record.update(median_s=statistics.median(r["wall_s"] for r in ok), times_s=[r["wall_s"] for r in ok],
                              cpu_s=statistics.median(r["cpu_s"] for r in ok),
                              peak_rss_mib=max(r["peak_rss_mib"] for r in ok))
            records.append(record)
    return records
