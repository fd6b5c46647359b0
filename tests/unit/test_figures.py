"""Figure details a reader depends on: the sequence's numbering on every axis, every amino acid
labelled, legend markers that can be seen, and contacts that were not predicted shown as such."""

from __future__ import annotations

import numpy as np
import plotly.colors

from flamino_core.analysis import outputs as analysis

from flamino_core import figures
from flamino_core.alphabet import STANDARD_AMINO_ACIDS
from flamino_core.numbering import Numbering

RNG = np.random.default_rng(11)
SEQ = "MKTAYIAKQRQISFVKSHFSRQ"


def _rgb(colour: str) -> list[float]:
    colour = {"white": "#FFFFFF", "black": "#000000"}.get(colour, colour)
    if colour.startswith("#"):
        return [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    return [float(v) / 255 for v in colour[colour.index("(") + 1:-1].split(",")[:3]]


def _luminance(colour: str) -> float:
    """WCAG 2 relative luminance of a colour (the formula written out here, not plotly's)."""
    rgb = _rgb(colour)
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_positions_follow_the_sequences_numbering_on_every_axis():
    first = 73  # SECY_CHLTR/73-433
    numbering = Numbering(first)
    probs = analysis.amino_acid_probabilities(RNG.normal(size=(len(SEQ), 33)))
    expected = [f"{aa}{first + i}" for i, aa in enumerate(SEQ)]
    heatmap = figures.probability_heatmap(probs, SEQ, analysis.entropy(probs), numbering=numbering)
    assert list(heatmap.data[0].x) == expected and list(heatmap.data[3].x) == expected
    substitution = figures.substitution_heatmap(RNG.normal(size=(len(SEQ), 20)), SEQ, "wt-marginals", numbering)
    assert list(substitution.data[0].x) == expected
    contact = figures.contact_map(RNG.random((len(SEQ), len(SEQ))), SEQ, numbering=numbering)
    assert list(contact.data[-1].x) == expected and list(contact.data[-1].y) == expected
    scatter = figures.residue_pca_scatter(analysis.pca(RNG.normal(size=(len(SEQ), 6)), 2), SEQ, numbering=numbering)
    assert scatter.data[0].text[0] == f"M{first} (hydrophobic)"
    assert list(scatter.data[0].marker.color)[:2] == [first, first + 1]
    grid = figures.attention_grid(RNG.random((2, 10, 10)), max_size=5, numbering=numbering)
    assert list(grid.data[0].x) == [first, first + 2, first + 4, first + 6, first + 8]  # 2-residue blocks


def test_the_masked_position_chart_labels_all_twenty_amino_acids():
    probs = RNG.dirichlet(np.ones(20))
    fig = figures.distribution_bars(probs, None, 80, "K")
    axis = fig.layout.xaxis
    # Explicit ticks: plotly's automatic ones skip every other category on a narrow chart.
    assert axis.tickmode == "array" and list(axis.tickvals) == list(STANDARD_AMINO_ACIDS)
    assert list(axis.ticktext) == list(STANDARD_AMINO_ACIDS)
    assert "Position 80 (K)" in fig.layout.title.text


def test_sequence_residue_markers_show_on_the_legend_and_on_every_colour_of_the_map():
    probs = analysis.amino_acid_probabilities(RNG.normal(size=(len(SEQ), 33)))
    fig = figures.probability_heatmap(probs, SEQ)
    outlines = [trace for trace in fig.data if trace.name == "sequence residue"]
    (legend,) = [trace for trace in outlines if trace.showlegend is not False]
    background = fig.layout.template.layout.paper_bgcolor or "#FFFFFF"
    # WCAG's 3:1 for graphics: the legend's marker must stand out from the legend background.
    assert contrast(legend.marker.color, background) >= 3
    viridis = plotly.colors.sequential.Viridis
    for cell in (viridis[0], viridis[len(viridis) // 2], viridis[-1]):  # low, middle, high p
        assert max(contrast(trace.marker.color, cell) for trace in outlines) >= 3, cell


def test_contacts_not_predicted_get_their_own_colour_and_a_legend_entry():
    contacts = RNG.random((len(SEQ), len(SEQ))).astype(np.float32)
    contacts[0, 15:] = contacts[15:, 0] = np.nan
    fig = figures.contact_map(contacts, SEQ)
    underlay, entry, predicted = fig.data
    missing = np.isnan(contacts)
    z = np.asarray(underlay.z, dtype=float)
    np.testing.assert_array_equal(~np.isnan(z), missing)  # the underlay fills exactly the NaN cells
    colour = underlay.colorscale[0][1]
    # The Greys scale of predicted contacts is achromatic (white to black, where p = 0 is white,
    # as a NaN cell would be): the not-predicted colour must be a clear hue, not a grey.
    assert all(max(_rgb(c)) - min(_rgb(c)) < 0.02 for _, c in plotly.colors.get_colorscale("Greys"))
    assert max(_rgb(colour)) - min(_rgb(colour)) > 0.25
    assert entry.showlegend is not False and "not predicted" in entry.name and fig.layout.showlegend
    assert entry.marker.color == colour
    np.testing.assert_array_equal(np.isnan(np.asarray(predicted.z, dtype=float)), missing)
    # Without NaN there is nothing to explain: one trace, no legend.
    plain = figures.contact_map(np.nan_to_num(contacts), SEQ)
    assert len(plain.data) == 1 and not plain.layout.showlegend


def test_every_head_thumbnail_has_numbered_axes_named_query_and_key():
    """#66 D12: the per-head thumbnails had no tick labels and no axis names."""
    grid = figures.attention_grid(RNG.random((7, 10, 10)), columns=5)  # two rows: 5 + 2
    layout = grid.layout
    axes = [layout[f"xaxis{'' if h == 0 else h + 1}"] for h in range(7)]
    assert all(axis.showticklabels for axis in axes)
    assert all(layout[f"yaxis{'' if h == 0 else h + 1}"].showticklabels for h in range(7))
    # "key" under the lowest thumbnail of each column (heads 3-5 end row 1, 6-7 row 2); "query" on the left
    assert [h + 1 for h, axis in enumerate(axes) if axis.title.text == "key"] == [3, 4, 5, 6, 7]
    assert [h + 1 for h in range(7) if layout[f"yaxis{'' if h == 0 else h + 1}"].title.text == "query"] == [1, 6]
