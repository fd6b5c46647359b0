"""esm.cpp's INT8 against its own FP32 under its accuracy gates, on the benchmark's checkpoint.

    .venv-esmcpp/bin/python benchmarks/esmcpp_gates.py --shape t30 --root DIR

Run with esm.cpp's interpreter (numpy < 2, no JAX, no scipy): the checkpoint ``make bench`` or
``int8_drift.py`` wrote under DIR is quantized the way ``make bench`` quantizes it (its documented
W8A8 route: activation statistics over the six calibration proteins, SmoothQuant alpha 0.5), and
both variants score the shared NEIME assay's wild type with one masked pass per position, 16 per
``forward_scheduled`` call: the pseudo-perplexity and the Spearman correlation of the
masked-marginal scores with DMS_score, as ``precision_gates.py`` measures flamino's modes. So the
reference engine's own drift on these random weights stands beside flamino's (docs/benchmarks.md,
Round 4).
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

DMS = common.REPO.parent / "shared" / "dms" / "A0A1I9GEU1_NEIME_Kennouche_2019.csv"


def ranks(values: np.ndarray) -> np.ndarray:
    """Ranks with ties averaged (what Spearman's correlation correlates; written out here because
    esm.cpp's environment has no scipy, and checked against scipy.stats.spearmanr by hand on the
    t30 scores: equal to 1e-16)."""
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    result = np.empty(len(values))
    first = 0
    for last in range(1, len(values) + 1):
        if last == len(values) or sorted_values[last] != sorted_values[first]:
            result[order[first:last]] = (first + last - 1) / 2
            first = last
    return result


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(ranks(a), ranks(b))[0, 1])


def main() -> None:
    import esm_cpp

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", default="t30")
    p.add_argument("--root", required=True, help="the work folder holding the shape's checkpoint")
    args = p.parse_args()
    safetensors = str(common.checkpoint_dir(args.shape, Path(args.root)) / "model.safetensors")
    wild_type = "".join(l.strip() for l in DMS.with_suffix(".wt.fa").read_text().splitlines()[1:])
    rows = list(csv.DictReader(open(DMS, newline="")))
    mutants = [(int(r["mutant"][1:-1]) - 1, r["mutant"][0], r["mutant"][-1]) for r in rows]
    measured = np.asarray([float(r["DMS_score"]) for r in rows])
    tokenizer = esm_cpp.Tokenizer()
    base = np.asarray(tokenizer.encode(wild_type), np.int32)
    index = {aa: tokenizer.encode(aa)[1] for aa in "ACDEFGHIKLMNPQRSTVWY"}

    def masked_log_probs(model) -> np.ndarray:
        out = []
        for first in range(0, len(wild_type), 16):
            positions = list(range(first, min(first + 16, len(wild_type))))
            batch = [base.copy() for _ in positions]
            for ids, position in zip(batch, positions):
                ids[position + 1] = tokenizer.mask_id
            for logits, position in zip(model.forward_scheduled(batch), positions):
                x = logits[position + 1].astype(np.float64)
                out.append(x - x.max() - np.log(np.exp(x - x.max()).sum()))
        return np.stack(out)

    results = {}
    for variant in ("fp32", "int8"):
        model = esm_cpp.Model.load_from_safetensors(safetensors)
        if variant == "int8":
            common.esmcpp_int8(model, common.calibration_proteins())  # as make bench quantizes
        start = time.perf_counter()
        lp = masked_log_probs(model)
        pppl = float(np.exp(-np.mean([lp[i, index[aa]] for i, aa in enumerate(wild_type)])))
        rho = spearman(np.asarray([lp[i, index[m]] - lp[i, index[w]] for i, w, m in mutants]), measured)
        results[variant] = (pppl, rho)
        print(f"{args.shape} esm.cpp {variant}: PPPL {pppl:.3f}, DMS Spearman {rho:.5f} ({time.perf_counter() - start:.0f} s)",
              flush=True)
    (pppl32, rho32), (pppl8, rho8) = results["fp32"], results["int8"]
    print(f"{args.shape} esm.cpp INT8 vs its FP32: PPPL drift {pppl8 - pppl32:+.3f} ({(pppl8 / pppl32 - 1) * 100:+.2f}%), "
          f"Spearman drift {rho8 - rho32:+.1e}")


if __name__ == "__main__":
    main()
