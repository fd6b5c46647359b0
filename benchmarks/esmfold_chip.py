"""esmfold_v1 at its published shape (a 36-layer ESM-2 3B stem, 48 trunk blocks, 4 passes, the
8-iteration structure module) folded end to end on one accelerator, with random weights drawn on
the device itself (no checkpoint is read: the published 8.4 GB file is not on these machines, and
timing does not depend on the weights' values). Each length is folded twice through
``structure.folding.fold``'s route (the first call includes its compilation, the second is the
warm fold a user waits for once the model is loaded), and the device's own peak memory is read
after each length (``memory_stats()['peak_bytes_in_use']``: lengths run shortest first, so the
running peak after a length is that length's peak). One precision per process, so each peak is
that precision's own. JSON lines to stdout and ``--out``.

Usage (on the chip host, after benchmarks/accelerator_host.sh or the wheels)::

    python3 benchmarks/esmfold_chip.py --stem-precision bf16 --lengths 100,300,1000
    python3 benchmarks/esmfold_chip.py --stem-precision fp32 --lengths 100,300,1000
    python3 benchmarks/esmfold_chip.py --stem-precision bf16 --matmul default --lengths 300,1000

``--matmul default`` runs every product at the platform's default precision (one bf16 pass on a
TPU): not the reference's numbers, a measure of what a bf16 fast mode could reach, not a mode.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED_FASTA = Path(os.environ.get("FLAMINO_SHARED") or ROOT.parent / "shared") / "fasta" / "proteingym_targets.fa"
# A real protein's residues where the shared set is here; the chip host has no ../shared, so a
# fixed human sequence (P53_HUMAN's first residues, repeated past its 393) stands in there.
P53 = ("MEEPQSDPSVEPPLSQETFSDLWKLLPENNVLSPLPSQAMDDLMLSPDDIEQWFTEDPGPDEAPRMPEAAPPVAPAPAAPTPAAPAPAPSWPLSSSVPSQKTYQGSYGF"
       "RLGFLHSGTAKSVTCTYSPALNKMFCQLAKTCPVQLWVDSTPPPGTRVRAMAIYKQSQHMTEVVRRCPHHERCSDSDGLAPPQHLIRVEGNLRVEYLDDRNTFRHSVVV"
       "PYEPPEVGSDCTTIHYNYMCNSSCMGGMNRRPILTIITLEDSSGNLLGRNSFEVRVCACPGRDRRTEEENLRKKGEPHHELPPGSTKRALPNNTSSSPQPKKKPLDGE"
       "YFTLQIRGRERFEMFRELNEALELKDAQAGKEPGGSRAHSSHLKSKKGQSTSRHKKLMFKTEGPDSD")


def protein(length: int) -> str:
    if SHARED_FASTA.exists():
        from flamino_core.inputs.fasta import read_fasta

        records = sorted(read_fasta(SHARED_FASTA).records, key=lambda r: len(r.sequence))
        return next(r.sequence for r in records if len(r.sequence) >= length)[:length]
    return (P53 * (length // len(P53) + 1))[:length]


def peak_gib(device) -> float | None:
    stats = device.memory_stats() or {}
    return round(stats["peak_bytes_in_use"] / 2**30, 2) if "peak_bytes_in_use" in stats else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", default="100,300,1000")
    parser.add_argument("--stem-precision", choices=("fp32", "bf16"), default="bf16")
    parser.add_argument("--matmul", choices=("exact", "default"), default="exact",
                        help="exact: the fold's fp32 route (products at 'highest' on a TPU); default: the platform's")
    parser.add_argument("--chunk-size", type=int, default=64)
    parser.add_argument("--blocks", type=int, default=48, help="trunk blocks (48: esmfold_v1)")
    parser.add_argument("--tiny", action="store_true", help="the test model's shape (a smoke run on a CPU)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    import jax
    from flax import nnx

    from flamino_core.engine import hardware
    from flamino_core.model.esmfold.config import FoldConfig
    from flamino_core.model.esmfold.model import ESMFold
    from flamino_core.engine.fold import fold_sequence
    from flamino_core.weights.esmfold import with_stem_precision

    device = jax.devices()[0]
    config = FoldConfig.tiny() if args.tiny else FoldConfig.esmfold_v1()
    if not args.tiny and args.blocks != config.trunk.num_blocks:
        import dataclasses

        config = dataclasses.replace(config, trunk=dataclasses.replace(config.trunk, num_blocks=args.blocks))
    start = time.perf_counter()
    def make():
        return with_stem_precision(ESMFold(config, rngs=nnx.Rngs(0)), args.stem_precision)

    # Drawn on the chip in one compiled program, in the stem's precision directly: eager
    # initialisation ran op by op (137 s) and held the fp32 stem beside its bf16 copy.
    graphdef, _ = nnx.split(nnx.eval_shape(make))
    state = jax.jit(lambda: nnx.split(make())[1])()
    model = nnx.merge(graphdef, jax.block_until_ready(state))
    init_s = time.perf_counter() - start
    weights_gib = peak_gib(device)
    precision = (hardware.exact_matmul_precision(hardware.detect(), "fp32") if args.matmul == "exact" else None)
    common = {"model": f"{config.name} shape (random weights)", "blocks": config.trunk.num_blocks,
              "passes": config.trunk.max_recycles,
              "stem_precision": args.stem_precision, "matmul": args.matmul, "matmul_precision": precision,
              "chunk_size": args.chunk_size, "platform": device.platform, "device": device.device_kind,
              "init_s": round(init_s, 1), "peak_after_init_gib": weights_gib}
    print(json.dumps({"event": "init", **common}), flush=True)
    rows = []
    for length in (int(x) for x in args.lengths.split(",")):
        sequence = protein(length)
        row = {**common, "residues": length}
        try:
            start = time.perf_counter()
            folded = fold_sequence(model, sequence, chunk_size=args.chunk_size or None, matmul_precision=precision)
            row["first_call_s"] = round(time.perf_counter() - start, 2)
            start = time.perf_counter()
            folded = fold_sequence(model, sequence, chunk_size=args.chunk_size or None, matmul_precision=precision)
            row["warm_s"] = round(time.perf_counter() - start, 2)
            row["mean_plddt"] = round(folded.mean_plddt, 4)
            row["ptm"] = round(folded.ptm, 4)
        except Exception as err:  # noqa: BLE001  (an out-of-memory on the chip is a result here)
            row["error"] = f"{type(err).__name__}: {str(err)[:300]}"
        row["peak_gib"] = peak_gib(device)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        with open(args.out, "a") as handle:
            handle.writelines(json.dumps(row) + "\n" for row in rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
