"""The predicted structure's pure half (flamino_core/structure/folding/prediction.py, folding/figures.py): the
memory said before a fold, the hosted length limit, the fold stored by model and sequence, mmCIF
text, the PAE heatmap. No model runs here (a fold is built from arrays)."""

from __future__ import annotations

import io

import jax
import numpy as np
import pytest
from flax import nnx

from flamino_core.model.esmfold import residue_constants as rc
from flamino_core.model.esmfold.config import FoldConfig
from flamino_core.model.esmfold.predict import FoldedProtein
from flamino_core.store.result_store import ResultStore
from flamino_core.structure import folding
from flamino_core.structure.folding.figures import pae_heatmap
from flamino_core.numbering import Numbering
from flamino_core.model.model_id import ModelId

GIB = 1 << 30


def made_fold(sequence: str = "MKTAYIAKQR", seed: int = 0) -> FoldedProtein:
    """A fold of ``sequence`` from random arrays: every atom its residue type has, pLDDT in [0, 1]."""
    rng = np.random.default_rng(seed)
    aatype = rc.aatype(sequence)
    exists = rc.ATOM37_MASK[aatype]
    n = len(sequence)
    return FoldedProtein(sequence, aatype, rng.normal(0, 10, (n, 37, 3)).astype(np.float32), exists,
                         rng.uniform(0, 1, (n, 37)).astype(np.float32), rng.uniform(0, 30, (n, n)).astype(np.float32),
                         float(rng.uniform()))


def test_the_weights_are_every_parameter_of_the_model_in_fp32():
    """Counted from the abstract state, checked against a model actually made (every array it
    holds, counted here: its parameters and its 8 values of fixed tables) and against esmfold_v1's published size: ESM-2 3B (2.84 billion) and a
    folding trunk of ~0.7 billion, 3.5 billion in all (Lin et al. 2023)."""
    from flamino_core.model.esmfold.model import ESMFold

    tiny = FoldConfig.tiny()
    made = ESMFold(tiny, nnx.Rngs(0))
    arrays = sum(int(np.prod(leaf.shape)) for leaf in jax.tree.leaves(nnx.state(made)))
    assert folding.fold_memory(tiny, 10).weights == 4 * arrays
    v1 = folding.parameter_count(FoldConfig.esmfold_v1())
    assert 3.4e9 < v1 < 3.6e9
    assert 12.5 < folding.fold_memory(FoldConfig.esmfold_v1(), 100).weights / GIB < 13.5


def test_the_pair_state_grows_as_the_length_squared_and_chunks_bound_the_attention():
    v1 = FoldConfig.esmfold_v1()
    count = folding.parameter_count(v1)
    short, long = (folding.fold_memory(v1, n, parameters=count) for n in (256, 512))
    assert long.pair == 4 * short.pair  # both padded lengths are multiples of 64
    # esmfold_v1's pair state is 128 floats per pair: 512^2 x 128 x 4 bytes = 128 MiB, held ~7 times in a block
    assert long.pair == 7 * 128 * (1 << 20)
    whole = folding.fold_memory(v1, 512, chunk_size=None, parameters=count)
    assert whole.chunk == 8 * long.chunk  # all 512 rows at once instead of 64
    assert long.weights == short.weights and "not a measurement" in long.describe()
    # 64 rows x 512 x (512 x 4 heads of logits + 512 of the pair MLP) floats: 0.3125 GiB
    assert long.chunk == 64 * 512 * (4 * 512 + 4 * 128) * 4
    # 13.13 of weights + twice (0.875 + 0.3125 + 0.22 of the stem's states) + the process's 0.46 and
    # compilation's 0.39 (measured, issue #67)
    assert long.describe().startswith("about 16.8 GiB for 512 residues")
    with pytest.raises(ValueError):
        folding.fold_memory(v1, 0, parameters=count)


def test_a_hosted_server_refuses_a_long_fold_before_work_saying_why(monkeypatch):
    assert folding.length_refusal(400, hosted=True) is None
    said = folding.length_refusal(401, hosted=True)
    assert "400 at most" in said and "pair state" in said and "flamino fold" in said
    assert folding.length_refusal(401, hosted=False) is None  # local: only the stem's length
    assert "1,022 at most" in folding.length_refusal(1023, hosted=False)
    monkeypatch.setenv("FLAMINO_MAX_FOLD_RESIDUES", "50")
    assert "50 at most" in folding.length_refusal(51, hosted=True)


def test_a_fold_is_stored_by_model_and_sequence_and_read_back(tmp_path, monkeypatch):
    from flamino_core.engine import fold as predict

    calls = []

    def fold(model, sequence, passes=None, chunk_size=None, matmul_precision=None):
        calls.append(sequence)
        return made_fold(sequence, seed=len(calls))

    monkeypatch.setattr(predict, "fold_sequence", fold)
    store = ResultStore(tmp_path / "store.sqlite")
    key = folding.model_key(ModelId.parse("random:esmfold-tiny"), 3)
    first = folding.predict_stored(None, store, key, "mktayiakqr")
    again = folding.predict_stored(None, store, key, "MKTAYIAKQR")
    assert calls == ["MKTAYIAKQR"]
    for name in folding.FIELDS:
        np.testing.assert_array_equal(getattr(again, name), getattr(first, name))
    seeded = ModelId.parse("random:esmfold-tiny:1")
    other = folding.predict_stored(None, store, folding.model_key(seeded, 3), "MKTAYIAKQR")
    assert len(calls) == 2 and not np.array_equal(other.atom37, first.atom37)  # another model: folded again
    tiny = ModelId.parse("random:esmfold-tiny")
    assert folding.model_key(tiny, 3) != folding.model_key(tiny, 4)
    assert folding.model_key(tiny, 3) != folding.model_key(tiny, 3, "bf16")
    # the published model by its Hub repository, whichever name it was asked by (nothing is loaded)
    assert folding.model_key(ModelId.parse("esmfold_v1"), 4) == folding.model_key(ModelId.parse("ESMFold_v1"), 4) == \
        folding.model_key(ModelId.parse("facebook/esmfold_v1"), 4) == \
        "esmfold|facebook/esmfold_v1|passes=4"


def test_the_mmcif_holds_the_pdbs_atoms_and_pldds():
    from Bio.PDB import MMCIFParser, PDBParser

    folded = made_fold()
    pdb_text = folding.prediction_pdb(folded, folding.RANDOM_MODEL, "toy")
    assert pdb_text.startswith("TITLE     ESMFOLD PREDICTION OF toy")
    cif = MMCIFParser(QUIET=True).get_structure("c", io.StringIO(folding.prediction_mmcif(pdb_text, "toy")))
    pdb = PDBParser(QUIET=True).get_structure("p", io.StringIO(pdb_text))
    assert "esmfold" in str(pdb.header).lower()  # three_di.is_predicted_structure: SaProt masks pLDDT < 70
    a, b = list(pdb.get_atoms()), list(cif.get_atoms())
    assert len(a) == len(b) == int(folded.atom37_exists.sum())
    np.testing.assert_allclose([x.coord for x in b], [x.coord for x in a], atol=1e-6)
    np.testing.assert_allclose([x.bfactor for x in b], [x.bfactor for x in a], atol=1e-6)
    # the B-factors are pLDDT x 100, within the PDB column's two decimals
    expected = 100 * folded.plddt[folded.atom37_exists > 0.5]
    np.testing.assert_allclose([x.bfactor for x in a], expected, atol=0.006)


def test_the_pae_heatmap_shows_the_matrix_in_the_records_numbering():
    pae = np.arange(9, dtype=float).reshape(3, 3)
    figure = pae_heatmap(pae, "PAE <b>", numbering=Numbering(10))
    heat = figure.data[0]
    np.testing.assert_array_equal(np.asarray(heat.z), pae)
    assert list(heat.x) == [10, 11, 12] and heat.zmin == 0 and heat.zmax == 30
    assert "&lt;b&gt;" in figure.layout.title.text
    with pytest.raises(ValueError, match="square"):
        pae_heatmap(np.zeros((2, 3)))


@pytest.mark.integration  # two compilations of the tiny model, ~50 s on this shared CPU
def test_the_estimate_is_above_what_xla_allocates_and_within_twice_it():
    """The fold's working memory as XLA plans it (the compiled forward's temporary buffers,
    ``memory_analysis``; nothing is run) against ``fold_memory``'s stem + pair + chunk terms, at two
    lengths of the test model (whose pair state has esmfold_v1's 4 heads of pair attention). The
    estimate is meant to be said before work, so it must not be below what is needed; and it
    must not be loose past twice it. Measured: 1.37x at 128 residues, 1.30x at 256. The weights
    are the compiled function's arguments. (At esmfold_v1's full shape, abstract weights, 2-4 min
    of compilation, so not run here: XLA planned 10,827 MiB of temporaries at 128 residues and
    11,186 MiB at 448 while the layer stack was sliced, 10,805 MiB of it a copy of the stem's
    layers, which model/stack.py no longer makes; the estimate's work was 138 and 1,131 MiB.)"""
    from flamino_core.engine import hardware
    from flamino_core.engine.fold import StemPass
    from flamino_core.model.esmfold import predict
    from flamino_core.model.esmfold.model import ESMFold

    config = FoldConfig.tiny()
    abstract = nnx.eval_shape(lambda: ESMFold(config, nnx.Rngs(0)))
    graphdef, state = nnx.split(abstract)
    backend = hardware.choose(config.stem.head_dim, precision="fp32")  # the stem's engine's choice here
    stem = StemPass.of(nnx.graphdef(abstract.esm), backend.implementation, backend.matmul_precision,
                       config.stem.num_layers)
    for length in (128, 256):
        aatype = jax.ShapeDtypeStruct((1, length), np.int32)
        mask = jax.ShapeDtypeStruct((1, length), np.bool_)
        planned = predict._forward.lower(graphdef, state, aatype, mask, config.trunk.max_recycles, 64,
                                         None, stem).compile()
        analysis = planned.memory_analysis()
        said = folding.fold_memory(config, length)
        work = said.stem + said.pair + said.chunk
        assert analysis.temp_size_in_bytes <= work <= 2 * analysis.temp_size_in_bytes, (length, analysis, said)
        # jit drops the arrays a fold never reads (the stem's LM head: 1.3% of this tiny model,
        # 0.2% of esmfold_v1's); they are loaded all the same, so the estimate counts them.
        assert 0.98 * said.weights <= analysis.argument_size_in_bytes <= said.weights


# The fold worker's resident MiB measured by benchmarks/hostile_folds.py (``memory``; the test model on
# the 2-core CPU server at load 9-10, 2026-12-07): the worker with the model loaded before any fold, and
# each length's cold fold's peak above it (a fresh worker per length).
LOADED_MIB = 471
COLD_PEAK_MIB = {100: 391, 250: 511, 400: 1_100}


def test_the_estimate_counts_what_the_fold_worker_held_within_1_5x():
    """Issue #67: before a 400-residue fold the page said "about 386 MiB", the buffers' sum from the
    shape; the fold's process peaked at +1.30 GiB (cold) in the issue, 1,571 MiB in all here. With
    the process, the compilation and the measured factor on the buffers the figure is at or above
    each measured peak and within 1.5x of it; once compiled, the compilation is left out."""
    config = FoldConfig.tiny()
    for length, peak in COLD_PEAK_MIB.items():
        said = folding.fold_memory(config, length).total / (1 << 20)
        assert LOADED_MIB + peak <= said <= 1.5 * (LOADED_MIB + peak), (length, said)
    warm = folding.fold_memory(config, 400, compiled=True)
    assert warm.compile == 0 and folding.fold_memory(config, 400).total - warm.total == 400 << 20
    chip = folding.fold_memory(config, 400, platform="tpu")  # an accelerator's memory: weights and buffers
    assert chip.total == chip.weights + chip.stem + chip.pair + chip.chunk and "process" not in chip.describe()
