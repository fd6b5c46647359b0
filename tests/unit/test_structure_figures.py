"""Structure figures (structure_figures.py): what each trace holds, and the 3D view offline in Chromium."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from structure_reference import STRUCTURES, entity_sequences

from flamino_core.structure.contacts import top_predictions, true_contacts
from flamino_core.figures import figure_html
from flamino_core.structure.files.reading import read_structure
from flamino_core.structure.align import align_chain, choose_chain
from flamino_core.structure.figures import contact_comparison_map, structure_trace_3d
from flamino_core.numbering import Numbering

pytestmark = pytest.mark.skipif(not STRUCTURES.is_dir(), reason=f"real structures not found at {STRUCTURES}")
CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="module")
def gbt():
    parsed = read_structure(STRUCTURES / "1GBT.cif")
    sequence = "MKWVT" + entity_sequences(STRUCTURES / "1GBT.cif")[0]  # 5 positions without structure
    return parsed, choose_chain(parsed, sequence)


def symmetric_map(length: int, seed: int) -> np.ndarray:
    """A made-up (length, length) symmetric map of probabilities, fixed by its seed."""
    predicted = np.random.default_rng(seed).random((length, length))
    return (predicted + predicted.T) / 2


def test_contact_map_triangles_and_marks(gbt):
    _, alignment = gbt
    length = len(alignment.sequence)
    predicted = symmetric_map(length, seed=0)
    contacts = true_contacts(alignment)
    top = top_predictions(predicted, contacts, "long", k=length // 5)
    fig = contact_comparison_map(predicted, contacts, top, title="<b>1GBT</b>")
    upper, lower, hits, misses = fig.data
    upper_z, lower_z = np.array(upper.z, dtype=float), np.array(lower.z, dtype=float)
    rows, cols = np.indices((length, length))
    assert np.isnan(upper_z[cols <= rows]).all() and np.allclose(upper_z[cols > rows], predicted[cols > rows])
    assert np.isnan(lower_z[cols >= rows]).all()
    below = cols < rows
    assert np.array_equal(lower_z[below], np.where(np.isnan(contacts), -1, contacts)[below])
    assert (lower_z[5:, :5][np.tril(np.ones((length - 5, 5), bool), k=4)] == -1).all()  # no structure
    # Marks: 1-based, above the diagonal, split by the structure's verdict.
    assert len(hits.x) + len(misses.x) == length // 5
    assert len(hits.x) == int(top.is_contact.sum())
    assert all(x > y for x, y in zip(hits.x, hits.y)) and min(misses.x) >= 1
    assert "&lt;b&gt;1GBT&lt;/b&gt;" in fig.layout.title.text


def test_trace_hover_names_residues_and_greys_unaligned(gbt):
    parsed, _ = gbt
    residues = choose_chain(parsed, entity_sequences(STRUCTURES / "1GBT.cif")[0]).chain
    fragment = residues.sequence[40:170]  # residues 41..170 aligned, the others get no value
    alignment = align_chain(fragment, residues)
    values = np.linspace(0, 4, len(fragment))
    fig = structure_trace_3d(alignment, values, "entropy (bits)")
    line, grey, coloured = fig.data
    assert len(coloured.x) == len(fragment) and len(grey.x) == len(residues) - len(fragment)
    np.testing.assert_allclose(coloured.marker.color, values)
    hover_184a = next(t for t in coloured.text if " 184A " in t)
    index = residues.labels.index("184A")
    assert hover_184a.startswith(f"A 184A {residues.names[index]}<br>position {index - 40 + 1} ")
    assert "entropy (bits) = " in hover_184a
    assert all("not aligned to the sequence" in t for t in grey.text)
    assert None not in line.x  # 1GBT has no chain break (its numbering gaps are not breaks)


def test_trace_breaks_where_residues_are_missing(gbt):
    """Residue 100 of 1GBT's chain dropped (real coordinates otherwise): the line breaks there."""
    parsed, _ = gbt
    residues = choose_chain(parsed, entity_sequences(STRUCTURES / "1GBT.cif")[0]).chain
    keep = np.r_[0:100, 101:len(residues)]
    gapped = dataclasses.replace(
        residues,
        residue_ids=tuple(residues.residue_ids[k] for k in keep),
        names=tuple(residues.names[k] for k in keep),
        sequence="".join(residues.sequence[k] for k in keep),
        ca=residues.ca[keep],
        contact_xyz=residues.contact_xyz[keep],
        contact_atom=tuple(residues.contact_atom[k] for k in keep),
    )
    fig = structure_trace_3d(align_chain(residues.sequence, gapped), np.zeros(len(residues)), "x")
    line = fig.data[0]
    assert list(line.x).count(None) == 1 and line.x.index(None) == 100


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium")
def test_3d_view_renders_offline(gbt, tmp_path, playwright_session):
    """The standalone HTML draws the 3D view in headless Chromium with every network request
    refused: plotly.js is embedded, nothing comes from a CDN. (A Chromium of its own, launched
    from the run's Playwright: WebGL through SwiftShader.)"""
    _, alignment = gbt
    fig = structure_trace_3d(alignment, np.arange(len(alignment.sequence), dtype=float), "position")
    page_file = tmp_path / "trace.html"
    page_file.write_bytes(figure_html(fig))
    refused = []
    browser = playwright_session.chromium.launch(
        executable_path=str(CHROMIUM), args=["--use-gl=swiftshader", "--enable-unsafe-swiftshader"]
    )
    try:
        page = browser.new_page()

        def route(request_route):
            if request_route.request.url.startswith("file:"):
                request_route.continue_()
            else:
                refused.append(request_route.request.url)
                request_route.abort()

        page.route("**/*", route)
        errors = []
        page.on("pageerror", lambda err: errors.append(str(err)))
        page.goto(page_file.as_uri())
        page.wait_for_selector(".js-plotly-plot .gl-container canvas", timeout=30_000)
        traces = page.evaluate("document.querySelector('.js-plotly-plot')._fullData.length")
    finally:
        browser.close()
    assert refused == [] and errors == []
    assert traces == len(fig.data) == 2  # the line and the coloured residues (all aligned here)


def test_long_maps_are_drawn_in_blocks(gbt):
    """Past ``max_cells`` a side, each cell holds its block's maximum: a block shows a contact
    when any pair in it is one. Checked tile by tile against numpy on the full maps."""
    _, alignment = gbt
    length = len(alignment.sequence)  # 228
    rng = np.random.default_rng(1)
    predicted = rng.random((length, length))
    contacts = true_contacts(alignment)
    fig = contact_comparison_map(predicted, contacts, max_cells=50)  # blocks of ceil(228/50) = 5
    upper, lower = (np.array(trace.z, dtype=float) for trace in fig.data[:2])
    assert upper.shape == lower.shape == (46, 46) and "5×5 blocks" in fig.layout.title.text
    rows, cols = np.indices((length, length))
    levels = np.where(np.isnan(contacts), -1, contacts)
    for r, c in ((0, 0), (10, 2), (30, 29), (45, 0), (3, 40)):
        tile = (slice(5 * r, 5 * r + 5), slice(5 * c, 5 * c + 5))
        above, below = (cols > rows)[tile], (cols < rows)[tile]
        expected_upper = predicted[tile][above].max() if above.any() else np.nan
        expected_lower = levels[tile][below].max() if below.any() else np.nan
        np.testing.assert_equal([upper[r, c], lower[r, c]], [np.float32(expected_upper), expected_lower])
    assert np.array(fig.data[0].x)[:2].tolist() == [3.0, 8.0]  # block centres, 1-based positions


# --- issue 24: one palette, the record's numbering, the molecular viewer's scene -----------------
def test_contact_marks_are_not_blue_on_blue_nor_clipped_and_axes_use_the_records_numbering(gbt):
    _, alignment = gbt
    length = len(alignment.sequence)
    predicted = symmetric_map(length, seed=1)
    top = top_predictions(predicted, true_contacts(alignment), "all", k=length)
    fig = contact_comparison_map(predicted, true_contacts(alignment), top, numbering=Numbering(151))
    upper, _, hits, misses = fig.data
    assert list(fig.layout.xaxis.range) == [150.5, 150.5 + length] and list(fig.layout.yaxis.range) == [150.5 + length, 150.5]
    assert upper.x[0] == 151 and upper.x[-1] == 150 + length
    np.testing.assert_array_equal(hits.x, top.j[top.is_contact] + 151)
    np.testing.assert_array_equal(misses.y, top.i[~top.is_contact] + 151)
    # The predicted map is Blues: a true-contact mark must not be a blue (its blue channel not the
    # largest), and marks on the edge stay whole.
    colour = hits.marker.color.lstrip("#")
    r, g, b = (int(colour[k:k + 2], 16) for k in (0, 2, 4))
    assert b < max(r, g) and hits.cliponaxis is False and misses.cliponaxis is False


def test_signed_tracks_are_red_blue_around_zero_in_the_trace(gbt):
    _, alignment = gbt
    values = np.linspace(-3, 1, len(alignment.sequence))
    fig = structure_trace_3d(alignment, values, "score", signed=True, numbering=Numbering(20))
    coloured = fig.data[-1]
    assert coloured.marker.colorscale[0][1] == "rgb(103,0,31)"  # RdBu starts dark red
    assert coloured.marker.cmin == -3 and coloured.marker.cmax == 3  # symmetric: white is 0
    assert "position 25 (I)" in coloured.text[0]  # 0-based 5 (the chain's first residue), numbered from 20
    sequential = structure_trace_3d(alignment, values, "entropy").data[-1]
    assert sequential.marker.colorscale[0][1] == "#440154"  # Viridis


def test_the_viewer_scene_holds_the_model_the_values_and_the_top_pairs(gbt):
    """The scene the molecular viewer draws, checked against the structure read independently."""
    import io

    from Bio.PDB import PDBParser
    from structure_reference import read_reference

    from flamino_core.structure.scene import FALSE_POSITIVE, TRUE_POSITIVE, molecular_scene

    parsed, alignment = gbt
    length = len(alignment.sequence)
    values = np.arange(length, dtype=float) / 10  # position p (0-based) has the value p / 10
    predicted = symmetric_map(length, seed=2)
    truth = true_contacts(alignment)
    top = top_predictions(predicted, truth, "long", k=length // 5)
    scene = molecular_scene(parsed, alignment, values, "position / 10", numbering=Numbering(1), chosen=5, top=top)
    reference = [r for r in read_reference(STRUCTURES / "1GBT.cif", "A") if not r.hetero]  # the amino acids
    # One entry per residue of the chain, keyed as 3Dmol.js reads a PDB (number, insertion code).
    assert [r["key"] for r in scene.residues] == [f"A|{r.label[:-1]}|{r.label[-1]}" if r.label[-1].isalpha()
                                                  else f"A|{r.label}|" for r in reference]
    # The sequence is the chain's with 5 extra residues in front: residue k is position k + 6.
    assert [r["position"] for r in scene.residues] == list(range(6, 6 + len(reference)))
    np.testing.assert_allclose([r["value"] for r in scene.residues], np.arange(5, 5 + len(reference)) / 10)
    assert scene.chosen["key"] == scene.residues[0]["key"]  # position 6 (0-based 5): the chain's first residue
    # The model text is PDB with the values in the B-factor column, the whole model (ligands too).
    model = PDBParser(QUIET=True).get_structure("m", io.StringIO(scene.model_text))[0]
    drawn = [r for r in model["A"] if r.id[0] == " "]
    np.testing.assert_allclose([next(iter(r)).get_bfactor() for r in drawn[:50]], np.arange(5, 55) / 10, atol=0.005)
    assert any(r.id[0].startswith("H_") for r in model["A"])  # the ligand GBS, the ions
    # Top pairs: between the two residues' contact atoms, coloured by the structure's verdict.
    assert len(scene.contacts) == len(top)
    for pair, i, j, hit in zip(scene.contacts, top.i, top.j, top.is_contact):
        a, b = alignment.residue_at[i], alignment.residue_at[j]
        np.testing.assert_allclose(pair["start"], alignment.chain.contact_xyz[a], atol=1e-3)
        np.testing.assert_allclose(pair["end"], alignment.chain.contact_xyz[b], atol=1e-3)
        assert pair["colour"] == (TRUE_POSITIVE if hit else FALSE_POSITIVE)
        assert pair["text"].startswith(f"positions {i + 1}–{j + 1}: predicted p = ")
    # Colours: Viridis from the lowest to the highest value of the track.
    assert scene.scale.low == 0 and scene.scale.high == (length - 1) / 10
    args = scene.as_args()
    assert args["legend"]["stops"][0] == "#440154" and args["legend"]["stops"][-1] == "#fde725"


def test_the_viewer_script_is_the_pinned_npm_release():
    """3Dmol.js is served by the app from the repository: the file must be npm 3dmol 2.5.5 as pinned."""
    from app_pages._ui.structure import molecule_view

    assert molecule_view.available()
    assert molecule_view.vendor_digest() == molecule_view.VENDOR_SHA256
