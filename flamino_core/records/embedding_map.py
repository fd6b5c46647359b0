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
from typing import NamedTuple, Sequence

import numpy as np
import plotly.graph_objects as go

from flamino_core.analysis.outputs import pca
from flamino_core.figures.style import (MISSING_COLOUR, OTHER_COLOUR, SAFE_CATEGORY_COLOURS, _layout, escape,
                           principal_component_title)

METHODS = {"pca": "PCA", "umap": "UMAP"}
UMAP_MIN_RECORDS = 5  # fewer points than this make no neighbourhood graph worth drawing
MAX_CATEGORIES = len(SAFE_CATEGORY_COLOURS)  # 12 values get a colour each; more: 11 and "other"
CONTINUOUS_MIN_VALUES = 12  # numbers with this many distinct values or more get a colour scale, fewer a legend
MISSING = "no value"


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
    titles = (principal_component_title(0, ratios[0]), principal_component_title(1, ratios[1]))
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
    fig = go.Figure()
    for group in _colour_groups(values, colour_name):
        fig.add_trace(_group_trace(coords, group, names, hover, labels))
    index = {record_id: i for i, record_id in enumerate(ids)}
    hits = [index[f] for f in dict.fromkeys(found) if f in index]
    if hits:
        fig.add_trace(_found_trace(coords, hits, names, hover))
    if selected in ids:
        fig.add_trace(_selected_trace(coords, list(ids).index(selected), names, hover))
    fig.update_xaxes(title=projection.axis_titles[0])
    fig.update_yaxes(title=projection.axis_titles[1])
    legend_title = {"title": {"text": escape(colour_name)}} if colour_name else {}
    return _layout(fig, title or f"Per-sequence mean embeddings ({METHODS[projection.method]})", height=520,
                   legend=legend_title)


class _PointGroup(NamedTuple):
    """Records drawn as one trace: one legend entry, or the whole map on one colour scale."""

    rows: list[int]
    name: str
    marker: dict
    showlegend: bool = True


def _colour_groups(values: list[object], colour_name: str) -> list[_PointGroup]:
    """The records split by their colour value; those without one last, in grey."""
    present = [i for i, v in enumerate(values) if v is not None]
    missing = [i for i, v in enumerate(values) if v is None]
    if not present:  # nothing to colour by (no colour chosen, or no record has a value)
        return [_PointGroup(list(range(len(values))), "records", {"color": "#4C72B0"}, showlegend=False)]
    numbers = all(isinstance(values[i], (int, float)) and not isinstance(values[i], bool) for i in present)
    if numbers and len({values[i] for i in present}) >= CONTINUOUS_MIN_VALUES:
        scale = {"color": [values[i] for i in present], "colorscale": "Viridis",
                 "colorbar": {"title": {"text": escape(colour_name)}}}
        groups = [_PointGroup(present, colour_name, scale, showlegend=False)]
    else:
        groups = _category_groups(values, present)
    if missing:
        groups.append(_PointGroup(missing, MISSING, {"color": MISSING_COLOUR}))
    return groups


def _category_groups(values: list[object], present: list[int]) -> list[_PointGroup]:
    """One group per value, most frequent first, each in its own colour-blind-safe colour
    (``SAFE_CATEGORY_COLOURS``); past ``MAX_CATEGORIES`` values the most frequent keep one
    colour fewer and the rest share "other" (so "other" always holds two values or more)."""
    counts = Counter(values[i] for i in present)
    ordered = sorted(counts, key=lambda v: (-counts[v], str(v)))
    shown = ordered if len(ordered) <= MAX_CATEGORIES else ordered[: MAX_CATEGORIES - 1]
    groups = [
        _PointGroup([i for i in present if values[i] == value], escape(value), {"color": colour})
        for value, colour in zip(shown, SAFE_CATEGORY_COLOURS)
    ]
    rest = [i for i in present if values[i] not in set(shown)]
    if rest:
        groups.append(_PointGroup(rest, f"other ({len(ordered) - len(shown)} values)", {"color": OTHER_COLOUR}))
    return groups


def _group_trace(
    coords: np.ndarray, group: _PointGroup, names: list[str], hover: list[str], labels: bool
) -> go.Scatter:
    rows = group.rows
    return go.Scatter(
        x=coords[rows, 0], y=coords[rows, 1], mode="markers+text" if labels else "markers", name=group.name,
        showlegend=group.showlegend, text=[names[i] for i in rows], textposition="top center",
        customdata=[hover[i] for i in rows], hovertemplate="%{customdata}<extra></extra>",
        marker={"size": 11, **group.marker},
    )


def _found_trace(coords: np.ndarray, hits: list[int], names: list[str], hover: list[str]) -> go.Scatter:
    """Orange rings, always labelled (whatever ``labels`` says): a search's matches must be findable."""
    return go.Scatter(
        x=coords[hits, 0], y=coords[hits, 1], mode="markers+text", name=f"found ({len(hits)})",
        text=[names[i] for i in hits], textposition="bottom center", customdata=[hover[i] for i in hits],
        hovertemplate="%{customdata} (found)<extra></extra>",
        marker={"size": 18, "symbol": "circle-open", "color": FOUND_COLOUR, "line": {"width": 3}},
    )


def _selected_trace(coords: np.ndarray, i: int, names: list[str], hover: list[str]) -> go.Scatter:
    """A black ring, larger than a found one's: a record can be both, and both rings show."""
    return go.Scatter(
        x=[coords[i, 0]], y=[coords[i, 1]], mode="markers+text", name=f"selected: {names[i]}",
        text=[names[i]], textposition="bottom center", hovertemplate=f"{hover[i]} (selected)<extra></extra>",
        marker={"size": 22, "symbol": "circle-open", "color": "#000000", "line": {"width": 3}},
    )
