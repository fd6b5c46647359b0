"""The model's dense layers, alone and as the model runs them, in JAX (XLA:CPU) and torch.

    .venv/bin/python benchmarks/dense_micro.py [--shape t6] [--tokens 4864] [--rounds 3] [--bf16]

For one preset's shapes on a (tokens, D) activation: an isolated ``jnp.dot`` / ``torch.mm`` of
each projection's shape, then the same dot with what the model fuses around it (bias, exact
GELU, residual, LayerNorm), then a whole MLP block. Same threads for both (all cores of the
process); rounds alternate. Prints GFLOP/s (matmul FLOPs only) per wall second, median of the
rounds, and per CPU-second (so a shared machine's lost time shows). A development tool that
answers "why are dots inside the model slower than an isolated dot" (docs/benchmarks.md).
``--bf16`` adds each projection's dot on bf16 operands: in JAX with fp32 accumulation and an
fp32 result, exactly what flamino's opt-in bf16 mode runs (``precision.bf16_dot_general``); in
torch ``mm`` of bf16 tensors (oneDNN; fp32 accumulation, bf16 result), a reference for what the
CPU's bf16 instructions (AVX512_BF16, AMX) can give.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from flamino_core.model.config import ESM2Config  # noqa: E402
from flamino_core.model.precision import bf16_dot_general  # noqa: E402

SHAPES = {"t6": "esm2_t6_8M_UR50D", "t12": "esm2_t12_35M_UR50D", "t30": "esm2_t30_150M_UR50D"}


def timed(fn, reps: int) -> tuple[float, float]:
    fn()
    fn()
    walls, cpus = [], []
    for _ in range(reps):
        c0, t0 = os.times(), time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
        c1 = os.times()
        cpus.append(c1.user + c1.system - c0.user - c0.system)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", default="t6", choices=list(SHAPES))
    p.add_argument("--tokens", type=int, default=None, help="rows of the activation (default: 16 x 304 for "
                   "t6/t12, 4 x 304 for t30: a masked-scan batch)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--bf16", action="store_true", help="add the dots on bf16 operands")
    args = p.parse_args()
    cfg = ESM2Config.preset(SHAPES[args.shape])
    D, F = cfg.embed_dim, cfg.ffn_dim
    T = args.tokens or (4 * 304 if args.shape == "t30" else 16 * 304)
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    rng = np.random.default_rng(0)
    arr = lambda *shape: rng.normal(size=shape).astype(np.float32) * 0.05  # noqa: E731
    x, h, w_qkv, w1, w2, b_d, b_f = arr(T, D), arr(T, F), arr(D, D), arr(D, F), arr(F, D), arr(D), arr(F)
    gamma, beta = arr(D) + 1, arr(D)
    jx = {k: jnp.asarray(v) for k, v in dict(x=x, h=h, w_qkv=w_qkv, w1=w1, w2=w2, b_d=b_d, b_f=b_f,
                                             gamma=gamma, beta=beta).items()}
    tx = {k: torch.from_numpy(np.asarray(v)) for k, v in jx.items()}

    def ln_j(a):
        mean = a.mean(-1, keepdims=True)
        var = ((a - mean) ** 2).mean(-1, keepdims=True)
        return (a - mean) / jnp.sqrt(var + 1e-5) * jx["gamma"] + jx["beta"]

    gelu_j = lambda a: jax.nn.gelu(a, approximate=False)  # noqa: E731
    gelu_t = torch.nn.functional.gelu
    ln_t = lambda a: torch.nn.functional.layer_norm(a, (D,), tx["gamma"], tx["beta"], 1e-5)  # noqa: E731
    cases = {
        # name: (matmul FLOPs, jax fn of the arrays, torch fn)
        f"dot {T}x{D}x{D} (q/k/v/out)": (2 * T * D * D, lambda a: a["x"] @ a["w_qkv"], lambda a: a["x"] @ a["w_qkv"]),
        f"dot {T}x{D}x{F} (fc1)": (2 * T * D * F, lambda a: a["x"] @ a["w1"], lambda a: a["x"] @ a["w1"]),
        f"dot {T}x{F}x{D} (fc2)": (2 * T * F * D, lambda a: a["h"] @ a["w2"], lambda a: a["h"] @ a["w2"]),
        "fc1 + bias + erf GELU": (2 * T * D * F, lambda a: gelu_j(a["x"] @ a["w1"] + a["b_f"]),
                                  lambda a: gelu_t(torch.addmm(a["b_f"], a["x"], a["w1"]))),
        "fc2 + bias + residual": (2 * T * F * D, lambda a: a["x"] + (a["h"] @ a["w2"] + a["b_d"]),
                                  lambda a: a["x"] + torch.addmm(a["b_d"], a["h"], a["w2"])),
        "MLP block: LN, fc1, GELU, fc2, residual": (
            4 * T * D * F,
            lambda a: a["x"] + gelu_j(ln_j(a["x"]) @ a["w1"] + a["b_f"]) @ a["w2"] + a["b_d"],
            lambda a: a["x"] + torch.addmm(a["b_d"], gelu_t(torch.addmm(a["b_f"], ln_t(a["x"]), a["w1"])), a["w2"]),
        ),
    }
    if args.bf16:
        dot16 = lambda a, b: bf16_dot_general(a, b, (((1,), (0,)), ((), ())))  # noqa: E731
        bf = lambda t: t.bfloat16()  # noqa: E731
        pairs = {"q/k/v/out": ("x", "w_qkv", D, D), "fc1": ("x", "w1", D, F), "fc2": ("h", "w2", F, D)}
        for label, (a_name, b_name, k_dim, n_dim) in pairs.items():
            tb = {a_name: bf(tx[a_name]), b_name: bf(tx[b_name])}
            cases[f"bf16 dot {T}x{k_dim}x{n_dim} ({label})"] = (
                2 * T * k_dim * n_dim,
                lambda a, a_name=a_name, b_name=b_name: dot16(a[a_name], a[b_name]),
                lambda a, tb=tb, a_name=a_name, b_name=b_name: tb[a_name] @ tb[b_name],
            )
    print(f"{args.shape}: {T} tokens, D={D}, F={F}, {torch.get_num_threads()} threads, "
          f"load average {os.getloadavg()[0]:.2f}", file=sys.stderr)
    print("| case | JAX GFLOP/s (per CPU-s) | torch GFLOP/s (per CPU-s) |")
    print("|---|---|---|")
    for name, (flops, fj, ft) in cases.items():
        jitted = jax.jit(fj)
        runs = {"jax": [], "torch": []}
        with torch.inference_mode():
            for _ in range(args.rounds):
                runs["jax"].append(timed(lambda: jitted(jx).block_until_ready(), args.reps))
                runs["torch"].append(timed(lambda: ft(tx), args.reps))
        cell = lambda r: (f"{flops / statistics.median(w for w, _ in r) / 1e9:.1f} "  # noqa: E731
                          f"({flops / statistics.median(c for _, c in r) / 1e9:.1f})")
        print(f"| {name} | {cell(runs['jax'])} | {cell(runs['torch'])} |", flush=True)


if __name__ == "__main__":
    main()
