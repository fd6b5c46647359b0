"""Heatmaps over sequence positions: predicted probabilities, substitution scores, attention, contacts.

Pure Plotly builders ``(result arrays) -> go.Figure``, no Streamlit. Positions are shown in the
sequence's own numbering: ``numbering`` (a ``Numbering``) numbers the residues drawn (from 1 for
a whole sequence numbered from 1; from 73 for ``SECY_CHLTR/73-433``; from the range's start when a
page shows a part of the sequence), so axes, hover text and ticks read as the user quotes positions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from flamino_core.alphabet import STANDARD_AMINO_ACIDS
from flamino_core.analysis.outputs import block_mean, residue_labels
from flamino_core.inputs.numbering import Numbering
from flamino_core.figures.style import _layout, escape, top_colourbar


# The sequence's residues are outlined twice, black inside a white halo: one of the two stands
# out on every colour of the map (white on dark purple, black on yellow), and the legend shows
# the black one, which a white legend background does not hide.
RESIDUE_OUTLINE, RESIDUE_HALO = "#000000", "#FFFFFF"
NOT_PREDICTED = "#F4A582"  # contact pairs no window held: a colour the grey scale never takes


def probability_heatmap(
    probabilities: np.ndarray, sequence: str, entropies: np.ndarray | None = None, title: str = "",
    numbering: Numbering = Numbering(),
) -> go.Figure:
    """20 x L heatmap of predicted amino-acid probabilities; the sequence's residues outlined.

    Args:
      probabilities: (20, L), rows in ``STANDARD_AMINO_ACIDS`` order.
      sequence: the L residues (axis labels such as ``M1``).
      entropies: (L,) per-position entropy in bits; when given, drawn as a track under the
        heatmap on the same position axis, so the two line up when zooming.
      numbering: the numbering of the residues drawn.
    """
    labels = residue_labels(sequence, numbering.first)
    with_entropy = entropies is not None
    fig = make_subplots(
        rows=2 if with_entropy else 1,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.04,
        row_heights=[0.75, 0.25] if with_entropy else None,
    )
    fig.add_trace(_probability_trace(probabilities, labels, with_entropy), row=1, col=1)
    for outline in _residue_outline_traces(labels, sequence):
        fig.add_trace(outline, row=1, col=1)
    fig.update_yaxes(type="category", title="amino acid", autorange="reversed", row=1, col=1)
    if with_entropy:
        fig.add_trace(_entropy_trace(labels, entropies), row=2, col=1)
        fig.update_yaxes(title="entropy (bits)", range=[0, math.log2(20) * 1.05], row=2, col=1)
    fig.update_xaxes(type="category")
    fig.update_xaxes(title="position", row=2 if with_entropy else 1, col=1)
    return _probability_layout(fig, title, with_entropy)


def _probability_trace(probabilities: np.ndarray, labels: list[str], with_entropy: bool) -> go.Heatmap:
    return go.Heatmap(
        z=probabilities,
        x=labels,
        y=list(STANDARD_AMINO_ACIDS),
        zmin=0,
        zmax=1,
        colorscale="Viridis",
        colorbar=top_colourbar("p", 0.75 if with_entropy else 1),  # only as tall as the map
        hovertemplate="position %{x}<br>amino acid %{y}<br>p = %{z:.3f}<extra></extra>",
    )


def _residue_outline_traces(labels: list[str], sequence: str) -> list[go.Scatter]:
    """The sequence's own residue at each position, outlined on the map (halo, then outline);
    none for letters outside the 20-letter alphabet, which have no row."""
    in_alphabet = [
        (label, aa) for label, aa in zip(labels, sequence, strict=True) if aa in STANDARD_AMINO_ACIDS
    ]
    if not in_alphabet:
        return []
    return [
        go.Scatter(
            x=[label for label, _ in in_alphabet],
            y=[aa for _, aa in in_alphabet],
            mode="markers",
            marker={"symbol": "square-open", "color": colour, "size": size, "line": {"width": width}},
            name="sequence residue",
            showlegend=legend,
            hoverinfo="skip",
        )
        for colour, size, width, legend in ((RESIDUE_HALO, 11, 3.5, False), (RESIDUE_OUTLINE, 9, 1.5, True))
    ]


def _entropy_trace(labels: list[str], entropies: np.ndarray) -> go.Bar:
    return go.Bar(
        x=labels,
        y=entropies,
        marker_color="#4C72B0",
        name="entropy",
        showlegend=False,
        hovertemplate="position %{x}<br>entropy %{y:.2f} bits<extra></extra>",
    )


def _probability_layout(fig: go.Figure, title: str, with_entropy: bool) -> go.Figure:
    subtitle = "<br><sup>below: entropy of each position's prediction (4.32 bits = uniform)</sup>"
    fig = _layout(
        fig,
        (title or "Predicted amino-acid probabilities (unmasked pass)") + (subtitle if with_entropy else ""),
        height=640 if with_entropy else 500,
        showlegend=True,
        # Legend on its own line between the title and the map: beside a two-line title it
        # overlapped it on narrow screens (800 px).
        legend={"orientation": "h", "y": 1.01, "x": 0, "xanchor": "left", "yanchor": "bottom"},
    )
    fig.update_layout(
        # Below the chart's top edge with room to spare: at y 0.985 the first line was cut (issue 24).
        title={"y": 1, "yref": "container", "yanchor": "top", "pad": {"t": 26}},
        margin={"t": 100},
    )
    return fig


def substitution_grid(values: np.ndarray, sequence: str, *, numbering: Numbering = Numbering(), centre: float = 0,
                      what: str = "score") -> go.Figure:
    """Every position x every mutant as one diverging heatmap centred on ``centre`` (red below,
    blue above, symmetric limits): the substitution map and the Predict page's prediction map.

    Args:
      values: (L, 20), columns in ``STANDARD_AMINO_ACIDS`` order (NaN: no value).
      centre: the value drawn white (0 for scores, the wild type's own prediction).
      what: the colour bar's title and the hover's name of a value.
    """
    labels = residue_labels(sequence, numbering.first)
    finite = np.abs(values[np.isfinite(values)] - centre)
    limit = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    return go.Figure(
        go.Heatmap(
            z=np.asarray(values).T,
            x=labels,
            y=list(STANDARD_AMINO_ACIDS),
            colorscale="RdBu",
            zmid=centre,
            zmin=centre - limit,
            zmax=centre + limit,
            colorbar={"title": {"text": what}},
            hovertemplate="%{x} → %{y}<br>" + what + " %{z:.3f}<extra></extra>",
        )
    )


def mark_wild_type(fig: go.Figure, sequence: str, numbering: Numbering = Numbering(), *,
                   keep_when_selected: bool = False) -> go.Figure:
    """The wild type's cell of each position marked on a ``substitution_grid``, whose cells then
    fill the plot (autorange would pad the category axes for the markers' size).

    ``keep_when_selected``: the marks stay visible while a cell of a clickable map is selected."""
    labels = residue_labels(sequence, numbering.first)
    wild = [(labels[i], aa) for i, aa in enumerate(sequence) if aa in STANDARD_AMINO_ACIDS]
    fig.add_trace(go.Scatter(
        x=[x for x, _ in wild], y=[y for _, y in wild], mode="markers", name="wild type",
        marker={"symbol": "circle", "size": 4, "color": "#444444"}, hoverinfo="skip",
        **({"unselected": {"marker": {"opacity": 1}}} if keep_when_selected else {}),
    ))
    fig.update_xaxes(range=[-0.5, len(sequence) - 0.5])
    return fig.update_yaxes(autorange=False, range=[len(STANDARD_AMINO_ACIDS) - 0.5, -0.5])


def substitution_heatmap(scores: np.ndarray, sequence: str, method: str,
                         numbering: Numbering = Numbering()) -> go.Figure:
    """Single-substitution map: log p(mutant) - log p(wild type) for every position and mutant.

    Args:
      scores: (L, 20), columns in ``STANDARD_AMINO_ACIDS`` order.
      method: ``masked-marginals`` or ``wt-marginals`` (shown in the title).
      numbering: the numbering of the residues drawn.
    """
    fig = substitution_grid(scores, sequence, numbering=numbering)
    fig.update_xaxes(type="category", title="position (wild type)")
    fig.update_yaxes(type="category", title="mutant", autorange="reversed")
    title = (
        f"Substitution scores ({method}): log p(mutant) − log p(wild type)"
        "<br><sup>negative (red): the model finds the mutant less likely than the wild type</sup>"
    )
    return _layout(fig, title, height=500)


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
    maps: np.ndarray, title: str = "", max_size: int = 64, columns: int = 5, diverging: bool = False,
    numbering: Numbering = Numbering(),
) -> go.Figure:
    """Small multiples: one thumbnail per head, averaged into at most ``max_size`` square blocks.

    Args:
      maps: (H, n, n) attention of every head of one layer (one shared colour scale).
      diverging: colour around zero, for APC-corrected maps.
      numbering: the numbering of the residues drawn (the hover names each block's first one).
    """
    heads = maps.shape[0]
    columns = min(columns, heads)
    rows = -(-heads // columns)
    fig = make_subplots(
        rows=rows,
        cols=columns,
        subplot_titles=[f"head {h + 1}" for h in range(heads)],
        horizontal_spacing=0.04,
        vertical_spacing=0.1 if rows > 1 else 0.12,
    )
    step = max(-(-maps.shape[-1] // max_size), 1)
    small = block_mean(maps, max_size)
    ticks = numbering.number(np.arange(small.shape[-1]) * step)  # number of each block's first residue
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
    # Each thumbnail's axes carry a few residue numbers (#66 D12: they had none, so a stripe could
    # not be placed); the first column says "query", the last row "key".
    small_ticks = {"showticklabels": True, "nticks": 4, "tickfont": {"size": 9}}
    fig.update_xaxes(**small_ticks)
    fig.update_yaxes(**small_ticks, autorange="reversed")
    for h in range(heads):  # square thumbnails
        suffix = "" if h == 0 else str(h + 1)
        fig.update_layout({f"yaxis{suffix}": {"scaleanchor": f"x{suffix}", "constrain": "domain"}})
        if h % columns == 0:
            fig.update_layout({f"yaxis{suffix}": {"title": {"text": "query", "font": {"size": 10}}}})
        if h // columns == rows - 1 or h + columns >= heads:  # the lowest thumbnail of its column
            fig.update_layout({f"xaxis{suffix}": {"title": {"text": "key", "font": {"size": 10}}}})
    colour = {"colorscale": "RdBu_r", "cmid": 0} if diverging else {"colorscale": "Blues", "cmin": 0}
    fig.update_layout(coloraxis=colour)
    note = f" (averaged in {step}×{step} blocks)" if step > 1 else ""
    return _layout(fig, (title or "All heads") + note, height=190 * rows + 90)


def contact_map(contacts: np.ndarray, sequence: str, title: str = "", numbering: Numbering = Numbering()) -> go.Figure:
    """(L, L) contact probabilities from the contact head; NaN pairs drawn as *not predicted*.

    Args:
      contacts: (L, L) probabilities; NaN where no window held both residues (long sequences).
      sequence: the L residues (axis labels such as ``M1``).
      numbering: the numbering of the residues drawn.
    """
    labels = residue_labels(sequence, numbering.first)
    contacts = np.asarray(contacts, dtype=np.float32)
    missing = np.isnan(contacts)
    fig = go.Figure()
    if missing.any():
        # Plotly leaves NaN cells transparent (white, like p = 0 in this scale): an underlay in
        # its own colour shows them, and a legend entry names it.
        fig.add_trace(go.Heatmap(
            z=np.where(missing, 1.0, np.nan).astype(np.float32), x=labels, y=labels,
            colorscale=[[0, NOT_PREDICTED], [1, NOT_PREDICTED]], showscale=False, hoverongaps=False,
            hovertemplate="%{y} – %{x}<br>not predicted (no window holds both)<extra></extra>",
            name="not predicted",
        ))
        fig.add_trace(go.Scatter(
            x=[None], y=[None], mode="markers", name="not predicted: no window holds both residues",
            marker={"symbol": "square", "size": 12, "color": NOT_PREDICTED},
        ))
    fig.add_trace(
        go.Heatmap(
            z=contacts,
            x=labels,
            y=labels,
            zmin=0,
            zmax=1,
            colorscale="Greys",
            hoverongaps=False,
            colorbar={"title": {"text": "p(contact)"}},
            hovertemplate="%{y} – %{x}<br>p(contact) = %{z:.3f}<extra></extra>",
            name="predicted",
        )
    )
    fig.update_xaxes(type="category", title="position", constrain="domain")
    fig.update_yaxes(type="category", title="position", autorange="reversed", scaleanchor="x")
    fig = _layout(
        fig, title or "Predicted contacts (contact head)", height=600,
        # Under the title, above the map: below it, the legend ran into the rotated tick labels.
        showlegend=bool(missing.any()), legend={"orientation": "h", "y": 1.0, "x": 0, "yanchor": "bottom"},
    )
    if missing.any():
        fig.update_layout(margin={"t": 90})
    return fig
