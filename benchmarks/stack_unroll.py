"""One protein's pass with the layer stack scanned (the engine's) vs unrolled over per-layer weight
views (a prototype carried here, not in the engine), and HF transformers on the same weights and
inputs, interleaved in one process (issue #52).

Why the prototype: the engine's stack runs in a loop, each layer's weights a ``dynamic-slice`` of
the stacked (N, in, out) arrays, and XLA:CPU's dot takes whole buffers, so it copies every layer's
weights before its products (t33: 79 MB a layer, 2.6 GB a pass; docs/benchmarks.md). A static
slice inside the jitted function is copied too. What XLA does not copy is an argument: on the CPU
a layer's block of a stacked array is contiguous host memory, and ``jax.device_put`` of a NumPy
view of it aliases that memory when aligned (every ESM weight is), so per-layer arrays cost no
memory (``layer_views``: each is checked to alias). ``unrolled_pass`` runs the stack as a Python
loop over them, the block one nested ``jax.jit`` (traced and lowered once, called N times; XLA
inlines N copies, so each shape compiles about twice as long at t33).

Timed, round by round in alternating order so a shared machine's load falls on all alike: the
engine's jitted forward on the bucketed one-row tokens ``Engine.run([protein])`` makes (logits
and the last hidden state), the unrolled pass on the same tokens, and ``EsmForMaskedLM`` as
``hf_jobs.hf_latency`` runs it (fp32, its default attention, unpadded). Per call, wall and CPU
time (getrusage: every thread of the process); ratios are medians of per-round ratios. Also: each
flamino variant's trace+lower and compile CPU seconds per length (a fresh compile cache), and the
largest absolute differences of the unrolled pass and HF from the scan's outputs. Usage::

    .venv/bin/python benchmarks/stack_unroll.py --shape t33 --lengths 100,300,1000 --rounds 5
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed(call) -> tuple[float, float, object]:
    wall, cpu = time.perf_counter(), cpu_seconds()
    out = call()
    return time.perf_counter() - wall, cpu_seconds() - cpu, out


def layer_views(stacked) -> tuple | None:
    """Per layer, the state of the stacked ``stacked`` at that layer, aliasing its CPU memory
    (None if more than 1% of the bytes would be copied: unaligned blocks)."""
    import jax
    import numpy as np

    leaves = jax.tree.leaves(stacked)
    hosts = [np.asarray(a) for a in leaves]  # a CPU array's own memory, read-only: not a copy
    blocks = [host[i] for i in range(leaves[0].shape[0]) for host in hosts]
    placed = jax.device_put(blocks)  # one batched call (t33: 528 arrays, 0.05-0.07 CPU-s)
    copied = sum(p.nbytes for p, b in zip(placed, blocks) if p.unsafe_buffer_pointer() != b.ctypes.data)
    if copied > 0.01 * sum(a.nbytes for a in leaves):
        return None
    tree, count = jax.tree.structure(stacked), len(hosts)
    return tuple(jax.tree.unflatten(tree, placed[i:i + count]) for i in range(0, len(placed), count))


def unrolled_pass(graphdef, attention, precision):
    """jit(state, views, tokens) -> (final representation, logits): the engine's unmasked pass with
    the stack unrolled over per-layer views; the same products in the same order per layer."""
    import jax
    from flax import nnx

    from flamino_core.model.segments import layout

    @functools.lru_cache(maxsize=None)
    def block(layer_graphdef):
        @jax.jit  # traced and lowered once; every layer calls it
        def call(layer, x, positions, spans):
            return nnx.merge(layer_graphdef, layer)(x, positions, spans, attention, capture=False)
        return call

    @jax.jit
    def run(state, views, tokens):
        model = nnx.merge(graphdef, state)
        with jax.default_matmul_precision(precision):
            rows = layout(tokens)
            x = model.embed(tokens, rows)
            positions, spans = rows.queries()
            call = block(nnx.graphdef(model.layers))
            for layer in views:
                x = call(layer, x, positions, spans)
            x = model.final_norm(x)
            return x, model.lm_logits(x)

    return run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="t33", choices=sorted(common.SHAPES))
    parser.add_argument("--lengths", default="100,300,1000")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--root", type=Path, default=Path(tempfile.gettempdir()) / "flamino-stack-unroll")
    parser.add_argument("--no-hf", action="store_true")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    os.environ["FLAMINO_CACHE"] = tempfile.mkdtemp(prefix="flamino-unroll-cache-")  # first calls compile
    checkpoint = common.write_checkpoint(args.shape, args.root)

    import jax
    import numpy as np

    from flamino_core import Engine, load_weights
    from flamino_core.alphabet import batch_encode
    from flamino_core.model.stack import Capture
    from flamino_core.engine import engine as engine_module
    from flamino_core.engine.planner import bucket_length

    engine = Engine(load_weights(str(checkpoint)))
    n = engine.config.num_layers
    backend = engine.backend
    scan_jit = engine_module.compiled(engine.graphdef, backend.implementation, backend.matmul_precision).forward
    unrolled_jit = unrolled_pass(engine.graphdef, backend.implementation, backend.matmul_precision)
    start = time.process_time()
    views = layer_views(engine.state["layers"])
    views_cpu_s = time.process_time() - start
    assert views is not None, "the layer blocks did not alias the stacked arrays"
    capture = Capture(hidden=(n,))
    flamino = {  # name: (jitted, its arguments given the tokens, its outputs as (hidden, logits))
        "scan": (scan_jit, lambda t: ((engine.state, t), {"capture": capture}), lambda o: (o.hidden[n], o.logits)),
        "unrolled": (unrolled_jit, lambda t: ((engine.state, views, t), {}), lambda o: o),
    }

    hf = None
    if not args.no_hf:
        import torch
        from transformers import EsmForMaskedLM

        torch.set_num_threads(args.threads)
        hf = EsmForMaskedLM.from_pretrained(str(checkpoint)).eval()

    def run_hf(seq):
        import torch

        ids = torch.from_numpy(batch_encode([seq], pad_to=len(seq) + 2).astype(np.int64))
        with torch.inference_mode():
            hidden = hf.esm(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state
            return hidden[0].numpy(), hf.lm_head(hidden)[0].numpy()

    for length in map(int, args.lengths.split(",")):
        seq = common.fixed_protein(length)
        tokens = jax.device_put(np.asarray(batch_encode([seq], pad_to=bucket_length(length + 2)), np.int32))
        row: dict = {"shape": args.shape, "residues": length, "tokens": int(tokens.shape[1]), "rounds": args.rounds,
                     "views_cpu_s": round(views_cpu_s, 3), "load_start": [round(x, 2) for x in os.getloadavg()]}
        variants, outs = {}, {}
        for name, (jitted, arguments, outputs) in flamino.items():
            positional, keywords = arguments(tokens)
            c0 = cpu_seconds()
            lowered = jitted.lower(*positional, **keywords)
            c1 = cpu_seconds()
            executable = lowered.compile()
            row[f"{name}_lower_cpu_s"], row[f"{name}_compile_cpu_s"] = round(c1 - c0, 2), round(cpu_seconds() - c1, 2)
            variants[name] = functools.partial(lambda e, o, p: jax.device_get(o(e(*p))),  # statics compiled in
                                               executable, outputs, positional)
            outs[name] = variants[name]()
        if hf is not None:
            variants["hf"] = lambda: run_hf(seq)
            hidden, logits = variants["hf"]()
            outs["hf"] = (hidden, logits)
        width = length + 2  # compare the real tokens only (the scan's row is padded to its bucket)
        for name in [v for v in variants if v != "scan"]:
            row[f"{name}_vs_scan_maxdiff"] = [float(np.abs(np.asarray(a)[..., :width, :].reshape(width, -1)
                                                           - np.asarray(b)[..., :width, :].reshape(width, -1)).max())
                                              for a, b in zip(outs[name], outs["scan"])]
        for call in variants.values():
            call()  # warm
        times = {name: {"wall": [], "cpu": []} for name in variants}
        order = list(variants)
        for round_ in range(args.rounds):
            for name in order if round_ % 2 == 0 else order[::-1]:
                wall, cpu, _ = timed(variants[name])
                times[name]["wall"].append(wall)
                times[name]["cpu"].append(cpu)
        for name, t in times.items():
            row[f"{name}_ms"] = {k: round(1e3 * statistics.median(v), 1) for k, v in t.items()}
        for k in ("wall", "cpu"):  # medians of per-round ratios: a load change between rounds cancels
            ratio = lambda a, b: round(statistics.median(x / y for x, y in zip(times[a][k], times[b][k])), 3)
            row[f"unrolled_speedup_{k}"] = ratio("scan", "unrolled")
            if hf is not None:
                row[f"hf_over_scan_{k}"], row[f"hf_over_unrolled_{k}"] = ratio("hf", "scan"), ratio("hf", "unrolled")
        row["load_end"] = [round(x, 2) for x in os.getloadavg()]
        print(json.dumps(row), flush=True)
        if args.markdown:
            ms = lambda name: f"{row[name + '_ms']['wall']:.0f} ({row[name + '_ms']['cpu']:.0f})"
            hf_cells = (f" {ms('hf')} | {row['hf_over_scan_wall']:.2f} / {row['hf_over_unrolled_wall']:.2f} |"
                        if hf is not None else " | |")
            print(f"| {args.shape} | {length} | {ms('scan')} | {ms('unrolled')} | {row['unrolled_speedup_wall']:.3f}"
                  f" ({row['unrolled_speedup_cpu']:.3f}) |{hf_cells} {row['scan_compile_cpu_s']:.1f} /"
                  f" {row['unrolled_compile_cpu_s']:.1f} | {row['load_start'][0]:.1f}-{row['load_end'][0]:.1f} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
