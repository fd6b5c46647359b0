"""Analyses and figure builders, checked against independent computations and hand-worked cases."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import pytest
import scipy.linalg
import scipy.stats

from flamino_core.analysis import outputs as analysis

from flamino_core import figures

from flamino_core.records import embedding_map as record_map
from flamino_core.alphabet import AA_TO_IDX, STANDARD_AMINO_ACIDS, TOKENS

RNG = np.random.default_rng(7)


# --- probabilities, entropy, top-k ----------------------------------------------------------------
def test_amino_acid_probabilities_softmax_over_the_full_vocabulary():
    logits = np.zeros((2, len(TOKENS)))
    logits[0, AA_TO_IDX["W"]] = math.log(10.0)  # W is 10x more likely than each other token
    probs = analysis.amino_acid_probabilities(logits)
    assert probs.shape == (20, 2)
    w = STANDARD_AMINO_ACIDS.index("W")
    assert probs[w, 0] == pytest.approx(10 / (10 + 32))
    assert probs[0, 0] == pytest.approx(1 / 42)
    # Uniform logits: every amino acid gets 1/33; the other 13 tokens hold the rest.
    np.testing.assert_allclose(probs[:, 1], 1 / 33)
    assert analysis.other_token_mass(logits)[1] == pytest.approx(13 / 33)


def test_entropy_matches_scipy_after_renormalising():
    p = RNG.random((20, 9))
    p[:, 0] = 0
    p[3, 0] = 0.7  # certain: entropy 0
    expected = scipy.stats.entropy(p, base=2, axis=0)  # scipy normalises too
    np.testing.assert_allclose(analysis.entropy(p), expected, rtol=1e-12)
    assert analysis.entropy(p)[0] == 0
    assert analysis.entropy(np.ones((20, 1)))[0] == pytest.approx(math.log2(20))
    np.testing.assert_allclose(analysis.entropy(p.T, axis=1, base=math.e), scipy.stats.entropy(p.T, axis=1))


def test_top_k_rows_hand_worked():
    p = np.zeros((20, 2))
    col = STANDARD_AMINO_ACIDS.index
    p[col("K"), 0], p[col("R"), 0], p[col("M"), 0] = 0.5, 0.3, 0.2
    p[col("A"), 1] = p[col("C"), 1] = 0.4  # a tie: alphabetical order wins
    p[col("D"), 1] = 0.2
    rows = analysis.top_k_rows(p, "MX", k=2)
    assert rows[0] == {
        "position": 1, "residue": "M", "p(residue)": 0.2, "rank": 3,
        "top1": "K", "p1": 0.5, "top2": "R", "p2": 0.3,
    }  # fmt: skip
    assert rows[1]["residue"] == "X" and rows[1]["p(residue)"] is None and rows[1]["rank"] is None
    assert (rows[1]["top1"], rows[1]["top2"]) == ("A", "C")
    with pytest.raises(ValueError, match="k must be"):
        analysis.top_k_rows(p, "MX", k=0)
    with pytest.raises(ValueError, match="expected"):
        analysis.top_k_rows(p, "MXA", k=1)


def test_token_distribution_names_every_token():
    log_probs = np.log(np.full(len(TOKENS), 1 / len(TOKENS)))
    dist = analysis.token_distribution(log_probs)
    assert list(dist) == list(TOKENS)
    assert sum(dist.values()) == pytest.approx(1.0)


def test_residue_classes():
    assert [analysis.residue_class(aa) for aa in "LFSKDGXw"] == [
        "hydrophobic", "aromatic", "polar", "positive", "negative", "special", "other", "aromatic",
    ]  # fmt: skip
    assert set(analysis.RESIDUE_CLASSES) == set(STANDARD_AMINO_ACIDS)
    assert analysis.residue_labels("MQI") == ["M1", "Q2", "I3"]


# --- PCA ----------------------------------------------------------------------------------------
def test_pca_matches_the_covariance_eigendecomposition():
    # Points with clearly separated variances along random directions.
    basis = np.linalg.qr(RNG.normal(size=(6, 6)))[0]
    data = (RNG.normal(size=(200, 6)) * [5.0, 3.0, 1.0, 0.5, 0.2, 0.1]) @ basis.T + 4.0
    result = analysis.pca(data, n_components=3)

    eigenvalues, eigenvectors = scipy.linalg.eigh(np.cov(data, rowvar=False))
    order = np.argsort(eigenvalues)[::-1]
    eigenvalues, eigenvectors = eigenvalues[order], eigenvectors[:, order]
    np.testing.assert_allclose(
        result.explained_variance_ratio, (eigenvalues / eigenvalues.sum())[:3], rtol=1e-9
    )
    for i in range(3):  # same axes up to sign
        axis = eigenvectors[:, i]
        sign = np.sign(axis @ result.components[i])
        np.testing.assert_allclose(result.components[i], sign * axis, atol=1e-9)
        np.testing.assert_allclose(result.coords[:, i], sign * (data - data.mean(0)) @ axis, atol=1e-8)
    np.testing.assert_allclose(result.mean, data.mean(0))


def test_pca_sign_is_deterministic_and_largest_loading_positive():
    data = RNG.normal(size=(30, 5))
    a, b = analysis.pca(data, 2), analysis.pca(data[::-1], 2)
    np.testing.assert_allclose(a.components, b.components, atol=1e-12)
    for component in a.components:
        assert component[np.abs(component).argmax()] > 0


def test_pca_with_fewer_points_than_components():
    two = analysis.pca(np.array([[0.0, 0.0, 0.0], [2.0, 0.0, 0.0]]), n_components=2)
    np.testing.assert_allclose(two.coords, [[-1, 0], [1, 0]])
    np.testing.assert_allclose(two.explained_variance_ratio, [1, 0])
    one = analysis.pca(np.ones((1, 4)), n_components=3)
    assert one.coords.shape == (1, 3) and not one.coords.any() and not one.explained_variance_ratio.any()
    with pytest.raises(ValueError):
        analysis.pca(np.zeros((0, 3)))


# --- attention ----------------------------------------------------------------------------------
def test_apc_hand_worked():
    # rows sum to 3 and 7, columns to 4 and 6, total 10: subtract row*col/10.
    m = np.array([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_allclose(analysis.apc(m), [[1 - 1.2, 2 - 1.8], [3 - 2.8, 4 - 4.2]])
    assert not analysis.apc(np.zeros((3, 3))).any()


def test_apc_runs_traced_by_jax_as_the_contact_head_runs_it():
    """The contact head calls the same apc inside jit: it must trace, and give what NumPy gives."""
    jax = pytest.importorskip("jax")
    x = RNG.random((2, 3, 7, 7)).astype(np.float32)
    traced = np.asarray(jax.jit(lambda a: analysis.apc(analysis.symmetrize(a)))(x))
    sym = x + x.swapaxes(-1, -2)  # written out independently of the module
    expected = sym - sym.sum(-1, keepdims=True) * sym.sum(-2, keepdims=True) / sym.sum((-1, -2), keepdims=True)
    # float32 sums of 49 values near 1: a few 1e-7 relative rounding apart.
    np.testing.assert_allclose(traced, expected, rtol=1e-5, atol=1e-6)
    assert not np.asarray(jax.jit(analysis.apc)(np.zeros((3, 3), np.float32))).any()  # no 0/0 when traced


def test_attention_view_selects_heads_and_strips_special_tokens():
    maps = RNG.random((3, 6, 6))  # 3 heads, 4 residues + <cls>/<eos>
    np.testing.assert_allclose(analysis.attention_view(maps, 1), maps[1, 1:-1, 1:-1])
    np.testing.assert_allclose(analysis.attention_view(maps, None), maps.mean(0)[1:-1, 1:-1])
    np.testing.assert_allclose(analysis.attention_view(maps, 2, keep_special=True), maps[2])
    apc_view = analysis.attention_view(maps, 0, use_apc=True, keep_special=True)
    sym = maps[0, 1:-1, 1:-1] + maps[0, 1:-1, 1:-1].T
    np.testing.assert_allclose(apc_view, sym - np.outer(sym.sum(1), sym.sum(0)) / sym.sum())
    with pytest.raises(ValueError, match="head 4"):
        analysis.attention_view(maps, 3)


def test_block_mean_hand_worked():
    m = np.arange(9.0).reshape(3, 3)
    np.testing.assert_allclose(
        analysis.block_mean(m, 2), [[np.mean([0, 1, 3, 4]), np.mean([2, 5])], [np.mean([6, 7]), 8]]
    )
    np.testing.assert_array_equal(analysis.block_mean(m, 3), m)
    assert analysis.block_mean(np.ones((4, 100, 100)), 10).shape == (4, 10, 10)


# --- figures --------------------------------------------------------------------------------------
SEQ = "MKTAYIAKQR"


def test_probability_heatmap_axes_and_sequence_markers():
    probs = analysis.amino_acid_probabilities(RNG.normal(size=(len(SEQ), 33)))
    fig = figures.probability_heatmap(probs, SEQ)
    heatmap, halo, markers = fig.data
    assert list(halo.x) == list(markers.x) and not halo.showlegend
    assert list(heatmap.y) == list(STANDARD_AMINO_ACIDS)
    assert list(heatmap.x) == analysis.residue_labels(SEQ)
    assert list(markers.y) == list(SEQ) and list(markers.x) == list(heatmap.x)
    with_track = figures.probability_heatmap(probs, SEQ, analysis.entropy(probs))
    track = with_track.data[3]
    assert track.type == "bar" and list(track.x) == list(heatmap.x)
    assert track.xaxis == "x2" and with_track.layout.xaxis.matches == "x2"  # one shared position axis


def test_every_builder_returns_a_figure():
    probs = analysis.amino_acid_probabilities(RNG.normal(size=(len(SEQ), 33)))
    reps = RNG.normal(size=(len(SEQ), 16))
    result = analysis.pca(reps, 3)
    maps = RNG.random((4, len(SEQ), len(SEQ)))
    built = [
        figures.distribution_bars(probs[:, 0], probs[:, 1], 1, "M", 0.1),
        figures.substitution_heatmap(RNG.normal(size=(len(SEQ), 20)), SEQ, "wt-marginals"),
        *(
            figures.residue_pca_scatter(result, SEQ, c, d)
            for c in ("position", "residue", "class")
            for d in (2, 3)
        ),
        record_map.record_map_figure(record_map.project(reps[:3]), ["a", "b", "c"]),
        figures.explained_variance_bars(result.explained_variance_ratio),
        figures.attention_heatmap(maps[0], analysis.residue_labels(SEQ), "t"),
        figures.attention_grid(maps, max_size=4),
        figures.contact_map(maps[0], SEQ),
    ]
    assert all(isinstance(fig, go.Figure) and fig.data for fig in built)
    html = figures.figure_html(built[0]).decode()
    assert "<html>" in html[:100] and "Plotly.newPlot" in html
    assert len(html) > 1_000_000  # plotly.js is embedded: the file opens offline


def test_residue_scatter_colour_groups_cover_every_residue():
    result = analysis.pca(RNG.normal(size=(len(SEQ), 8)), 3)
    by_class = figures.residue_pca_scatter(result, SEQ, "class")
    assert sum(len(trace.x) for trace in by_class.data) == len(SEQ)
    assert {trace.name for trace in by_class.data} == {analysis.residue_class(aa) for aa in SEQ}
    by_residue = figures.residue_pca_scatter(result, SEQ, "residue", dims=3)
    assert sorted(trace.name for trace in by_residue.data) == sorted(set(SEQ))
    assert "M1 (hydrophobic)" in by_residue.data[sorted(set(SEQ)).index("M")].text
    with pytest.raises(ValueError):
        figures.residue_pca_scatter(result, SEQ, "charge")


def test_user_text_is_escaped_in_figures():
    fig = record_map.record_map_figure(record_map.project(RNG.normal(size=(2, 4))), ["<b>x</b>", "a&b"], ["<i>", None], "<u>")
    assert list(fig.data[0].text) == ["&lt;b&gt;x&lt;/b&gt;"] and fig.data[0].name == "&lt;i&gt;"
    assert list(fig.data[1].text) == ["a&amp;b"]
    fig = figures.attention_heatmap(np.eye(2), ["<cls>", "M1"], "t")
    assert list(fig.data[0].x) == ["&lt;cls&gt;", "M1"]


def test_attention_grid_thumbnails_are_block_averages():
    maps = RNG.random((2, 10, 10))
    fig = figures.attention_grid(maps, max_size=5)
    np.testing.assert_allclose(fig.data[1].z, analysis.block_mean(maps[1], 5))
    assert "2×2 blocks" in fig.layout.title.text
