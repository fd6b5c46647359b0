"""The start-up cost of ml_dtypes 0.7.0 (docs/benchmarks.md "ml_dtypes, pinned below 0.7").

Whole processes, interleaved rounds: the JAX floor (import JAX, one op, ``os._exit``) and
``flamino embed`` of one protein from the warm cache, each with the installed ml_dtypes and with
another version put first on ``PYTHONPATH``. Wall and CPU time of each child from ``os.wait4``;
medians. Usage::

    .venv/bin/pip install --no-deps --target /tmp/mld07 ml_dtypes==0.7.0
    .venv/bin/python benchmarks/import_floor.py CHECKPOINT_DIR FASTA --other /tmp/mld07 [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

from whole_process import FLOOR_NO_TEARDOWN as FLOOR
from whole_process import run_once

CPUS = sorted(os.sched_getaffinity(0))


def timed(cmd: list[str], env: dict) -> tuple[float, float]:
    """Wall and CPU seconds of one run (``whole_process.run_once``, as ``make bench`` times them)."""
    run = run_once(cmd, env, CPUS)
    if run["exit"]:
        raise SystemExit(f"{cmd[:2]} failed: {run['stderr_tail']}")
    return run["wall_s"], run["cpu_s"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoint")
    p.add_argument("fasta")
    p.add_argument("--other", required=True, help="folder holding the other ml_dtypes (pip --target)")
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args()
    flamino = str(Path(sys.executable).with_name("flamino"))
    embed = [flamino, "embed", args.fasta, "-m", args.checkpoint, "-o", str(Path(args.fasta).with_suffix(".npz")),
             "--include", "mean,per_tok"]
    installed, other = dict(os.environ), {**os.environ, "PYTHONPATH": args.other}
    commands = {"floor, installed": ([sys.executable, "-c", FLOOR], installed),
                "flamino embed, installed": (embed, installed),
                "floor, other": ([sys.executable, "-c", FLOOR], other),
                "flamino embed, other": (embed, other)}
    for cmd, env in commands.values():  # untimed: warm caches (converted weights, compiled code)
        timed(cmd, env)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(args.rounds):
        for name, (cmd, env) in commands.items():
            times[name].append(timed(cmd, env))
    print(f"load average {os.getloadavg()[0]:.2f}")
    for name, runs in times.items():
        print(f"{name:26s} wall {statistics.median(w for w, _ in runs):.2f} s  "
              f"CPU {statistics.median(c for _, c in runs):.2f} s")


if __name__ == "__main__":
    main()
