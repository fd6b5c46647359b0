"""Design rounds: from this round's measurements to the next round's plate (docs/predict.md).

* ``campaign``: the campaign folder (JSON + CSV): wild type, rounds, measurements, proposals;
* ``candidates``: the pool a round proposes from: allowed singles, a given library, multi-mutants
  of the singles that measured well;
* ``gaussian_process``: the predictor that says how sure it is, and its calibration;
* ``acquisition``: greedy, UCB, Thompson (and random), picked under diversity rules;
* ``proposals``: one round's proposals, reproducible from the campaign's seed.
"""
