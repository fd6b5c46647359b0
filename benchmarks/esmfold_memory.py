"""XLA's plan of ESMFold's memory against ``structure.folding.fold_memory``: the compiled forward's
arguments (the weights) and temporaries (``memory_analysis()``), with abstract weights, so
nothing is allocated or run; esmfold_v1's full shape compiles in ~2 min per length on a CPU.

    .venv/bin/python benchmarks/esmfold_memory.py 128 448            # esmfold_v1
    .venv/bin/python benchmarks/esmfold_memory.py --tiny 128 256     # the test model
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
from flax import nnx

from flamino_core.model.esmfold import predict
from flamino_core.model.esmfold.config import FoldConfig
from flamino_core.model.esmfold.model import ESMFold
from flamino_core.structure import folding

MIB = 1 << 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lengths", type=int, nargs="+")
    parser.add_argument("--tiny", action="store_true", help="the test model instead of esmfold_v1")
    parser.add_argument("--chunk-size", type=int, default=64)
    args = parser.parse_args()
    config = FoldConfig.tiny() if args.tiny else FoldConfig.esmfold_v1()
    graphdef, state = nnx.split(nnx.eval_shape(lambda: ESMFold(config, nnx.Rngs(0))))
    for length in args.lengths:
        start = time.perf_counter()
        width = predict.padded_length(length, predict.PAD_TO)
        aatype, mask = jax.ShapeDtypeStruct((1, width), jnp.int32), jax.ShapeDtypeStruct((1, width), jnp.bool_)
        plan = predict._forward.lower(graphdef, state, aatype, mask, config.trunk.max_recycles,
                                      args.chunk_size or None).compile().memory_analysis()
        said = folding.fold_memory(config, length, chunk_size=args.chunk_size or None)
        print(f"{config.name} {length} residues (padded {width}): XLA arguments {plan.argument_size_in_bytes / MIB:,.0f} MiB, "
              f"temporaries {plan.temp_size_in_bytes / MIB:,.0f} MiB | estimate: weights {said.weights / MIB:,.0f}, "
              f"stem copy {said.stem_copy / MIB:,.0f}, work {(said.stem + said.pair + said.chunk) / MIB:,.0f} MiB, "
              f"total {said.total / MIB:,.0f} MiB vs XLA "
              f"{(plan.argument_size_in_bytes + plan.temp_size_in_bytes) / MIB:,.0f} MiB "
              f"(compiled in {time.perf_counter() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
