"""A warm one-protein ``flamino embed`` against the JAX floor, in one run (issue 52 item 4).

Whole processes, interleaved rounds (floor, flamino, floor, flamino, ...), each timed by
``whole_process.run_once`` (wall and CPU time from ``os.wait4``); the best of the rounds and
the median are printed, and flamino's distance to the floor. The floor is ``import jax`` and
one operation, ended with ``os._exit`` as ``flamino`` ends (``whole_process.FLOOR_NO_TEARDOWN``).
One untimed run of each first fills the caches (converted weights, compiled code). ``--other
DIR`` adds ``flamino embed`` with the ``flamino_core`` of another checkout (``git worktree add
DIR COMMIT``) first on ``PYTHONPATH``, for a before/after in the same run. Usage::

    .venv/bin/python benchmarks/start_floor.py CHECKPOINT_DIR FASTA [--rounds 3] [--other DIR]

CHECKPOINT_DIR: a t6 checkpoint as ``make bench`` writes it (``common.write_checkpoint``), or
any model identifier; FASTA: one short protein (docs/benchmarks.md "The start of a one-protein
embed" has the commands that make both).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from whole_process import FLOOR_NO_TEARDOWN, run_once

CPUS = sorted(os.sched_getaffinity(0))


def timed(name: str, cmd: list[str], env: dict) -> tuple[float, float]:
    run = run_once(cmd, env, CPUS)
    if run["exit"]:
        raise SystemExit(f"{name} failed: {run['stderr_tail']}")
    return run["wall_s"], run["cpu_s"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", help="checkpoint folder or model identifier")
    p.add_argument("fasta")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--other", help="another checkout's root, its flamino_core timed beside this one's")
    args = p.parse_args()
    out = Path(tempfile.mkdtemp(prefix="start-floor-"))
    embed = ["embed", args.fasta, "-m", args.model, "-o", str(out / "one.npz"), "--include", "mean,per_tok"]
    env = dict(os.environ)
    commands = {"floor": ([sys.executable, "-c", FLOOR_NO_TEARDOWN], env),
                "flamino embed": ([str(Path(sys.executable).with_name("flamino")), *embed], env)}
    if args.other:
        other = str(Path(args.other).resolve())
        commands["flamino embed (other)"] = (
            [sys.executable, "-c", "from flamino_core.cli import run; run()", *embed],
            {**env, "PYTHONPATH": other + os.pathsep + env.get("PYTHONPATH", "")})
    for name, (cmd, run_env) in commands.items():  # untimed: fills the caches
        timed(name, cmd, run_env)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    load = os.getloadavg()[0]
    for _ in range(args.rounds):
        for name, (cmd, run_env) in commands.items():
            times[name].append(timed(name, cmd, run_env))
    print(f"{args.rounds} rounds, load average {load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end")
    best_floor = min(w for w, _ in times["floor"])
    for name, runs in times.items():
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        beyond = "" if name == "floor" else f"  best - floor's best {min(walls) - best_floor:+.2f} s"
        print(f"{name:24s} wall best {min(walls):.2f} s, median {statistics.median(walls):.2f} s;  "
              f"CPU best {min(cpus):.2f} s, median {statistics.median(cpus):.2f} s{beyond}")


if __name__ == "__main__":
    main()
