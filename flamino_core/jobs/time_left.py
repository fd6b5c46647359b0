"""How long a job has left: its own measured pace, smoothed with the cost model's prediction
while it has measured little (``Job.seconds_left`` asks this with its counters, under its lock).
Pure arithmetic, apart from the job so that its rule reads (and is tested, tests/test_time_left.py,
tests/test_jobs.py) on its own.
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
