"""Structure figures (structure_figures.py): what each trace holds, and the 3D view offline in Chromium."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from structure_reference import STRUCTURES, entity_sequences

from flamino_core.structure.contacts import top_predictions, true_contacts
from flamino_core.figures import figure_html
from flamino_core.structure.reading import read_structure
from flamino_core.structure.align import align_chain, choose_chain
from flamino_core.structure.figures import contact_comparison_map, structure_trace_3d

pytestmark = pytest.mark.skipif(not STRUCTURES.is_dir(), reason=f"real structures not found at {STRUCTURES}")
CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="module")
def gbt():
    parsed = read_structure(STRUCTURES / "1GBT.cif")
    sequence = "MKWVT" + entity_sequences(STRUCTURES / "1GBT.cif")[0]  # 5 positions without structure
    return parsed, choose_chain(parsed, sequence)


def test_contact_map_triangles_and_marks(gbt):
    _, alignment = gbt
    length = len(alignment.sequence)
    rng = np.random.default_rng(0)
    predicted = rng.random((length, length))
    predicted = (predicted + predicted.T) / 2
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
def test_3d_view_renders_offline(gbt, tmp_path):
    """The standalone HTML draws the 3D view in headless Chromium with every network request
    refused: plotly.js is embedded, nothing comes from a CDN."""
    from playwright.sync_api import sync_playwright

    _, alignment = gbt
    fig = structure_trace_3d(alignment, np.arange(len(alignment.sequence), dtype=float), "position")
    page_file = tmp_path / "trace.html"
    page_file.write_bytes(figure_html(fig))
    refused = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
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
