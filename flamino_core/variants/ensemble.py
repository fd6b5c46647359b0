"""An ensemble of models scored as one choice (``families.ENSEMBLES``: the ESM-1v five; or
``ensemble:<model>,<model>,...``): each member scores the table on its own, every masked pass
through the result store under that member's fingerprint, and the ensemble's score is the mean
of the members' scores, as Meier et al. 2021 and ProteinGym score the ESM-1v ensemble
(masked-marginals per model, then the mean). Each member's score is kept in a column of its own.

Members are loaded one at a time (``load(identifier)``) and let go before the next, so five
650M models need the memory of one.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from flamino_core.progress import ProgressFn
from flamino_core.model.model_id import short_name
from flamino_core.variants.dms import DmsScores, DmsTable, score_dms

MEMBER_PREFIX = "score_"  # one column per member: score_<member's short name>


def member_columns(members: Sequence[str]) -> list[str]:
    """``score_<name>`` per member: a preset's name, a path's last part, ``ensemble`` for an
    ``ensemble:`` list; numbered if two agree."""
    names = [short_name(m) for m in members]
    return [f"{MEMBER_PREFIX}{name}" if names.count(name) == 1 else f"{MEMBER_PREFIX}{i + 1}_{name}"
            for i, name in enumerate(names)]


def score_dms_ensemble(
    load: Callable[[str], object],
    members: Sequence[str],
    dms: DmsTable,
    strategy: str,
    *,
    record_id: str = "",
    progress: ProgressFn | None = None,
    cancelled: Callable[[], bool] | None = None,
    store=None,
) -> DmsScores:
    """``dms.score_dms`` for each member, then their mean as ``score``.

    Returns:
      The first member's ``DmsScores`` (statuses and metrics' rows are the table's, the same
      for every member) with one ``score_<member>`` column per member before ``score``, which
      holds their mean; ``passes`` counts every member's.
    """
    scored: list[DmsScores] = []
    for index, member in enumerate(members):
        step = None if progress is None else (
            lambda done, total, i=index: progress(i * total + done, len(members) * total))
        engine = load(member)
        scored.append(score_dms(engine, dms, strategy, record_id=record_id, progress=step, cancelled=cancelled,
                                store=store))
        del engine  # the next member loads into the memory this one held
    return mean_of_members(members, scored)


def mean_of_members(members: Sequence[str], scored: Sequence[DmsScores]) -> DmsScores:
    """The ensemble's ``DmsScores`` from its members' (each from ``score_dms`` on the same table):
    the first member's statuses, a ``score_<member>`` column each, then ``score``, their mean."""
    frame = mean_frame(members, [s.frame for s in scored])
    note = f"score: the mean of {len(members)} models' scores ({', '.join(member_columns(members))})"
    first = scored[0]
    return dataclasses.replace(first, frame=frame, passes=sum(s.passes for s in scored), notes=[note, *first.notes])


def mean_frame(members: Sequence[str], frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The members' scored tables of the same rows as one: the first's columns, a
    ``score_<member>`` column each, then ``score`` (their mean), ``non_additivity`` (their mean,
    where the strategy gives one) and the first's ``status``; columns the first had after those
    (``normalisation``) still after them."""
    first = frames[0]
    model_columns = [c for c in ("score", "non_additivity", "status") if c in first.columns]
    last = max(list(first.columns).index(c) for c in model_columns)
    trailing = list(first.columns[last + 1:])  # e.g. normalisation, written after status
    frame = first.drop(columns=model_columns + trailing)
    per_member = np.stack([f["score"].to_numpy(dtype=float) for f in frames])
    for column, values in zip(member_columns(members), per_member):
        frame[column] = values
    frame["score"] = per_member.mean(axis=0)  # after the members' columns, as written out
    if "non_additivity" in model_columns:  # joint strategies: the members' non-additivity, averaged too
        frame["non_additivity"] = np.mean([f["non_additivity"].to_numpy(dtype=float) for f in frames], axis=0)
    frame["status"] = first["status"].to_numpy()
    for column in trailing:
        frame[column] = first[column].to_numpy()
    return frame
