"""Design rounds: from this round's measurements to the next round's plate (docs/predict.md).

* ``campaign``: the campaign folder (JSON + CSV): wild type, rounds, measurements, proposals;
* ``candidates``: the pool a round proposes from: allowed singles, a given library, multi-mutants
  of the singles that measured well;
* ``gaussian_process``: the predictor that says how sure it is, and its calibration;
* ``acquisition``: greedy, UCB, Thompson (and random), picked under diversity rules;
* ``proposals``: one round's proposals, reproducible from the campaign's seed.
"""

from __future__ import annotations

from flamino_core.doors import lazy_door

# The door (doors.py): each name the app imports from this package -> its module here.
_EXPORTS = {
    "ACQUISITIONS": "acquisition",
    "DesignError": "gaussian_process",
    **dict.fromkeys(["DEFAULT_ACQUISITION", "DEFAULT_BATCH", "Settings", "propose"], "proposals"),
}
__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)
