"""What the opt-in bf16 mode costs in accuracy on an accelerator, and the longest single pass.

For one ESM-2 shape (weights drawn on the device, as ``accelerator.py`` does), in fp32 and bf16:
the shared DMS assay (../shared/dms, or $FLAMINO_SHARED/dms) scored with masked-marginals, the
pseudo-perplexity of real proteins, and a ``--long full`` pass of a 10,000-residue protein (time,
the chip's peak memory, or the refusal). It appends to ``--out`` one JSON line per mode as it
ends, then one comparing them: the Spearman of bf16's scores with fp32's, their largest
difference, the pseudo-perplexity drift. The Spearman of each mode with the assay's own scores
is written too, but the weights are random: it is no measure of biology, only of whether bf16
moves it.

Usage: python benchmarks/accelerator_accuracy.py --shape t33 --out results.jsonl
       (or --modes bf16 --against an earlier run's file, whose fp32 row stands: the weights are the same)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import accelerator  # noqa: E402
import common  # noqa: E402

DMS = Path(os.environ.get("FLAMINO_SHARED") or common.REPO.parent / "shared") / "dms" / \
    "A0A1I9GEU1_NEIME_Kennouche_2019.csv"


def measure_mode(preset: str, mode: str, proteins: list[str], long_length: int) -> dict:
    import jax
    from scipy.stats import spearmanr

    from flamino_core import Engine
    from flamino_core.variants.dms import read_dms, score_dms
    from flamino_core.variants.substitution_maps import pseudo_perplexity

    engine = Engine(accelerator.device_weights(preset), precision=mode)
    row: dict = {"preset": preset, "mode": mode, "backend": engine.backend.describe()}
    t0 = time.perf_counter()
    scored = score_dms(engine, read_dms(DMS), "masked-marginals")
    row["dms_s"] = round(time.perf_counter() - t0, 2)
    frame = scored.frame[scored.in_metrics]
    row["dms_rows"] = len(frame)
    row["scores"] = frame["score"].round(6).tolist()
    row["spearman_vs_assay"] = round(float(spearmanr(frame["score"], frame["DMS_score"]).statistic), 4)
    t0 = time.perf_counter()
    row["pseudo_perplexity"] = [pseudo_perplexity(engine.compute_masked(p), p) for p in proteins]
    row["pll_s"] = round(time.perf_counter() - t0, 2)
    if long_length:
        device = jax.devices()[0]
        t0 = time.perf_counter()
        try:
            out = engine.run([common.fixed_protein(long_length)], long="full", logits=True)
            row["long_full"] = {"residues": long_length, "seconds": round(time.perf_counter() - t0, 2),
                                "finite": bool(np.isfinite(out[0].logits).all())}
        except (MemoryError, ValueError) as err:  # refused before running: the reason is the result
            row["long_full"] = {"residues": long_length, "refused": str(err)[:300]}
        stats = device.memory_stats() or {}
        row["long_full"]["peak_gib"] = round(stats.get("peak_bytes_in_use", 0) / 2**30, 2)
    return row


def main(argv=None) -> int:
    from scipy.stats import spearmanr

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="t33")
    parser.add_argument("--proteins", type=int, default=8, help="real proteins (up to 1,022 residues) for pseudo-perplexity")
    parser.add_argument("--max-length", type=int, default=1022, help="the proteins' longest (a CPU run: shorter ones)")
    parser.add_argument("--long", type=int, default=10_000, help="residues of the --long full pass (0: none)")
    parser.add_argument("--out", type=Path, default=common.RESULTS / "accelerator_accuracy.jsonl")
    parser.add_argument("--modes", default="fp32,bf16", help="the modes run here, fp32 first")
    parser.add_argument("--against", type=Path, help="a JSON-lines file of this script's whose fp32 row (the same "
                        "shape, at least as many proteins) stands for fp32: --modes bf16 alone fits one device call")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="flamino-accuracy-"))
    os.environ.setdefault("FLAMINO_CACHE", str(root / "cache"))
    proteins = [p for p in common.varlen_workload() if len(p) <= args.max_length][:args.proteins]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    rows = {}
    if args.against:  # the weights are drawn from a fixed key, so another run's fp32 row is this run's
        for line in args.against.read_text().splitlines():
            row = json.loads(line)
            if row.get("mode") == "fp32" and row.get("preset") == accelerator.SHAPES[args.shape] \
                    and len(row["pseudo_perplexity"]) >= len(proteins):
                rows["fp32"] = {**row, "pseudo_perplexity": row["pseudo_perplexity"][:len(proteins)]}
    for mode in args.modes.split(","):  # each mode written as it ends: a run stopped at its limit keeps the first
        rows[mode] = measure_mode(accelerator.SHAPES[args.shape], mode, proteins, args.long)
        accelerator.emit(args.out, rows[mode])
    if set(rows) != {"fp32", "bf16"}:
        print(f"only {sorted(rows)} measured: nothing to compare")
        return 0
    exact, fast = (np.asarray(rows[m]["scores"]) for m in ("fp32", "bf16"))
    exact_ppl, fast_ppl = (np.asarray(rows[m]["pseudo_perplexity"]) for m in ("fp32", "bf16"))
    summary = {"shape": args.shape, "dms_rows": int(len(exact)),
               "spearman_bf16_vs_fp32": round(float(spearmanr(exact, fast).statistic), 5),
               "max_abs_score_diff": round(float(np.abs(exact - fast).max()), 5),
               "score_range_fp32": round(float(exact.max() - exact.min()), 4),
               "spearman_vs_assay": {m: rows[m]["spearman_vs_assay"] for m in rows},
               "ppl_fp32": exact_ppl.round(4).tolist(),
               "ppl_max_rel_drift": round(float(np.abs(fast_ppl / exact_ppl - 1).max()), 6),
               "seconds": {m: {"dms": rows[m]["dms_s"], "pll": rows[m]["pll_s"]} for m in rows},
               "long_full": {m: rows[m].get("long_full") for m in rows}}
    with args.out.open("a") as handle:
        handle.write(json.dumps(summary) + "\n")
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
