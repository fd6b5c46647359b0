"""Plotly figure builders, one import for all of them: ``from flamino_core import figures``.

The builders live by concern: ``heatmaps.py`` (maps over sequence positions), ``charts.py``
(bars and scatters) and ``figure_style.py`` (the shared layout, escaping and HTML export);
this module re-exports them so callers need not know where each one is.
"""

from __future__ import annotations

from flamino_core.figures.charts import (
    distribution_bars,
    explained_variance_bars,
    residue_pca_scatter,
)
from flamino_core.figures.style import CLASS_COLOURS, TEMPLATE, escape, figure_html
from flamino_core.figures.heatmaps import (
    attention_grid,
    attention_heatmap,
    contact_map,
    probability_heatmap,
    substitution_heatmap,
)

__all__ = [
    "CLASS_COLOURS",
    "TEMPLATE",
    "attention_grid",
    "attention_heatmap",
    "contact_map",
    "distribution_bars",
    "escape",
    "explained_variance_bars",
    "figure_html",
    "probability_heatmap",
    "residue_pca_scatter",
    "substitution_heatmap",
]
