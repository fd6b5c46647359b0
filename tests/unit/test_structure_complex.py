"""The Structure page's ESMFold2 complex, its core pieces without a model (fast): AlphaFold's
pLDDT bands at their edges, the PAE heatmap's chain boundaries and hover, the ipTM table, the 3D
scene by chain and by band, the hosted limit on the whole complex, the store's round trip of a
fold and its key, and the memory estimate's growth with the complex's length."""

from __future__ import annotations

import numpy as np
import pytest

from flamino_core.model.esmfold2.folded import FoldedComplex
from flamino_core.model.esmfold2.residues import HEAVY_ATOMS, ONE_TO_THREE
from flamino_core.structure import folding
from flamino_core.model.model_id import ModelId


def made_complex(sequences=("MKV", "GW"), names=("one", "two"), seed=0) -> FoldedComplex:
    """A FoldedComplex of random numbers (no model): shapes as ``fold_complex`` gives them."""
    rng = np.random.default_rng(seed)
    n = sum(len(s) for s in sequences)
    atoms = sum(len(HEAVY_ATOMS[ONE_TO_THREE[a]]) for s in sequences for a in s)
    pair = rng.uniform(0, 1, (len(sequences), len(sequences))).astype(np.float32)
    return FoldedComplex(name="_".join(names), chain_ids=tuple("AB"[:len(sequences)]), chain_names=names,
                         sequences=sequences, positions=rng.normal(size=(atoms, 3)).astype(np.float32),
                         plddt_atoms=rng.uniform(0, 1, atoms).astype(np.float32),
                         plddt=np.array([0.95, 0.8, 0.6, 0.4, 0.2][:n], np.float32),  # off the band edges (float32)
                         pae=rng.uniform(0, 30, (n, n)).astype(np.float32), ptm=0.5, iptm=0.4,
                         chain_pair_iptm=pair, complex_plddt=0.6, sample=1, samples=2)


def test_plddt_bands_are_alphafolds_with_their_edges():
    from flamino_core.structure.folding.complex_figures import plddt_band

    got = [plddt_band(v)[1] for v in (95, 90.01, 90, 70.01, 70, 50.01, 50, 0)]
    # A band holds its lower bound (70.0 is confident, as SaProt's mask of pLDDT < 70 keeps it).
    assert got == ["#0053d6", "#0053d6", "#0053d6", "#65cbf3", "#65cbf3", "#ffdb13", "#ffdb13", "#ff7d45"]


def test_the_scene_colours_each_chain_or_each_residue_by_its_band():
    folded = made_complex()
    by_chain = folding.complex_scene(folded, "MODEL", "pdb", "chain").as_args()
    assert by_chain["chains"] == ["A", "B"] and [r["key"] for r in by_chain["residues"]] == \
        ["A|1|", "A|2|", "A|3|", "B|1|", "B|2|"]
    colours = [r["colour"] for r in by_chain["residues"]]
    assert len(set(colours[:3])) == 1 and len(set(colours[3:])) == 1 and colours[0] != colours[3]
    assert [k[1] for k in by_chain["legend"]["keys"]] == ["chain A: one", "chain B: two"]
    by_plddt = folding.complex_scene(folded, "MODEL", "pdb", "pLDDT").as_args()
    assert [r["colour"] for r in by_plddt["residues"]] == ["#0053d6", "#65cbf3", "#ffdb13", "#ff7d45", "#ff7d45"]
    assert "pLDDT 60.0 (low (50-70))" in by_plddt["residues"][2]["text"]
    with pytest.raises(ValueError, match="'chain' or 'pLDDT'"):
        folding.complex_scene(folded, "MODEL", "pdb", "entity")


def test_the_pae_heatmap_marks_the_chain_boundary_and_names_chains_in_hover():
    folded = made_complex()
    fig = folding.complex_pae_heatmap(folded, "PAE <b>x</b>")
    lines = sorted((s.x0, s.x1, s.y0, s.y1) for s in fig.layout.shapes)
    assert lines == [(0.5, 5.5, 3.5, 3.5), (3.5, 3.5, 0.5, 5.5)]  # between residue 3 (A 3) and 4 (B 1)
    np.testing.assert_array_equal(fig.data[0].z, folded.pae)
    assert tuple(fig.data[0].customdata[0][3]) == ("A 1", "B 1")
    assert list(fig.layout.xaxis.ticktext) == ["chain A", "chain B"] and "&lt;b&gt;" in fig.layout.title.text
    one = made_complex(("MKVGW",), ("solo",))
    assert len(folding.complex_pae_heatmap(one, "").layout.shapes) == 0


def test_the_iptm_table_is_the_chain_pair_matrix_by_chain():
    folded = made_complex()
    table = folding.iptm_table(folded)
    assert list(table.columns) == ["chain", "A (one)", "B (two)"]
    np.testing.assert_allclose(table.iloc[:, 1:].to_numpy(float), folded.chain_pair_iptm, atol=5e-4)


def test_a_hosted_server_limits_the_whole_complex_and_says_why(monkeypatch):
    monkeypatch.setenv("FLAMINO_MAX_FOLD_RESIDUES", "100")
    assert folding.complex_refusal([60, 40], hosted=True) is None
    said = folding.complex_refusal([60, 41], hosted=True)
    assert said.startswith("101 residues in the complex: this server folds 100 at most") and "squared" in said
    assert folding.complex_refusal([60, 41], hosted=False) is None
    assert folding.complex_refusal([], hosted=False) == "pick at least one record to fold"
    assert folding.complex_problem(["MKV", "GW"], "a + b") is None
    assert "a + b" in folding.complex_problem(["MKV", "G-W"], "a + b")  # the featuriser's refusal, said before work


def test_a_fold_goes_through_the_store_and_back_under_its_model_and_chains(tmp_path):
    from flamino_core.store.result_store import ResultStore

    store = ResultStore(tmp_path / "results.sqlite")
    folded = made_complex()
    key = folding.complex_key(ModelId.parse("random:esmfold2-tiny:3"))
    assert key != folding.complex_key(ModelId.parse("random:esmfold2-tiny")) and "esmfold2-tiny:3" in key
    assert folding.stored_complex(store, key, folded.sequences, folded.chain_names, folded.name) is None
    folding.store_complex(store, key, folded)
    back = folding.stored_complex(store, key, folded.sequences, folded.chain_names, folded.name)
    for field in ("positions", "plddt_atoms", "plddt", "pae", "chain_pair_iptm"):
        np.testing.assert_array_equal(getattr(back, field), getattr(folded, field))
    assert (back.ptm, back.iptm, back.sample, back.samples, back.chain_ids) == (0.5, 0.4, 1, 2, ("A", "B"))
    # Another order is another complex (other chain letters): not read back.
    assert folding.stored_complex(store, key, folded.sequences[::-1], folded.chain_names, folded.name) is None


def test_the_memory_estimate_grows_with_the_square_of_the_complex_and_names_the_model():
    from flamino_core.model.esmfold2.config import EsmFold2Config

    config = EsmFold2Config.tiny()
    small, large = (folding.complex_memory(config, lengths, parameters=1000) for lengths in ([50, 50], [100, 100]))
    assert large.pair == 4 * small.pair and small.weights == 4000
    assert "an estimate from the model's shape" in small.describe()
    assert folding.complex_label(ModelId.parse("random:esmfold2-tiny")).endswith("are not biology")
    # the full model: shape known, no weights read
    assert folding.complex_config(ModelId.parse("esmfold2")).msa_encoder.enabled
    assert not folding.complex_config(ModelId.parse("biohub/ESMFold2-Fast")).msa_encoder.enabled
    with pytest.raises(ValueError, match="neither"):
        folding.complex_config(ModelId.parse(str(__file__)))
