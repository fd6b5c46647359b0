"""Plotly figure builders: ``(result arrays) -> go.Figure``, no Streamlit.

Positions are shown 1-based, as biologists count them. Every string that comes from the
user (record ids, descriptions) is HTML-escaped before it goes into a figure, because plotly
renders a subset of HTML in titles, labels and hover text.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .alphabet import STANDARD_AMINO_ACIDS
from .analysis import CLASS_ORDER, PCAResult, block_mean, residue_class, residue_labels

TEMPLATE = "plotly_white"
CLASS_COLOURS = {
    "hydrophobic": "#E69F00",
    "aromatic": "#8C564B",
    "polar": "#009E73",
    "positive": "#0072B2",
    "negative": "#D55E00",
    "special": "#CC79A7",
    "other": "#999999",
}


def _layout(fig: go.Figure, title: str, height: int | None = None, **kwargs) -> go.Figure:
    fig.update_layout(
        template=TEMPLATE,
        title={"text": title, "x": 0, "xanchor": "left"},
        margin={"l": 60, "r": 20, "t": 60, "b": 50},
        height=height,
        **kwargs,
    )
    return fig


def escape(text: str) -> str:
    """User text made safe for plotly's HTML-like labels."""
    return html.escape(str(text), quote=False)


# --- masked predictions ------------------------------------------------------------------------
def probability_heatmap(
    probabilities: np.ndarray, sequence: str, entropies: np.ndarray | None = None, title: str = ""
) -> go.Figure:
    """20 x L heatmap of predicted amino-acid probabilities; the sequence's residues outlined.

    Args:
      probabilities: (20, L), rows in ``STANDARD_AMINO_ACIDS`` order.
      sequence: the L residues (axis labels such as ``M1``).
      entropies: (L,) per-position entropy in bits; when given, drawn as a track under the
        heatmap on the same position axis, so the two line up when zooming.
    """
    labels = residue_labels(sequence)
    aas = list(STANDARD_AMINO_ACIDS)
    rows = 1 if entropies is None else 2
    fig = make_subplots(
        rows=rows,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.04,
        row_heights=[0.75, 0.25] if rows == 2 else None,
    )
    fig.add_trace(
        go.Heatmap(
            z=probabilities,
            x=labels,
            y=aas,
            zmin=0,
            zmax=1,
            colorscale="Viridis",
            colorbar={"title": {"text": "p"}, "len": 0.75 if rows == 2 else 1, "y": 1, "yanchor": "top"},
            hovertemplate="position %{x}<br>amino acid %{y}<br>p = %{z:.3f}<extra></extra>",
        ),
        row=1,
        col=1,
    )
    in_alphabet = [
        (label, aa) for label, aa in zip(labels, sequence, strict=True) if aa in STANDARD_AMINO_ACIDS
    ]
    if in_alphabet:
        fig.add_trace(
            go.Scatter(
                x=[label for label, _ in in_alphabet],
                y=[aa for _, aa in in_alphabet],
                mode="markers",
                marker={"symbol": "square-open", "color": "white", "size": 9, "line": {"width": 2}},
                name="sequence residue",
                hoverinfo="skip",
            ),
            row=1,
            col=1,
        )
    fig.update_yaxes(type="category", title="amino acid", autorange="reversed", row=1, col=1)
    if entropies is not None:
        fig.add_trace(
            go.Bar(
                x=labels,
                y=entropies,
                marker_color="#4C72B0",
                name="entropy",
                showlegend=False,
                hovertemplate="position %{x}<br>entropy %{y:.2f} bits<extra></extra>",
            ),
            row=2,
            col=1,
        )
        fig.update_yaxes(title="entropy (bits)", range=[0, math.log2(20) * 1.05], row=2, col=1)
    fig.update_xaxes(type="category")
    fig.update_xaxes(title="position", row=rows, col=1)
    subtitle = "<br><sup>below: entropy of each position's prediction (4.32 bits = uniform)</sup>"
    return _layout(
        fig,
        (title or "Predicted amino-acid probabilities (unmasked pass)") + (subtitle if rows == 2 else ""),
        height=480 if rows == 1 else 620,
        showlegend=True,
        legend={"orientation": "h", "y": 1.02, "x": 1, "xanchor": "right", "yanchor": "bottom"},
    )


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
      position: 1-based position, residue: its letter (for the title).
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
    fig.update_xaxes(title="amino acid (red: the sequence's residue)")
    fig.update_yaxes(title="probability", rangemode="tozero")
    return _layout(fig, title, height=360, barmode="group")


def substitution_heatmap(scores: np.ndarray, sequence: str, method: str) -> go.Figure:
    """Single-substitution map: log p(mutant) - log p(wild type) for every position and mutant.

    Args:
      scores: (L, 20), columns in ``STANDARD_AMINO_ACIDS`` order.
      method: ``masked-marginals`` or ``wt-marginals`` (shown in the title).
    """
    labels = residue_labels(sequence)
    finite = np.abs(scores[np.isfinite(scores)])
    limit = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    fig = go.Figure(
        go.Heatmap(
            z=np.asarray(scores).T,
            x=labels,
            y=list(STANDARD_AMINO_ACIDS),
            colorscale="RdBu",
            zmid=0,
            zmin=-limit,
            zmax=limit,
            colorbar={"title": {"text": "score"}},
            hovertemplate="%{x} → %{y}<br>score %{z:.3f}<extra></extra>",
        )
    )
    fig.update_xaxes(type="category", title="position (wild type)")
    fig.update_yaxes(type="category", title="mutant", autorange="reversed")
    title = (
        f"Substitution scores ({method}): log p(mutant) − log p(wild type)"
        "<br><sup>negative (red): the model finds the mutant less likely than the wild type</sup>"
    )
    return _layout(fig, title, height=500)


# --- embeddings ---------------------------------------------------------------------------------
def _axis_title(index: int, ratio: float) -> str:
    return f"PC{index + 1} ({100 * ratio:.1f}%)"


def residue_pca_scatter(
    result: PCAResult, sequence: str, colour_by: str = "position", dims: int = 2, title: str = ""
) -> go.Figure:
    """Per-residue embeddings projected on their principal components.

    Args:
      result: ``pca`` of the (L, D) per-residue representations (at least ``dims`` components).
      sequence: the L residues, for hover text and colouring.
      colour_by: ``position`` (continuous), ``residue`` (one colour per letter) or ``class``.
      dims: 2 or 3.
    """
    if dims not in (2, 3):
        raise ValueError(f"dims must be 2 or 3, not {dims}")
    if colour_by not in ("position", "residue", "class"):
        raise ValueError(f"colour_by must be position, residue or class, not {colour_by!r}")
    coords = result.coords
    positions = np.arange(1, len(sequence) + 1)
    hover = [f"{aa}{i} ({residue_class(aa)})" for i, aa in zip(positions, sequence, strict=True)]
    fig = go.Figure()

    def add(mask: np.ndarray, name: str, marker: dict, showlegend: bool = True) -> None:
        common = dict(
            mode="markers",
            name=name,
            text=[hover[i] for i in np.flatnonzero(mask)],
            hovertemplate="%{text}<extra></extra>",
            marker=marker,
            showlegend=showlegend,
        )
        if dims == 3:
            fig.add_trace(go.Scatter3d(x=coords[mask, 0], y=coords[mask, 1], z=coords[mask, 2], **common))
        else:
            fig.add_trace(go.Scatter(x=coords[mask, 0], y=coords[mask, 1], **common))

    size = 4 if dims == 3 else 8
    everything = np.ones(len(sequence), bool)
    if colour_by == "position":
        marker = dict(
            color=positions, colorscale="Viridis", size=size, colorbar={"title": {"text": "position"}}
        )
        add(everything, "residues", marker, showlegend=False)
    elif colour_by == "class":
        classes = np.array([residue_class(aa) for aa in sequence])
        for name in CLASS_ORDER:
            mask = classes == name
            if mask.any():
                add(mask, name, dict(color=CLASS_COLOURS[name], size=size))
    else:
        letters = np.array(list(sequence))
        palette = _qualitative(26)
        for index, aa in enumerate(sorted(set(sequence))):
            add(letters == aa, aa, dict(color=palette[index % len(palette)], size=size))

    ratios = result.explained_variance_ratio
    title = title or "Per-residue embeddings (PCA)"
    if dims == 3:
        fig.update_layout(
            scene={
                "xaxis": {"title": {"text": _axis_title(0, ratios[0])}},
                "yaxis": {"title": {"text": _axis_title(1, ratios[1])}},
                "zaxis": {"title": {"text": _axis_title(2, ratios[2])}},
            }
        )
        return _layout(fig, title, height=600)
    fig.update_xaxes(title=_axis_title(0, ratios[0]))
    fig.update_yaxes(title=_axis_title(1, ratios[1]))
    return _layout(fig, title, height=520)


def _qualitative(n: int) -> list[str]:
    import plotly.express as px

    return list(px.colors.qualitative.Alphabet)[:n]


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


# --- attention and contacts ---------------------------------------------------------------------
def attention_heatmap(
    matrix: np.ndarray, labels: Sequence[str], title: str, diverging: bool = False
) -> go.Figure:
    """One attention map: rows are the attending (query) tokens, columns the attended (key) ones.

    Args:
      matrix: (n, n) map; labels: n axis labels (residues such as ``M1``, or ``<cls>``).
      diverging: colour around zero (APC-corrected maps have negative values).
    """
    shown = [escape(label) for label in labels]
    colour = {"colorscale": "RdBu_r", "zmid": 0} if diverging else {"colorscale": "Blues", "zmin": 0}
    fig = go.Figure(
        go.Heatmap(
            z=np.asarray(matrix, dtype=np.float32),  # half the bytes sent for a 1022 x 1022 map
            x=shown,
            y=shown,
            hovertemplate="query %{y} → key %{x}<br>%{z:.4f}<extra></extra>",
            colorbar={"title": {"text": "weight"}},
            **colour,
        )
    )
    fig.update_xaxes(type="category", title="key (attended to)", constrain="domain")
    fig.update_yaxes(type="category", title="query (attending)", autorange="reversed", scaleanchor="x")
    return _layout(fig, title, height=560)


def attention_grid(
    maps: np.ndarray, title: str = "", max_size: int = 64, columns: int = 5, diverging: bool = False
) -> go.Figure:
    """Small multiples: one thumbnail per head, averaged into at most ``max_size`` square blocks.

    Args:
      maps: (H, n, n) attention of every head of one layer (one shared colour scale).
      diverging: colour around zero, for APC-corrected maps.
    """
    heads = maps.shape[0]
    columns = min(columns, heads)
    rows = -(-heads // columns)
    fig = make_subplots(
        rows=rows,
        cols=columns,
        subplot_titles=[f"head {h + 1}" for h in range(heads)],
        horizontal_spacing=0.02,
        vertical_spacing=0.06 if rows > 1 else 0.1,
    )
    step = max(-(-maps.shape[-1] // max_size), 1)
    small = block_mean(maps, max_size)
    ticks = np.arange(small.shape[-1]) * step + 1  # first residue index of each block
    for h in range(heads):
        fig.add_trace(
            go.Heatmap(
                z=small[h].astype(np.float32),
                x=ticks,
                y=ticks,
                coloraxis="coloraxis",
                hovertemplate=f"head {h + 1}<br>query %{{y}} → key %{{x}}<br>%{{z:.4f}}<extra></extra>",
            ),
            row=h // columns + 1,
            col=h % columns + 1,
        )
    fig.update_xaxes(showticklabels=False)
    fig.update_yaxes(showticklabels=False, autorange="reversed")
    for h in range(heads):  # square thumbnails
        suffix = "" if h == 0 else str(h + 1)
        fig.update_layout({f"yaxis{suffix}": {"scaleanchor": f"x{suffix}", "constrain": "domain"}})
    colour = {"colorscale": "RdBu_r", "cmid": 0} if diverging else {"colorscale": "Blues", "cmin": 0}
    fig.update_layout(coloraxis=colour)
    note = f" (averaged in {step}×{step} blocks)" if step > 1 else ""
    return _layout(fig, (title or "All heads") + note, height=170 * rows + 80)


def contact_map(contacts: np.ndarray, sequence: str, title: str = "") -> go.Figure:
    """(L, L) contact probabilities from the contact head."""
    labels = residue_labels(sequence)
    fig = go.Figure(
        go.Heatmap(
            z=np.asarray(contacts, dtype=np.float32),
            x=labels,
            y=labels,
            zmin=0,
            zmax=1,
            colorscale="Greys",
            colorbar={"title": {"text": "p(contact)"}},
            hovertemplate="%{y} – %{x}<br>p(contact) = %{z:.3f}<extra></extra>",
        )
    )
    fig.update_xaxes(type="category", title="position", constrain="domain")
    fig.update_yaxes(type="category", title="position", autorange="reversed", scaleanchor="x")
    return _layout(fig, title or "Predicted contacts (contact head)", height=560)


def figure_html(fig: go.Figure) -> bytes:
    """A standalone HTML file of the figure; plotly.js is embedded so it opens offline."""
    return fig.to_html(include_plotlyjs=True, full_html=True).encode("utf-8")
