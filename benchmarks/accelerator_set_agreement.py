"""How far the accelerator's fast mode moves a set's plain outputs from its exact mode.

The 64-protein set (``common.varlen_workload``) through one ESM-2 shape, weights drawn on the
device (``accelerator.device_weights``, fixed key), in fp32 (exact) and in bf16 twice: with
``jax.nn.dot_product_attention`` (fp32 attention inputs) and with Pallas's flash kernel (bf16
inputs), both on packed rows. For each bf16 run against fp32: the largest difference of the
per-residue log-probabilities, their Pearson correlation, how often the top amino acid agrees,
and the smallest cosine similarity of a protein's mean embedding. Random weights: a measure of
arithmetic, not of biology. Usage, on an accelerator host::

    python3 benchmarks/accelerator_set_agreement.py --shape t33 --out results.jsonl
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import accelerator  # noqa: E402
import common  # noqa: E402


def agreement(exact, fast) -> dict:
    """The bf16 run's outputs (``fast``) against fp32's, one ``SequenceOutput`` list each."""
    ours, theirs = (np.concatenate([o.logits for o in run]) for run in (fast, exact))
    means = [(a.mean, b.mean) for a, b in zip(fast, exact)]
    cosines = [float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)) for a, b in means]
    return {"max_abs_log_prob_diff": round(float(np.abs(ours - theirs).max()), 5),
            "log_prob_pearson": round(float(np.corrcoef(ours.ravel(), theirs.ravel())[0, 1]), 6),
            "top_residue_agreement": round(float((ours.argmax(1) == theirs.argmax(1)).mean()), 5),
            "min_mean_embedding_cosine": round(min(cosines), 6)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="t33")
    parser.add_argument("--out", type=Path, default=common.RESULTS / "accelerator-set-agreement.jsonl")
    args = parser.parse_args(argv)
    from flamino_core import Engine

    weights = accelerator.device_weights(accelerator.SHAPES[args.shape])
    proteins = common.varlen_workload()
    exact = Engine(weights, packing="on").run(proteins)
    for attention in ("dot-product-attention", "pallas-flash"):
        engine = Engine(weights, precision="bf16", attention=attention, packing="on")
        row = {"shape": args.shape, "proteins": len(proteins), "residues": sum(map(len, proteins)),
               "attention": engine.attention_path, **agreement(exact, engine.run(proteins))}
        accelerator.emit(args.out, row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
