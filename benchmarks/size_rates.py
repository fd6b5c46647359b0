"""Seconds per MFLOP of model passes across architectures of different sizes on this machine: what
``jobs/pass_cost.py``'s first guess for an architecture never measured here (``Rates.seconds``)
is fitted to (issue 50 item 2: one small model's rate per MFLOP, borrowed by the 8M model, was
3.2x its own).

    .venv/bin/python benchmarks/size_rates.py [--models random:tiny random:esm2_t6_8M_UR50D ...]
        [--lengths 64 160 300] [--repeat 3]

For each model and sequence length: masked passes (``Engine.compute_masked``, full passes of
``Engine.masked_pass_shape``) and unmasked passes keeping every layer and the logits (what
``passes.record_outputs`` asks of ``Engine.run``), each compiled by a first call, then timed
``--repeat`` times (the fastest kept: other processes only add). Prints one JSON line per
measurement: the work (``pass_cost.row_work``), the batches, the seconds, and the rate per MFLOP
net of ``pass_cost.BATCH_FIXED_S`` per batch, as ``MeteredEngine`` records it. Untrained weights
of published shapes (``random:``): the times are this machine's for those shapes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODELS = ("random:tiny", "random:tiny-esmc", "random:esm2_t6_8M_UR50D", "random:esm2_t12_35M_UR50D",
          "random:esm2_t30_150M_UR50D")
RESIDUES = "ACDEFGHIKLMNPQRSTVWY"


def sequence(length: int, seed: int = 0) -> str:
    return "".join(RESIDUES[(i * 7 + seed * 3 + i * i) % 20] for i in range(length))


def best(call, repeat: int) -> float:
    call()  # compiles
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=MODELS)
    parser.add_argument("--lengths", nargs="+", type=int, default=(64, 160, 300))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--budget", type=float, default=2e5,
                        help="MFLOP of masked work a measurement aims at (fewer passes for big models)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from flamino_core.jobs import pass_cost
    from flamino_core.engine.engine import Engine
    from flamino_core.weights.loading import load_weights

    for model in args.models:
        engine = Engine(load_weights(model))
        c = engine.config
        for length in args.lengths:
            seq = sequence(length)
            rows, width = engine.masked_pass_shape(length)
            per_pass = rows * pass_cost.row_work(c, width, 1)
            passes = max(1, min(4, int(args.budget // per_pass)))
            positions = list(range(min(length, rows * passes)))
            took = best(lambda: engine.compute_masked(seq, positions), args.repeat)
            report(model, c, "masked", length,
                   lambda: pass_cost.masked_batches(engine, [(length, len(positions))], chunk=None), took)
            records = [sequence(length, seed) for seed in range(min(rows, 32))]  # a batch or two
            took = best(lambda: engine.run(records, repr_layers=tuple(range(c.num_layers + 1)), logits=True),
                        args.repeat)
            report(model, c, "unmasked", length,
                   lambda: pass_cost.unmasked_batches(engine, [len(s) for s in records], grouped=False), took)


def parts(plan, kind: str) -> tuple[list, float, float]:
    """(batches, matmul MFLOP, tokens x layers) of a plan (``plan()``: its batches), apart:
    planned once with no per-token-layer term and once with one MFLOP a token-layer."""
    from flamino_core.jobs import pass_cost

    kept = dict(pass_cost.TOKEN_LAYER_MFLOP)
    try:
        pass_cost.TOKEN_LAYER_MFLOP[kind] = 0.0
        matmul = plan()
        pass_cost.TOKEN_LAYER_MFLOP[kind] = 1.0
        token_layers = sum(w for _, w in plan()) - sum(w for _, w in matmul)
    finally:
        pass_cost.TOKEN_LAYER_MFLOP.update(kept)
    return matmul, sum(w for _, w in matmul), token_layers


def report(model, config, kind, length, plan, seconds) -> None:
    from flamino_core.jobs import pass_cost

    batches, work, token_layers = parts(plan, kind)
    net = max(seconds - len(batches) * pass_cost.BATCH_FIXED_S, pass_cost.MIN_WORK_SHARE * seconds)
    print(json.dumps({"model": model, "layers": config.num_layers, "dim": config.embed_dim, "kind": kind,
                      "length": length, "batches": len(batches), "mflop": round(work, 1),
                      "token_layers": token_layers, "seconds": round(seconds, 4),
                      "s_per_mflop": float(f"{net / work:.3g}"), "load": os.getloadavg()[0]}), flush=True)


if __name__ == "__main__":
    main()
