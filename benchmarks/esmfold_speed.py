"""ESMFold's seconds per fold on this machine, flamino against transformers'
``EsmForProteinFolding.infer`` on the same random weights (tests/esmfold_checkpoints.py shapes:
the small test shape, and esmfold_v1's widths at one stem layer and one trunk block), fp32,
the reference's default passes, one protein of 64 and of 128 residues (P53_HUMAN's first
residues). flamino's time is its second call (the first, with its compilation, is printed
beside it); one sample each. docs/esmfold.md has the figures. Usage::

    .venv/bin/python benchmarks/esmfold_speed.py
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from esmfold_checkpoints import SMALL, V1_WIDTHS, make_hf_esmfold, write_hf_esmfold  # noqa: E402
from flamino_core.inputs.fasta import read_fasta  # noqa: E402
from flamino_core.model.esmfold.predict import fold_sequence  # noqa: E402
from flamino_core.weights.esmfold import load_esmfold  # noqa: E402

SHARED_FASTA = ROOT.parent / "shared" / "fasta" / "proteingym_targets.fa"


def seconds(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def main() -> None:
    protein = next(r for r in read_fasta(SHARED_FASTA).records if r.id.startswith("P53_HUMAN")).sequence
    with tempfile.TemporaryDirectory() as scratch:
        for label, shape in (("small", SMALL), ("v1-widths", V1_WIDTHS)):
            reference = make_hf_esmfold(3, shape)
            model = load_esmfold(write_hf_esmfold(reference, Path(scratch) / label))
            for length in (64, 128):
                sequence = protein[:length]
                first = seconds(lambda: fold_sequence(model, sequence))
                ours = seconds(lambda: fold_sequence(model, sequence))
                with torch.no_grad():
                    theirs = seconds(lambda: reference.infer([sequence]))
                print(f"{label} L={length}: flamino {ours:.2f} s (first call {first:.1f} s with compilation), "
                      f"transformers {theirs:.2f} s", flush=True)
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB")


if __name__ == "__main__":
    main()
