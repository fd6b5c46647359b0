"""Plotly builders for a predicted structure (ESMFold): the predicted aligned error as a heatmap.

Pure ``(arrays) -> go.Figure`` functions with no Streamlit, like ``figures.py``.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from flamino_core.figures.style import _layout, escape, top_colourbar
from flamino_core.numbering import Numbering

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
    fig.update_yaxes(autorange="reversed", title="Aligned residue", scaleanchor="x")
    fig.update_xaxes(title="Scored residue")
    return _layout(fig, escape(title), height=520)
