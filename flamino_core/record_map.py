"""The per-sequence map: a set of records' mean embeddings projected to 2-D (PCA, or UMAP when
umap-learn is installed), and its figure, coloured by metadata, the selected record marked.

UMAP (McInnes et al., umap-learn) is what ProtSpace users expect beside PCA. It is an optional
extra (``pip install 'flamino[umap]'``): umap-learn pulls numba and llvmlite (~260 MB
installed, ~20 s of JIT compilation on first use), too heavy for a default install; without it
the map offers PCA only and says how to get UMAP.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections import Counter
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from .analysis import pca
from .figures import _layout, _qualitative, escape

METHODS = {"pca": "PCA", "umap": "UMAP"}
UMAP_MIN_RECORDS = 5  # fewer points than this make no neighbourhood graph worth drawing
MAX_CATEGORIES = 20  # more distinct values are grouped as "other"
CONTINUOUS_MIN_VALUES = 12  # numbers with more distinct values get a colour scale, fewer a legend
MISSING = "no value"
MISSING_COLOUR = "#BBBBBB"


@dataclasses.dataclass(frozen=True)
class Projection:
    coords: np.ndarray  # (N, 2)
    method: str  # the method used (PCA when UMAP was asked for but could not run)
    axis_titles: tuple[str, str]
    note: str = ""  # why the method asked for was not used, for the user


def umap_available() -> bool:
    """True if umap-learn is installed (without importing it: that takes seconds)."""
    return importlib.util.find_spec("umap") is not None


def project(means: np.ndarray, method: str = "pca", seed: int = 0) -> Projection:
    """Project (N, D) per-sequence embeddings to 2-D.

    Args:
      means: per-sequence mean embeddings.
      method: ``pca`` or ``umap`` (falls back to PCA, with a note, when umap-learn is missing
        or there are fewer than ``UMAP_MIN_RECORDS`` records).
      seed: UMAP's random state; fixed so the same records give the same map.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
    note = ""
    if method == "umap" and not umap_available():
        note = "UMAP needs umap-learn (pip install 'flamino[umap]'); showing PCA"
    elif method == "umap" and len(means) < UMAP_MIN_RECORDS:
        note = f"UMAP needs at least {UMAP_MIN_RECORDS} records; showing PCA"
    elif method == "umap":
        import umap

        neighbours = min(15, len(means) - 1)
        reducer = umap.UMAP(n_components=2, n_neighbors=neighbours, random_state=seed, n_jobs=1)
        coords = reducer.fit_transform(np.asarray(means, dtype=np.float32))
        return Projection(np.asarray(coords, dtype=np.float64), "umap", ("UMAP 1", "UMAP 2"))
    result = pca(means, n_components=2)
    ratios = result.explained_variance_ratio
    titles = (f"PC1 ({100 * ratios[0]:.1f}%)", f"PC2 ({100 * ratios[1]:.1f}%)")
    return Projection(result.coords, "pca", titles, note)


FOUND_COLOUR = "#E8710A"  # records a search matched


def record_map_figure(
    projection: Projection,
    ids: Sequence[str],
    colour: Sequence[object] | None = None,
    colour_name: str = "",
    selected: str | None = None,
    labels: bool = True,
    title: str = "",
    found: Sequence[str] = (),
) -> go.Figure:
    """The records on the map.

    Args:
      projection: ``project`` of their mean embeddings.
      ids: record ids, in the rows' order.
      colour: a value per record to colour by (None entries: "no value"); numbers with many
        distinct values get a colour scale, anything else one legend entry per value.
      colour_name: what ``colour`` is, for the legend.
      selected: the id of the record the other pages analyse, ringed and always labelled.
      labels: write each record's id beside its point (hover shows it either way).
      found: ids of records a search matched: ringed in orange and always labelled.
    """
    coords = projection.coords
    names = [escape(i) for i in ids]
    values = list(colour) if colour is not None else [None] * len(ids)
    hover = [n if v is None else f"{n}<br>{escape(colour_name)}: {escape(v)}" for n, v in zip(names, values)]
    mode = "markers+text" if labels else "markers"
    fig = go.Figure()

    def add(rows: list[int], name: str, marker: dict, showlegend: bool = True) -> None:
        fig.add_trace(go.Scatter(
            x=coords[rows, 0], y=coords[rows, 1], mode=mode, name=name, showlegend=showlegend,
            text=[names[i] for i in rows], textposition="top center", customdata=[hover[i] for i in rows],
            hovertemplate="%{customdata}<extra></extra>", marker={"size": 11, **marker},
        ))  # fmt: skip

    present = [i for i, v in enumerate(values) if v is not None]
    missing = [i for i, v in enumerate(values) if v is None]
    numbers = all(isinstance(values[i], (int, float)) and not isinstance(values[i], bool) for i in present)
    if colour is None or not present:
        add(list(range(len(ids))), "records", {"color": "#4C72B0"}, showlegend=False)
    elif numbers and len({values[i] for i in present}) >= CONTINUOUS_MIN_VALUES:
        scale = {"color": [values[i] for i in present], "colorscale": "Viridis",
                 "colorbar": {"title": {"text": escape(colour_name)}}}  # fmt: skip
        add(present, colour_name, scale, showlegend=False)
    else:
        counts = Counter(values[i] for i in present)
        ordered = sorted(counts, key=lambda v: (-counts[v], str(v)))
        shown = ordered[:MAX_CATEGORIES] if len(ordered) > MAX_CATEGORIES + 1 else ordered
        palette = _qualitative(26)
        for index, value in enumerate(shown):
            add([i for i in present if values[i] == value], escape(value), {"color": palette[index % len(palette)]})
        rest = [i for i in present if values[i] not in set(shown)]
        if rest:
            add(rest, f"other ({len(ordered) - len(shown)} values)", {"color": "#666666"})
    if missing and colour is not None and present:
        add(missing, MISSING, {"color": MISSING_COLOUR})
    index = {record_id: i for i, record_id in enumerate(ids)}
    hits = [index[f] for f in dict.fromkeys(found) if f in index]
    if hits:
        fig.add_trace(go.Scatter(
            x=coords[hits, 0], y=coords[hits, 1], mode="markers+text", name=f"found ({len(hits)})",
            text=[names[i] for i in hits], textposition="bottom center", customdata=[hover[i] for i in hits],
            hovertemplate="%{customdata} (found)<extra></extra>",
            marker={"size": 18, "symbol": "circle-open", "color": FOUND_COLOUR, "line": {"width": 3}},
        ))  # fmt: skip
    if selected in ids:
        i = list(ids).index(selected)
        fig.add_trace(go.Scatter(
            x=[coords[i, 0]], y=[coords[i, 1]], mode="markers+text", name=f"selected: {names[i]}",
            text=[names[i]], textposition="bottom center", hovertemplate=f"{hover[i]} (selected)<extra></extra>",
            marker={"size": 22, "symbol": "circle-open", "color": "#000000", "line": {"width": 3}},
        ))  # fmt: skip
    fig.update_xaxes(title=projection.axis_titles[0])
    fig.update_yaxes(title=projection.axis_titles[1])
    legend_title = {"title": {"text": escape(colour_name)}} if colour_name else {}
    return _layout(fig, title or f"Per-sequence mean embeddings ({METHODS[projection.method]})", height=520,
                   legend=legend_title)  # fmt: skip
