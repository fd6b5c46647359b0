"""Plotly builders for the structure views: predicted vs true contacts, and a 3D C-alpha trace.

Pure ``(arrays) -> go.Figure`` functions with no Streamlit, like ``figures.py``. The app's 3D view
is the molecular viewer (``scene.py``, 3Dmol.js); the C-alpha trace here is its fallback, a
plain Plotly ``Scatter3d`` that renders wherever plotly.js is served. Residue names and chain ids
come from the user's file and are HTML-escaped before they reach hover text.
"""

from __future__ import annotations

import warnings

import numpy as np
import plotly.graph_objects as go

from flamino_core.figures.style import _layout, escape, top_colourbar
from flamino_core.inputs.numbering import Numbering
from flamino_core.structure.align import ChainAlignment
from flamino_core.structure.contacts import TopPairs
# One palette for both views.
from flamino_core.structure.confidence import plotly_colourscale
from flamino_core.structure.scene import (FALSE_POSITIVE, NO_VALUE, PLDDT_SCALE, TRUE_POSITIVE, ColourScale,
                                          colour_scale)

# Consecutive C-alpha atoms of a chain are 3.8 A apart (trans peptide; ~2.9 A cis). Farther
# than this, residues are missing between them and the trace is broken rather than drawn across.
CA_BREAK = 4.2
HOVER_WORDS_UP_TO = 400  # cells a side
MAX_CELLS = 500  # heatmap cells a side; longer maps are drawn in blocks


def contact_comparison_map(
    predicted: np.ndarray,
    contacts: np.ndarray,
    top: TopPairs | None = None,
    title: str = "",
    max_cells: int = MAX_CELLS,
    numbering: Numbering = Numbering(),
) -> go.Figure:
    """Predicted contacts above the diagonal, true contacts below, top predictions marked.

    Args:
      predicted: (L, L) predicted probabilities (NaN = not predicted, shown blank).
      contacts: (L, L) from ``contact_eval.true_contacts``: 1 contact, 0 none, NaN no structure.
      top: the ranked pairs to mark (``contact_eval.top_predictions``), drawn as green circles
        (true contacts) and vermillion crosses (false positives) on the predicted triangle, never
        clipped at the map's edge.
      title: figure title (escaped).
      max_cells: longer sequences are drawn in k x k blocks holding each block's maximum (a
        block shows a contact if any pair in it is one), so the figure stays a few megabytes;
        the marks stay at their exact positions.
      numbering: the sequence's residue numbering: axes, hover and marks use the record's
        own numbering (``SECY_CHLTR/73-433`` starts at 73), as on every other page.
    """
    length = len(predicted)
    upper, lower, block = _comparison_triangles(predicted, contacts, max_cells)
    # Cell centres as residue numbers: position p for single cells, a block's middle otherwise
    # (half-integers: exact in floating point, so the order of the sums does not matter).
    centres = numbering.number(np.arange(len(upper)) * block + (block - 1) / 2)
    where = "positions %{y} – %{x}" if block == 1 else f"{block}×{block} block around %{{y:.0f}} – %{{x:.0f}}"
    fig = go.Figure()
    fig.add_trace(_predicted_triangle_trace(upper, centres, where))
    fig.add_trace(_structure_triangle_trace(lower, centres, where))
    if top is not None and len(top):
        for trace in _top_pair_traces(top, numbering):
            fig.add_trace(trace)
    low, high = numbering.first - 0.5, numbering.last(length) + 0.5
    fig.update_xaxes(title="position (predicted above the diagonal)", range=[low, high], constrain="domain")
    fig.update_yaxes(title="position (structure below the diagonal)", range=[high, low], scaleanchor="x")
    note = f" ({block}×{block} blocks, maximum shown)" if block > 1 else ""
    return _layout(
        fig, (escape(title) or "Predicted contacts vs the structure") + note, height=620,
        legend={"orientation": "h", "y": -0.15},
    )


def _comparison_triangles(
    predicted: np.ndarray, contacts: np.ndarray, max_cells: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """The predicted map above the diagonal and the structure's below (NaN elsewhere), in
    blocks of ``block`` x ``block`` residues when longer than ``max_cells``: (upper, lower, block)."""
    predicted = np.asarray(predicted, dtype=np.float32)
    length = len(predicted)
    row, col = np.indices((length, length))
    upper = np.where(col > row, predicted, np.nan)
    # Lower triangle on three levels: -1 no structure, 0 no contact, 1 contact.
    lower = np.where(col < row, np.where(np.isnan(contacts), -1.0, contacts), np.nan).astype(np.float32)
    block = max(1, -(-length // max_cells))
    if block > 1:
        upper, lower = _block_max(upper, block), _block_max(lower, block)
    return upper, lower, block


def _predicted_triangle_trace(upper: np.ndarray, centres: np.ndarray, where: str) -> go.Heatmap:
    return go.Heatmap(
        z=upper, x=centres, y=centres, zmin=0, zmax=1, colorscale="Blues",
        colorbar=top_colourbar("p(contact)", 0.6),
        hovertemplate=where + "<br>predicted p = %{z:.3f}<extra></extra>",
        name="predicted",
    )


def _structure_triangle_trace(lower: np.ndarray, centres: np.ndarray, where: str) -> go.Heatmap:
    return go.Heatmap(
        z=lower, x=centres, y=centres, zmin=-1, zmax=1, showscale=False,
        colorscale=[[0, "#ececec"], [0.33, "#ececec"], [0.34, "#ffffff"], [0.66, "#ffffff"],
                    [0.67, "#303030"], [1, "#303030"]],
        **_structure_hover(lower, where),
        name="structure",
    )


def _top_pair_traces(top: TopPairs, numbering: Numbering) -> list[go.Scatter]:
    """The top predictions at their exact positions: true contacts, then false positives."""
    traces = []
    for is_contact, name, colour, symbol in (
        (True, "top predictions: contact", TRUE_POSITIVE, "circle-open"),
        (False, "top predictions: no contact", FALSE_POSITIVE, "x-thin-open"),
    ):
        pick = top.is_contact == is_contact
        traces.append(go.Scatter(
            x=numbering.number(top.j[pick]), y=numbering.number(top.i[pick]), mode="markers",
            name=f"{name} ({int(pick.sum())})",
            marker={"color": colour, "symbol": symbol, "size": 8, "line": {"width": 2, "color": colour}},
            cliponaxis=False,  # a mark on the first or last position stays whole
            customdata=top.probability[pick],
            hovertemplate="positions %{y} – %{x}<br>predicted p = %{customdata:.3f}<extra></extra>",
        ))
    return traces


def _block_max(matrix: np.ndarray, block: int) -> np.ndarray:
    """Maximum over block x block tiles, ignoring NaN (a tile of only NaN stays NaN)."""
    n = len(matrix)
    size = -(-n // block) * block
    padded = np.full((size, size), np.nan, dtype=np.float32)
    padded[:n, :n] = matrix
    tiles = padded.reshape(size // block, block, size // block, block)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN tiles
        return np.nanmax(tiles, axis=(1, 3))


def _structure_hover(lower: np.ndarray, where: str) -> dict:
    # Words per cell cost ~15 bytes each in the figure's JSON: fine up to a few hundred cells a
    # side, megabytes beyond, where the hover shows the level's code instead.
    if len(lower) <= HOVER_WORDS_UP_TO:
        words = np.where(lower == 1, "contact (< 8 Å)", np.where(lower == 0, "no contact", "no structure"))
        return {"customdata": words, "hovertemplate": where + "<br>structure: %{customdata}<extra></extra>"}
    return {"hovertemplate": where + "<br>structure: %{z} (1 contact, 0 none, -1 no structure)<extra></extra>"}


def structure_trace_3d(
    alignment: ChainAlignment,
    values: np.ndarray,
    label: str,
    title: str = "",
    signed: bool = False,
    numbering: Numbering = Numbering(),
    confidence: bool = False,
) -> go.Figure:
    """The chain's C-alpha trace, residues coloured by a per-position track: the fallback of the
    molecular viewer (``scene.py``), on the same colour scale.

    Args:
      alignment: the chain aligned to the sequence (gives coordinates and the residue of each
        sequence position).
      values: (L,) one value per sequence position; residues not aligned (or NaN) are grey.
      label: what the values are (colour-bar title and hover).
      title: figure title (escaped).
      signed: a quantity around 0 (scores, PCA): red-blue centred on 0, else Viridis.
      numbering: the sequence's residue numbering (positions in hover text).
      confidence: the values are pLDDT: AlphaFold's fixed bands (``confidence.py``), as the viewer.

    Hover shows the residue as the file numbers it (with insertion code), its name, the
    sequence position it is aligned to, and the value.
    """
    chain = alignment.chain
    per_residue = alignment.per_residue(values)
    label_text = escape(label)
    hover = np.array(_residue_hover(alignment, per_residue, label_text, numbering), dtype=object)
    fig = go.Figure()
    fig.add_trace(_ca_line_trace(chain.ca))
    scale = PLDDT_SCALE if confidence else colour_scale(values, signed)
    for trace in _residue_marker_traces(chain.ca, per_residue, hover, scale, label_text):
        fig.add_trace(trace)
    hidden = {"visible": False}
    return _layout(
        fig, escape(title) or f"Chain {escape(chain.chain_id)} coloured by {label_text}", height=620,
        scene={"xaxis": hidden, "yaxis": hidden, "zaxis": hidden, "aspectmode": "data"},
        legend={"orientation": "h", "y": 0},
    )


def _residue_hover(alignment: ChainAlignment, per_residue: np.ndarray, label_text: str,
                   numbering: Numbering) -> list[str]:
    """Per chain residue: its chain, number and name as the file has them, the sequence position
    it is aligned to, and its value."""
    chain = alignment.chain
    position_of = np.full(len(chain), -1)
    aligned = np.flatnonzero(alignment.residue_at >= 0)
    position_of[alignment.residue_at[aligned]] = aligned
    return [
        f"{escape(chain.chain_id)} {escape(number)} {escape(name)}<br>"
        + (f"position {numbering.number(p)} ({escape(alignment.sequence[p])})" if p >= 0
           else "not aligned to the sequence")
        + (f"<br>{label_text} = {value:.3g}" if np.isfinite(value) else "")
        for number, name, p, value in zip(chain.labels, chain.names, position_of, per_residue)
    ]


def _ca_line_trace(xyz: np.ndarray) -> go.Scatter3d:
    """The C-alpha atoms joined in chain order, broken where residues are missing (a None
    between two points ends a segment)."""
    gap_after = np.linalg.norm(np.diff(xyz, axis=0), axis=1) > CA_BREAK
    line_x, line_y, line_z = [], [], []
    for k, point in enumerate(xyz):
        line_x.append(point[0]), line_y.append(point[1]), line_z.append(point[2])
        if k < len(gap_after) and gap_after[k]:
            line_x.append(None), line_y.append(None), line_z.append(None)
    return go.Scatter3d(
        x=line_x, y=line_y, z=line_z, mode="lines", line={"color": "#9a9a9a", "width": 4},
        hoverinfo="skip", name="C-alpha trace", showlegend=False,
    )


def _residue_marker_traces(
    xyz: np.ndarray, per_residue: np.ndarray, hover: np.ndarray, scale: ColourScale, label_text: str
) -> list[go.Scatter3d]:
    """Residues without a value in grey, then those with one on the colour scale."""
    has_value = np.isfinite(per_residue)
    traces = []
    if (~has_value).any():
        traces.append(go.Scatter3d(
            x=xyz[~has_value, 0], y=xyz[~has_value, 1], z=xyz[~has_value, 2], mode="markers",
            marker={"size": 4, "color": NO_VALUE}, text=hover[~has_value],
            hovertemplate="%{text}<extra></extra>", name="no value",
        ))
    if has_value.any():
        traces.append(go.Scatter3d(
            x=xyz[has_value, 0], y=xyz[has_value, 1], z=xyz[has_value, 2], mode="markers",
            marker={"size": 5, "color": per_residue[has_value],
                    "colorscale": plotly_colourscale() if scale.bands else scale.name, "cmin": scale.low,
                    "cmax": scale.high,
                    "colorbar": {"title": {"text": label_text}}, "showscale": True},
            text=hover[has_value], hovertemplate="%{text}<extra></extra>", name=label_text,
        ))
    return traces
