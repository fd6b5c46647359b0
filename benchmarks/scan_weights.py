"""The cost of running layers with ``lax.scan`` over stacked weights (how ``ESM2`` runs its
layers): XLA:CPU copies each layer's weight slices out of the stacked arrays on every step.

    .venv/bin/python benchmarks/scan_weights.py [--rounds 5]

30 layers of a t30-sized MLP (D=640, F=2560) on 112 tokens, three ways, alternating rounds:
``lax.scan`` over stacked weights, a Python loop over slices of the stacked arrays, and a Python
loop over separate arrays (no slicing, no copies). Prints median and range of the round medians.
A development tool for docs/benchmarks.md ("Dense matmuls").
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

LAYERS, D, F, TOKENS = 30, 640, 2560, 112


def layer(x, weights):
    w1, w2 = weights
    return x + jax.nn.gelu(x @ w1) @ w2, None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    w1 = jnp.asarray(rng.normal(size=(LAYERS, D, F)).astype(np.float32) * 0.02)
    w2 = jnp.asarray(rng.normal(size=(LAYERS, F, D)).astype(np.float32) * 0.02)
    x = jnp.asarray(rng.normal(size=(TOKENS, D)).astype(np.float32))
    separate = ([w1[i] for i in range(LAYERS)], [w2[i] for i in range(LAYERS)])

    def sliced(x, w1, w2):
        for i in range(LAYERS):
            x, _ = layer(x, (w1[i], w2[i]))
        return x

    def listed(x, w1s, w2s):
        for a, b in zip(w1s, w2s):
            x, _ = layer(x, (a, b))
        return x

    scan = jax.jit(lambda x, w1, w2: jax.lax.scan(layer, x, (w1, w2))[0])
    calls = {
        "lax.scan over stacked weights": lambda: scan(x, w1, w2),
        "loop over slices of the stacked weights": (lambda f: lambda: f(x, w1, w2))(jax.jit(sliced)),
        "loop over separate arrays": (lambda f: lambda: f(x, *separate))(jax.jit(listed)),
    }
    for call in calls.values():
        call().block_until_ready()
    medians = {name: [] for name in calls}
    for _ in range(args.rounds):
        for name, call in calls.items():
            times = []
            for _ in range(5):
                start = time.perf_counter()
                call().block_until_ready()
                times.append(time.perf_counter() - start)
            medians[name].append(statistics.median(times) * 1e3)
    for name, ms in medians.items():
        print(f"{name}: {statistics.median(ms):.1f} ms ({min(ms):.1f}-{max(ms):.1f})")


if __name__ == "__main__":
    main()
