"""ESMFold2 folded end to end on one accelerator at its published network shape (the reference's
defaults: 24 trunk layers, 10 loops, 8 diffusion samples, 68 sampler steps, no MSA: the Fast
layout), on each ESM C stem it is published with: the 2026 300M and 600M backbones (the smaller,
experimental variants) in fp32, and ESM C 6B (80 layers, width 2,560) with its weights stored in
bf16 (25 GB of fp32 weights do not fit a 16 GiB chip; labelled). Random weights are filled on the
host in each leaf's own dtype (no checkpoint here; timing does not depend on the
weights' values, and a 6B drawn in fp32 first would not fit either).

Each length is folded twice through ``fold_arrays`` (``flamino fold``'s route; the first call
includes compilation, the second is the warm fold a user waits for), the stem's warm pass is
timed alone, and the device's peak memory is read after each length (lengths run shortest first,
so the running peak after a length is that length's peak). Products at ``highest`` (exact fp32)
unless ``--matmul default``. JSON lines to stdout and ``--out``.

Usage (on the chip host, after benchmarks/accelerator_host.sh)::

    python3 benchmarks/esmfold2_chip.py --stem 300M --lengths 100,300,1024
    python3 benchmarks/esmfold2_chip.py --stem 6B --lengths 100,300,1024
    python3 benchmarks/esmfold2_chip.py --tiny --lengths 40   # a smoke run on a CPU
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from esmfold_chip import peak_gib, protein  # noqa: E402  (the same real residues and peak reading)

# The ESM C stems ESMFold2 is published with: (layers, width, heads) as ``ModelConfig.esmc`` takes
# them; 6B's feed-forward width is its card's 6,912 (config.py's ``_esmc_6b``).
STEMS = {"300M": (30, 960, 15), "600M": (36, 1152, 18), "6B": None}


def build_config(stem: str, tiny: bool):
    from flamino_core.model.config import ModelConfig
    from flamino_core.model.esmfold2.config import EsmFold2Config

    if tiny:
        return EsmFold2Config.tiny()
    config = EsmFold2Config.esmfold2_fast()
    if STEMS[stem] is not None:
        config = dataclasses.replace(config, esmc=ModelConfig.esmc(*STEMS[stem], name=f"esmfold2-{stem}-esmc"),
                                     name=f"esmfold2-{stem}")
    return config


def draw_model(config, stem_bf16: bool):
    """The model with random weights filled on the host in each leaf's own dtype (the stem's kernels
    in bf16 when ``stem_bf16``) and put on the device: no program is compiled to draw them (one
    small program per leaf shape took 101 s on the chip host), and a 6B stem is never held in fp32.
    Each leaf repeats one block of a million normal draws: timing does not depend on the values."""
    import jax
    import ml_dtypes  # noqa: F401  (NumPy's bfloat16)
    import numpy as np
    from flax import nnx

    from flamino_core.model.esmfold2.model import EsmFold2
    from flamino_core.model.precision import use_bf16_matmuls

    def make():
        model = EsmFold2(config, rngs=nnx.Rngs(0))
        if stem_bf16:
            use_bf16_matmuls(model.esmc, store_bf16=True)
        return model

    graphdef, abstract = nnx.split(nnx.eval_shape(make))
    block = np.random.default_rng(0).standard_normal(1 << 20).astype(np.float32) * 0.02
    device = jax.devices()[0]

    def fill(leaf):
        values = np.resize(block.astype(np.dtype(leaf.dtype)), leaf.shape)
        return jax.device_put(values, device)

    state = jax.tree.map(fill, abstract)
    return nnx.merge(graphdef, jax.block_until_ready(state))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stem", choices=sorted(STEMS), default="300M")
    parser.add_argument("--stem-precision", choices=("fp32", "bf16"), default=None,
                        help="default: bf16 for 6B (it does not fit a 16 GiB chip in fp32), fp32 otherwise")
    parser.add_argument("--lengths", default="100,300,1024")
    parser.add_argument("--matmul", choices=("exact", "default"), default="exact")
    parser.add_argument("--samples", type=int, default=None, help="diffusion samples (default: the config's 8)")
    parser.add_argument("--steps", type=int, default=None, help="sampler steps (default: the config's 68)")
    parser.add_argument("--tiny", action="store_true", help="the test model's shape (a smoke run on a CPU)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    import jax

    from flamino_core.engine import hardware
    from flamino_core.model.esmfold2.features import check_chains, prepare_features
    from flamino_core.model.esmfold2.predict import fold_arrays

    stem_precision = args.stem_precision or ("bf16" if args.stem == "6B" and not args.tiny else "fp32")
    device = jax.devices()[0]
    config = build_config(args.stem, args.tiny)
    start = time.perf_counter()
    model = draw_model(config, stem_precision == "bf16")
    init_s = time.perf_counter() - start
    precision = hardware.exact_matmul_precision(hardware.detect(), "fp32") if args.matmul == "exact" else None
    common = {"model": f"{config.name} network shape (random weights, Fast layout: no MSA encoder)",
              "stem": "tiny" if args.tiny else args.stem, "stem_precision": stem_precision, "matmul": args.matmul,
              "matmul_precision": precision, "trunk_layers": config.folding_trunk_num_hidden_layers,
              "loops": config.num_loops, "samples": args.samples or config.structure_head.num_diffusion_samples,
              "steps": args.steps or config.structure_head.inference_num_steps,
              "platform": device.platform, "device": device.device_kind, "init_s": round(init_s, 1),
              "peak_after_init_gib": peak_gib(device)}
    print(json.dumps({"event": "init", **common}), flush=True)
    rows = []
    for length in (int(x) for x in args.lengths.split(",")):
        row = {**common, "residues": length}
        try:
            features = prepare_features(check_chains([protein(length)], "bench"), "bench")
            options = dict(seed=0, num_samples=args.samples, num_steps=args.steps, matmul_precision=precision)
            start = time.perf_counter()
            out = fold_arrays(model, features, **options)
            row["first_call_s"] = round(time.perf_counter() - start, 2)
            start = time.perf_counter()
            out = fold_arrays(model, features, **options)
            row["warm_s"] = round(time.perf_counter() - start, 2)
            with jax.default_matmul_precision(precision) if precision else _nothing():
                start = time.perf_counter()
                jax.block_until_ready(model.language_model_states(features))
                row["stem_warm_s"] = round(time.perf_counter() - start, 2)
            row["atoms"] = int(features["atom_attention_mask"].sum())
            row["finite"] = bool(jax.numpy.isfinite(out["sample_atom_coords"]).all())
        except Exception as err:  # noqa: BLE001  (an out-of-memory on the chip is a result here)
            row["error"] = f"{type(err).__name__}: {str(err)[:300]}"
        row["peak_gib"] = peak_gib(device)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        with open(args.out, "a") as handle:
            handle.writelines(json.dumps(row) + "\n" for row in rows)
    return 0


def _nothing():
    import contextlib

    return contextlib.nullcontext()


if __name__ == "__main__":
    raise SystemExit(main())
