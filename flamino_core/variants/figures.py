"""Figures for variant lists and deep mutational scans: pure ``(results) -> go.Figure`` builders.

Positions are in the user's numbering (``first``: the number of the sequence's first residue). User text (mutants,
labels) is HTML-escaped, as in ``figures``.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from flamino_core.alphabet import STANDARD_AMINO_ACIDS
from flamino_core.analysis.outputs import residue_labels
from flamino_core.inputs.numbering import Numbering
from flamino_core.variants.dms import DmsScores
from flamino_core.figures.style import _layout, _qualitative, escape
from flamino_core.figures.heatmaps import mark_wild_type, substitution_heatmap
from flamino_core.variants.notation import Variant

# Colours for the labels people use most (ClinVar's classes); other labels get the palette.
LABEL_COLOURS = {
    "benign": "#009E73", "likely benign": "#56B4E9",
    "pathogenic": "#000000", "likely pathogenic": "#D55E00",
    "vus": "#E69F00", "uncertain": "#E69F00", "uncertain significance": "#E69F00",
}
LABEL_SYMBOLS = ("circle-open", "diamond-open", "square-open", "triangle-up-open", "star-open", "x-thin-open")
FIT_COLOURS = {1: "#0072B2", 0: "#D55E00"}  # DMS_score_bin: fit / not fit
MANY_POINTS = 5_000  # WebGL scatter above this many points
NOT_MEASURED = "#d9d9d9"  # DMS map cells without a value


def _statistics_line(metrics: dict) -> tuple[str, str]:
    """The statistics, and the rows they were computed on (with what was left out)."""
    names = [("spearman", "Spearman ρ"), ("auc", "AUC"), ("mcc", "MCC"), ("ndcg", "NDCG"),
             ("top10_recall", "top-10% recall")]
    parts = [f"{label} {metrics[key]:.3f}" for key, label in names if metrics.get(key) is not None]
    left_out = [f"{metrics.get('n_skipped', 0):,} skipped"]
    if metrics.get("n_excluded"):
        left_out.append(f"{metrics['n_excluded']:,} multi-mutants excluded")
    return " · ".join(parts), f"n = {metrics.get('n_scored', 0):,} ({', '.join(left_out)})"


# The scatter's three groups of rows (``Variant.kind`` -> group; any other kind is an indel).
_KIND_GROUP = {"substitution": "single", "multi-substitution": "multi"}
_KIND_SYMBOLS = (("single", "circle", "single"), ("multi", "diamond", "multi-mutant"),
                 ("indel", "triangle-up", "indel or stop"))


def dms_scatter(scores: DmsScores, metrics: dict, singles_only: bool = False) -> go.Figure:
    """Model score (x) against DMS_score (y) for the rows the statistics use; statistics in the title.

    Colour: the assay's fit / not fit bin; symbol: single substitutions (circles),
    multi-substitutions (diamonds) or indels, stops and frameshifts (triangles), so they can be
    told apart.

    Args:
      scores: from ``dms.score_dms``.
      metrics: from ``dms_metrics.dms_metrics`` on the same rows.
      singles_only: show single substitutions only (as the metrics were computed).
    """
    used = scores.rows_used(singles_only)
    frame = scores.frame[used]
    groups_of = np.array([_KIND_GROUP.get(k, "indel") for k in scores.kinds[used]])
    names = (scores.variants["variant"] if scores.dms.by_sequence else scores.frame["mutant"]).to_numpy()[used]
    bins = frame["DMS_score_bin"] if scores.dms.has_bins else pd.Series(np.nan, index=frame.index)
    kind = go.Scattergl if len(frame) > MANY_POINTS else go.Scatter
    fig = go.Figure()
    groups = [(1, "fit (DMS_score_bin 1)"), (0, "not fit (DMS_score_bin 0)"), (None, "no DMS_score_bin")]
    for value, name in groups:
        for group, symbol, what in _KIND_SYMBOLS:
            pick = (bins.isna() if value is None else bins == value).to_numpy() & (groups_of == group)
            part = frame[pick]
            if part.empty:
                continue
            fig.add_trace(kind(
                x=part["score"], y=part["DMS_score"], mode="markers", name=f"{name}, {what}",
                text=[escape(m) for m in names[pick]],
                marker={"size": 5 if group == "single" else 7, "opacity": 0.7,
                        "color": FIT_COLOURS.get(value, "#777777"), "symbol": symbol},
                hovertemplate=f"%{{text}} ({what})<br>model %{{x:.3f}}<br>DMS %{{y:.3f}}<extra></extra>",
            ))
    fig.update_xaxes(title=f"model score ({escape(scores.strategy)}, log p(mutant) − log p(wild type))")
    fig.update_yaxes(title="DMS_score (higher = fitter)")
    statistics, rows = _statistics_line(metrics)  # two lines: one was cut off at 1400 px
    title = (f"Model vs experiment: {statistics}"
             f"<br><sup>{rows} · {escape(metrics.get('model', ''))}, {escape(scores.strategy)}"
             f"{', single substitutions only' if singles_only else ''}</sup>")
    return _layout(fig, title, height=520, legend={"orientation": "h", "y": -0.15})


def experiment_neutral(scores: DmsScores) -> tuple[float, str]:
    """The DMS_score that means "like the wild type", for centring the experiment's colours.

    The median DMS_score of the table's synonymous rows (the amino acid does not change: the
    wild type measured through the assay) when it has any; else 0, which is wild-type-like for
    the log-ratio / log-fitness scores most assays report (ProteinGym's included). Returns the
    value and how it was chosen, for the figure to say.
    """
    frame = scores.frame
    synonymous = frame["status"].astype(str).str.contains("synonymous", case=False, regex=False).to_numpy()
    values = frame["DMS_score"].to_numpy(dtype=np.float64)[synonymous]
    values = values[np.isfinite(values)]
    if values.size:
        median = np.median(values)
        return float(median), f"white: {median:.3g}, the median of {values.size:,} synonymous rows"
    return 0.0, "white: 0 (no synonymous rows: 0 taken as wild-type-like, as for log-fitness scores)"


def _grid(scores: DmsScores, used: np.ndarray, column: str, low: int, high: int) -> np.ndarray:
    """(20, positions low..high) values of ``column`` for the single substitutions in ``used``."""
    grid = np.full((len(STANDARD_AMINO_ACIDS), high - low + 1), np.nan)
    rows = {aa: j for j, aa in enumerate(STANDARD_AMINO_ACIDS)}
    values = scores.frame[column].to_numpy(dtype=np.float64)
    for row in np.flatnonzero(used):
        mutant = scores.variants["variant"].iat[row]
        (position,) = scores.variants["positions"].iat[row]
        grid[rows[mutant[-1]], position - low] = values[row]
    return grid


def dms_heatmaps(scores: DmsScores) -> go.Figure:
    """Experiment above, model below: position x amino-acid maps on the same axes, laid out as
    the Masked predictions page's substitution map (positions across, mutants down).

    Single substitutions only (a multi-mutant has no cell). Columns are the positions the assay
    covers, in the user's numbering; the wild-type residue of each column is marked. Each panel
    is red-blue around its neutral value: 0 for the model (as likely as the wild type), the
    wild-type-like DMS_score for the experiment (``experiment_neutral``), so white means the
    same thing in both.
    """
    used = scores.rows_used(singles_only=True)
    dms = scores.dms
    if not used.any():
        return _layout(go.Figure(), "No single substitutions to map", height=300)
    positions = [p for (p,) in scores.variants["positions"][used]]
    low, high = min(positions), max(positions)
    numbering = dms.numbering
    labels = residue_labels(dms.wild_type[numbering.index(low):numbering.index(high) + 1], low)
    aas = list(STANDARD_AMINO_ACIDS)
    neutral, how = experiment_neutral(scores)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.1, subplot_titles=(
        "experiment: DMS_score", f"model: {escape(scores.strategy)} score"))
    panels = [("DMS_score", "DMS", neutral, 0.79), ("score", "model", 0.0, 0.21)]
    for row, (column, name, mid, bar_y) in enumerate(panels, start=1):
        grid = _grid(scores, used, column, low, high)
        finite = np.abs(grid[np.isfinite(grid)] - mid)
        spread = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
        fig.add_trace(go.Heatmap(
            z=grid, x=labels, y=aas, colorscale="RdBu", zmid=mid, zmin=mid - spread, zmax=mid + spread,
            colorbar={"title": {"text": name}, "y": bar_y, "len": 0.42},
            hovertemplate=f"%{{x}} → %{{y}}<br>{name} %{{z:.3f}}<extra></extra>",
        ), row=row, col=1)
        wild = [(label, aa) for label, aa in zip(labels, dms.wild_type[numbering.index(low):]) if aa in aas]
        fig.add_trace(go.Scatter(
            x=[label for label, _ in wild], y=[aa for _, aa in wild], mode="markers", name="wild type",
            marker={"symbol": "circle", "size": 4, "color": "#444444"}, hoverinfo="skip", showlegend=row == 1,
        ), row=row, col=1)
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=labels)
    fig.update_xaxes(title="position (wild type)", row=2, col=1)
    fig.update_yaxes(type="category", autorange="reversed", categoryorder="array", categoryarray=aas, title="mutant")
    title = ("Experiment and model, single substitutions<br><sup>red: low (less fit / less likely); blue: high; "
             f"grey: not measured</sup><br><sup>experiment {escape(how)}; model white: 0, as likely as the "
             "wild type</sup>")
    fig = _layout(fig, title, height=900,
                  legend={"orientation": "h", "y": 1.0, "x": 1, "xanchor": "right", "yanchor": "bottom"})
    # Cells the assay did not measure show the plot's background: grey, never the white of "neutral".
    fig.update_xaxes(showgrid=False)
    fig.update_yaxes(showgrid=False)
    return fig.update_layout(margin={"t": 130}, plot_bgcolor=NOT_MEASURED)


def substitution_map(
    substitution_scores: np.ndarray, sequence: str, method: str, *, numbering: Numbering = Numbering(),
    clickable: bool = False,
) -> go.Figure:
    """The full single-substitution map, wild-type cells marked, positions in the user's numbering.

    Args:
      substitution_scores: (L, 20) ``scores.substitution_map(...).substitutions``.
      sequence: the wild type.
      method: the strategy of ``substitution_scores``, for the title.
      numbering: the sequence's residue numbering (the axis labels follow it).
      clickable: add one invisible point per cell, so a click selects that cell. Plotly
        heatmaps emit no selection events (streamlit issue #8760); scatter points do, and the
        selected one is drawn as an outlined square. ``clicked_cell`` reads the selection back.
    """
    fig = substitution_heatmap(substitution_scores, sequence, method, numbering)
    labels = residue_labels(sequence, numbering.first)
    aas = list(STANDARD_AMINO_ACIDS)
    if clickable:
        # The cells' hover moves to the points (two hovers on one cell would flicker).
        fig.update_traces(hoverinfo="skip", hovertemplate=None, selector={"type": "heatmap"})
        scores = np.asarray(substitution_scores, dtype=np.float64)  # (L, 20)
        kind = go.Scattergl if scores.size > MANY_POINTS else go.Scatter
        # Small points: plotly's hover ranks points by distance minus marker radius, so markers
        # wider than a cell (a 146-residue map has ~5 px cells) would tie with their neighbours
        # and a click would pick the wrong cell. The selected one is drawn large.
        fig.add_trace(kind(
            x=np.repeat(labels, len(aas)), y=aas * len(sequence), customdata=scores.reshape(-1),
            mode="markers", name="cells", showlegend=False,
            marker={"symbol": "square-open", "size": 2, "color": "#000000", "opacity": 0, "line": {"width": 2}},
            selected={"marker": {"opacity": 1, "size": 12}}, unselected={"marker": {"opacity": 0}},
            hovertemplate="%{x} → %{y}<br>score %{customdata:.3f}<br>click: mask this position<extra></extra>",
        ))
    mark_wild_type(fig, sequence, numbering, keep_when_selected=True)
    legend = {"orientation": "h", "y": 1.0, "x": 1, "xanchor": "right", "yanchor": "bottom"}
    return fig.update_layout(showlegend=True, legend=legend)


def clicked_cell(points: Sequence[dict], sequence: str, numbering: Numbering = Numbering()) -> tuple[int, str] | None:
    """The cell a click on ``substitution_map`` selected: (0-based residue index, mutant letter).

    Args:
      points: the selection's points (``event.selection.points`` in Streamlit): each has the
        ``x`` (position label such as ``V1``) and ``y`` (amino acid) of the point clicked.
      sequence, numbering: as the map was drawn.

    Returns:
      None when nothing (or nothing on the map) is selected; the last point otherwise.
    """
    index_of = {label: i for i, label in enumerate(residue_labels(sequence, numbering.first))}
    for point in reversed(list(points or ())):
        index, aa = index_of.get(str(point.get("x"))), point.get("y")
        if index is not None and aa in STANDARD_AMINO_ACIDS:
            return index, aa
    return None


def variant_map(
    substitution_scores: np.ndarray,
    sequence: str,
    variants: Sequence[Variant],
    *,
    numbering: Numbering = Numbering(),
    method: str = "masked-marginals",
    table: pd.DataFrame | None = None,
) -> go.Figure:
    """The full substitution map with the user's variants marked, one marker style per label.

    Args:
      substitution_scores: (L, 20) ``scores.substitution_map(...).substitutions``.
      sequence: the wild type.
      variants: the variants to mark (each substitution of a multi-mutant gets a marker).
      numbering: the sequence's residue numbering (the axis labels follow it).
      method: the strategy of ``substitution_scores``, for the title.
      table: ``VariantScores.table``, to show each variant's own score on hover.
    """
    fig = substitution_map(substitution_scores, sequence, method, numbering=numbering)
    labels = residue_labels(sequence, numbering.first)
    own = {} if table is None else dict(zip(table["order"], table["score"]))
    groups: dict[str, list[Variant]] = {}
    for v in variants:
        groups.setdefault(v.label, []).append(v)
    palette = _qualitative(len(groups))
    for n, (label, members) in enumerate(sorted(groups.items())):
        cells = [(labels[s.index], s.mt, v) for v in members for s in v.substitutions]
        colour = LABEL_COLOURS.get(label.strip().lower(), palette[n % len(palette)])
        hover = [f"{escape(v.text)}" + (f" ({escape(label)})" if label else "")
                 + (f"<br>variant score {own[v.order]:.3f}" if np.isfinite(own.get(v.order, np.nan)) else "")
                 for _, _, v in cells]
        fig.add_trace(go.Scatter(
            x=[x for x, _, _ in cells], y=[y for _, y, _ in cells], mode="markers",
            name=escape(label) if label else "your variants", text=hover,
            marker={"symbol": LABEL_SYMBOLS[n % len(LABEL_SYMBOLS)], "size": 11, "color": colour, "line": {"width": 2}},
            hovertemplate="%{text}<extra></extra>",
        ))
    return fig


def model_scatter(comparison, x_model: str, y_model: str) -> go.Figure:
    """One model's scores (x) against another's (y) on the rows compared (``compare.Comparison``),
    coloured by the experiment's DMS_score; their Spearman and top-10% overlap in the title."""
    x_col = comparison.columns[comparison.models.index(x_model)]
    y_col = comparison.columns[comparison.models.index(y_model)]
    frame = comparison.frame[comparison.used]
    kind = go.Scattergl if len(frame) > MANY_POINTS else go.Scatter
    fig = go.Figure(kind(
        x=frame[x_col], y=frame[y_col], mode="markers", text=frame["mutant"] if "mutant" in frame else None,
        marker={"color": frame["DMS_score"], "colorscale": "Viridis", "size": 6, "opacity": 0.8,
                "colorbar": {"title": "DMS_score"}},
        hovertemplate="%{text}<br>x %{x:.3f}<br>y %{y:.3f}<extra></extra>",
    ))
    rho = comparison.spearman_between.loc[x_model, y_model]
    shared = comparison.top_shared.loc[x_model, y_model]
    numbers = " · ".join(part for part in (
        None if rho is None else f"Spearman ρ {rho:.3f}",
        None if shared is None else f"top 10% shared {shared:.0%}") if part)
    fig.update_xaxes(title=escape(f"{x_model} score"))
    fig.update_yaxes(title=escape(f"{y_model} score"))
    return _layout(fig, f"{escape(y_model)} against {escape(x_model)}<br><sup>{numbers} · n = {len(frame):,}</sup>")
