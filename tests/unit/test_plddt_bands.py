"""pLDDT drawn as confidence (issue #66, D2, D9): AlphaFold's four fixed bands with their names and
customary colours in every pLDDT view (the viewer's scene and legend, the Plotly fallback, the
track along the sequence), never a scale stretched to the data; the PAE heatmap's axes hold the
residues only. The reference is AlphaFold DB's key, typed here from its page: very low < 50
#FF7D45, low 50-70 #FFDB13, confident 70-90 #65CBF3, very high > 90 #0053D6."""

from __future__ import annotations

import numpy as np
import pytest

AFDB = {"very low": "#ff7d45", "low": "#ffdb13", "confident": "#65cbf3", "very high": "#0053d6"}


def test_each_value_gets_its_bands_colour_with_the_lower_bound_inside():
    from flamino_core.structure.confidence import PLDDT_BANDS, band_counts, plddt_colours

    assert {b.name: b.colour for b in PLDDT_BANDS} == AFDB
    values = [0, 49.99, 50, 69.99, 70, 89.99, 90, 100, np.nan]
    expected = [AFDB[n] for n in ("very low", "very low", "low", "low", "confident", "confident",
                                  "very high", "very high")] + [None]
    assert plddt_colours(values) == expected
    assert band_counts([10, 55, 56, 95]) == {"very low": 1, "low": 2, "confident": 0, "very high": 1}


def _uniform_low_fold():
    """A chain whose residues all have pLDDT below 57 (as the issue's untrained fold: 49-57)."""
    from structure_reference import STRUCTURES

    from flamino_core.structure import choose_chain, read_structure
    from test_contact_eval import reference_case

    seq, _, _ = reference_case("2BEG.pdb")
    parsed = read_structure(STRUCTURES / "2BEG.pdb")
    alignment = choose_chain(parsed, seq)
    plddt = np.linspace(30.0, 57.0, len(seq))  # 2BEG models residues 17-42: 41-57 there
    return parsed, alignment, plddt


def test_the_viewer_scene_colours_plddt_by_band_not_by_the_datas_range():
    pytest.importorskip("structure_reference")
    from flamino_core.structure.scene import molecular_scene

    parsed, alignment, plddt = _uniform_low_fold()
    scene = molecular_scene(parsed, alignment, plddt, "pLDDT", confidence=True).as_args()
    colours = {r["colour"] for r in scene["residues"] if r["value"] is not None}
    # 41-57 is very low then low: two colours, orange and yellow; never a blue ("confident").
    assert colours == {AFDB["very low"], AFDB["low"]}
    assert [b["name"] for b in scene["legend"]["bands"]] == ["very low (< 50)", "low (50-70)",
                                                               "confident (70-90)", "very high (≥ 90)"]
    assert (scene["legend"]["low"], scene["legend"]["high"]) == (0.0, 100.0)
    assert "(low)" in scene["residues"][-1]["text"]
    # Any other track still gets a scale over its values (the bands are pLDDT's only).
    other = molecular_scene(parsed, alignment, plddt, "entropy").as_args()
    assert other["legend"]["bands"] == [] and other["legend"]["low"] == pytest.approx(30.0)


def test_the_plotly_fallback_draws_the_bands_over_0_to_100():
    pytest.importorskip("structure_reference")
    from plotly.colors import find_intermediate_color  # noqa: F401 (plotly is here)

    from flamino_core.structure.figures import structure_trace_3d

    parsed, alignment, plddt = _uniform_low_fold()
    fig = structure_trace_3d(alignment, plddt, "pLDDT", confidence=True)
    marker = fig.data[-1].marker
    assert (marker.cmin, marker.cmax) == (0.0, 100.0)
    assert [c for _, c in marker.colorscale][::2] == list(AFDB.values())


def test_the_plddt_track_is_coloured_by_band_on_a_fixed_0_to_100_axis():
    from flamino_core.numbering import Numbering
    from flamino_core.structure.folding.figures import plddt_track

    plddt = np.array([30.0, 55.0, 75.0, 95.0, 52.0])
    fig = plddt_track(plddt, "t", Numbering(16))
    assert list(fig.layout.yaxis.range) == [0, 100]
    by_colour = {trace.marker.color: list(trace.x) for trace in fig.data}
    assert by_colour == {AFDB["very low"]: [16], AFDB["low"]: [17, 20], AFDB["confident"]: [18],
                         AFDB["very high"]: [19]}
    assert [t.name for t in fig.data][1] == "low (50-70): 2"


def test_the_pae_axes_hold_the_residues_only():
    from flamino_core.numbering import Numbering
    from flamino_core.structure.folding.figures import pae_heatmap

    fig = pae_heatmap(np.zeros((146, 146)), "t", Numbering(1))
    assert list(fig.layout.xaxis.range) == [0.5, 146.5]  # Plotly's autorange gave -50..200 (D9)
    assert list(fig.layout.yaxis.range) == [146.5, 0.5]  # the first residue on top, as before
    assert fig.layout.xaxis.autorange is False and fig.layout.yaxis.autorange is False
    assert fig.layout.xaxis.constrain == fig.layout.yaxis.constrain == "domain"
