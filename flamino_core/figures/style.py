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

# Categories on the records' map (docs/inputs.md, "Colouring the records' map"): Okabe and Ito's
# eight colours (Color Universal Design, 2002; Wong, Nature Methods 8:441, 2011), then four of Paul
# Tol's (high-contrast's blue, the dark brown of his 12-colour scheme, light's cyan, muted's wine).
# Every pair, and each against the map's white and its greys ("no value"; "other" for the first
# eleven), stays at least 10 CIEDE2000 apart in normal vision and in simulated protanopia,
# deuteranopia and tritanopia (Machado et al. 2009): tests/unit/test_record_sets.py measures it.
# The twelfth is nearer "other"'s grey under deuteranopia, so it is used only when there is none.
SAFE_CATEGORY_COLOURS = (
    "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#000000",
    "#004488", "#661100", "#99DDFF", "#882255",
)
OTHER_COLOUR = "#666666"  # the values past the palette, together
MISSING_COLOUR = "#BBBBBB"  # records without a value


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


def category_colours(count: int) -> list[str]:
    """One colour per category, cycling the 26-colour qualitative palette past 26 categories."""
    palette = _qualitative(26)
    return [palette[index % len(palette)] for index in range(count)]


def top_colourbar(title: str, length: float) -> dict:
    """A colour bar hung from the plot's top edge, ``length`` of its height: the map it belongs
    to sits at the top, with a track or a legend below it."""
    return {"title": {"text": title}, "len": length, "y": 1, "yanchor": "top"}


def principal_component_title(index: int, ratio: float) -> str:
    """Axis title of a principal component with its share of the variance: ``PC1 (42.0%)``."""
    return f"PC{index + 1} ({100 * ratio:.1f}%)"


def figure_html(fig: go.Figure) -> bytes:
    """A standalone HTML file of the figure; plotly.js is embedded so it opens offline."""
    return fig.to_html(include_plotlyjs=True, full_html=True).encode("utf-8")
