"""Issue #53: a fit costed by what it does (its classes too), stopped mid-fit, and a shared fit rate
that one visitor's job cannot poison; the mutation list's whole-list refusal said once.

The attack tables are generated here, small: 300 random sequences of 60 residues with 51 string
classes (the issue's 19 kB table), and the shared assay's first rows.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time

import numpy as np
import pytest

from flamino_core.jobs.rates import CLAMP, Rates
from flamino_core.predictors import cost
from flamino_core.predictors.table_fit import feature_sets, fit_table, planned_fits
from flamino_core.predictors.table import parse_labelled_table
from flamino_core.predictors.worker import FitWorker

AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"


def classes_table(rows: int, length: int, classes: int, seed: int = 0) -> bytes:
    """``rows`` random sequences with ``classes`` labels, balanced and learnable (ranked by their
    first two residues), as benchmarks/fit_estimate.py makes them."""
    rng = np.random.default_rng(seed)
    seqs = rng.integers(0, 20, size=(rows, length))
    rank = np.argsort(np.argsort(seqs[:, 0] * 20 + seqs[:, 1], kind="stable"))
    lines = ["sequence,label"] + ["".join(AMINO_ACIDS[j] for j in s) + f",class_{rank[i] * classes // rows}"
                                  for i, s in enumerate(seqs)]
    return "\n".join(lines).encode()


# --- the cost counts the classes ----------------------------------------------------------------------------
def test_a_fits_cost_grows_with_its_classes_as_lbfgs_work_does():
    """The same 300 one-hot rows cost ~30x more with 51 classes than with 2: lbfgs updates one
    coefficient vector per class (51 x 1,201) and the gradient is computed per class, where the
    old cost (rows x non-zero entries only) said the same ~20 s for both."""
    def planned(classes: int):
        table = parse_labelled_table(classes_table(300, 60, classes), "label")
        return planned_fits(table, feature_sets(table, False), None)

    two, many = planned(2), planned(51)
    assert two.fits == many.fits == 21  # 5 folds, the final model, 3 x 5 learning-curve fits
    # By hand, per lbfgs iteration of a 240-row training fold: 2 classes, 0.9 ms + 1,201 x 47 ns
    # + 240 x 60 x 1.9 ns = 0.98 ms; 51 classes, 0.9 + 51 x (1,201 x 47 + 240 x 60 x 1.9) ns = 5.2 ms.
    per_iteration = {c: cost.fit_work("classification", 240, 1_200, 60, c) / cost.LOGISTIC_ITERATIONS
                     for c in (2, 51)}
    assert per_iteration[2] == pytest.approx(0.98e6 + cost.FIT_OVERHEAD / cost.LOGISTIC_ITERATIONS, rel=0.02)
    assert per_iteration[51] == pytest.approx(5.2e6 + cost.FIT_OVERHEAD / cost.LOGISTIC_ITERATIONS, rel=0.02)
    assert many.seconds() > 4 * two.seconds()


def test_a_fit_over_the_budget_is_refused_before_it_starts():
    """The attack's table is estimated at minutes of fitting on a 2-core server: under a 60 s
    budget it is refused in words before any fit runs, naming its fits."""
    table = parse_labelled_table(classes_table(300, 60, 51), "label")
    planned = planned_fits(table, feature_sets(table, False), None)
    why = cost.problem(planned, cost.FitLimits(max_seconds=60), planned.seconds())
    assert why and "21 scikit-learn fits" in why and "up to 1 minutes" in why


# --- a fit runs in a process of its own: stopped mid-fit --------------------------------------------------
def test_a_fit_in_the_worker_gives_the_in_process_fit_and_its_process_ends_with_it():
    """The worker is only where the fit runs: the same predictions, statistics and model (a ridge
    fit of 60 rows: classes' 1,000 resampled AUCs per row would take minutes under load here)."""
    rng = np.random.default_rng(1)
    seqs = ["".join(rng.choice(list(AMINO_ACIDS), 8)) for _ in range(60)]
    data = "sequence,y\n" + "\n".join(f"{s},{s.count('A') + rng.normal():.4f}" for s in seqs)
    table = parse_labelled_table(data.encode(), "y")
    here = fit_table(table, "onehot")
    with FitWorker() as worker:
        there = fit_table(table, "onehot", run_fit=worker.run)
        pid = worker.pid
    np.testing.assert_array_equal(there.result.predictions, here.result.predictions)
    assert there.comparison == here.comparison and there.curves == here.curves
    assert not _alive(pid)


def test_a_running_fit_stops_within_a_second_of_cancel_not_at_its_end():
    """One LogisticRegressionCV of 51 learnable classes over 600 rows x 3,000 one-hot features
    takes tens of seconds on one thread; cancelled two seconds in, it stops within a poll
    (0.2 s) plus the kill, mid-fit, and its process is gone (the server's thread is free)."""
    table = parse_labelled_table(classes_table(600, 150, 51), "label")
    stop = threading.Event()

    def check():
        if stop.is_set():
            raise KeyboardInterrupt("cancelled")  # any error: the worker is killed, the error goes on

    timer = threading.Timer(2.0, stop.set)
    with FitWorker() as worker:
        timer.start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            fit_table(table, "onehot", compare=False, curves=False, run_fit=lambda fit: worker.run(fit, check))
        stopped = time.monotonic() - started
        assert worker.pid is None  # killed, not left fitting
    # 2 s to the cancel, then at most a poll and the kill; the whole fit takes far longer here.
    assert stopped < 2.0 + 2.0, f"stopped {stopped:.1f} s after the start"


def test_the_fits_stage_is_said_before_its_first_fit_runs():
    """Issue #67: the fits' progress was first reported after the first fit, so the progress line
    described the model passes' stage ("about 5 seconds left") for the minutes a 51-class fit's
    first fit took. The job now enters the fits' stage, at 0 of its work, before any fit runs."""
    from flamino_core.jobs import Job
    from flamino_core.predictors.fit_plan import UNIT, _Fitting
    from flamino_core.predictors.table_fit import FitSteps

    table = parse_labelled_table(classes_table(60, 12, 3), "label")
    planned = planned_fits(table, feature_sets(table, False), None)
    job = Job("fit", "model passes (one-hot)", total=60)
    job.progress(60, 60)
    fitting = _Fitting(job, lambda: False, contextlib.nullcontext, None)
    seen = []

    def run_fit(fit):
        seen.append((job.unit, job.done, job.total))
        return fit()

    steps = FitSteps(planned.fits, fitting.each_fit, None, run_fit, planned, fitting.fits)
    steps(lambda: None)
    assert seen == [(UNIT, 0, planned.fits)]
    assert job.unit == UNIT and job.done == 1


def test_the_worker_does_not_run_the_servers_main_script(tmp_path):
    """Under ``streamlit run`` the app's script is ``__main__``; a ``multiprocessing`` child ran it
    again before its first fit (the whole app, and its traceback in the server's log). The worker
    starts as a program of its own: a script that marks any import of itself is not imported."""
    import subprocess
    import sys
    import textwrap

    marker = tmp_path / "imported"
    script = tmp_path / "server_main.py"
    script.write_text(textwrap.dedent(f"""
        import functools
        if __name__ != "__main__":
            open({str(marker)!r}, "w").write(__name__)
        else:
            from flamino_core.predictors.worker import FitWorker
            with FitWorker() as worker:
                print(worker.run(functools.partial(sum, [1, 2, 3])))
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "6" and not marker.exists()


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie is gone


# --- a shared rate one visitor cannot poison ----------------------------------------------------------
KEY = ("scikit-learn classification 1e10", "fit")
PRIOR = cost.DEFAULT_SECONDS_PER_OP


def test_one_outlier_fit_does_not_move_the_shared_rate_nor_refuse_another_visitors_fit(tmp_path):
    """Issue #53: one 15-class fit estimated at 5 s took 226 s (45x); the running average made the
    shared rate 14.6x the default, and another visitor's 1,800-row table (2.7 min at the
    default rate) was refused as "about 40 minutes". The rate is now the lower median of two
    copies of the default and the recent samples, so one sample moves nothing."""
    rates = Rates(tmp_path / "pass_rates.json")
    work = 1e10  # operations: 10 s at the default rate
    for visitor, seconds in zip("abc", (9.0, 10.0, 11.0)):  # three honest fits near the default
        rates.record_sample(*KEY, work, seconds, source=visitor)
    # The lower median of [1e-9, 1e-9, 0.9e-9, 1.0e-9, 1.1e-9], sorted: the third, 1e-9.
    assert rates.robust_seconds(*KEY, work, PRIOR) == pytest.approx(10.0)
    rates.record_sample(*KEY, work, 450.0, source="attacker")  # 45x
    assert rates.robust_seconds(*KEY, work, PRIOR) == pytest.approx(10.0)
    for _ in range(9):  # the same visitor again and again: one sample, its newest
        rates.record_sample(*KEY, work, 450.0, source="attacker")
    assert rates.robust_seconds(*KEY, work, PRIOR) == pytest.approx(10.0)

    legitimate = cost.fit_cost("regression", 1_800, 5, [("onehot", "one-hot")], 161, None)
    fits = Rates(tmp_path / "pass_rates.json")  # a restart reads the same file
    assert fits.robust_seconds(*KEY, work, PRIOR) == pytest.approx(10.0)
    seconds = cost.seconds_here(legitimate, fits)
    assert seconds == pytest.approx(legitimate.seconds())  # the default rate: nothing measured for its key
    assert cost.problem(legitimate, cost.FitLimits(max_seconds=600), seconds) is None


def test_many_outliers_from_many_visitors_move_the_rate_at_most_the_clamp(tmp_path):
    """A machine really slower than the default moves the rate after three consistent fits, never
    past CLAMP times the default; a faster one never below a CLAMP-th of it."""
    rates = Rates(tmp_path / "pass_rates.json")
    for i in range(9):
        rates.record_sample(*KEY, 1e10, 450.0, source=f"visitor {i}")
    assert rates.robust_seconds(*KEY, 1e10, PRIOR) == pytest.approx(10.0 * CLAMP)
    for i in range(9):
        rates.record_sample(*KEY, 1e10, 0.01, source=f"visitor {i}")
    assert rates.robust_seconds(*KEY, 1e10, PRIOR) == pytest.approx(10.0 / CLAMP)


def test_a_poisoned_rate_written_by_the_old_running_average_is_not_read_after_a_restart(tmp_path):
    """The file of the attack kept ``scikit-learn fit`` at 14.6x the default; the fit's estimate
    reads its own samples only, so a restart does not carry that value."""
    path = tmp_path / "pass_rates.json"
    path.write_text('{"scikit-learn fit": 1.46e-08, "pass_unit": "MFLOP"}')
    planned = cost.fit_cost("classification", 100, 5, [("onehot", "one-hot")], 60, None, classes=15)
    assert cost.seconds_here(planned, Rates(path)) == pytest.approx(planned.seconds())


# --- the Variant effects page: a whole-list refusal is said once ---------------------------------------
def test_the_page_says_a_whole_list_refusal_without_none_of_the_1_entries(tmp_path, monkeypatch):
    """200,000 mutations were refused with a clear message, then "None of the 1 entries can be
    scored" (the refusal counted as an entry)."""
    import hostile_files
    from test_app import open_page, start, unescaped

    monkeypatch.setenv("FLAMINO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FLAMINO_MODEL", "random:tiny")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("FLAMINO_HOSTED", "1")
    file = hostile_files.valid_mutations(tmp_path)
    at = open_page(start({"seq": hostile_files.MUTATED, "page": "variants"}), "variants")
    at.file_uploader(key="_mutation_upload").set_value([(file.name, file.read_bytes(), "text/plain")]).run()
    assert not at.exception
    assert any("has 200,000 entries" in unescaped(w.value) for w in at.warning)
    assert not [e.value for e in at.error if "None of the" in e.value]
