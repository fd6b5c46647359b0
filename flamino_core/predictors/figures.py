"""Figures of a fit: pure ``(result) -> go.Figure`` builders (no Streamlit).

Every figure made from a model with random weights says so in its title: its embedding and
zero-shot numbers are noise, only the one-hot and composition baselines mean anything.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from flamino_core.figures.heatmaps import mark_wild_type, substitution_grid
from flamino_core.numbering import Numbering
from flamino_core.figures.style import _layout, _qualitative, escape
from flamino_core.predictors.table_fit import FitResult

RANDOM_WEIGHTS_MARK = " · RANDOM WEIGHTS: not biology"
MANY_POINTS = 5_000  # WebGL scatter above this many points
STATISTIC_LABELS = {"spearman": "Spearman ρ", "auc": "AUC", "mcc": "MCC"}


def _mark(random_weights: bool) -> str:
    return RANDOM_WEIGHTS_MARK if random_weights else ""


def _interval_text(row: dict, key: str) -> str:
    value, low, high = row.get(key), row.get(f"{key}_low"), row.get(f"{key}_high")
    if value is None:
        return f"{STATISTIC_LABELS[key]} undefined"
    span = f" [{low:.3f}, {high:.3f}]" if low is not None and high is not None else ""
    return f"{STATISTIC_LABELS[key]} {value:.3f}{span}"


def out_of_fold_scatter(fit: FitResult) -> go.Figure:
    """Measured target (y) against the out-of-fold prediction (x), one colour per fold; for
    classes, the predicted probability of the last class for each true class."""
    table, result = fit.table, fit.result
    rows = np.flatnonzero(result.evaluated)
    names = [escape(str(v)) for v in table.frame.get("mutant", table.frame.index.astype(str))]
    head = fit.headline
    if table.task == "regression":
        kind = go.Scattergl if len(rows) > MANY_POINTS else go.Scatter
        fig = go.Figure()
        palette = _qualitative(max(len(set(fit.folds[rows])), 1))
        for n, fold in enumerate(sorted(set(fit.folds[rows]))):
            part = rows[fit.folds[rows] == fold]
            fig.add_trace(kind(
                x=result.predictions[part], y=table.values[part].astype(float), mode="markers", name=f"fold {fold}",
                text=[names[r] for r in part], marker={"size": 5, "opacity": 0.7, "color": palette[n % len(palette)]},
                hovertemplate="%{text}<br>predicted %{x:.3f}<br>measured %{y:.3f}<extra></extra>",
            ))
        fig.update_xaxes(title="out-of-fold prediction (the row's fold held out)")
        fig.update_yaxes(title=f"measured {escape(table.target)}")
        statistic = _interval_text(head, "spearman")
    else:
        positive = table.classes[-1]
        fig = go.Figure()
        for label in table.classes:
            part = rows[table.values[rows] == label]
            fig.add_trace(go.Box(
                x=result.probabilities[part, -1], name=escape(label), boxpoints="all", jitter=0.4, pointpos=0,
                orientation="h", text=[names[r] for r in part], marker={"size": 4, "opacity": 0.6},
                hovertemplate="%{text}<br>p(" + escape(positive) + ") %{x:.3f}<extra></extra>",
            ))
        fig.update_xaxes(title=f"out-of-fold probability of {escape(positive)}", range=[0, 1])
        fig.update_yaxes(title=f"measured {escape(table.target)}")
        statistic = f"{_interval_text(head, 'auc')} · {_interval_text(head, 'mcc')}"
    title = (f"Out-of-fold predictions: {statistic} (n = {head['n']:,}){_mark(fit.predictor.random_weights)}"
             f"<br><sup>{escape(fit.spec.label)}; {escape(fit.folds_name)} folds; 95% bootstrap interval</sup>")
    return _layout(fig, title, height=520, legend={"orientation": "h", "y": -0.18})


def _above(row: dict, key: str) -> float:
    """How far the interval reaches above the statistic (0 without one)."""
    return (row[f"{key}_high"] - row[key]) if row.get(f"{key}_high") is not None else 0


def _below(row: dict, key: str) -> float:
    """How far the interval reaches below the statistic (0 without one)."""
    return (row[key] - row[f"{key}_low"]) if row.get(f"{key}_low") is not None else 0


def comparison_bars(fit: FitResult) -> go.Figure:
    """Each feature set's out-of-fold statistic with its interval, on the same folds."""
    key = "spearman" if fit.table.task == "regression" else "auc"
    rows = [row for row in fit.comparison if row.get(key) is not None]
    values = [row[key] for row in rows]
    fig = go.Figure(go.Bar(
        x=values, y=[escape(row["label"]) for row in rows], orientation="h",
        marker={"color": ["#0072B2" if row["uses_model"] else "#999999" for row in rows]},
        error_x={"type": "data", "symmetric": False,
                 "array": [_above(row, key) for row in rows],
                 "arrayminus": [_below(row, key) for row in rows]},
        hovertemplate="%{y}<br>" + STATISTIC_LABELS[key] + " %{x:.3f}<extra></extra>",
    ))
    fig.update_xaxes(title=f"out-of-fold {STATISTIC_LABELS[key]} (95% bootstrap interval)")
    fig.update_yaxes(autorange="reversed")
    title = ("Feature sets side by side, same folds" + _mark(fit.model_is_random)
             + "<br><sup>grey: no model (the baseline); blue: uses the model</sup>")
    fig = _layout(fig, title, height=160 + 45 * len(rows))
    return fig.update_layout(margin={"l": 260, "r": 20, "t": 70, "b": 50})  # room for the feature sets' names


def learning_curves(fit: FitResult) -> go.Figure:
    """Training rows against the held-out statistic, one line per feature set."""
    key = "spearman" if fit.table.task == "regression" else "auc"
    labels = {row["features"]: row["label"] for row in fit.comparison}
    fig = go.Figure()
    for name, curve in fit.curves.items():
        points = [p for p in curve if p["score"] is not None]
        fig.add_trace(go.Scatter(
            x=[p["train_size"] for p in points], y=[p["score"] for p in points], mode="lines+markers",
            name=escape(labels.get(name, name)),
            error_y={"type": "data", "array": [p["score_sd"] or 0 for p in points]},
        ))
    fig.update_xaxes(title="training rows")
    fig.update_yaxes(title=f"held-out {STATISTIC_LABELS[key]} (mean over folds ± sd)")
    title = "Learning curve: would more measurements help?" + _mark(fit.model_is_random)
    return _layout(fig, title, height=420, legend={"orientation": "h", "y": -0.2})


def prediction_map(grid: np.ndarray, wild_type: str, wild_value: float, *, target: str, task: str,
                   numbering: Numbering = Numbering(), random_weights: bool = False,
                   classes: tuple[str, ...] = ()) -> go.Figure:
    """The predictor's output for every single substitution (wild-type cells: the wild type's own
    prediction), centred on the wild type's, laid out like the substitution map."""
    what = f"p({escape(classes[-1])})" if task == "classification" and classes else f"predicted {escape(target)}"
    fig = substitution_grid(grid, wild_type, numbering=numbering, centre=wild_value, what=what)
    fig.update_xaxes(type="category", title="position (wild type)")
    fig.update_yaxes(type="category", title="mutant")
    mark_wild_type(fig, wild_type, numbering)
    title = (f"Predicted effect of every single substitution: {what}{_mark(random_weights)}"
             f"<br><sup>wild type {wild_value:.3f}; blue: above it, red: below</sup>")
    return _layout(fig, title, height=500, showlegend=True,
                   legend={"orientation": "h", "y": 1.0, "x": 1, "xanchor": "right", "yanchor": "bottom"})
