"""Estimates under load (#66 D1): a job's first estimate scaled from the load its rates were
measured at to the load now (``rates.load_scale``), and the countdown a page shows following the
job's estimate without ever rising (``time_left.countdown_step``, ``Job.countdown``). Fake clocks and
fixed load shares: every figure is exact (the tests' conftest fixes ``FLAMINO_LOAD_SHARE`` at 1; these
set their own)."""

from __future__ import annotations

import pytest

from flamino_core.jobs import background as jobs
from flamino_core.jobs import rates as rates_module
from flamino_core.jobs.rates import Rates
from flamino_core.jobs.time_left import countdown_step


# --- the first estimate under load -------------------------------------------------------------------------
def test_a_rate_measured_quiet_is_said_slower_on_a_busy_machine(monkeypatch, tmp_path):
    """Measured at load share 1 (a quiet machine), estimated at 3 (6 runnable threads on 2 cores):
    3x the time; back at 1, the rate as measured; the scale held within LOAD_CLAMP."""
    monkeypatch.setenv("FLAMINO_LOAD_SHARE", "1")
    rates = Rates(tmp_path / "pass_rates.json")
    rates.record("m", "unmasked", 100.0, 2.0)  # 0.02 s per MFLOP
    assert rates.seconds("m", "unmasked", 10.0) == pytest.approx(0.2)
    monkeypatch.setenv("FLAMINO_LOAD_SHARE", "3")
    assert rates.seconds("m", "unmasked", 10.0) == pytest.approx(0.6)
    assert Rates(tmp_path / "pass_rates.json").seconds("m", "unmasked", 10.0) == pytest.approx(0.6)  # (kept)
    monkeypatch.setenv("FLAMINO_LOAD_SHARE", "40")
    assert rates.seconds("m", "unmasked", 10.0) == pytest.approx(0.2 * rates_module.LOAD_CLAMP)


def test_a_rate_measured_busy_is_said_faster_once_the_machine_is_quiet(monkeypatch, tmp_path):
    """Measured at load share 4 then (running average, weight 0.3) at 2: the load kept beside it is
    averaged alike (3.4), so the estimate at share 1.7 is half of the averaged rate."""
    rates = Rates(tmp_path / "pass_rates.json")
    monkeypatch.setenv("FLAMINO_LOAD_SHARE", "4")
    rates.record("m", "masked", 1.0, 4.0)
    monkeypatch.setenv("FLAMINO_LOAD_SHARE", "2")
    rates.record("m", "masked", 1.0, 2.0)
    monkeypatch.setenv("FLAMINO_LOAD_SHARE", "1.7")
    assert rates.seconds("m", "masked", 1.0) == pytest.approx((0.7 * 4 + 0.3 * 2) * 1.7 / (0.7 * 4 + 0.3 * 2))


def test_a_borrowed_rate_is_scaled_by_the_load_it_was_measured_at(monkeypatch, tmp_path):
    """A model's masked passes never timed: the other model's masked rate, at its own load."""
    rates = Rates(tmp_path / "pass_rates.json")
    monkeypatch.setenv("FLAMINO_LOAD_SHARE", "2")
    rates.record("other", "masked", 1.0, 1.0)
    monkeypatch.setenv("FLAMINO_LOAD_SHARE", "1")
    assert rates.seconds("m", "masked", 1.0) == pytest.approx(0.5)


def test_a_rates_file_without_loads_is_read_unscaled(monkeypatch, tmp_path):
    """A file written before loads were kept: its rates as they are, at any load."""
    path = tmp_path / "pass_rates.json"
    path.write_text('{"m unmasked": 0.5, "pass_unit": "MFLOP+token-layers"}')
    monkeypatch.setenv("FLAMINO_LOAD_SHARE", "3")
    assert Rates(path).seconds("m", "unmasked", 2.0) == pytest.approx(1.0)


def test_the_load_share_is_runnable_threads_per_core_counting_the_job_about_to_start(monkeypatch):
    monkeypatch.setenv("FLAMINO_LOAD_SHARE", "auto")  # off unless asked (unset: 1, tested below)
    monkeypatch.setattr(rates_module, "_cores", lambda: 2)
    monkeypatch.setattr(rates_module.os, "getloadavg", lambda: (5.0, 4.0, 3.0))
    assert rates_module.load_share() == pytest.approx(2.5)
    assert rates_module.load_share(starting=True) == pytest.approx(3.0)
    monkeypatch.setattr(rates_module.os, "getloadavg", lambda: (0.4, 0.4, 0.4))
    assert rates_module.load_share(starting=True) == 1.0  # a quiet machine: the rate as measured alone
    assert rates_module.load_scale(2.5) == pytest.approx(1 / 2.5)


def test_the_load_share_is_off_unless_asked(monkeypatch):
    """Unset, the share is 1 whatever the load average says (docs/reliability.md: scaling by the
    load average said browser-test jobs 1.6-1.8x too long when the load fell)."""
    monkeypatch.delenv("FLAMINO_LOAD_SHARE", raising=False)
    monkeypatch.setattr(rates_module, "_cores", lambda: 2)
    monkeypatch.setattr(rates_module.os, "getloadavg", lambda: (5.0, 4.0, 3.0))
    assert rates_module.load_share() == 1.0 and rates_module.load_share(starting=True) == 1.0


# --- the countdown ------------------------------------------------------------------------------------------
def test_the_countdown_runs_at_the_wall_clock_when_the_estimate_agrees():
    assert countdown_step(60.0, 60.0, 1.0) == pytest.approx(60.0 / (1 + 2 * 60.0 ** 2 / 60.0 ** 3) ** 0.5)
    shown = 60.0
    for second in range(1, 31):  # the estimate counting down with it, read each second
        shown = countdown_step(shown, 60.0 - second, 1.0)
    assert shown == pytest.approx(30.0, rel=0.02)  # (each step ends a second early at the old estimate)


def test_the_countdown_never_rises_when_the_estimate_jumps_up_and_never_undershoots_it_coming_down():
    assert countdown_step(60.0, 600.0, 5.0) < 60.0  # a spike: held, a little less
    assert countdown_step(60.0, 600.0, 5.0) == pytest.approx(60.0 / (1 + 2 * 60.0 ** 2 * 5 / 600.0 ** 3) ** 0.5)
    # The estimate far below (a chunk of records found stored, done at once): down at 1,000x the
    # clock, not at once (a fast chunk's estimate may rise again), and never past it.
    assert countdown_step(600.0, 60.0, 1.0) == pytest.approx(600 / (1 + 2 * 600 ** 2 / 60 ** 3) ** 0.5)
    assert countdown_step(600.0, 60.0, 1.0) < 600 - 1.0 and countdown_step(600.0, 60.0, 100.0) == 60.0
    assert countdown_step(100.0, 80.0, 1.0) == pytest.approx(100 / (1 + 2 * 100 ** 2 / 80 ** 3) ** 0.5)  # faster than the clock
    assert countdown_step(10.0, 0.0, 1.0) == 0.0


def test_the_countdown_is_the_same_whoever_reads_it_how_often():
    """Read by two watchers (each second, or once in 10 s) under a steady estimate: the same."""
    often = 30.0
    for _ in range(10):
        often = countdown_step(often, 50.0, 1.0)
    assert countdown_step(30.0, 50.0, 10.0) == pytest.approx(often)


def test_a_job_twice_as_slow_as_predicted_shows_a_falling_countdown_that_closes_on_the_truth(monkeypatch):
    """Predicted 100 s for 100 positions, each taking 2 s (200 s): a first estimate 2x short, as
    #66 D1's under load. Read each second as the page does: the shown time never rises, and from
    half the work on it is within 1.5x of the time truly left (without the countdown the estimate
    itself: the job's own pace blended with the prediction; with a late chunk, a pause, no jump)."""
    now = [0.0]
    monkeypatch.setattr(jobs.time, "monotonic", lambda: now[0])
    job = jobs.Job("Mean entropy of 186 records", "positions")
    job.expect(100.0)
    job.state = jobs.RUNNING
    job.progress(0, 100)
    shown = []
    for second in range(1, 200):
        now[0] = float(second)
        if second % 10 == 0 and second != 120:  # a chunk of 5 positions each 10 s; the one due at 120 s
            job.progress(second // 2, 100)  # comes at 130 s with its successor's work: a late chunk
        elif second == 130:
            job.progress(65, 100)
        shown.append((second, job.status().seconds_left))
    assert all(b[1] <= a[1] + 1e-9 for a, b in zip(shown, shown[1:]))  # never rises
    ratios = [max(s / (200 - t), (200 - t) / s) for t, s in shown if 100 <= t <= 190]
    assert max(ratios) < 1.5
    estimate_at_119 = dict(shown)[119]
    assert dict(shown)[125] <= estimate_at_119  # the late chunk: held, not raised


def test_a_job_faster_than_predicted_comes_down_to_its_own_pace(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(jobs.time, "monotonic", lambda: now[0])
    job = jobs.Job("Mean entropy of 186 records", "records")
    job.expect(200.0)
    job.state = jobs.RUNNING
    job.progress(0, 100)
    assert job.countdown() == pytest.approx(200.0)
    for second in range(1, 51):
        now[0] = float(second)
        if second % 5 == 0:
            job.progress(second, 100)  # 1 s a record: 100 s in all
        job.countdown()
    assert job.seconds_left() <= job.countdown() < 1.5 * 50.0  # half way: within 1.5x of the 50 s left


def test_compilations_past_twice_the_cost_models_count_in_the_pace(monkeypatch):
    """A machine slower than when its rates were measured: each 10-position chunk takes 8 s where
    2 were predicted, and the engine, measuring its work at the old rate, calls 6 of them compiling
    (``MeteredEngine._compiling_seconds``). Kept out of the pace up to 2x the cost model's 10 s of
    compilations; beyond, they slow it (#66 D1: the time left reached 0 with half the job to go)."""
    now = [0.0]
    monkeypatch.setattr(jobs.time, "monotonic", lambda: now[0])
    job = jobs.Job("Mean entropy of 186 records", "records")
    job.expect(30.0, compiling=10.0)  # 0.2 s per record predicted, for 100
    job.progress(0, 100)
    for chunk in range(1, 6):
        now[0] = 8.0 * chunk
        job.compiled(6.0)
        job.progress(10 * chunk, 100)
    # 40 s elapsed, 30 s called compiling, 20 s (2 x 10) of them kept apart: 20 s on 50 records.
    assert job.seconds_left() == pytest.approx(50 * (5 * 0.2 + 20.0) / 55)  # 19.1 s, where 40 s remain
    monkeypatch.setattr(jobs, "COMPILE_SLACK", float("inf"))  # every such second kept apart, as before
    assert job._left(now[0]) == pytest.approx(50 * (5 * 0.2 + 10.0) / 55)  # 10 s


def test_the_countdown_holds_to_the_jobs_wall_clock_pace_weighted_by_its_progress(monkeypatch):
    """The estimate collapsed to 0 half way (#66 D1 under load: its compilations' budget spent by
    slowness counted as compiling): the countdown comes down to the job's own wall-clock pace times
    its share done (50 records left at 1 s each, half done: 25 s), not to 0."""
    from flamino_core.jobs.time_left import progress_weighted

    assert progress_weighted(0.0, 50.0, 100.0, 50.0) == pytest.approx(25.0)
    assert progress_weighted(0.0, 0.0, 100.0, 5.0) == 0.0  # nothing measured: nothing to hold to
    assert progress_weighted(10.0, 100.0, 100.0, 90.0) == 0.0  # done
    now = [0.0]
    monkeypatch.setattr(jobs.time, "monotonic", lambda: now[0])
    job = jobs.Job("Mean entropy of 186 records", "records")
    job.expect(100.0)
    job.state = jobs.RUNNING
    job.progress(0, 100)
    job.countdown()
    now[0] = 50.0
    job.progress(50, 100)
    monkeypatch.setattr(job, "seconds_left", lambda: 0.0)
    for second in range(51, 55):
        now[0] = float(second)
        job.countdown()
    # Down to the pace read at 51 s (25.5 s) at once, then below it at the slowed clock, not rising
    # with it (27 s at 54 s): 23.2 s with 46 s truly left at the pace measured, where it said 0.
    assert 20.0 < job.countdown() <= 50 * 51 / 100
