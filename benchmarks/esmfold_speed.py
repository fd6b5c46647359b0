"""ESMFold's seconds per fold on this machine, flamino against transformers'
``EsmForProteinFolding.infer`` on the same random weights (tests/esmfold_checkpoints.py shapes:
the small test shape, esmfold_v1's widths at one stem layer and one trunk block, and v1-trunk: its
48 trunk blocks under one stem layer), fp32 (``structure.folding.fold``, the app's route),
the reference's default passes, one protein per length (P53_HUMAN's first residues, then
BRCA1's for lengths past P53's 393). Each (shape, length, implementation) runs in its own
process, so its peak resident memory is its own. flamino's time is its second call (the first,
with its compilation, is given beside it); one sample each. docs/esmfold.md has the figures.
Usage::

    .venv/bin/python benchmarks/esmfold_speed.py --lengths 100,300,1000 --shapes small,v1-widths
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
SHARED_FASTA = Path(os.environ.get("FLAMINO_SHARED") or ROOT.parent / "shared") / "fasta" / "proteingym_targets.fa"
CHUNK_SIZE, CHUNK_FROM = 64, 300
# esmfold_v1's whole folding trunk (48 blocks) under a one-layer stem: the trunk and structure
# module as published, so a fold's time is esmfold_v1's less its stem's 35 other layers (those are
# the ESM-2 3B shape's, timed by benchmarks/accelerator.py as t36).
V1_TRUNK_BLOCKS = 48


def seconds(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def protein(length: int) -> str:
    """A real protein's first ``length`` residues: the first ProteinGym target at least that long."""
    from flamino_core.inputs.fasta import read_fasta

    records = read_fasta(SHARED_FASTA).records
    preferred = [r for r in records if r.id.startswith("P53_HUMAN")] + sorted(records, key=lambda r: len(r.sequence))
    return next(r.sequence for r in preferred if len(r.sequence) >= length)[:length]


def one(shape_name: str, length: int, implementation: str) -> dict:
    """Fold one protein in this process; its time and this process's peak memory."""
    import torch

    from esmfold_checkpoints import SMALL, V1_WIDTHS, make_hf_esmfold, write_hf_esmfold
    from flamino_core.structure.folding.prediction import fold
    from flamino_core.weights.esmfold import load_esmfold

    V1_TRUNK = {**V1_WIDTHS, "trunk": {**V1_WIDTHS["trunk"], "num_blocks": V1_TRUNK_BLOCKS}}
    shape = {"small": SMALL, "v1-widths": V1_WIDTHS, "v1-trunk": V1_TRUNK}[shape_name]
    sequence = protein(length)
    # Past a few hundred residues both fold the pair state in chunks of rows (the reference's
    # chunk_size, the same numbers): unchunked, triangular attention's scores at 1,000 residues
    # are (L, heads, L, L) floats, 16 GB at 4 heads.
    chunk = CHUNK_SIZE if length > CHUNK_FROM else None
    reference = make_hf_esmfold(3, shape, chunk_size=chunk)
    row = {"shape": shape_name, "residues": length, "implementation": implementation, "chunk_size": chunk}
    if implementation == "flamino":
        with tempfile.TemporaryDirectory() as scratch:
            model = load_esmfold(write_hf_esmfold(reference, Path(scratch) / shape_name))
        del reference
        # ``fold`` is the app's and the CLI's route: fp32 products on every platform.
        row["first_call_s"] = round(seconds(lambda: fold(model, sequence, chunk_size=chunk)), 2)
        row["seconds"] = round(seconds(lambda: fold(model, sequence, chunk_size=chunk)), 2)
        import jax

        row["platform"] = jax.default_backend()
    else:
        with torch.no_grad():
            row["seconds"] = round(seconds(lambda: reference.infer([sequence])), 2)
        row["torch_threads"] = torch.get_num_threads()
    row["peak_rss_gib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="64,128")
    parser.add_argument("--shapes", default="small,v1-widths")
    parser.add_argument("--implementations", default="flamino,transformers")
    parser.add_argument("--out", type=Path, help="append each row as a JSON line")
    parser.add_argument("--one", nargs=3, metavar=("SHAPE", "LENGTH", "IMPLEMENTATION"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one[0], int(args.one[1]), args.one[2])), flush=True)
        return 0
    for shape in args.shapes.split(","):
        for length in map(int, args.lengths.split(",")):
            for implementation in args.implementations.split(","):
                done = subprocess.run([sys.executable, __file__, "--one", shape, str(length), implementation],
                                      capture_output=True, text=True)
                line = done.stdout.strip().splitlines()[-1] if done.returncode == 0 else json.dumps(
                    {"shape": shape, "residues": length, "implementation": implementation,
                     "failed": done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]})
                print(line, flush=True)
                if args.out:
                    with args.out.open("a") as handle:
                        handle.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
