"""Each system's numbers against HF transformers' on the same weights and inputs.

The varlen and scan workers save what they computed (``measure.save_outputs``); ``run.py``
calls ``compare`` with HF's file and another system's, and puts the figures in that
measurement's record:

- ``max_abs_dlogit``: the largest |logit - HF logit| over every residue of the 64 varlen
  proteins and all 33 vocabulary entries (flamino's parity bound is 1e-4 in fp32);
- ``logit_pearson``: correlation of all those logits with HF's (esm.cpp's own INT8 gate is
  >= 0.999 against its FP32);
- ``scan_spearman``: Spearman correlation, over every timed position of the masked scan and
  its 19 substitutions, of the masked-marginal scores log p(mt) - log p(wt) with HF's (what
  a variant-effect ranking sees); ``scan_max_abs_dlogp``: the largest |log p - HF log p|.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

def compare(reference: Path, other: Path, scan_sequence: str | None = None) -> dict:
    """Accuracy figures of ``other`` against ``reference`` (HF): whichever parts both hold."""
    ref, out = np.load(reference), np.load(other)
    result: dict = {}
    keys = sorted((k for k in ref.files if k.startswith("logits/")), key=lambda k: int(k.split("/")[1]))
    if keys and all(k in out.files for k in keys):
        a = np.concatenate([ref[k].reshape(-1) for k in keys]).astype(np.float64)
        b = np.concatenate([out[k].reshape(-1) for k in keys]).astype(np.float64)
        result.update(max_abs_dlogit=float(np.max(np.abs(a - b))), logit_pearson=float(np.corrcoef(a, b)[0, 1]),
                      residues=int(sum(ref[k].shape[0] for k in keys)))
    if "scan" in ref.files and "scan" in out.files and scan_sequence:
        n = min(len(ref["scan"]), len(out["scan"]))
        a, b = ref["scan"][:n].astype(np.float64), out["scan"][:n].astype(np.float64)
        result.update(scan_max_abs_dlogp=float(np.max(np.abs(a - b))),
                      scan_spearman=_spearman(masked_marginal_scores(a, scan_sequence[:n]),
                                              masked_marginal_scores(b, scan_sequence[:n])),
                      scan_positions=n)
    return result


def masked_marginal_scores(log_probs: np.ndarray, sequence: str) -> np.ndarray:
    """log p(mt) - log p(wt) at each position for its 19 substitutions, flattened in a fixed order."""
    from flamino_core.alphabet import AA_TO_IDX, STANDARD_AA_TOKEN_IDS, STANDARD_AMINO_ACIDS

    scores = []
    for i, wt in enumerate(sequence):
        row = log_probs[i, STANDARD_AA_TOKEN_IDS] - log_probs[i, AA_TO_IDX[wt]]
        scores.append(np.delete(row, STANDARD_AMINO_ACIDS.index(wt)))
    return np.concatenate(scores)


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)
