"""A fold's time said before the work (flamino_core/structure/folding/fold_time.py): the platform's
first guess against the folds recorded on a TPU v5e, a compilation counted only for a length not
yet compiled in the process, and this machine's own warm folds taking over without one odd fold
moving the estimate. No model runs here (the rates are a file in tmp_path)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from flamino_core.jobs.rates import Rates
from flamino_core.model.esmfold.config import FoldConfig
from flamino_core.structure import folding
from flamino_core.structure.folding import fold_time
from flamino_core.model.model_id import ModelId

RECORDED = Path(__file__).resolve().parents[2] / "benchmarks" / "recorded" / "esmfold-tpu-v5e-2026-12-06.jsonl"
CPU_PRIOR = RECORDED.parent / "hostile-folds-prior-2026-12-07.json"  # benchmarks/hostile_folds.py --only prior


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch):
    """Each test starts as a process that has compiled nothing."""
    monkeypatch.setattr(fold_time, "_compiled", set())


def v1_trunk() -> FoldConfig:
    """esmfold_v1's 48-block trunk under one stem layer: benchmarks/esmfold_speed.py's v1-trunk."""
    v1 = FoldConfig.esmfold_v1()
    return dataclasses.replace(v1, stem=dataclasses.replace(v1.stem, num_layers=1))


def test_the_tpus_first_guess_holds_for_every_fold_recorded_on_the_chip(tmp_path):
    # The chip's folds of 100, 300 and 1,000 residues ran at 1.6-4.0 TFLOP/s of fold_gflop's count;
    # one prior (2.6) must say each within 1.65x either way (a first guess, corrected by the
    # machine's own folds; 1.6x is the widest the recorded rates allow one constant).
    rows = [json.loads(line) for line in RECORDED.read_text().splitlines()]
    trunk = [r for r in rows if r["shape"] == "v1-trunk"]
    assert {r["residues"] for r in trunk} >= {100, 300, 1000}
    for row in trunk:
        said = folding.fold_time_estimate(v1_trunk(), row["residues"], "v1-trunk", "tpu", Rates(tmp_path / "r.json"))
        assert said.compute / row["seconds"] == pytest.approx(1, abs=0.65), row


def test_the_cpus_first_guess_holds_for_the_hosted_models_folds_recorded_here(tmp_path):
    # Issue #67: the hosted fold model (random:esmfold-tiny) folded warm in a worker on one core of
    # the 2-core EPYC at 60, 200 and 400 residues. Its CPU seconds are what a fold costs a core of its
    # own, as on the quiet hosted server (the machine was shared then, load 13-17: its wall seconds
    # were 2.7-7x that, which this machine's own folds correct, the test below): the prior must say
    # each within 1.5x either way, as the issue asks of every estimate.
    rows = json.loads(CPU_PRIOR.read_text())["prior"]["rows"]
    assert {r["length"] for r in rows} >= {60, 200, 400}
    for row in rows:
        said = folding.fold_time_estimate(FoldConfig.tiny(), row["length"], "tiny", "cpu", Rates(tmp_path / "r.json"),
                                          compiled=True)
        assert 1 / 1.5 <= row["warm_cpu_s"] / said.compute <= 1.5, row


def test_a_length_is_compiled_once_per_process_and_only_warm_folds_are_measured(tmp_path):
    rates, config = Rates(tmp_path / "r.json"), FoldConfig.tiny()
    first = folding.fold_time_estimate(config, 100, "tiny", "cpu", rates)
    assert first.compile is not None and not first.measured
    assert first.seconds > first.compute  # the job's expectation counts the compilation
    folding.record_fold_time(config, 100, "tiny", 40.0, rates)  # compiled here: its seconds are no rate
    assert not rates.measured_samples("tiny", "fold")
    again = folding.fold_time_estimate(config, 110, "tiny", "cpu", rates)  # 110 pads to 128: compiled with 100
    assert again.compile is None and again.seconds == again.compute
    assert folding.fold_time_estimate(config, 200, "tiny", "cpu", rates).compile is not None  # 256: new
    folding.record_fold_time(config, 100, "tiny", 2.0, rates)
    assert rates.measured_samples("tiny", "fold")


def test_the_machines_own_folds_take_over_and_one_odd_fold_moves_nothing(tmp_path):
    rates, config = Rates(tmp_path / "r.json"), FoldConfig.tiny()
    prior = folding.fold_time_estimate(config, 100, "tiny", "cpu", rates).compute
    folding.record_fold_time(config, 100, "tiny", 1.0, rates)  # compiles
    folding.record_fold_time(config, 100, "tiny", prior * 30, rates, source="visitor a")  # one outlier
    assert folding.fold_time_estimate(config, 100, "tiny", "cpu", rates).compute == pytest.approx(prior)
    for visitor in "bcd":  # three visitors' folds, each 3x the prior: this machine is slower
        folding.record_fold_time(config, 100, "tiny", prior * 3, rates, source=f"visitor {visitor}")
    said = folding.fold_time_estimate(config, 100, "tiny", "cpu", rates)
    assert said.measured and said.compute == pytest.approx(prior * 3, rel=1e-6)
    assert "this machine's rate" in said.describe()
    # A restart reads the samples back (the rates' file), not the first guess.
    assert folding.fold_time_estimate(config, 100, "tiny", "cpu", Rates(tmp_path / "r.json")).compute == pytest.approx(prior * 3)


class _Job:
    def __init__(self):
        self.reports = []

    def progress(self, done, total):
        self.reports.append((done, total))


class _Slot:
    """The metered engine a fold's plan is given: only its heavy-job slot, entered once per fold."""

    def __init__(self):
        self.entered = 0

    def slot(self):
        import contextlib

        self.entered += 1
        return contextlib.nullcontext()


def test_a_fold_plan_is_one_step_in_the_slot_read_back_from_the_store_and_timed_when_computed(tmp_path, monkeypatch):
    from flamino_core.engine import fold as predict
    from flamino_core.store.result_store import ResultStore
    from test_fold_estimate import made_fold

    folded_here = []
    monkeypatch.setattr(predict, "fold_sequence", lambda model, sequence, **_: folded_here.append(sequence) or made_fold(sequence))
    rates, store, config = Rates(tmp_path / "r.json"), ResultStore(tmp_path / "store.sqlite"), FoldConfig.tiny()
    monkeypatch.setattr(fold_time, "_rates", lambda _: rates)
    key = folding.model_key(ModelId.parse("random:esmfold-tiny"), 3)
    loads = []
    plan = folding.FoldPlan(lambda: loads.append(1) or "model", store, key, "MKTAYIAKQR", config, 12.0, "the test model",
                            visitor="a")
    needed = plan.needed()
    assert (needed.passes, needed.one, needed.many, needed.seconds(None)) == (1, "fold", "folds", 12.0)
    job, engine = _Job(), _Slot()
    first = plan.run(job, engine)
    assert folded_here == ["MKTAYIAKQR"] and engine.entered == 1 and job.reports == [(0, 1), (1, 1)]
    assert not rates.measured_samples(key, "fold")  # the length's first fold: its compilation
    again = plan.run(_Job(), engine)  # the store answers: no fold, nothing timed
    assert folded_here == ["MKTAYIAKQR"] and not rates.measured_samples(key, "fold")
    np.testing.assert_array_equal(again.atom37, first.atom37)
    other = dataclasses.replace(plan, sequence="MKTAYIAKQRQISFVK")  # pads to 64 as the first: compiled
    plan_run = other.run(_Job(), engine)
    assert folded_here[-1] == "MKTAYIAKQRQISFVK" and rates.measured_samples(key, "fold")
    assert len(plan_run.sequence) == 16 and len(loads) == 3
