"""How long a job has left: its own measured pace, smoothed with the cost model's prediction
while it has measured little (``Job.seconds_left`` asks this with its counters, under its lock).
Pure arithmetic, apart from the job so that its rule reads (and is tested, tests/unit/test_time_left.py,
tests/integration/test_jobs.py) on its own.
"""

from __future__ import annotations

# The cost model's prediction counts as this share of a job's units measured: at 10% of the work
# the time left is a third the prediction's and two thirds the job's own rate.
PRIOR_SHARE = 0.05
# A Resume's pace (``carry_on``) counts as this share: measured before the Cancel, and with 5% the
# time left stayed flat for minutes when the machine got busier since (issue 50: "about 6 minutes").
CARRIED_SHARE = 0.01
# A prediction whose rate was borrowed from the other kind of pass (``PassSeconds.borrowed``)
# counts as this share: off by up to 18x here (masked vs unmasked passes of random:tiny), it
# must not hold the time left once the job measured a few chunks of its own.
BORROWED_SHARE = 0.005
# A job's compilations beyond this many times the cost model's count in its own pace
# (``Job._compiles_apart``). A compiling call's time beyond its work at the rate measured before is
# counted as compilation (``MeteredEngine``), so a machine slower than when the rate was measured
# looks like compiling: #66 D1's 186 records, 2 busy loops added, paid about twice their predicted
# time as "compilations", their pace stayed the prediction's and the time left reached 0 s with 95 s
# to go. The cost model's compile seconds are this machine's measured ones and a plan's shapes its
# own: within the slack, a shape the plan did not foresee stays out of the pace.
COMPILE_SLACK = 2.0


def seconds_left_from(*, first: float, done: float, total: float, elapsed: float, units: tuple[int, int],
                      expected: float | None, compiling: float | None, compiled: float,
                      carried: float | None, prior_share: float) -> float | None:
    """Seconds to finish (None: neither a prediction nor a measured pace yet).

    Args: ``first``, ``done``, ``total``: the job's work at its first report, now and in all (its
    units, or the work it reports beside them); ``elapsed``: seconds since the first report less
    the compilations paid; ``units``: (units done at the first report, units in all);
    ``expected``, ``compiling``: the prediction and the compilations it counted (``Job.expect``);
    ``compiled``: compilation seconds paid; ``carried``: a resumed job's pace per unit
    (``Job.carry_on``); ``prior_share``: what the prediction weighs.

    Seconds per unit = (w * predicted + elapsed) / (w + measured units), the prediction worth
    ``w`` units (``PRIOR_SHARE`` of the work, at least one unit; ``BORROWED_SHARE`` when its rate
    was borrowed; ``CARRIED_SHARE`` for a resumed job's pace): no jump at the first chunk, and a
    chunk slower than predicted raises the estimate while it runs. Compilations are out of both
    (the elapsed time less ``compiled``, the prediction less ``compiling``) and added back once:
    those the cost model counted and the job has not paid yet.
    """
    measured, remaining = done - first, max(total - done, 0)
    elapsed = max(elapsed, 0.0)
    compiling = compiling if carried is None else None
    to_compile = 0.0 if compiling is None else max(compiling - compiled, 0.0)
    prior = carried if carried is not None else (
        (expected - (compiling or 0.0)) / (total - first) if expected is not None and total > first else None)
    if prior is not None and total > first:
        one_unit = (total - first) / max(units[1] - units[0], 1)  # (of work: many MFLOP)
        share = CARRIED_SHARE if carried is not None else prior_share
        weight = max(one_unit, share * (total - first))
        per_unit = (weight * prior + elapsed) / (weight + measured)
    elif measured > 0 and elapsed > 0:
        per_unit = elapsed / measured
    else:
        return None
    return remaining * per_unit + (to_compile if remaining else 0.0)


def progress_weighted(first: float, done: float, total: float, elapsed: float) -> float:
    """The time left at the job's own wall-clock pace, compilations and all, times the share of its
    work done: nothing at its start, where a fresh process's first compilations make that pace
    several times slow (118.8 s said at 10% for 57 s, issue #37), the whole of it at its end, where
    the compilations are counted in proportion. What the countdown holds to when the estimate runs
    below it: #66 D1's 186 records under load counted their slowness as compilation, and the
    estimate (its compilations' budget spent early) said 2 s with 63 s to go."""
    measured = done - first
    if measured <= 0 or total <= first or elapsed <= 0:
        return 0.0
    return max(total - done, 0.0) * elapsed / (total - first)  # (left x elapsed / measured) x measured share


def countdown_step(shown: float, estimate: float, seconds: float) -> float:
    """The time left shown after ``seconds`` more, from ``shown``, following the job's ``estimate``
    (``Job.seconds_left``) without ever rising (#66 D1: a set's countdown said 2 min, 11 min, then
    1 min, and "about 1 minute left" for 60 s while 150 s remained).

    Its clock runs at (shown / estimate)^3 seconds a second: as the wall clock when the two agree,
    slower when the estimate is above (a job found slower than said: the shown time holds rather
    than jumps up), faster when below, never under the estimate then. Why cubed: at the wall
    clock's pace a shown time half the true one stays half to the end; at this pace the ratio r of
    shown to true time left moves as dr/dt = r (1 - r^2) / (time left): r / sqrt(1 - r^2) doubles
    each time the time left halves (a 2x-short start is 1.32x short half way, 1.09x with a quarter
    left; squared, 1.5x and 1.25x), and an estimate's tenfold spike is met by a pause (the clock at
    a thousandth), not a jump. Exact for a steady ``estimate`` over ``seconds`` (1 / shown^2 grows
    by 2 seconds / estimate^3), so any number of watchers reading it at any times move it alike."""
    if shown <= 0 or estimate <= 0:
        return max(min(shown, estimate), 0.0)
    stepped = shown / (1.0 + 2.0 * shown ** 2 * max(seconds, 0.0) / estimate ** 3) ** 0.5
    return max(stepped, estimate) if shown > estimate else stepped
