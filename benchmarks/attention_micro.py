"""Attention alone: the fused kernel against the pure-JAX path, as the model calls them.

    .venv/bin/python benchmarks/attention_micro.py [--rounds 5] [--shapes t6:16x304,t30:4x304]
        [--variants avx512,avx2]

Both start from q, k, v in the (B, T, H, hd) layout the projections produce and end in the
(B, T, D) layout ``out_proj`` reads (the pure-JAX path transposes to heads-major and back and
applies rotary in XLA; the kernel does it all in one call). The two are timed in alternating
rounds (this machine is shared; one round alone can be off by 1.5x); the table gives the
median and the spread (min-max) of the per-round medians. Rows are padded like real batches:
row i of B holds T - 7 i tokens. ``--variants`` times the kernel once per instruction-set
variant (``fused_attention.status().variants``: avx512, avx2, ...) instead of the default one.
Speedup: the first column's time over each later column's (``--variants avx2,avx512``: how
much faster AVX-512 is). A development tool: not
part of ``make bench``.
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

from flamino_core.model import fused_attention  # noqa: E402
from flamino_core.model.attention import AttentionImpl, Positions, Spans, attend  # noqa: E402
from flamino_core.model.rotary import RotaryEmbedding  # noqa: E402

HEADS = {"t6": (20, 16), "t12": (20, 24), "t30": (20, 32), "t33": (20, 64), "t48": (40, 128)}
DEFAULT = "t6:16x304,t6:1x304,t6:1x1008,t6:8x1008,t12:16x304,t30:4x304,t30:1x1008,t33:2x304"


def inputs(batch: int, tokens: int, heads: int, head_dim: int):
    rng = np.random.default_rng(0)
    q, k, v = (jnp.asarray(rng.normal(size=(batch, tokens, heads, head_dim)), jnp.float32) for _ in range(3))
    lengths = np.maximum(tokens - 7 * np.arange(batch), 1)
    bias = jnp.asarray(np.where(np.arange(tokens)[None] < lengths[:, None], 0.0, -np.inf), jnp.float32)
    rot = RotaryEmbedding(head_dim, 10000.0)
    return q, k, v, bias, rot


def _path(name: str):
    """``attention.attend`` with one implementation, on right-padded rows, as the model calls it."""

    def run(q, k, v, bias, inv_freq):
        batch, tokens, heads, head_dim = q.shape
        angles = jnp.arange(tokens, dtype=jnp.float32)[:, None] * inv_freq
        positions = jnp.broadcast_to(jnp.arange(tokens), (batch, tokens))
        real = jnp.isfinite(bias).sum(axis=1, keepdims=True).astype(jnp.int32)
        spans = Spans(jnp.zeros_like(positions), jnp.broadcast_to(real, (batch, tokens)), shared=True)
        out = attend(q, k, v, Positions(positions, positions), spans, AttentionImpl(name),
                     table=(jnp.cos(angles), jnp.sin(angles)), scale=head_dim**-0.5)
        return out.reshape(batch, tokens, heads * head_dim)

    return run


xla_path, kernel_path = _path("xla"), _path("fused")


def variant_call(name: str, fn, call_args):
    """The first call of a path (which traces it), with its kernel variant set if it has one."""
    if not name.startswith("kernel "):
        return fn(*call_args)
    saved = os.environ.get(fused_attention.VARIANT_ENV)
    os.environ[fused_attention.VARIANT_ENV] = name.removeprefix("kernel ")
    try:
        return fn(*call_args)
    finally:
        if saved is None:
            del os.environ[fused_attention.VARIANT_ENV]
        else:
            os.environ[fused_attention.VARIANT_ENV] = saved


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default=DEFAULT, help="comma-separated preset:BxT")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--reps", type=int, default=5, help="calls per round (median kept)")
    p.add_argument("--variants", default="", help="comma-separated kernel variants to compare (no pure JAX)")
    args = p.parse_args()
    status = fused_attention.status()
    print(f"kernel: {status.reason}; load average {os.getloadavg()[0]:.2f}", file=sys.stderr)
    if args.variants:
        # The variant is read when a call is traced: one jitted function per variant, each
        # traced (on its first call, in ``variant_call``) with its variant set.
        paths = {f"kernel {v}": jax.jit(lambda *a: kernel_path(*a)) for v in args.variants.split(",")}
    else:
        paths = {"pure JAX": jax.jit(xla_path), "fused kernel": jax.jit(kernel_path)}
    names = list(paths)
    print("| shape | " + " | ".join(f"{n} (ms)" for n in names) + " | speedup | max abs difference |")
    print("|---|" + "---|" * (len(names) + 2))
    for spec in args.shapes.split(","):
        preset, dims = spec.split(":")
        batch, tokens = map(int, dims.split("x"))
        heads, head_dim = HEADS[preset]
        q, k, v, bias, rot = inputs(batch, tokens, heads, head_dim)
        call_args = (q, k, v, bias, rot.inv_freq[...])
        outs = {name: np.asarray(variant_call(name, fn, call_args)) for name, fn in paths.items()}
        real = np.asarray(bias[:, :, None] == 0).repeat(heads * head_dim, -1)
        diff = max(float(np.abs(outs[names[0]] - out)[real].max()) for out in outs.values())
        medians = {name: [] for name in paths}
        for _ in range(args.rounds):
            for name, fn in paths.items():
                times = []
                for _ in range(args.reps):
                    start = time.perf_counter()
                    fn(*call_args).block_until_ready()
                    times.append(time.perf_counter() - start)
                medians[name].append(statistics.median(times) * 1e3)
        cell = lambda ms: f"{statistics.median(ms):.2f} ({min(ms):.2f}-{max(ms):.2f})"  # noqa: E731
        ratios = [statistics.median(medians[names[0]]) / statistics.median(medians[n]) for n in names[1:]]
        print(f"| {preset} {batch}x{tokens} (H={heads}, hd={head_dim}) | "
              + " | ".join(cell(medians[n]) for n in names)
              + f" | {' / '.join(f'{r:.2f}x' for r in ratios)} | {diff:.1e} |", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}", file=sys.stderr)


if __name__ == "__main__":
    main()
