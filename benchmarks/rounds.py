"""Retrospective benchmark of design rounds: a real deep mutational scan as the oracle.

Each run starts from B variants of the assay drawn at random and "measured" (their DMS score
read from the table), then runs R rounds: the strategy proposes B unmeasured variants of the
assay (the pool is the assay's own rows: only they have a measured value), which are then
measured. After the start and after each round it records the fraction of the assay's top 1%
(its ceil(1%) highest scores) found so far and the best value found so far. Each strategy runs
with the same seeds, so the same random start.

Strategies call the campaign's own functions (``flamino_core.design.proposals``: the Gaussian
process, the acquisitions, the diversity rules at their defaults):

* ``random``: B unmeasured variants at random (with the position rule, as every strategy);
* ``zero-shot``: the model's zero-shot score only, no fit (random weights here: NOT biology);
* ``greedy``, ``ucb``, ``thompson``: the acquisitions on the process fitted to what was measured.

Features: ``onehot`` (no model: the numbers mean something on any machine), and with ``-m``
``augmented`` and ``embedding`` (a random-weight model here: labelled as such).

    .venv/bin/python benchmarks/rounds.py                       # the table in docs/predict.md
    .venv/bin/python benchmarks/rounds.py --features onehot,augmented -m random:tiny
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flamino_core.design.acquisition import UCB_BETA, ZERO_SHOT, Diversity  # noqa: E402
from flamino_core.design.proposals import design_matrix, fit_posterior, pick  # noqa: E402
from flamino_core.predictors.table import parse_labelled_table  # noqa: E402

ASSAY = ROOT.parent / "shared" / "dms" / "A0A1I9GEU1_NEIME_Kennouche_2019.csv"
STRATEGIES = ("random", ZERO_SHOT, "greedy", "ucb", "thompson")
TOP = 0.01


def load_assay(path: Path):
    """(wild type, variants, sequences, scores) of a ProteinGym assay, read as ``flamino fit`` reads it."""
    table = parse_labelled_table(path.read_bytes(), "DMS_score", task="regression")
    rows = np.flatnonzero(table.labelled)
    return (table.wild_type, [table.variants[r] for r in rows], [table.sequences[r] for r in rows],
            table.values[rows].astype(np.float64))


def run(strategy: str, X, y: np.ndarray, subs: list, scores, seed: int, batch: int, rounds: int,
        diversity: Diversity, beta: float = UCB_BETA) -> dict:
    """One campaign on the assay: found top-1% fraction and best value after the start and each round."""
    n = len(y)
    top = set(np.argsort(-y, kind="stable")[:math.ceil(TOP * n)].tolist())
    rng = np.random.default_rng([seed, 0])
    measured = list(rng.choice(n, batch, replace=False))
    found, best = [], []

    def record():
        found.append(len(top & set(measured)) / len(top))
        best.append(float(y[measured].max()))

    record()
    for r in range(1, rounds + 1):
        round_rng = np.random.default_rng([seed, r])
        left = np.setdiff1d(np.arange(n), measured)
        posterior, prior = None, None
        if strategy in ("greedy", "ucb", "thompson"):
            train = np.array(measured)
            prior_train = scores[train] if scores is not None else None
            prior_pool = scores[left] if scores is not None else None
            posterior = fit_posterior(X[train], y[train], X[left], int(round_rng.integers(2**31)),
                                      prior_train, prior_pool)
        elif strategy == ZERO_SHOT:
            prior = scores[left]
        choices = pick(strategy, [subs[j] for j in left], batch, round_rng, posterior=posterior, prior=prior,
                       diversity=diversity, beta=beta)
        measured += [int(left[c.index]) for c in choices]
        record()
    return {"found": found, "best": best}


def features_for(kind: str, wild_type: str, variants, sequences, engine):
    """(X, prior scores or None) for a feature set: one-hot, augmented (one-hot + the zero-shot
    score as the prior mean) or embedding (standardised over the whole assay: the benchmark
    refits each round, and the campaign standardises on the measured rows)."""
    X = design_matrix("onehot" if kind == "augmented" else kind, wild_type, sequences, len(sequences), engine)
    scores = zero_shot_scores(engine, wild_type, variants) if kind == "augmented" else None
    return X, scores


def zero_shot_scores(engine, wild_type, variants):
    from flamino_core.design.proposals import zero_shot

    return zero_shot(engine, wild_type, variants, "masked-marginals")


def summarise(results: dict, rounds: int) -> pd.DataFrame:
    rows = []
    for (strategy, kind), runs in results.items():
        found = np.array([r["found"] for r in runs])  # (seeds, rounds + 1)
        best = np.array([r["best"] for r in runs])
        rows.append({"strategy": strategy, "features": kind,
                     **{f"top1%_r{r}": f"{found[:, r].mean():.2f} ± {found[:, r].std():.2f}"
                        for r in range(rounds + 1)},
                     "best_final": f"{best[:, -1].mean():.2f} ± {best[:, -1].std():.2f}",
                     "found_mean": float(found[:, -1].mean())})
    return pd.DataFrame(rows)


def markdown(frame: pd.DataFrame) -> str:
    lines = ["| " + " | ".join(map(str, frame.columns)) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def figure(results: dict, rounds: int, path: Path, title: str) -> None:
    import plotly.graph_objects as go

    fig = go.Figure()
    for (strategy, kind), runs in results.items():
        found = np.array([r["found"] for r in runs])
        fig.add_trace(go.Scatter(x=list(range(rounds + 1)), y=found.mean(axis=0), name=f"{strategy} ({kind})",
                                 error_y={"type": "data", "array": found.std(axis=0), "visible": True}))
    fig.update_layout(title=title, xaxis_title="round (0: the random start)",
                      yaxis_title="fraction of the assay's top 1% found (mean ± sd over seeds)")
    fig.write_html(path, include_plotlyjs="cdn")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assay", type=Path, default=ASSAY)
    parser.add_argument("--batch", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--features", default="onehot", help="onehot,augmented,embedding")
    parser.add_argument("--per-position", type=int, default=1, help="0: no limit")
    parser.add_argument("--beta", type=float, default=UCB_BETA, help="ucb: mean + beta x sd")
    parser.add_argument("-m", "--model", help="the model of zero-shot, augmented and embedding (random:tiny here)")
    parser.add_argument("--json", type=Path, help="write every run's curves here")
    parser.add_argument("--figure", type=Path, help="write the curves as a Plotly HTML file")
    args = parser.parse_args(argv)
    wild_type, variants, sequences, y = load_assay(args.assay)
    subs = [frozenset((s.index, s.mt) for s in v.substitutions) for v in variants]
    engine = None
    if args.model:
        from flamino_core.cli.common import load_engine

        engine = load_engine(args.model)
    diversity = Diversity(args.per_position or None)
    results, started = {}, time.time()
    strategies = [s for s in args.strategies.split(",") if s]

    def campaigns(strategy, label, X, scores):
        results[(strategy, label)] = [run(strategy, X, y, subs, scores, seed, args.batch, args.rounds, diversity,
                                          args.beta) for seed in range(args.seeds)]
        print(f"{strategy} ({label}): {time.time() - started:.0f} s", file=sys.stderr)

    if "random" in strategies:  # reads no features: once
        campaigns("random", "-", None, None)
    if ZERO_SHOT in strategies and engine is not None:
        campaigns(ZERO_SHOT, "score", None, zero_shot_scores(engine, wild_type, variants))
    for kind in [k for k in args.features.split(",") if k]:
        X, prior = features_for(kind, wild_type, variants, sequences, engine)
        for strategy in (s for s in strategies if s in ("greedy", "ucb", "thompson")):
            campaigns(strategy, kind, X, prior)
    table = summarise(results, args.rounds)
    name = args.assay.stem
    weights = f"; model {args.model} (RANDOM WEIGHTS: its scores and embeddings are not biology)" if args.model else ""
    print(f"{name}: {len(y)} variants, top 1% = {math.ceil(TOP * len(y))}, start {args.batch} at random, "
          f"{args.rounds} rounds of {args.batch}, {args.seeds} seeds, per position {args.per_position or 'any'}, "
          f"beta {args.beta:g}{weights}",
          flush=True)
    print(markdown(table.drop(columns="found_mean")))
    if args.json:
        args.json.write_text(json.dumps({f"{s}|{k}": runs for (s, k), runs in results.items()}) + "\n")
    if args.figure:
        figure(results, args.rounds, args.figure, f"{name}: design rounds of {args.batch}{weights}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
