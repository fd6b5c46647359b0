"""flamino on an accelerator (TPU or GPU): residues per second and hardware utilisation of each
ESM-2 shape in fp32 (float32 products) and the opt-in bf16 mode, a masked scan, the load of a
cached model, compilation, the start of a whole process, and the host CPU's HF run of the same
work. ``benchmarks/run.py`` hands over to this on a host whose JAX runs on an accelerator;
``python benchmarks/accelerator.py --report RESULTS.jsonl`` turns its lines into the block of
docs/benchmarks.md.

Weights are random (drawn on the device: the 3B shape's 11 GB take a second there, where
``random:`` presets draw them layer by layer on the host), so figures are speed, never biology.
The 64-protein set is ``common.varlen_workload`` (real proteins from ../shared/fasta, or
$FLAMINO_SHARED/fasta on a host where only the checkout travels).

Usage: python benchmarks/accelerator.py --shapes t6,t33 --modes fp32,bf16 --out results.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

SHAPES = {**common.SHAPES, "t36": "esm2_t36_3B_UR50D", "t48": "esm2_t48_15B_UR50D"}
# Dense bf16 peak per chip (vendor figures): what utilisation is measured against in both modes
# (fp32 products run as several bf16 passes on a TPU, so fp32 cannot reach it).
PEAK_BF16 = {"TPU v5 lite": 197e12, "TPU v5e": 197e12, "TPU v4": 275e12, "TPU v6 lite": 918e12,
             "NVIDIA H100 80GB HBM3": 989e12, "NVIDIA A100-SXM4-80GB": 312e12}
SCAN_LENGTH = 1000
SCAN_SHAPES = ("t6", "t12", "t30", "t33")  # t36's 1,000 passes of 1,024 tokens: minutes in fp32


def emit(out: Path, row: dict) -> None:
    print(json.dumps(row), flush=True)
    with out.open("a") as handle:
        handle.write(json.dumps(row) + "\n")


def device_weights(preset: str, seed: int = 0):
    """Random weights of a preset's shape drawn on the device (N(0, 0.02), the rotary buffer the
    model's own), as ``ModelWeights`` with a stated checksum (hashing 11 GB is not the point)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from flamino_core.model.config import ModelConfig
    from flamino_core.weights.convert import expected_params
    from flamino_core.weights.loading import ModelWeights

    config = ModelConfig.preset(preset)
    leaves, tree = jax.tree.flatten(expected_params(config))
    keys = jax.random.split(jax.random.key(seed), len(leaves))
    draw = jax.jit(lambda key, shape: 0.02 * jax.random.normal(key, shape, jnp.float32), static_argnums=1)
    # Each leaf to the host as it is drawn: the engine then loads them as it loads any checkpoint
    # (bf16 kernels rounded on the host), and the device never holds two copies.
    params = jax.tree.unflatten(tree, [np.asarray(draw(k, leaf.shape)) for k, leaf in zip(keys, leaves)])
    inv = params["layers"]["self_attn"]["rot_emb"]["inv_freq"] if config.family == "esm2" else None
    if inv is not None:  # rotary frequencies as the model defines them, not noise
        half = inv.shape[-1]
        params["layers"]["self_attn"]["rot_emb"]["inv_freq"] = np.broadcast_to(
            1.0 / (10000 ** (np.arange(half, dtype=np.float32) / half)), inv.shape).copy()
    return ModelWeights(f"untrained ({preset}, drawn on the device)", config, params, f"random:{preset}",
                        is_random=True, checksum=f"device-random-{preset}-{seed}")


def host_peak_gb() -> float:
    """This process's peak resident host memory so far (the 3B shape stages 11 GB on the host)."""
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2)


def useful_flops(config, sequences) -> float:
    """Matmul FLOPs of each sequence alone at its own length (no padding, no filler rows)."""
    return sum(common.forward_flops(config, 1, len(s) + 2) for s in sequences)


def measure_shape(shape: str, mode: str, out: Path, peak: float, device: str, scan: bool) -> None:
    import jax

    from flamino_core import Engine
    from flamino_core.engine.hardware import refuse_before_loading
    from flamino_core.model.config import ModelConfig

    preset = SHAPES[shape]
    started = time.perf_counter()
    try:
        refuse_before_loading(ModelConfig.preset(preset), mode)  # 15B: before 60 GB are drawn
        weights = device_weights(preset)
        drawn_peak = host_peak_gb()
        print(f"{shape} {mode}: weights drawn, host peak {drawn_peak} GB", flush=True)  # where a host OOM struck
        engine = Engine(weights, precision=mode)
    except (ValueError, MemoryError) as err:
        emit(out, {"shape": shape, "mode": mode, "refused": str(err)})
        return
    jax.block_until_ready(engine.state)
    row = {"shape": shape, "preset": preset, "mode": mode, "device": device, "backend": engine.backend.describe(),
           "token_budget": engine.token_budget, "build_s": round(time.perf_counter() - started, 2),
           "host_peak_gb": {"drawn": drawn_peak, "engine": host_peak_gb()}}
    print(f"{shape} {mode}: engine built, host peak {row['host_peak_gb']['engine']} GB", flush=True)
    proteins = common.varlen_workload()
    residues = sum(map(len, proteins))
    t0 = time.perf_counter()
    engine.run(proteins)
    row["first_call_s"] = round(time.perf_counter() - t0, 2)  # compilation of every shape + one run
    warm = []
    for _ in range(2):
        t0 = time.perf_counter()
        engine.run(proteins)
        warm.append(time.perf_counter() - t0)
    best = min(warm)
    row.update(set_s=round(best, 3), residues=residues, residues_per_s=round(residues / best),
               mfu_bf16_peak=round(useful_flops(engine.config, proteins) / best / peak, 3),
               token_budget_after=engine.token_budget)
    if scan:
        scan = common.fixed_protein(SCAN_LENGTH)
        engine.compute_masked(scan, positions=range(min(SCAN_LENGTH, engine.masked_pass_shape(SCAN_LENGTH)[0])))  # compile
        t0 = time.perf_counter()
        engine.compute_masked(scan)
        row["scan_1000_s"] = round(time.perf_counter() - t0, 2)
    emit(out, row)
    del engine, weights


def cached_load(shape: str, out: Path, root: Path) -> None:
    """Seconds to build an engine from a flamino checkpoint folder (what a cached model reads)."""
    import jax
    import numpy as np

    from flamino_core import Engine, load_weights
    from flamino_core.weights.loading import save_checkpoint

    weights = device_weights(SHAPES[shape])
    folder = root / f"{shape}-checkpoint"
    host = jax.tree.map(np.asarray, weights.params)
    save_checkpoint(folder, weights.config, host, weights.source, True)
    del weights, host
    t0 = time.perf_counter()
    engine = Engine(load_weights(str(folder)))
    jax.block_until_ready(engine.state)
    emit(out, {"shape": shape, "cached_load_s": round(time.perf_counter() - t0, 2), "folder": str(folder)})


def hf_host_cpu(shape: str, out: Path) -> None:
    """HF transformers' EsmForMaskedLM on this host's CPU, the same 64 proteins, padded batches
    of ``common.HF_TOKEN_BUDGET`` tokens sorted by length (as benchmarks/hf_jobs.py runs it)."""
    import torch
    from transformers import EsmConfig, EsmForMaskedLM

    from flamino_core.alphabet import batch_encode
    from flamino_core.model.config import ModelConfig

    config = ModelConfig.preset(SHAPES[shape])
    model = EsmForMaskedLM(EsmConfig(**config.to_hf_config())).eval()
    proteins = sorted(common.varlen_workload(), key=len)
    t0 = time.perf_counter()
    with torch.inference_mode():
        start = 0
        while start < len(proteins):
            stop = start + 1
            while stop < len(proteins) and (stop - start + 1) * (len(proteins[stop]) + 2) <= common.HF_TOKEN_BUDGET:
                stop += 1
            tokens = torch.as_tensor(batch_encode(proteins[start:stop]))
            model(input_ids=tokens, attention_mask=(tokens != 1).long())
            start = stop
    seconds = time.perf_counter() - t0
    emit(out, {"shape": shape, "hf_cpu_set_s": round(seconds, 2), "hf_threads": torch.get_num_threads(),
               "residues_per_s_hf_cpu": round(sum(map(len, proteins)) / seconds)})


def whole_process(folder: str, out: Path) -> None:
    """``flamino embed`` of one 19-residue protein as a user starts it, twice (the second finds
    the compilation in the persistent cache): start to exit, the chip opened by that process."""
    with tempfile.TemporaryDirectory() as tmp:
        fasta = Path(tmp) / "one.fa"
        fasta.write_text(">one\nMKTAYIAKQRQISFVKSHF\n")
        for attempt in range(2):
            t0 = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "flamino_core.cli", "embed", str(fasta), "-m", folder,
                                   "-o", str(Path(tmp) / f"out{attempt}.npz")], capture_output=True, text=True)
            emit(out, {"whole_process_s": round(time.perf_counter() - t0, 2), "attempt": attempt + 1,
                       "rc": done.returncode, "stderr_tail": done.stderr[-300:]})


def report(path: Path) -> str:
    """The markdown block of docs/benchmarks.md from a results file."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    runs = [r for r in rows if "set_s" in r or "refused" in r]
    device = next((r["device"] for r in runs if "device" in r), "?")
    lines = ["| shape | mode | token budget | build s | first call s | 64 proteins s | residues/s | MFU (bf16 peak) | scan 1,000 s |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in runs:
        if "refused" in r:
            lines.append(f"| {r['shape']} | {r['mode']} | refused: {r['refused']} | | | | | | |")
            continue
        lines.append(f"| {r['shape']} | {r['mode']} | {r['token_budget']} | {r['build_s']} | {r['first_call_s']} | "
                     f"{r['set_s']} | {r['residues_per_s']:,} | {r['mfu_bf16_peak']:.0%} | {r.get('scan_1000_s', '')} |")
    extra = [f"- cached load, {r['shape']}: {r['cached_load_s']} s" for r in rows if "cached_load_s" in r]
    extra += [f"- HF on the host CPU, {r['shape']}: {r['hf_cpu_set_s']} s ({r['residues_per_s_hf_cpu']:,} residues/s, "
              f"{r['hf_threads']} threads)" for r in rows if "hf_cpu_set_s" in r]
    extra += [f"- whole process, one protein, attempt {r['attempt']}: {r['whole_process_s']} s (exit {r['rc']})"
              for r in rows if "whole_process_s" in r]
    return f"Device: {device}\n\n" + "\n".join(lines + [""] + extra)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="t6,t12,t30,t33,t36")
    parser.add_argument("--modes", default="fp32,bf16")
    parser.add_argument("--out", type=Path, default=common.RESULTS / "accelerator.jsonl")
    parser.add_argument("--scan-shapes", default=",".join(SCAN_SHAPES), help="shapes that also time a masked scan")
    parser.add_argument("--extras", default="", help="any of: load, hf, start (comma-separated)")
    parser.add_argument("--report", type=Path, help="print the markdown block of a results file and exit")
    args = parser.parse_args(argv)
    if args.report:
        print(report(args.report))
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    extras = set(filter(None, args.extras.split(",")))
    root = Path(tempfile.mkdtemp(prefix="flamino-accelerator-"))
    os.environ.setdefault("FLAMINO_CACHE", str(root / "cache"))
    if "start" in extras:  # before this process opens the chip: one process may hold it
        subprocess.run([sys.executable, __file__, "--shapes", "", "--extras", "load", "--out", str(args.out)], check=True)
        folder = next(json.loads(line)["folder"] for line in args.out.read_text().splitlines() if "folder" in line)
        whole_process(folder, args.out)
    import jax

    from flamino_core.engine.engine import enable_compilation_cache

    enable_compilation_cache(os.environ.get("FLAMINO_JAX_CACHE") or root / "jax")
    device = jax.devices()[0].device_kind
    peak = PEAK_BF16.get(device, float("nan"))
    if "load" in extras and "start" not in extras:  # "start"'s own process has timed the load
        cached_load("t33", args.out, root)
    for shape in filter(None, args.shapes.split(",")):
        for mode in filter(None, args.modes.split(",")):
            measure_shape(shape, mode, args.out, peak, device, shape in args.scan_shapes.split(","))
    if "hf" in extras:
        hf_host_cpu("t33", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
