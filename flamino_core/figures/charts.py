"""Bar charts and scatter plots: one position's predicted distribution, embedding projections.

Pure Plotly builders ``(result arrays) -> go.Figure``, no Streamlit.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from flamino_core.alphabet import STANDARD_AMINO_ACIDS
from flamino_core.analysis.outputs import CLASS_ORDER, PCAResult, residue_class
from flamino_core.inputs.numbering import Numbering
from flamino_core.figures.style import CLASS_COLOURS, _layout, category_colours, principal_component_title


def distribution_bars(
    masked: np.ndarray,
    unmasked: np.ndarray | None,
    position: int,
    residue: str,
    other_mass: float | None = None,
) -> go.Figure:
    """Bar chart of the 20 amino-acid probabilities at one position.

    Args:
      masked: (20,) probabilities with the position masked.
      unmasked: (20,) probabilities from the unmasked pass, drawn beside them, or None.
      position: the position's number (in the sequence's numbering), residue: its letter.
      other_mass: probability on non-amino-acid tokens in the masked pass (shown in the title).
    """
    aas = list(STANDARD_AMINO_ACIDS)
    colours = ["#C44E52" if aa == residue else "#4C72B0" for aa in aas]
    fig = go.Figure(
        go.Bar(
            x=aas,
            y=masked,
            name=f"{residue}{position} masked",
            marker_color=colours,
            hovertemplate="%{x}: p = %{y:.3f}<extra>masked</extra>",
        )
    )
    if unmasked is not None:
        fig.add_trace(
            go.Bar(
                x=aas,
                y=unmasked,
                name="unmasked",
                marker_color="rgba(150,150,150,0.6)",
                hovertemplate="%{x}: p = %{y:.3f}<extra>unmasked</extra>",
            )
        )
    title = f"Position {position} ({residue}) masked: predicted distribution"
    if other_mass is not None:
        title += f"<br><sup>probability on non-amino-acid tokens: {other_mass:.3f}</sup>"
    # Every letter labelled: plotly's automatic ticks skip every other one when the chart is narrow.
    fig.update_xaxes(title="amino acid (red: the sequence's residue)", tickmode="array", tickvals=aas,
                     ticktext=aas, tickangle=0)
    fig.update_yaxes(title="probability", rangemode="tozero")
    return _layout(fig, title, height=360, barmode="group")


# --- embeddings ---------------------------------------------------------------------------------
def residue_pca_scatter(
    result: PCAResult, sequence: str, colour_by: str = "position", dims: int = 2, title: str = "",
    numbering: Numbering = Numbering(),
) -> go.Figure:
    """Per-residue embeddings projected on their principal components.

    Args:
      result: ``pca`` of the (L, D) per-residue representations (at least ``dims`` components).
      sequence: the L residues, for hover text and colouring.
      colour_by: ``position`` (continuous), ``residue`` (one colour per letter) or ``class``.
      dims: 2 or 3.
      numbering: the sequence's numbering (hover text and the position colour scale).
    """
    if dims not in (2, 3):
        raise ValueError(f"dims must be 2 or 3, not {dims}")
    if colour_by not in ("position", "residue", "class"):
        raise ValueError(f"colour_by must be position, residue or class, not {colour_by!r}")
    positions = np.asarray(numbering.numbers(len(sequence)))
    hover = [f"{aa}{i} ({residue_class(aa)})" for i, aa in zip(positions, sequence, strict=True)]
    fig = go.Figure()
    for mask, name, marker, showlegend in _residue_groups(sequence, positions, colour_by, size=4 if dims == 3 else 8):
        text = [hover[i] for i in np.flatnonzero(mask)]
        fig.add_trace(_residue_trace(result.coords, mask, dims, name, text, marker, showlegend))
    return _principal_axes_layout(
        fig, result.explained_variance_ratio, dims, title or "Per-residue embeddings (PCA)"
    )


def _residue_groups(
    sequence: str, positions: np.ndarray, colour_by: str, size: int
) -> list[tuple[np.ndarray, str, dict, bool]]:
    """(mask over residues, legend name, marker, show in legend) for each trace of the scatter."""
    if colour_by == "position":
        marker = dict(
            color=positions, colorscale="Viridis", size=size, colorbar={"title": {"text": "position"}}
        )
        return [(np.ones(len(sequence), bool), "residues", marker, False)]
    if colour_by == "class":
        classes = np.array([residue_class(aa) for aa in sequence])
        return [
            (classes == name, name, dict(color=CLASS_COLOURS[name], size=size), True)
            for name in CLASS_ORDER
            if (classes == name).any()
        ]
    letters = np.array(list(sequence))
    present = sorted(set(sequence))
    return [
        (letters == aa, aa, dict(color=colour, size=size), True)
        for aa, colour in zip(present, category_colours(len(present)))
    ]


def _residue_trace(
    coords: np.ndarray, mask: np.ndarray, dims: int, name: str, text: list[str], marker: dict, showlegend: bool
) -> go.Scatter | go.Scatter3d:
    common = dict(
        mode="markers",
        name=name,
        text=text,
        hovertemplate="%{text}<extra></extra>",
        marker=marker,
        showlegend=showlegend,
    )
    if dims == 3:
        return go.Scatter3d(x=coords[mask, 0], y=coords[mask, 1], z=coords[mask, 2], **common)
    return go.Scatter(x=coords[mask, 0], y=coords[mask, 1], **common)


def _principal_axes_layout(fig: go.Figure, ratios: np.ndarray, dims: int, title: str) -> go.Figure:
    """Each axis titled with its component's share of the variance; a 3-D scene for ``dims`` 3."""
    if dims == 3:
        fig.update_layout(
            scene={
                "xaxis": {"title": {"text": principal_component_title(0, ratios[0])}},
                "yaxis": {"title": {"text": principal_component_title(1, ratios[1])}},
                "zaxis": {"title": {"text": principal_component_title(2, ratios[2])}},
            }
        )
        return _layout(fig, title, height=600)
    fig.update_xaxes(title=principal_component_title(0, ratios[0]))
    fig.update_yaxes(title=principal_component_title(1, ratios[1]))
    return _layout(fig, title, height=520)


def explained_variance_bars(ratios: np.ndarray, title: str = "") -> go.Figure:
    """Explained variance ratio of each principal component, with the cumulative sum."""
    names = [f"PC{i + 1}" for i in range(len(ratios))]
    fig = go.Figure(
        [
            go.Bar(x=names, y=ratios, name="per component", marker_color="#4C72B0"),
            go.Scatter(x=names, y=np.cumsum(ratios), name="cumulative", mode="lines+markers"),
        ]
    )
    fig.update_yaxes(title="fraction of variance", range=[0, 1.05], tickformat=".0%")
    return _layout(
        fig,
        title or "Explained variance",
        height=320,
        legend={"orientation": "h", "y": -0.25, "x": 0},
    )
