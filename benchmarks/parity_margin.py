"""How much room the 1e-4 parity bound has on the test checkpoints, over many weight seeds.

For each seed: a random HF checkpoint at the test scale (``reference_checkpoints``), our logits
against ``EsmForMaskedLM``'s on the real FASTA files, then the same with each modelling error of
``tests/parity/test_parity.py::MODELLING_ERRORS`` injected. Prints the worst faithful difference (fp32
noise) and the smallest injected one; the bound must sit well between them.

    .venv/bin/python benchmarks/parity_margin.py --seeds 20 [--embedding-std 1.0]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests")]
import kind_folders  # noqa: E402,F401  (the test folders on the path: test modules' helpers)


class _Patch:
    """The bit of pytest's monkeypatch the injections use."""

    def __init__(self):
        self.undo = []

    def setattr(self, target, name, value):
        self.undo.append((target, name, getattr(target, name)))
        setattr(target, name, value)

    def restore(self):
        for target, name, value in reversed(self.undo):
            setattr(target, name, value)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--embedding-std", type=float, default=None)
    args = parser.parse_args()

    import jax.numpy as jnp
    import torch

    import reference_checkpoints as rc
    from conftest import SHARED_FASTA, T6, TINY, _eager
    from test_parity import MODELLING_ERRORS
    from flamino_core.alphabet import batch_encode
    from flamino_core.weights.convert import params_to_model
    from flamino_core.inputs.fasta import read_fasta
    from flamino_core.weights.loading import load_weights

    std = args.embedding_std if args.embedding_std is not None else rc.EMBEDDING_STD
    seqs = [r.sequence for p in sorted(SHARED_FASTA.glob("*.fa")) for r in read_fasta(p).records]
    tokens = batch_encode(seqs)
    real = tokens != 1
    import tempfile

    for config in (TINY, T6):
        noise, injected = [], {name: [] for name in MODELLING_ERRORS}
        for seed in range(args.seeds):
            hf = _eager(rc.make_hf_model(config, seed, std))
            with tempfile.TemporaryDirectory() as folder:
                weights = load_weights(str(rc.write_hf_2022(hf, config, Path(folder))))
            ref = rc.hf_forward(hf, tokens).logits.numpy().astype(np.float64)

            def worst(model_config, params):
                logits = params_to_model(params, model_config)(jnp.asarray(tokens))["logits"]
                return float(np.abs(np.asarray(logits, np.float64) - ref)[real].max())

            noise.append(worst(weights.config, weights.params))
            for name, inject in MODELLING_ERRORS.items():
                patch = _Patch()
                try:
                    injected[name].append(worst(*inject(weights.config, weights.params, patch)))
                finally:
                    patch.restore()
        print(f"{config.name}, embedding std {std}, {args.seeds} seeds: faithful worst {max(noise):.2e} "
              f"(median {np.median(noise):.2e}); injected, smallest: "
              + ", ".join(f"{name} {min(v):.2e}" for name, v in injected.items()), flush=True)


if __name__ == "__main__":
    main()
