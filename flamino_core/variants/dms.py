"""Deep mutational scanning tables in ProteinGym's format, scored by the model.

ProteinGym's substitution files have ``mutant`` (``A23V`` or ``A23V:G45D``) and ``DMS_score``
(higher = fitter), and usually ``mutated_sequence`` and ``DMS_score_bin`` (1 fit, 0 not). The wild
type is given (FASTA) or derived from ``mutated_sequence`` + ``mutant``. Missing values, duplicate
mutants and rows that disagree with the wild type are reported and left out, never fatal; only a
table without the two required columns, or without any way to know the wild type, is refused.
The agreement statistics are in ``dms_metrics``.

ProteinGym's indel tables have no ``mutant`` column: each row's ``mutated_sequence`` is the
variant (``DmsTable.by_sequence``). Their wild type must be given (ProteinGym's reference file
``DMS_indels.csv`` holds it as ``target_seq``); each row becomes one edit of it
(``indels.from_sequence``), scored by a ``sequence`` strategy of ``options.STRATEGIES``.
"""

from __future__ import annotations

import collections
import dataclasses
import os
from typing import Callable

import numpy as np
import pandas as pd

from flamino_core.progress import ProgressFn
from flamino_core.inputs.numbering import Numbering
from flamino_core.inputs.tables import NO_LIMITS, TableError, TableLimits, check_protein, read_table
from flamino_core.options import STRATEGIES
from flamino_core.variants import indels as indel_notation
from flamino_core.variants.notation import (
    OUT_OF_RANGE, WRONG_WILD_TYPE, Variant, VariantIssue, parse_variant, read_changes, suggest_offset,
)
from flamino_core.variants.scoring import DEFAULT_VARIANT_STRATEGY, OK, score_variants

REQUIRED_COLUMNS = ("mutant", "DMS_score")
SCORE_COLUMNS = ("score", "non_additivity", "status")  # what scoring adds to the table
NUMBER_COLUMNS = ("DMS_score", "DMS_score_bin")  # read as numbers
_SHOWN = 3  # example lines quoted per reported problem
# A numbering that most rows miss is wrong, not a few bad rows: on ProteinGym's PIN1 assay with
# --offset 5, 49 of 802 rows fit by chance and got metrics. Scoring stops unless forced.
MOSTLY_MISSED = 0.5


class DmsError(TableError):
    """A DMS table that cannot be used at all (the message says why and what to do)."""


@dataclasses.dataclass
class DmsTable:
    """A DMS table as read: every input column, the wild type, what was noticed on the way.

    ``frame`` keeps the input columns in order (as text, except ``DMS_score`` and
    ``DMS_score_bin``, which are numbers with NaN where missing); ``as_written`` keeps those two
    as the file wrote them, so a scored table written back shows the user's own values.
    """

    frame: pd.DataFrame
    wild_type: str
    first: int  # the number of the wild type's first residue in the mutant column
    wild_type_source: str  # "given", or "derived from mutated_sequence"
    issues: list[str]  # reported, not fatal
    as_written: pd.DataFrame | None = None  # DMS_score (and DMS_score_bin) as text

    @property
    def numbering(self) -> Numbering:
        """The wild type's residue numbering in the mutant column."""
        return Numbering(self.first)

    @property
    def has_bins(self) -> bool:
        return "DMS_score_bin" in self.frame.columns

    @property
    def by_sequence(self) -> bool:
        """ProteinGym's indel layout: no ``mutant`` column, each row's ``mutated_sequence`` is it."""
        return "mutant" not in self.frame.columns

    @property
    def names(self) -> pd.Series:
        """Each row's variant as written: its ``mutant``, else its ``mutated_sequence``."""
        return self.frame["mutated_sequence" if self.by_sequence else "mutant"]


@dataclasses.dataclass
class DmsScores:
    """A scored DMS table: ``frame`` is every input column plus ``score``, (``non_additivity``,)
    ``status``, in input order; ``in_metrics`` marks the rows the statistics use."""

    frame: pd.DataFrame
    in_metrics: np.ndarray  # (rows,) bool: scored, DMS_score present, first of its mutant
    variants: pd.DataFrame  # score_variants' table, row for row: variant, positions, n_mutations
    strategy: str
    passes: int
    notes: list[str]
    dms: DmsTable

    @property
    def n_mutations(self) -> np.ndarray:
        """(rows,) substitutions per row, 0 where the mutant could not be scored."""
        return self.variants["n_mutations"].to_numpy()

    @property
    def kinds(self) -> np.ndarray:
        """(rows,) ``Variant.kind``: substitution, multi-substitution, deletion ... ("" if not scored)."""
        return self.variants["kind"].to_numpy()

    def rows_used(self, singles_only: bool = False) -> np.ndarray:
        """(rows,) bool: the rows the statistics use (single substitutions only if asked)."""
        return self.in_metrics & (self.kinds == "substitution") if singles_only else self.in_metrics.copy()


def read_dms(path: str | os.PathLike, wild_type: str | None = None, numbering: Numbering = Numbering()) -> DmsTable:
    """``parse_dms`` on a file; a missing or unreadable file raises ``DmsError``."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise DmsError(f"cannot read the DMS table {os.fspath(path)!r}: {exc.strerror or exc}") from None
    return parse_dms(data, wild_type, numbering)


def parse_dms(data: bytes | str, wild_type: str | None = None, numbering: Numbering = Numbering(),
              limits: TableLimits = NO_LIMITS) -> DmsTable:
    """Read a ProteinGym-style DMS table and settle its wild type.

    Args:
      data: the CSV (comma or tab separated) as bytes or text.
      wild_type: the sequence the mutants refer to (validated, e.g. from ``fasta``); None to
        derive it from ``mutated_sequence`` and ``mutant``.
      numbering: how the ``mutant`` column numbers the wild type's residues.
      limits: the table's bounds (a hosted server's: bytes, columns, rows checked before pandas
        reads it; the wild type, given or derived, before any row is applied or scored); the
        Predict page's labelled tables are held to the same (``csv_tables``).

    Returns:
      ``DmsTable``.

    Raises:
      DmsError: unreadable, no ``mutant``/``DMS_score`` column, or no wild type obtainable.
    """
    frame = read_table(data, limits, what="the DMS table", error=DmsError, strip_names=False)
    by_sequence = "mutant" not in frame.columns and "mutated_sequence" in frame.columns  # ProteinGym's indels
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns and not (by_sequence and c == "mutant")]
    if missing:
        raise DmsError(f"the DMS table needs the columns {' and '.join(REQUIRED_COLUMNS)} (ProteinGym format); "
                       f"{', '.join(missing)} missing among: {', '.join(map(str, frame.columns[:12]))}")
    if frame.empty:
        raise DmsError("the DMS table has a header but no rows")
    if by_sequence and wild_type is None:
        raise DmsError("the DMS table has mutated_sequence and no mutant column (ProteinGym's indel layout): give "
                       "its wild type as FASTA (ProteinGym's reference file DMS_indels.csv has it as target_seq)")
    issues = []
    as_written = frame[[c for c in NUMBER_COLUMNS if c in frame.columns]].copy()
    names = "mutated_sequence" if by_sequence else "mutant"
    frame[names] = frame[names].str.strip()
    frame["DMS_score"] = _numbers(frame, "DMS_score", issues)
    if "DMS_score_bin" in frame.columns:
        frame["DMS_score_bin"] = _numbers(frame, "DMS_score_bin", issues)
        odd = frame["DMS_score_bin"].notna() & ~frame["DMS_score_bin"].isin([0, 1])
        if odd.any():
            issues.append(f"{_lines(odd)}: DMS_score_bin is not 0 or 1; those rows are left out of AUC and MCC")
            frame.loc[odd, "DMS_score_bin"] = np.nan
    if wild_type is None:
        wild_type, source = _derive_wild_type(frame, numbering, issues), "derived from mutated_sequence"
    else:
        source = "given"
    check_protein(len(wild_type), f"the wild type ({source})", limits, does="scores DMS tables of",
                  run="flamino dms", error=DmsError)
    if source == "given" and not by_sequence:
        _check_mutated_sequences(frame, wild_type, numbering, issues)
    counts = frame.loc[frame[names] != "", names].value_counts()
    repeated = counts[counts > 1]
    if len(repeated):
        shown = ", ".join(f"{m if len(m) <= 24 else m[:24] + '…'} ({n}x)" for m, n in repeated.head(_SHOWN).items())
        more = " …" if len(repeated) > _SHOWN else ""
        which = "1 mutant appears" if len(repeated) == 1 else f"{len(repeated):,} mutants appear"
        issues.append(f"{which} on more than one row ({shown}{more}); each is scored, but only its first row "
                      "counts in the statistics")
    return DmsTable(frame, wild_type, numbering.first, source, issues, as_written)


def _numbers(frame: pd.DataFrame, column: str, issues: list[str]) -> pd.Series:
    values = pd.to_numeric(frame[column].str.strip(), errors="coerce")
    missing = values.isna() | ~np.isfinite(values)
    if missing.any():
        issues.append(f"{_lines(missing)}: {column} is missing or not a number"
                      + ("; those rows are scored but left out of the statistics" if column == "DMS_score" else ""))
    return values.where(~missing)


def _lines(mask) -> str:
    """'line 5' / '3 rows (lines 5, 9, 12 …)' for a boolean row mask (the header is line 1)."""
    rows = np.flatnonzero(np.asarray(mask))
    shown = ", ".join(str(r + 2) for r in rows[:_SHOWN])
    more = " …" if len(rows) > _SHOWN else ""
    return f"line {shown}" if len(rows) == 1 else f"{len(rows):,} rows (lines {shown}{more})"


def _derive_wild_type(frame: pd.DataFrame, numbering: Numbering, issues: list[str]) -> str:
    """Undo each row's substitutions in its ``mutated_sequence``; the rows must agree."""
    if "mutated_sequence" not in frame.columns:
        raise DmsError("the DMS table has no mutated_sequence column to derive the wild type from; "
                       "give the wild-type sequence as FASTA")
    votes: collections.Counter = collections.Counter()
    row_wild = np.full(len(frame), None, dtype=object)
    for row, (mutant, mutated) in enumerate(zip(frame["mutant"], frame["mutated_sequence"].str.strip().str.upper())):
        changes, problem = read_changes(mutant)
        residues = list(mutated)
        if problem or not residues:
            continue
        for wt, number, mt in changes:
            index = numbering.index_within(number, len(residues))
            if index is None or residues[index] != mt:
                break
            residues[index] = wt
        else:
            row_wild[row] = "".join(residues)
            votes[row_wild[row]] += 1
    if not votes:
        raise DmsError("no row's mutated_sequence fits its mutant, so the wild type cannot be derived; "
                       "give the wild-type sequence as FASTA (or check the numbering offset)")
    wild_type, _ = votes.most_common(1)[0]
    disagree = np.array([w is not None and w != wild_type for w in row_wild])
    unusable = np.array([w is None for w in row_wild])
    if disagree.any():
        issues.append(f"{_lines(disagree)}: mutated_sequence with the mutant undone gives another wild type than "
                      f"the other {votes[wild_type]:,} rows; the majority wild type is used")
    if unusable.any():
        issues.append(f"{_lines(unusable)}: mutated_sequence does not fit the mutant (or one is unreadable), "
                      "so these rows did not help derive the wild type")
    return wild_type


def _check_mutated_sequences(frame: pd.DataFrame, wild_type: str, numbering: Numbering, issues: list[str]) -> None:
    if "mutated_sequence" not in frame.columns:
        return
    differ = np.zeros(len(frame), bool)
    for row, (mutant, mutated) in enumerate(zip(frame["mutant"], frame["mutated_sequence"].str.strip().str.upper())):
        variant = parse_variant(mutant, wild_type, numbering)
        if isinstance(variant, Variant) and mutated and variant.apply(wild_type) != mutated:
            differ[row] = True
    if differ.any():
        issues.append(f"{_lines(differ)}: mutated_sequence is not the given wild type with the mutant applied; "
                      "the model scores the given wild type with the mutant applied")


def numbering_problem(dms: DmsTable) -> str | None:
    """Why the rows do not fit the wild type as numbered (more than ``MOSTLY_MISSED`` of the
    readable mutants name a wrong wild-type letter or a position outside it, while some fit by
    chance and would be scored and measured), else None.

    The message gives the numbering they all fit when there is one (``suggest_offset``). Front
    ends stop there (``flamino dms`` exits 2, the app shows it) unless the user forces the scoring.
    """
    if dms.by_sequence:
        return None  # whole sequences: no numbering to miss
    variants, missed = [], []
    for row, mutant in enumerate(dms.frame["mutant"]):
        parsed = parse_variant(mutant, dms.wild_type, dms.numbering, order=row)
        if isinstance(parsed, Variant):
            variants.append(parsed)
        elif parsed.kind in (WRONG_WILD_TYPE, OUT_OF_RANGE):
            missed.append(parsed)
    checked = len(variants) + len(missed)
    if not variants or not missed or len(missed) <= MOSTLY_MISSED * checked:
        return None  # no row fits: scoring says "nothing could be scored", with the same hint
    hint = suggest_offset(variants, missed, dms.wild_type, dms.numbering)
    consensus = _consensus(dms.frame) if not hint and "mutated_sequence" in dms.frame.columns else ""
    if consensus:  # a wild type derived under a wrong numbering is wrong too; the columns' majority is not
        hint = suggest_offset(variants, missed, consensus, dms.numbering)
    where = f"the wild type ({dms.wild_type_source}) numbered from {dms.first}"
    return (f"{len(missed):,} of {checked:,} rows do not fit {where} (first: line {missed[0].order + 2}: "
            f"{missed[0].message})" + (f"; {hint}" if hint else "; check the numbering and the wild type"))


def _consensus(frame: pd.DataFrame, rows: int = 2000) -> str:
    """The most common letter at each position of the (first ``rows``) mutated sequences of the
    commonest length: the wild type of a scan of few substitutions per row, whatever the numbering."""
    sequences = frame["mutated_sequence"].iloc[:rows].str.strip().str.upper()
    if sequences.empty:
        return ""
    length = sequences.str.len().mode().iloc[0]
    same = sequences[sequences.str.len() == length]
    if not length or same.empty:
        return ""
    letters = np.frombuffer("".join(same).encode("ascii", "replace"), dtype=np.uint8).reshape(len(same), length)
    return "".join(chr(np.bincount(column).argmax()) for column in letters.T)


def table_variants(dms: DmsTable, indels: bool = False) -> tuple[list[Variant], list[VariantIssue]]:
    """Each row's mutant read against the wild type: ``(variants, problems)``, ``order`` = row.
    ``indels``: read indels and stops in the ``mutant`` column too (``notation.parse_variant``);
    a table of whole sequences is always read as edits of the wild type."""
    variants: list[Variant] = []
    problems: list[VariantIssue] = []
    read = indel_notation.parse_variant if indels else parse_variant
    for row, name in enumerate(dms.names):
        parsed = (indel_notation.from_sequence(dms.wild_type, name, dms.numbering, order=row) if dms.by_sequence
                  else read(name, dms.wild_type, dms.numbering, order=row))
        (variants if isinstance(parsed, Variant) else problems).append(parsed)
    return variants, problems


def score_dms(
    engine,
    dms: DmsTable,
    strategy: str = DEFAULT_VARIANT_STRATEGY,
    *,
    record_id: str = "",
    progress: ProgressFn | None = None,
    cancelled: Callable[[], bool] | None = None,
    store=None,
    structure: str | None = None,
) -> DmsScores:
    """Score every row of a DMS table (multi-mutants too: additively under masked-marginals).

    Args:
      engine: a loaded ``Engine``.
      dms: from ``read_dms`` / ``parse_dms``.
      strategy: one of ``options.scoring_strategies()`` (a table of whole sequences, or of indels,
        needs a ``sequence`` strategy: the others refuse those rows).
      record_id: the wild type's record id, for messages.
      progress: called with (passes done, passes total).
      cancelled, store, structure: as ``scoring.score_variants`` (masked passes stop between chunks, what
        finished is kept in the result store).

    Returns:
      ``DmsScores``; rows that cannot be scored have NaN and the reason in ``status``. The
      wild-type disagreements found here are added to ``dms.issues``.
    """
    variants, problems = table_variants(dms, indels=STRATEGIES[strategy].whole_sequences)
    issues = list(dms.issues)
    if problems:
        kinds = collections.Counter(p.kind for p in problems)
        example = problems[0]
        issues.append(f"{len(problems):,} rows cannot be scored ({', '.join(f'{n:,} {k}' for k, n in kinds.items())}); "
                      f"first: line {example.order + 2}: {example.message}")
        hint = suggest_offset(variants, problems, dms.wild_type, dms.numbering)
        if hint:
            issues.append(hint)
    result = score_variants(engine, dms.wild_type, variants, strategy, issues=problems,
                            record_id=record_id, progress=progress, cancelled=cancelled, store=store,
                            structure=structure)
    frame = dms.frame.copy()
    clashes = [c for c in SCORE_COLUMNS if c in frame.columns]
    if clashes:
        issues.append(f"the input column(s) {', '.join(clashes)} are replaced by the model's")
    table = result.table
    for column in SCORE_COLUMNS:
        if column in table.columns:
            frame[column] = table[column].to_numpy()
    # Duplicates by the ProteinGym spelling, so A23V and p.Ala23Val are the same mutant.
    key = table["variant"].where(table["variant"] != "", dms.names.to_numpy())
    first_of_mutant = ~key.duplicated(keep="first")
    in_metrics = (table["status"].to_numpy() == OK) & frame["DMS_score"].notna().to_numpy() & first_of_mutant.to_numpy()
    dms = dataclasses.replace(dms, issues=issues)
    return DmsScores(frame, in_metrics, table, strategy, result.passes, result.notes, dms)


def output_frame(scores: DmsScores) -> pd.DataFrame:
    """The scored table to write out: every input column as the file had it, then ``score``
    (``non_additivity``) and ``status``."""
    frame = scores.frame.copy()
    written = scores.dms.as_written
    if written is not None:
        for column in written.columns:
            frame[column] = written[column].to_numpy()
    return frame
