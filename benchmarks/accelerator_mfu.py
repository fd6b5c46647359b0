"""Where the accelerator's bf16 utilisation goes: the network alone on dense batches (no padding,
no packing, no transfer back) against the engine on the 64-protein set, at several token budgets.

If the network alone on full rows reaches the issue's 50% of the chip's bf16 peak and the set
does not, the gap is the engine's batching (padding, filler rows, transfers); if the network alone
does not, it is the kernels. One process, random weights drawn on the device (accelerator.py's),
fixed key. Usage, on an accelerator host::

    python3 benchmarks/accelerator_mfu.py --shape t33 --mode bf16 --budgets 8192,16384,32768
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
from accelerator import PEAK_BF16, SHAPES, device_weights, useful_flops  # noqa: E402


def best_of(call, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return min(times)


def dense_rows(engine, width: int, peak: float) -> dict:
    """The jitted forward alone on token_budget // width full rows of ``width`` tokens, logits kept
    on the device (what the engine computes per batch, minus its host work)."""
    import jax
    import numpy as np

    from flamino_core.model.stack import Capture
    from flamino_core.engine.engine import to_device

    rows = engine.token_budget // width
    rng = np.random.default_rng(0)
    tokens = rng.integers(4, 24, size=(rows, width)).astype(np.int32)  # amino-acid ids, no padding
    tokens[:, 0], tokens[:, -1] = 0, 2  # <cls> ... <eos>
    device_tokens = to_device(tokens)

    def call():
        jax.block_until_ready(engine._forward(engine.state, device_tokens, capture=Capture()))

    call()  # compile
    seconds = best_of(call)
    flops = common.forward_flops(engine.config, rows, width)
    return {"rows": rows, "width": width, "seconds": round(seconds, 4), "mfu": round(flops / seconds / peak, 3)}


def profile(engine, proteins, widths, peak, folder: Path) -> None:
    """One warm set and one dense batch under ``jax.profiler.trace``. The Perfetto trace (JSON, read
    without TensorBoard) is copied up to ``folder/trace.json.gz``: the profiler nests it three
    folders down."""
    import shutil

    import jax

    with jax.profiler.trace(str(folder / "raw"), create_perfetto_trace=True):
        engine.run(proteins)
        dense_rows(engine, widths[-1], peak)
    trace = next((folder / "raw").rglob("perfetto_trace.json.gz"))
    shutil.copy(trace, folder / "trace.json.gz")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="t33")
    parser.add_argument("--mode", default="bf16")
    parser.add_argument("--budgets", default="8192,16384,32768")
    parser.add_argument("--widths", default="256,1024")
    parser.add_argument("--out", type=Path, default=common.RESULTS / "accelerator-mfu.jsonl")
    # attention:packing:ahead triples, e.g. "dot-product-attention:off:1,pallas-flash:on:2" (the
    # engine's defaults when omitted: "auto:auto:default").
    parser.add_argument("--variants", default="auto:auto:default")
    parser.add_argument("--flash-block", type=int, help="the flash kernel's widest block (attention.FLASH_BLOCK_MAX)")
    # flamino's TPU kernel (flash_tpu) against Pallas's, in one process: "tokens-major:512" (its
    # query block), "pallas" (flash_tpu off: every row in Pallas's heads-major kernel).
    parser.add_argument("--kernels", default="default",
                        help="comma-separated: default | tokens-major:QUERY_BLOCK | pallas")
    parser.add_argument("--profile", type=Path, help="also trace one set and one dense batch of the last variant "
                        "with jax.profiler; the Perfetto trace is copied to PROFILE/trace.json.gz")
    args = parser.parse_args(argv)
    if args.flash_block:
        from flamino_core.model import attention

        attention.FLASH_BLOCK_MAX = args.flash_block
    import dataclasses

    import jax

    from flamino_core import Engine

    peak = PEAK_BF16.get(jax.devices()[0].device_kind, float("nan"))
    weights = device_weights(SHAPES[args.shape])
    proteins = common.varlen_workload()
    residues = sum(map(len, proteins))
    widths = [int(w) for w in args.widths.split(",") if w]
    from flamino_core.model import flash_tpu

    runs = [(budget, variant, kernel) for budget in map(int, args.budgets.split(","))
            for variant in args.variants.split(",") for kernel in args.kernels.split(",")]
    defaults = (flash_tpu.MAX_WIDTH, flash_tpu.QUERY_BLOCK)
    for budget, variant, kernel in runs:
        flash_tpu.MAX_WIDTH, flash_tpu.QUERY_BLOCK = defaults
        if kernel == "pallas":
            flash_tpu.MAX_WIDTH = 0
        elif kernel.startswith("tokens-major:"):
            flash_tpu.QUERY_BLOCK = int(kernel.split(":")[1])
        jax.clear_caches()  # the kernel is chosen when a pass is traced: trace each variant anew
        attention, packing, ahead = variant.split(":")
        engine = Engine(weights, precision=args.mode, token_budget=budget,
                        attention=None if attention == "auto" else attention,
                        packing=None if packing == "auto" else packing)
        if ahead != "default":
            engine.backend = dataclasses.replace(engine.backend, batches_ahead=int(ahead))
        engine.run(proteins)  # compile every shape the set needs
        seconds = best_of(lambda: engine.run(proteins), 3)
        row = {"shape": args.shape, "mode": args.mode, "token_budget": engine.token_budget, "kernel": kernel,
               "flash_block_max": args.flash_block,
               "attention": engine.attention_path, "packing": engine.backend.packing,
               "batches_ahead": engine.backend.batches_ahead,
               "set_s": round(seconds, 3), "residues_per_s": round(residues / seconds),
               "set_mfu": round(useful_flops(engine.config, proteins) / seconds / peak, 3),
               "dense": [dense_rows(engine, w, peak) for w in widths]}
        print(json.dumps(row), flush=True)
        if args.profile:
            profile(engine, proteins, widths, peak, args.profile)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("a") as handle:
            handle.write(json.dumps(row) + "\n")
        del engine
    return 0


if __name__ == "__main__":
    sys.exit(main())
