"""A fit's estimate against its real time (issue #53): the Predict page's one-hot fits of generated
classification tables (and the shared assay's fitness bins), estimated by ``table_fit.planned_fits`` at
the default rate, then run as the server runs them (each fit in a ``FitWorker``, one thread).

    .venv/bin/python benchmarks/fit_estimate.py [--quick]

Prints one line per table: rows, classes, fits, the estimate, the real time, the worker's CPU time
(what the fits cost, whatever else shares the machine) and their ratios to the estimate. The
bar of issue #53 is the 300-row, 51-class table within 1.5x; a table's lbfgs iterations depend on
its labels, so the others show how far the one iteration count carries.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flamino_core.predictors.table_fit import feature_sets, fit_table, planned_fits  # noqa: E402
from flamino_core.predictors.table import parse_labelled_table  # noqa: E402
from flamino_core.predictors.worker import FitWorker  # noqa: E402

AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"
ASSAY = Path("/work/shared/dms/A0A1I9GEU1_NEIME_Kennouche_2019.csv")


def classes_table(rows: int, length: int, classes: int, seed: int = 0, learnable: bool = False) -> bytes:
    """``rows`` random sequences of ``length`` with ``classes`` string labels: cycled (the attack's
    19 kB table: labels unrelated to the sequences), or ``learnable`` (a function of two residues)."""
    rng = np.random.default_rng(seed)
    seqs = rng.integers(0, 20, size=(rows, length))
    rank = np.argsort(np.argsort(seqs[:, 0] * 20 + seqs[:, 1], kind="stable"))  # equal classes, by two residues
    lines = ["sequence,label"]
    for i, s in enumerate(seqs):
        label = rank[i] * classes // rows if learnable else i % classes
        lines.append("".join(AMINO_ACIDS[j] for j in s) + f",class_{label}")
    return "\n".join(lines).encode()


def assay_bins() -> bytes | None:
    """The shared assay's mutants with their fitness bins (DMS_score_bin), as tests/integration/test_predict.py fits them."""
    if not ASSAY.exists():
        return None
    import pandas as pd

    frame = pd.read_csv(ASSAY)[["mutated_sequence", "DMS_score_bin"]]
    return frame.to_csv(index=False).encode()


def measure(name: str, data: bytes, target: str) -> dict:
    table = parse_labelled_table(data, target)
    kinds = feature_sets(table, with_model=False)
    planned = planned_fits(table, kinds, None)
    estimate = planned.seconds()
    started, load = time.monotonic(), os.getloadavg()[0]
    with FitWorker() as worker:
        fit_table(table, kinds[0], run_fit=worker.run)
        cpu = _cpu_seconds(worker.pid)
    real = time.monotonic() - started
    line = {"table": name, "rows": int(table.labelled.sum()), "classes": len(table.classes), "fits": planned.fits,
            "estimate_s": round(estimate, 1), "real_s": round(real, 1), "worker_cpu_s": round(cpu, 1),
            "real/estimate": round(real / estimate, 2), "cpu/estimate": round(cpu / estimate, 2),
            "load": round(load, 1)}
    print(line, flush=True)
    return line


def _cpu_seconds(pid: int | None) -> float:
    """The worker's CPU seconds so far (its fits' own time, whatever else shares the machine)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="only the attack's table")
    args = parser.parse_args()
    measure("attack: 300 rows x 60 residues, 51 cycled classes", classes_table(300, 60, 51), "label")
    if args.quick:
        return
    measure("100 rows, 15 cycled classes", classes_table(100, 60, 15), "label")
    measure("300 rows, 51 learnable classes", classes_table(300, 60, 51, learnable=True), "label")
    measure("300 rows, 2 learnable classes", classes_table(300, 60, 2, learnable=True), "label")
    bins = assay_bins()
    if bins is not None:
        measure("shared assay, fitness bins (922 rows)", bins, "DMS_score_bin")


if __name__ == "__main__":
    main()
