"""ESMFold's opt-in fast mode (``weights.esmfold.with_fold_precision``, ``flamino fold
--fold-precision fast``): the trunk's dense layers and its triangular and attention einsums on bf16
operands with fp32 accumulation (read from the traced program, not from the module's flags), the
stem in bf16, the structure module and heads untouched; folds that move from fp32's by a bounded
amount, a store key of their own, and a label in every PDB."""

from __future__ import annotations

import io
import re

import jax
import numpy as np
import pytest
from Bio.PDB import PDBParser

from flamino_core.cli import main
from flamino_core.model.model_id import ModelId
from flamino_core.options import FoldPrecision, Precision
from flamino_core.structure import folding
from flamino_core.weights.esmfold import load_fold_model

TINY = ModelId.parse("random:esmfold-tiny")
ABETA42 = "DAEFRHDSGYEVHHQKLVFFAEDVGGNKGAIIIVIA"  # amyloid beta 1-42's first 36 residues (P05067 672-707)
DOT = re.compile(r"stablehlo\.dot_general[^\n]*?:\s*\((tensor<[^>]*>),\s*(tensor<[^>]*>)\)\s*->\s*(tensor<[^>]*>)")


def _dots(model) -> list[tuple[str, str, str]]:
    """(lhs, rhs, result) element types of every dot of the fold's program for ``model``, lowered
    (not run) through the route the app and the CLI fold by."""
    from flamino_core.model.esmfold import predict

    jitted, found = predict._forward, []

    def lowered(graphdef, state, aatype, mask, passes, chunk_size, matmul_precision=None, stem=None):
        text = jitted.lower(graphdef, state, aatype, mask, passes, chunk_size, matmul_precision, stem).as_text()
        found.extend(tuple(t.rsplit("x", 1)[-1] for t in m) for m in DOT.findall(text))
        raise StopIteration

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(predict, "_forward", lowered)
        with pytest.raises(StopIteration):
            folding.fold(model, ABETA42, passes=1)
    return found


def test_the_trunks_products_are_bf16_with_fp32_accumulation_in_the_traced_program():
    exact = _dots(load_fold_model(TINY)[0])
    stem_only = _dots(load_fold_model(TINY, Precision.BF16)[0])
    fast = _dots(load_fold_model(TINY, fold_precision=FoldPrecision.FAST)[0])
    assert exact and all(d == ("f32>", "f32>", "f32>") for d in exact)  # fp32: every product fp32
    assert len(fast) == len(exact) == len(stem_only)  # the same program: only the operands rounded

    def rounded(dots):  # bf16 operands, an fp32 result (accumulated in fp32)
        return sum(d == ("bf16>", "bf16>", "f32>") for d in dots)

    # A trunk block, traced once (nnx.scan's body, in lax.scan's pass body), has 34 dense layers
    # (sequence attention 3, sequence-to-pair 2, pair-to-sequence 1, two triangular updates 6 each,
    # two triangular attentions 6 each, the two MLPs 2 each) and 8 einsums (the sequence
    # attention's 2, one per triangular update, the triangular attentions' 2 each): 42 products
    # on bf16 operands beyond the bf16 stem's (the same engine mode, fast mode's stem too).
    assert rounded(fast) - rounded(stem_only) == 42
    assert not any("bf16>" in d[2] for d in fast)  # never a bf16 result
    # The structure module, the heads and the stem's attention stay fp32: fp32 products remain.
    assert sum(d == ("f32>", "f32>", "f32>") for d in fast) > 0


def test_the_fast_mode_moves_the_fold_a_bounded_amount_and_is_stored_apart():
    exact = folding.fold(load_fold_model(TINY)[0], ABETA42, passes=1)
    model = load_fold_model(TINY, fold_precision=FoldPrecision.FAST)[0]
    assert model.fold_precision == FoldPrecision.FAST and model.stem_precision == Precision.BF16
    fast = folding.fold(model, ABETA42, passes=1)
    assert np.isfinite(fast.atom37).all() and np.isfinite(fast.pae).all()
    assert not np.array_equal(exact.atom37, fast.atom37)  # the option changes the computation
    # bf16 keeps 8 significant bits (a relative rounding up to 2^-9 per operand), through every
    # block's products, with fp32 sums. Measured when this was written (the test model, one pass,
    # seeds 0 and 1): CA RMSD after superposition 0.20 and 0.32 A (1.4% and 1.7% of the chain's
    # radius of gyration), pLDDT at most 0.0018 apart, PAE at most 0.31 A apart (0.05 A on
    # average); five ProteinGym targets at the model's three passes (benchmarks/fold_gates.py,
    # docs/esmfold.md) gave 0.9-1.5% of the radius. Random weights fold loosely, so a trained
    # model's folds should move less. The bounds are 3-5x those: a guard against a fast path that
    # breaks the fold (NaN, a wrong cast, a bf16 sum, an fp32 layer norm lost), not a parity claim.
    from flamino_core.structure.folding.variant_structures import kabsch

    ca, ca_fast = exact.atom37[:, 1], fast.atom37[:, 1]  # atom37's CA slot
    rotation, shift = kabsch(ca_fast, ca)
    rmsd = np.sqrt(((ca_fast @ rotation.T + shift - ca) ** 2).sum(-1).mean())
    assert rmsd < 0.05 * np.sqrt(((ca - ca.mean(0)) ** 2).sum(-1).mean())
    assert np.abs(exact.plddt - fast.plddt).max() < 0.01
    assert np.abs(exact.pae - fast.pae).max() < 1.5
    keys = {folding.model_key(TINY, 4, Precision.FP32, f) for f in FoldPrecision}
    keys.add(folding.model_key(TINY, 4, Precision.BF16))
    assert len(keys) == 3 and folding.model_key(TINY, 4) in keys
    with pytest.raises(ValueError, match="choose one of fp32, fast"):
        load_fold_model(TINY, fold_precision="fp16")


def test_the_cli_says_the_fast_mode_in_each_pdb(tmp_path, capsys):
    fasta = tmp_path / "in.fa"
    fasta.write_text(f">abeta\n{ABETA42}\n")
    assert main(["fold", str(fasta), "-m", "random:esmfold-tiny", "-o", str(tmp_path / "o"), "--passes", "1",
                 "--fold-precision", "fast"]) == 0
    assert "fast mode" in capsys.readouterr().err
    text = (tmp_path / "o" / "abeta.pdb").read_text()
    assert "fast mode: bf16 products" in text.splitlines()[0]
    assert len(list(PDBParser(QUIET=True).get_structure("abeta", io.StringIO(text)).get_residues())) == len(ABETA42)
    table = (tmp_path / "o" / "folds.csv").read_text().splitlines()[0]
    assert table == "name,length,mean_plddt,ptm,pdb,past_trained_length"  # the columns scripts read, unchanged
    assert jax.numpy.isfinite(float(open(tmp_path / "o" / "folds.csv").read().splitlines()[1].split(",")[2]))


def test_esmfold2_refuses_the_fast_mode_before_any_work(tmp_path, capsys):
    fasta = tmp_path / "in.fa"
    fasta.write_text(f">abeta\n{ABETA42}\n")
    assert main(["fold", str(fasta), "-m", "random:esmfold2-tiny", "-o", str(tmp_path / "o"),
                 "--fold-precision", "fast"]) != 0
    assert "--fold-precision fast is for ESMFold (v1)" in capsys.readouterr().err
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())
