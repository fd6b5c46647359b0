"""ESMFold's opt-in bf16 stem (``weights.esmfold.with_stem_precision``, ``flamino fold
--stem-precision bf16``, the Structure page's choice): the ESM-2 stem's dense kernels stored in
bf16 and nothing else, the memory estimate lower by exactly what is stored in 2 bytes instead of
4 (counted here from the built models' arrays, not from the estimate's own count), folds that
move from fp32's but stay close, a store key of their own, and a label in every PDB."""

from __future__ import annotations

import io

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from Bio.PDB import PDBParser
from flax import nnx

from flamino_core.cli import main
from flamino_core.model.esmfold.config import FoldConfig
from flamino_core.structure import folding
from flamino_core.weights.esmfold import load_fold_model
from flamino_core.model.model_id import ModelId

ABETA42 = "DAEFRHDSGYEVHHQKLVFFAEDVGGNKGAIIIVIA"  # amyloid beta 1-42's first 36 residues (P05067 672-707)


def _bytes(state) -> int:
    return sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(state))


def test_only_the_stems_dense_kernels_become_bf16_and_the_estimate_counts_them():
    exact, _ = load_fold_model(ModelId.parse("random:esmfold-tiny"))
    fast, _ = load_fold_model(ModelId.parse("random:esmfold-tiny"), "bf16")
    stem_kernels = [leaf for path, leaf in jax.tree_util.tree_leaves_with_path(nnx.state(fast.esm))
                    if "kernel" in jax.tree_util.keystr(path)]
    assert stem_kernels and all(k.dtype == jnp.bfloat16 for k in stem_kernels)
    others = [leaf for module in (fast.trunk, fast.esm_s_mlp, fast.lddt_head) for leaf in jax.tree.leaves(nnx.state(module))]
    assert others and all(leaf.dtype == jnp.float32 for leaf in others)  # the trunk and the heads stay fp32
    saved = _bytes(nnx.state(exact)) - _bytes(nnx.state(fast))
    config = FoldConfig.tiny()
    estimate = folding.fold_memory(config, 100).weights - folding.fold_memory(config, 100, stem_precision="bf16").weights
    assert saved == estimate > 0
    assert "bf16 dense kernels" in folding.fold_memory(config, 100, stem_precision="bf16").describe()
    with pytest.raises(ValueError, match="choose one of fp32, bf16"):
        load_fold_model(ModelId.parse("random:esmfold-tiny"), "fp16")


def test_a_bf16_stem_moves_the_fold_a_little_and_is_stored_apart():
    exact = folding.fold(load_fold_model(ModelId.parse("random:esmfold-tiny"))[0], ABETA42, passes=2)
    fast = folding.fold(load_fold_model(ModelId.parse("random:esmfold-tiny"), "bf16")[0], ABETA42, passes=2)
    assert not np.array_equal(exact.atom37, fast.atom37)  # the option changes the computation
    # bf16 keeps 8 significant bits (relative rounding up to 2^-9 per operand). Measured when this
    # was written, with the test model's seeds 0, 1 and 2 (two trunk passes): pLDDT moved by at
    # most 0.0014-0.0044, CA positions by an RMS of 1.6-2.2% of the chain's radius of gyration
    # (0.25-0.78 A of 15-38 A; random weights fold loosely, so coordinates move more than a trained
    # model's would). The bounds are ~2-5x those: a guard against a bf16 path that breaks the fold
    # (NaN, a wrong cast), not a parity claim.
    assert np.abs(exact.plddt - fast.plddt).max() < 0.02
    ca = exact.atom37[:, 1]  # atom37's CA slot
    drift = np.sqrt(((ca - fast.atom37[:, 1]) ** 2).sum(-1).mean())
    assert drift < 0.05 * np.sqrt(((ca - ca.mean(0)) ** 2).sum(-1).mean())
    keys = {folding.model_key(ModelId.parse("random:esmfold-tiny"), 4, p) for p in ("fp32", "bf16")}
    assert len(keys) == 2 and folding.model_key(ModelId.parse("random:esmfold-tiny"), 4) in keys


def test_the_cli_says_a_bf16_stem_in_each_pdb(tmp_path, capsys):
    fasta = tmp_path / "in.fa"
    fasta.write_text(f">abeta\n{ABETA42}\n")
    assert main(["fold", str(fasta), "-m", "random:esmfold-tiny", "-o", str(tmp_path / "o"), "--passes", "1",
                 "--stem-precision", "bf16"]) == 0
    assert "stem in bf16" in capsys.readouterr().err
    text = (tmp_path / "o" / "abeta.pdb").read_text()
    assert "stem in bf16" in text.splitlines()[0]
    assert len(list(PDBParser(QUIET=True).get_structure("abeta", io.StringIO(text)).get_residues())) == len(ABETA42)
