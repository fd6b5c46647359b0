"""The shared fit rate (issue #53 Medium), for benchmarks/hostile_visitor.py (``fit-rate``): one
visitor's completed 15-class, 100-row fit against the estimates every other visitor is shown.

Before #53 a fit's seconds per operation went into one running average shared by every visitor and
kept in ``pass_rates.json``: one such fit (estimated at 5 s, it took 226 s) made the rate 14.6x the
default, the shared assay's estimate went from 40 s to 10 minutes, still after a restart, and a
legitimate 1,800-row table was refused as "about 40 minutes". Here, on a server of its own (a fresh
``FLAMINO_CACHE``: nothing measured yet), a second visitor reads the Predict page's estimate for
three tables: the shared assay (A0A1I9GEU1_NEIME, 922 rows, regression of DMS_score), 1,800
generated mutants of its wild type (regression), and the attacker's own 15-class table (the very
rate key the attacker's fit records into); then the first visitor fits the 15-class table to its
end; the second visitor reads the three again; the server restarts on the same cache and a third
visitor reads them once more. The rates file is read after the restart: the attacker's sample,
its factor over the default, and the rate the estimate uses now (``Rates.robust_seconds``).
"""

from __future__ import annotations

import random
import re
import time
from pathlib import Path

from fit_estimate import ASSAY, classes_table
from hostile_visitor import Server, Visit

from flamino_core.jobs.rates import Rates
from flamino_core.predictors.cost import DEFAULT_SECONDS_PER_OP, WORKER_KEY, WORKER_START_S

MiB = 2**20
AMINO = "ACDEFGHIKLMNPQRSTVWY"
FIT_WAIT_S = 2_400  # the attacker's fit at this load (316 s wall for its one-hot half at load 4.4)


def mutants_1800(folder: Path) -> Path:
    """1,800 distinct double mutants of the shared assay's wild type with random scores (the issue's
    legitimate 1,800-row table: 2.7 min at the default rate, refused when the rate was poisoned)."""
    wild = "".join(ASSAY.with_suffix(".wt.fa").read_text().splitlines()[1:]).strip()
    rng, seen, lines = random.Random(1800), set(), ["mutant,mutated_sequence,DMS_score"]
    while len(seen) < 1_800:
        picks = tuple(sorted(rng.sample(range(len(wild)), 2)))
        edits = tuple((i, rng.choice([a for a in AMINO if a != wild[i]])) for i in picks)
        if edits in seen:
            continue
        seen.add(edits)
        seq = list(wild)
        for i, aa in edits:
            seq[i] = aa
        lines.append(":".join(f"{wild[i]}{i + 1}{aa}" for i, aa in edits) + f",{''.join(seq)},{rng.gauss(0, 1):.4f}")
    path = folder / "mutants_1800.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def estimates(server: Server, browser, folder: Path, tables: dict[str, Path]) -> dict[str, str]:
    """The Predict page's estimate (or refusal) for each table, read by a visitor of its own."""
    said = {}
    for name, table in tables.items():
        v = Visit(server, browser, folder)
        page = v.open("?page=predict")
        v.upload(page, [table], "Labelled table")
        answer = page.get_by_text(re.compile(r"^(Fitting: |Not fitted here)")).first
        answer.wait_for()
        said[name] = answer.inner_text()[:300]
        refused = page.get_by_text("Not fitted here", exact=False)
        if refused.count():
            said[name] += " | " + refused.first.inner_text()[:300]
        v.close()
    return said


def stored_rates(cache: Path) -> dict:
    """The fit samples in the restarted server's rates file, each as a factor of its prior (the
    default rate; the worker's start: ``WORKER_START_S``), and the robust value of each key (what an
    estimate uses) as a factor of the prior."""
    rates = Rates(cache / "pass_rates.json")
    rates._load()
    found = {}
    for key, samples in rates._samples.items():
        model, kind = key.rsplit(" ", 1)
        if kind != "fit" or not model.startswith("scikit-learn "):
            continue
        prior = WORKER_START_S if model == WORKER_KEY else DEFAULT_SECONDS_PER_OP
        found[model] = {"samples_x_prior": [round(s[0] / prior, 2) for s in samples],
                        "estimate_x_prior": round(rates.robust_seconds(model, kind, 1.0, prior) / prior, 2)}
    found["old_running_average_key_present"] = "scikit-learn fit" in rates._load()
    return found


def fit_rate(folder: Path, browser) -> dict:
    server = Server(folder)
    attack = folder / "classes15.csv"
    attack.write_bytes(classes_table(100, 60, 15))
    tables = {"shared assay (922 rows)": ASSAY, "1,800 mutants": mutants_1800(folder), "the 15-class table": attack}
    result: dict = {}
    try:
        warm = Visit(server, browser, folder)  # the model loaded, as for any visitor
        warm.open("?page=predict")
        warm.close()
        result["before"] = estimates(server, browser, folder, tables)

        first = Visit(server, browser, folder)
        page = first.open("?page=predict")
        first.upload(page, [attack], "Labelled table")
        page.get_by_text("Fitting: ", exact=False).first.wait_for()
        result["attacker_estimate"] = page.get_by_text("Fitting: ", exact=False).first.inner_text()[:300]
        page.get_by_role("button", name="Fit the predictor").click()
        first.go()
        # Its end: the results, or the budget's kill (twice FLAMINO_MAX_FIT_SECONDS), which records no sample.
        page.get_by_text(re.compile(r"Out-of-fold|the fit stopped after")).first.wait_for(timeout=FIT_WAIT_S * 1000)
        result["attacker_fit_s"] = round(time.monotonic() - first.started, 1)
        stopped = page.get_by_text("the fit stopped after").count()
        result["attacker_fit_ended"] = "stopped by the budget" if stopped else "done"
        result["peak_mib"], result["children_peak_mib"] = round(server.peak / MiB), round(server.children_peak / MiB)
        first.close()

        result["after"] = estimates(server, browser, folder, tables)
    finally:
        server.stop()
    server = Server(folder)  # the same FLAMINO_CACHE: what a restart reads
    try:
        result["after_restart"] = estimates(server, browser, folder, tables)
    finally:
        server.stop()
    result["rates_after_restart"] = stored_rates(folder / "cache")
    return result
