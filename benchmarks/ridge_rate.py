"""What a ridge fit costs here, against ``predictors.cost.fit_work``'s count (issue 50 row 3).

Times ``fitting.fit_estimator("regression", ...)`` (RidgeCV after StandardScaler, as the Predict page
fits) on one thread (the server's fit worker runs one: ``predictors/worker.py``) over dense and one-hot
tables through both of scikit-learn's routes (the Gram matrix when there are fewer rows than
features, the SVD otherwise), and prints each fit's seconds beside the estimate at the default rate.
The constants ``RIDGE_GRAM``, ``RIDGE_EIGEN`` and ``RIDGE_OP`` were fitted to its output on a quiet
machine (docs/reliability.md).

    .venv/bin/python benchmarks/ridge_rate.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHAPES = [("dense", 200, 3221), ("dense", 737, 3221), ("dense", 922, 3221), ("dense", 2000, 3221),
          ("dense", 922, 320), ("dense", 922, 1280), ("dense", 3000, 1280), ("onehot", 300, 3220),
          ("onehot", 922, 3220), ("onehot", 2000, 3220), ("onehot", 3000, 3000), ("onehot", 3000, 12000),
          ("onehot", 4500, 9000)]


def table(kind: str, rows: int, features: int, rng) -> np.ndarray:
    if kind == "dense":  # an embedding's columns
        return rng.normal(size=(rows, features))
    X = np.zeros((rows, features))  # one-hot: 20 columns per position, one set in each
    X[np.arange(rows)[:, None], (np.arange(features // 20) * 20)[None, :] + rng.integers(0, 20, (rows, features // 20))] = 1
    return X


def main(argv=None) -> int:
    from threadpoolctl import threadpool_limits

    from flamino_core.predictors import cost, fitting

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the shapes under 1,000 rows only")
    args = parser.parse_args(argv)
    threadpool_limits(1)
    rng = np.random.default_rng(0)
    print("kind   rows features  seconds  estimate  estimate/seconds")
    for kind, rows, features in SHAPES:
        if args.quick and rows >= 1000:
            continue
        X, y = table(kind, rows, features, rng), rng.normal(size=rows)
        fitting.fit_estimator("regression", True, X[:50], y[:50])  # imports and first calls out of the timing
        started = time.perf_counter()
        fitting.fit_estimator("regression", True, X, y)
        seconds = time.perf_counter() - started
        estimate = cost.fit_work("regression", rows, features, features) * cost.DEFAULT_SECONDS_PER_OP
        print(f"{kind:6} {rows:5} {features:8} {seconds:8.3f} {estimate:9.3f} {estimate / seconds:8.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
