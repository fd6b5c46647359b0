"""The look every flamino figure shares: template, colours, layout, escaping, the HTML export.

Figures are pure Plotly builders (no Streamlit) in ``heatmaps.py`` (position-indexed maps),
``charts.py`` (bars and scatters), ``variants/figures.py`` and ``structure/figures.py``; they all
take their layout and escaping from here. Every string that comes from the user (record ids,
descriptions) is HTML-escaped before it goes into a figure, because plotly renders a subset of
HTML in titles, labels and hover text.
"""

from __future__ import annotations

import html

import plotly.graph_objects as go

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


def _qualitative(n: int) -> list[str]:
    import plotly.express as px

    return list(px.colors.qualitative.Alphabet)[:n]


def figure_html(fig: go.Figure) -> bytes:
    """A standalone HTML file of the figure; plotly.js is embedded so it opens offline."""
    return fig.to_html(include_plotlyjs=True, full_html=True).encode("utf-8")
