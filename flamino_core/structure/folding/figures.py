"""Plotly builders for a predicted structure (ESMFold): the predicted aligned error as a heatmap,
and pLDDT along the sequence in AlphaFold's fixed confidence bands (``structure/confidence.py``).

Pure ``(arrays) -> go.Figure`` functions with no Streamlit, like ``figures.py``.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from flamino_core.figures.style import _layout, escape, top_colourbar
from flamino_core.numbering import Numbering
from flamino_core.structure.confidence import PLDDT_BANDS, band_index

# AlphaFold DB draws PAE from dark green (0 A: the relative position is sure) to white (30 A+);
# ESMFold's PAE bins end at 31.75 A, so 0-30 covers every value it gives.
PAE_COLOURS = [[0.0, "#0a4d1f"], [0.5, "#8cc68c"], [1.0, "#ffffff"]]
PAE_MAX = 30.0


def pae_heatmap(pae: np.ndarray, title: str = "", numbering: Numbering = Numbering()) -> go.Figure:
    """The (L, L) predicted aligned error in Angstrom: row i, column j is the expected error in
    residue j's position when the prediction is aligned on residue i (as AlphaFold DB shows it).
    ``numbering``: the record's residue numbering (the axes' numbers)."""
    pae = np.asarray(pae, dtype=float)
    if pae.ndim != 2 or pae.shape[0] != pae.shape[1]:
        raise ValueError(f"the predicted aligned error is a square matrix, not {pae.shape}")
    numbers = numbering.number(np.arange(pae.shape[0]))
    fig = go.Figure(go.Heatmap(
        z=pae, x=numbers, y=numbers, zmin=0.0, zmax=PAE_MAX, colorscale=PAE_COLOURS,
        colorbar=top_colourbar("Expected<br>error (Å)", 1.0),
        hovertemplate="aligned on residue %{y}<br>residue %{x}<br>expected error %{z:.1f} Å<extra></extra>",
    ))
    # The axes hold the residues and nothing more: a square axis (scaleanchor) widened the other
    # one's range to -50..200 for 146 residues; constrained to its domain, the plot shrinks instead.
    low, high = numbering.first - 0.5, numbering.last(pae.shape[0]) + 0.5
    fig.update_yaxes(title="Aligned residue", scaleanchor="x", range=[high, low], autorange=False, constrain="domain")
    fig.update_xaxes(title="Scored residue", range=[low, high], autorange=False, constrain="domain")
    return _layout(fig, escape(title), height=520)


def plddt_track(plddt: np.ndarray, title: str = "", numbering: Numbering = Numbering()) -> go.Figure:
    """pLDDT (0-100) of each residue as bars in AlphaFold's band colours, one legend entry per band
    (with its name and count), the band limits 50/70/90 as lines; the y axis always 0-100, so a
    uniformly unsure fold looks unsure. ``numbering``: the record's residue numbers (x axis)."""
    plddt = np.asarray(plddt, dtype=float)
    numbers = numbering.number(np.arange(len(plddt)))
    index = band_index(plddt)
    fig = go.Figure()
    for k, band in enumerate(PLDDT_BANDS):  # every band in the legend, even empty, so the key is whole
        pick = index == k
        fig.add_trace(go.Bar(
            x=numbers[pick], y=plddt[pick], marker={"color": band.colour, "line": {"width": 0}},
            name=f"{band.describe()}: {int(pick.sum())}",
            hovertemplate=f"residue %{{x}}<br>pLDDT %{{y:.1f}} ({band.name})<extra></extra>",
        ))
    for bound in (50, 70, 90):
        fig.add_hline(y=bound, line={"color": "#888888", "width": 1, "dash": "dot"})
    fig.update_yaxes(title="pLDDT", range=[0, 100])
    fig.update_xaxes(title="Residue", range=[numbering.first - 0.5, numbering.last(len(plddt)) + 0.5])
    fig.update_layout(bargap=0, barmode="overlay", showlegend=True)
    return _layout(fig, escape(title), height=300, legend={"orientation": "h", "y": -0.3})


def variant_structure_tracks(table, title: str = "") -> go.Figure:
    """A variant's fold against the wild type's along the sequence
    (``variant_structures.compare``'s table): the C-alpha displacement after superposition (Å),
    the pLDDT difference (variant minus wild type) and the contacts gained (up) and lost (down),
    one row each on a shared residue axis; the mutated residues marked by a dotted line."""
    from plotly.subplots import make_subplots

    x = table["position"].to_numpy()
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        subplot_titles=["C-alpha displacement after superposition (Å)",
                                        "pLDDT difference (variant − wild type)", "Contacts gained / lost"])
    fig.add_trace(go.Bar(x=x, y=table["ca_displacement"], name="displacement (Å)", marker_color="#4c72b0",
                         hovertemplate="residue %{x}<br>%{y:.2f} Å<extra></extra>"), row=1, col=1)
    difference = table["plddt_difference"].to_numpy()
    fig.add_trace(go.Bar(x=x, y=difference, name="pLDDT difference",
                         marker_color=np.where(difference < 0, "#d55e00", "#0072b2"),
                         hovertemplate="residue %{x}<br>%{y:+.1f}<extra></extra>"), row=2, col=1)
    fig.add_trace(go.Bar(x=x, y=table["contacts_gained"], name="contacts gained", marker_color="#009e73",
                         hovertemplate="residue %{x}<br>%{y} gained<extra></extra>"), row=3, col=1)
    fig.add_trace(go.Bar(x=x, y=-table["contacts_lost"].to_numpy(), name="contacts lost", marker_color="#cc79a7",
                         customdata=table["contacts_lost"],
                         hovertemplate="residue %{x}<br>%{customdata} lost<extra></extra>"), row=3, col=1)
    for position in x[table["mutated"].to_numpy(bool)]:
        fig.add_vline(x=position, line={"color": "#ff00ff", "width": 1, "dash": "dot"})
    fig.update_xaxes(title="Residue", row=3, col=1, range=[x.min() - 0.5, x.max() + 0.5])
    fig.update_layout(barmode="relative", bargap=0.1)
    return _layout(fig, escape(title), height=620, legend={"orientation": "h", "y": -0.12})
