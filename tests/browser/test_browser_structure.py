"""The molecular viewer and the DMS views in headless Chromium (``streamlit run app.py``,
``random:tiny``): the viewer runs with every request that would leave the machine refused (and
none is attempted), its colours and B-factors are read back from the page, hovering a residue
names it and its value; the Structure and DMS views are photographed at 1400 x 1000.

Screenshots go to ``test-artifacts/screenshots/``; with ``FLAMINO_DOCS_SCREENSHOTS=1`` they are
also written to ``docs/screenshots/`` (the README shows them).
"""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
from test_browser import (
    CHROMIUM,
    ROOT,
    SCREENSHOTS,
    TIMEOUT_MS,
    _check_page,
    _download,
    _settle,
    _wait_for_charts,
)
from test_cli_contacts import entropy_bits

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"),
]
STRUCTURES = ROOT.parent / "shared" / "structures"
DMS = ROOT.parent / "shared" / "dms" / "A0A1I9GEU1_NEIME_Kennouche_2019.csv"
ABETA42 = "DAEFRHDSGYEVHHQKLVFFAEDVGSNKGAIIGLMVGGVVIA"
DOCS_SIZE = {"width": 1400, "height": 1000}


def _photograph(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    if os.environ.get("FLAMINO_DOCS_SCREENSHOTS"):
        (ROOT / "docs" / "screenshots").mkdir(exist_ok=True)
        shutil.copy(path, ROOT / "docs" / "screenshots" / f"{name}.png")


def _offline_page(browser, server):
    """A 1400 x 1000 page whose requests to anywhere but the app's server are refused and listed."""
    page = browser.new_context(viewport=DOCS_SIZE).new_page()
    page.set_default_timeout(TIMEOUT_MS)
    outside: list[str] = []

    def refuse(route):
        outside.append(route.request.url)
        route.abort()

    # Only outside requests are routed: the app's own (uploads included) go straight through.
    page.route(lambda url: not url.startswith(server.url), refuse)
    return page, outside


def _viewer_frame(page):
    """The molecular viewer's frame, once it has drawn its scene. Around its first draw a rerun can
    mount a new frame and detach the one being watched (a fresh-clone run failed so: "Frame was
    detached"; by hand, one frame then stayed for 40 s of reruns): then the new frame is watched."""
    import time

    from playwright.sync_api import Error

    deadline = time.monotonic() + 4 * TIMEOUT_MS / 1000
    while True:
        page.wait_for_selector('iframe[src*="flamino_molecule"]', timeout=3 * TIMEOUT_MS)
        frame = next((f for f in page.frames if "flamino_molecule" in f.url and not f.is_detached()), None)
        try:
            if frame is not None:
                frame.wait_for_function("document.body.dataset.drawn", timeout=TIMEOUT_MS)
                return frame
        except Error as err:
            if "detached" not in str(err) or time.monotonic() > deadline:
                raise
        assert time.monotonic() < deadline, "the viewer's frame was never drawn"
        page.wait_for_timeout(200)


def _structure_page(browser, server, query: str, structure):
    """The Structure page for ``query`` (a share link's parameters) with ``structure`` uploaded, once
    its viewer has drawn: (page, the list of refused outside requests, the viewer's frame)."""
    page, outside = _offline_page(browser, server)
    page.goto(f"{server.url}/?page=structure&{query}")
    page.get_by_role("heading", name="Structure", exact=True).wait_for()
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(structure))
    return page, outside, _viewer_frame(page)


def test_the_structure_page_offline_table_downloads_and_the_viewer_coloured_by_the_track_with_hover(
        server, browser, tmp_path):
    """Upload 2BEG.pdb for Aβ42 on the Structure page: the precision table, the contact map and the
    molecular viewer (WebGL) are drawn with no request leaving this machine; the PDB download carries
    the track in its B-factor column, and the viewer draws each residue in the track's colour."""
    structure = STRUCTURES / "2BEG.pdb"
    if not structure.exists():
        pytest.skip(f"real structure not found at {structure}")
    from Bio.PDB import PDBParser

    from flamino_core.engine.engine import Engine
    from flamino_core.weights.loading import load_weights

    page, outside, frame = _structure_page(browser, server, f"seq={ABETA42}", structure)
    _check_page(page, "structure_2beg", 1)  # the contact map; no error, no traceback
    # The viewer again, once the page's work is done: a model new to the server draws the page
    # before its pass is in and reruns when it is (#50 row 1), which mounts the viewer anew.
    frame = _viewer_frame(page)
    assert frame.evaluate("document.body.dataset.drawn") == "26"  # chain A's residues, no error
    assert frame.evaluate("document.getElementById('problem').textContent") == ""
    assert frame.locator("canvas").count() >= 1
    assert page.get_by_text("chain A: 26 residues, 26 aligned, identity 100.0%").count() == 1
    assert page.locator('[data-testid="stDataFrame"]').count() == 1
    table = _download(page, "Precision (CSV)", tmp_path).read_text().splitlines()
    assert table[0] == "model,record_id,chain,range,cutoff,precision,n_pairs,identity,coverage" and len(table) == 13
    pdb = _download(page, "Structure with entropy as B-factors (PDB)", tmp_path)
    assert pdb.read_text().startswith("REMARK flamino: B-factor column: entropy (bits)\n")
    chain = PDBParser(QUIET=True).get_structure("out", str(pdb))[0]["A"]
    per_residue = {residue.id[1]: {atom.get_bfactor() for atom in residue} for residue in chain}
    assert sorted(per_residue) == list(range(17, 43))
    # One value per residue, an entropy over 20 amino acids: within [0, log2 20 = 4.32] bits.
    assert all(len(b) == 1 and 0 <= min(b) <= 4.33 for b in per_residue.values())

    # What 3Dmol.js itself read: one B-factor per residue, the entropy of its position computed
    # here from the engine (independently of the page); two decimals in the PDB column.
    (out,) = Engine(load_weights("random:tiny")).run([ABETA42], repr_layers=(), logits=True)
    expected = entropy_bits(out.logits)[16:]  # chain A holds positions 17-42
    read = frame.evaluate("""() => { const out = [];
        for (let r = 17; r <= 42; r++) out.push([...new Set(window.flamino.atomsOf('A', r).map(a => a.b))]);
        return out; }""")
    assert all(len(b) == 1 for b in read)
    np.testing.assert_allclose([b[0] for b in read], expected, atol=0.0051)
    # The colour each residue is drawn in (the cartoon's colour function on its C-alpha):
    # Viridis, whose green channel rises with the value, so the greens rank as the entropies do.
    colours = frame.evaluate("() => { const out = []; for (let r = 17; r <= 42; r++) "
                             "out.push(window.flamino.drawnColour('A', r)); return out; }")
    greens = [int(c[3:5], 16) for c in colours]
    order = np.argsort(expected)
    assert all(np.diff(np.array(greens)[order]) >= 0), (colours, expected)
    assert greens[order[0]] < greens[order[-1]]
    assert frame.evaluate("window.flamino.drawnColour('B', 17)") == "#d0d0d0"  # another chain: grey

    # Hovering residue 30's C-alpha names it and its value.
    page.locator('iframe[src*="flamino_molecule"]').scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    x, y = frame.evaluate("""() => { const a = window.flamino.atomsOf('A', 30).find(x => x.atom === 'CA');
        const s = window.flamino.viewer.modelToScreen({x: a.x, y: a.y, z: a.z}); return [s.x, s.y]; }""")
    box = page.locator('iframe[src*="flamino_molecule"]').bounding_box()
    for dx in (0, 1):  # a second move: 3Dmol.js names what stays under the pointer
        page.mouse.move(box["x"] + x + dx, box["y"] + y)
        page.wait_for_timeout(400)
    frame.wait_for_function("document.getElementById('status').textContent.startsWith('A 30 ALA')")
    status = frame.evaluate("document.getElementById('status').textContent")
    assert status == f"A 30 ALA · position 30 (A) · entropy (bits) = {expected[13]:.3g}"

    # The best L/5 of the top L pairs marked on the contact map are drawn (the key counts them).
    keys = frame.evaluate("document.getElementById('keys').textContent")
    drawn = frame.evaluate("window.flamino.scene.contacts.length")
    assert drawn == 42 // 5 and "top predicted pair" in keys
    assert outside == []
    page.context.close()


def test_the_structure_view_photographed_on_a_globular_protein(server, browser):
    """1GBT (trypsin with an inhibitor, calcium and sulfate) for its own sequence, coloured by the
    mean substitution score (red-blue around 0): the picture in the README."""
    structure = STRUCTURES / "1GBT.cif"
    if not structure.exists():
        pytest.skip(f"real structure not found at {structure}")
    from structure_reference import entity_sequences

    query = f"strack=mean-score&sres=57&seq={entity_sequences(structure)[0]}"
    page, outside, frame = _structure_page(browser, server, query, structure)
    assert frame.evaluate("window.flamino.scene.legend.signed") is True
    assert frame.evaluate("document.getElementById('problem').textContent") == ""
    page.get_by_role("heading", name="The structure in 3D").evaluate("e => e.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(1500)
    _photograph(page, "structure")
    assert outside == []
    page.context.close()


def test_the_dms_view_photographed(server, browser):
    if not DMS.exists():
        pytest.skip(f"real DMS table not found at {DMS}")
    page, outside = _offline_page(browser, server)
    page.goto(f"{server.url}/?page=variants&vinput=dms&vstrategy=wt-marginals&seq={ABETA42}")
    page.get_by_role("heading", name="Variant effects", exact=True).wait_for()
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(DMS))
    page.get_by_text("Spearman ρ").first.wait_for(timeout=3 * TIMEOUT_MS)
    _wait_for_charts(page, 1)
    page.get_by_role("tab", name="Side by side, per position").click()
    _settle(page)
    _wait_for_charts(page, 2)
    page.get_by_role("tab", name="Side by side, per position").evaluate("e => e.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(800)
    _photograph(page, "dms")
    page.get_by_role("tab", name="Model vs experiment").click()
    page.get_by_role("tab", name="Model vs experiment").evaluate("e => e.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(800)
    _photograph(page, "dms-scatter")
    assert outside == []
    page.context.close()


def test_the_probability_maps_title_is_whole_at_1400_and_1440(server, browser):
    """Issue 24: the title of the probability heatmap was cut at the top (1440 x 900, 1400 x 1000)."""
    ubiquitin = "MQIFVKTLTGKTITLEVEPSDTIENVKAKIQDKEGIPPDQQRLIFAGKQLEDGRTLSDYNIQKESTLHLVLRLRGG"
    for size in ({"width": 1440, "height": 900}, DOCS_SIZE):
        page = browser.new_context(viewport=size).new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(f"{server.url}/?page=predictions&seq={ubiquitin}&range=20-60")
        _wait_for_charts(page, 1)
        top, chart_top = page.evaluate("""() => { const t = document.querySelector('.js-plotly-plot .g-gtitle');
            const chart = t.closest('[data-testid="stPlotlyChart"]');
            return [t.getBoundingClientRect().top, chart.getBoundingClientRect().top]; }""")
        assert top >= chart_top + 2, (size, top, chart_top)  # the first line's glyphs inside the chart
        page.context.close()


def test_a_structure_uploaded_on_the_input_page_is_the_record_and_the_structure_page_opens_on_it(server, browser):
    """Issue #37, item 4: 1GBT.cif uploaded on the Input page is one record (chain A, numbered from
    the file's first residue, 16); the Structure page then opens on it, aligned to its own chain, the
    contact map, the table and the viewer drawn, without pasting anything. A second structure uploaded
    there (4ZHL: a homologous protease, chain U, and a peptide, chain P) is aligned to the record (chain
    U, 40% identical) and offers "use this chain's sequence", which makes chain U the analysed record,
    aligned to its own chain at 100%."""
    structure, other = STRUCTURES / "1GBT.cif", STRUCTURES / "4ZHL.cif"
    if not structure.exists() or not other.exists():
        pytest.skip(f"real structures not found in {STRUCTURES}")
    from flamino_core.structure.files.reading import chain_residues, read_structure
    from test_browser import _nav

    chain = chain_residues(read_structure(structure), "A")  # the reader's residues, independently of the page
    page, outside = _offline_page(browser, server)
    page.goto(f"{server.url}/?page=input")
    page.get_by_role("heading", name="Your sequences").wait_for()
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(structure))
    page.get_by_text("1GBT.cif · structure, 1 protein chain").wait_for()
    page.get_by_text("1 record ready for analysis").wait_for()
    assert page.get_by_text("this looks like").count() == 0  # no longer refused as "not FASTA"
    sidebar = page.locator('[data-testid="stSidebar"]')
    sidebar.get_by_text(f"1GBT_A/16-245 ({len(chain):,} aa)").wait_for()
    # The file numbers residues 16-245 with insertion codes and gaps (chymotrypsin numbering): the
    # sidebar says the record is numbered as the file numbers it, not a warning about its own id (#66).
    assert sidebar.get_by_text("numbered as its structure file numbers it").count() == 1
    assert sidebar.get_by_text("but the sequence has").count() == 0

    _nav(page, "Structure").click()
    page.get_by_role("heading", name="Structure", exact=True).wait_for()
    frame = _viewer_frame(page)
    _check_page(page, "structure_from_input", 1)  # the contact map; no error, no traceback
    aligned = f"chain A: {len(chain)} residues, {len(chain)} aligned, identity 100.0%"
    assert page.get_by_text(aligned).count() == 1
    assert page.locator("input[value=\"the record's own chain (A)\"]").count() == 1  # the chain picker
    assert page.get_by_text("uploaded on the Input page as 1GBT.cif").count() == 1
    assert page.locator('[data-testid="stDataFrame"]').count() == 1  # the precision table
    assert int(frame.evaluate("document.body.dataset.drawn")) == len(chain)
    assert frame.evaluate("document.getElementById('problem').textContent") == ""
    assert page.get_by_role("button", name="Use chain A's sequence").count() == 0  # the record is chain A

    page.locator('[data-testid="stFileUploader"] input[type="file"]').first.set_input_files(str(other))
    page.get_by_text("4ZHL.cif, uploaded file 4ZHL.cif").wait_for()
    page.get_by_text("chain U: 247 residues, 222 aligned, identity 40.5%").wait_for()
    page.get_by_role("button", name="Use chain U's sequence").click()
    page.get_by_text("chain U: 247 residues, 247 aligned, identity 100.0%").wait_for()
    assert sidebar.locator('input[value="4ZHL_U/16-244 (247 aa)"]').count() == 1  # the record picker
    assert page.locator("input[value=\"the record's own chain (U)\"]").count() == 1
    _check_page(page, "structure_chain_used", 1)
    assert outside == []
    page.context.close()
