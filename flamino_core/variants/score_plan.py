"""A variant score planned (``jobs/plan.py``'s protocol): a mutation list or a DMS table scored by
one strategy, the passes it still needs given the result store (``variant_passes``: the one rule
``score_variants`` runs by), their seconds here, and its rows in chunks.

The masked sequence strategies (every residue of every mutant masked: ``chunked``) are scored a
chunk of rows at a time, the first row alone (it appears within seconds, and measures the rate),
then ``chunk_rows`` at a time, each chunk's table kept on the job (``job.value["partial"]``) as
it arrives; the whole is then scored again from the store, without running the model (its
statistics and duplicates need every row). Every other strategy is one call, reporting its passes,
and so is every strategy without ``chunk_rows`` (the command line's way: the plan's passes are
the same, said before the work by ``flamino variants`` and ``flamino dms``).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import pandas as pd

from flamino_core.progress import ProgressFn
from flamino_core.jobs.plan import Needed
from flamino_core.options import STRATEGIES
from flamino_core.variants.dms import DmsTable, score_dms
from flamino_core.variants.scoring import score_variants
from flamino_core.variants.variant import Variant
from flamino_core.variants.variant_passes import held_in_store, held_sets_in_store, variant_passes



def chunked(strategy: str) -> bool:
    """Whether ``strategy`` is scored a chunk of rows at a time (every residue of every mutant
    masked: the rows arrive as they are scored)."""
    return STRATEGIES[strategy].whole_sequences and STRATEGIES[strategy].masked


def row_chunks(n: int, chunk_rows: int) -> list[tuple[int, int]]:
    """Row chunks: the first row alone, then ``chunk_rows`` at a time."""
    bounds = [0, *range(1, n, chunk_rows), n] if n else [0, 0]
    return list(zip(bounds[:-1], bounds[1:]))


@dataclasses.dataclass(frozen=True)
class ScorePlan:
    """``rows`` rows (``row_unit``: "variants", "rows") of ``variants`` of ``sequence`` scored by
    ``strategy``: ``part(engine, start, stop)`` scores rows [start, stop) into a table,
    ``whole(engine, progress)`` every row into the final result. ``structure``: a
    structure-aware model's 3Di letters (the store keys its masked passes by them)."""

    engine: object
    sequence: str
    variants: tuple[Variant, ...]
    strategy: str
    rows: int
    row_unit: str
    chunk_rows: int | None  # None: every row in one call (the command line's way)
    part: Callable[[object, int, int], pd.DataFrame]
    whole: Callable[[object, ProgressFn | None], object]
    structure: str | None = None

    @property
    def chunks(self) -> list[tuple[int, int]]:
        if chunked(self.strategy) and self.chunk_rows:
            return row_chunks(self.rows, self.chunk_rows)
        return [(0, self.rows)]

    @property
    def unit(self) -> str:
        """What the progress counts: rows when chunked (every list of 2 or more), else the passes
        ``score_variants`` reports (a short pll list said "done (12 passes)" after 2,007 passes,
        counting its 12 variants as passes)."""
        return self.row_unit if len(self.chunks) > 1 else "passes"

    def needed(self) -> Needed:
        found = variant_passes(self.sequence, self.variants, self.strategy,
                               held_in_store(self.engine, structure=self.structure),
                               held_sets_in_store(self.engine, structure=self.structure))
        return Needed(found.masked, found.runs, found.how)

    def run(self, job, engine, first_only: bool = False, stop: Callable[[], bool] | None = None):
        chunks = self.chunks
        partial: list[pd.DataFrame] = []
        job.value = {"partial": partial}
        if len(chunks) > 1:
            job.progress(0, self.rows)  # the start: the job's rate is measured from here
        for start, end in chunks if len(chunks) > 1 else ():  # rows arrive chunk by chunk
            partial.append(self.part(engine, start, end))
            job.progress(end, self.rows)
            if first_only:  # this chunk measured the rate: the caller now knows what the rest costs
                return job.value
        return self.whole(engine, None if len(chunks) > 1 else job.progress)


def list_plan(engine, sequence: str, variants: Sequence[Variant], strategy: str, *, issues=(), record_id: str,
              chunk_rows: int | None = None, structure: str | None = None) -> ScorePlan:
    """A mutation list of ``sequence`` scored (``score_variants``; ``issues``: the list's entries
    that could not be read, listed in its table)."""
    variants = tuple(variants)
    with_structure = {"structure": structure} if structure else {}

    def part(engine, start: int, end: int) -> pd.DataFrame:
        return score_variants(engine, sequence, list(variants[start:end]), strategy, record_id=record_id,
                              **with_structure).table

    def whole(engine, progress):
        return score_variants(engine, sequence, list(variants), strategy, issues=issues, record_id=record_id,
                              progress=progress, **with_structure)

    return ScorePlan(engine, sequence, variants, strategy, len(variants), "variants", chunk_rows, part, whole,
                     structure)


def dms_plan(engine, table: DmsTable, variants: Sequence[Variant], strategy: str, *, record_id: str,
             chunk_rows: int | None = None, structure: str | None = None) -> ScorePlan:
    """Every row of the DMS ``table`` scored (``score_dms``); ``variants``: its mutants as the pass
    rule counts them (``dms.table_variants``, indels read when the strategy scores them)."""
    with_structure = {"structure": structure} if structure else {}

    def part(engine, start: int, end: int) -> pd.DataFrame:
        rows = dataclasses.replace(table, frame=table.frame.iloc[start:end].reset_index(drop=True),
                                   as_written=None if table.as_written is None
                                   else table.as_written.iloc[start:end].reset_index(drop=True))
        return score_dms(engine, rows, strategy, record_id=record_id, **with_structure).frame

    def whole(engine, progress):
        return score_dms(engine, table, strategy, record_id=record_id, progress=progress, **with_structure)

    return ScorePlan(engine, table.wild_type, tuple(variants), strategy, len(table.frame), "rows", chunk_rows,
                     part, whole, structure)
