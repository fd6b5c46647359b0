"""A labelled table: which rows, which sequences, which target and which cross-validation folds.

Three layouts are read, as biologists keep them:

* a ``sequence`` (or ``mutated_sequence``) column: one protein per row;
* a ``mutant`` column (``A23V``, ``A23V:G45D``, ``p.Ala23Val``) against a wild type given as
  FASTA;
* a ProteinGym DMS table (``mutant`` + ``mutated_sequence``): the wild type is derived from it
  exactly as ``flamino dms`` derives it, unless given.

A table of mutants of one wild type is a *variant table*: its rows can also be described by
one-hot residues at each position and by the model's zero-shot score (``features``). Rows that
cannot be used (an unreadable mutant, letters outside the 20 amino acids) are reported and left
out, never fatal; rows without a target value are not trained on but still predicted.
"""

from __future__ import annotations

import collections
import dataclasses

import numpy as np
import pandas as pd

from flamino_core.alphabet import STANDARD_AMINO_ACIDS
from flamino_core.inputs.numbering import Numbering
from flamino_core.inputs.tables import NO_LIMITS, TableError, TableLimits, check_protein, read_table
from flamino_core.variants.notation import Substitution, Variant, parse_variant

SEQUENCE_COLUMNS = ("sequence", "mutated_sequence")  # the first present is read
MUTANT_COLUMN = "mutant"
# ProteinGym's fold columns (its supervised benchmark): random, position modulo 5, contiguous
# stretches of positions. Random folds put neighbouring substitutions of one position in train
# and test alike, which over-estimates what a model does on positions it has not seen.
PROTEINGYM_FOLD_COLUMNS = ("fold_random_5", "fold_modulo_5", "fold_contiguous_5")
RANDOM_FOLDS = "random"
N_RANDOM_FOLDS = 5
SEED = 0  # random folds, bootstrap resamples and learning-curve subsets: the same every run
TASKS = ("auto", "regression", "classification")
_AMINO_ACIDS = frozenset(STANDARD_AMINO_ACIDS)
_SHOWN = 3  # example lines quoted per reported problem


class LabelError(TableError):
    """A labelled table that cannot be used at all (the message says why and what to do)."""


@dataclasses.dataclass
class LabelledTable:
    """A labelled table as read.

    ``values`` holds the target per row: floats (NaN where missing) for regression, labels as
    text (None where missing) for classification, whose classes are ``classes`` in order (the
    last one is the "positive" class of a two-class AUC). ``sequences`` is each row's protein
    (None: the row cannot be used, ``issues`` says why); ``variants`` each row's substitutions
    of ``wild_type`` in a variant table.
    """

    frame: pd.DataFrame  # every input column, as text
    target: str
    task: str  # "regression" or "classification"
    values: np.ndarray
    classes: tuple[str, ...]
    sequences: list[str | None]
    wild_type: str | None
    first: int  # the number of the wild type's first residue (mutant numbering)
    variants: list[Variant | None]
    issues: list[str]

    @property
    def numbering(self) -> Numbering:
        """The wild type's residue numbering in the ``mutant`` column."""
        return Numbering(self.first)

    @property
    def is_variant_table(self) -> bool:
        return self.wild_type is not None

    @property
    def usable(self) -> np.ndarray:
        """(rows,) bool: the row has a sequence the features can describe."""
        return np.array([s is not None for s in self.sequences], dtype=bool)

    @property
    def labelled(self) -> np.ndarray:
        """(rows,) bool: usable and with a target value (the rows a fit can learn from)."""
        if self.task == "regression":
            present = np.isfinite(self.values.astype(float))
        else:
            present = np.array([v is not None for v in self.values], dtype=bool)
        return self.usable & present

    @property
    def equal_lengths(self) -> bool:
        """Every usable sequence has the same length (one-hot features need it)."""
        return len({len(s) for s in self.sequences if s is not None}) == 1


def read_table_text(data: bytes | str, limits: TableLimits = NO_LIMITS) -> pd.DataFrame:
    """A CSV (comma or tab separated; bytes or text, BOM tolerated) as text columns, read as a
    DMS table is (``csv_tables.read_table``: bytes, columns and rows checked against ``limits``
    before pandas reads it)."""
    frame = read_table(data, limits, error=LabelError)
    if frame.empty:
        raise LabelError("the table has a header but no rows")
    return frame


def parse_labelled_table(
    data: bytes | str,
    target: str,
    wild_type: str | None = None,
    numbering: Numbering = Numbering(),
    task: str = "auto",
    limits: TableLimits = NO_LIMITS,
) -> LabelledTable:
    """Read a labelled table.

    Args:
      data: the CSV as bytes or text.
      target: the column to learn.
      wild_type: the sequence a ``mutant`` column refers to (validated, e.g. from FASTA); None to
        derive it from ``mutated_sequence`` (ProteinGym), or for a table of sequences.
      numbering: how the ``mutant`` column numbers the wild type's residues.
      task: ``auto`` (numbers with more than two distinct values: regression; anything else:
        classification), ``regression`` or ``classification``.
      limits: the bounds of a DMS table on the Variant effects page (``csv_tables``): bytes,
        columns and rows before the table is read, the wild type's length (or the longest
        sequence's) before any row is applied to it.

    Raises:
      LabelError: unreadable, over a limit, no such target column, no sequences, no usable row.
    """
    if task not in TASKS:
        raise LabelError(f"unknown task {task!r}: choose one of {', '.join(TASKS)}")
    frame = read_table_text(data, limits)
    if target not in frame.columns:
        raise LabelError(f"no column {target!r} to predict; the table's columns are: "
                         f"{', '.join(map(str, frame.columns[:20]))}")
    issues: list[str] = []
    task, values, classes = _target(frame[target], task, target, issues)
    sequences, variants, wild_type = read_rows(frame, wild_type, numbering, issues, limits)
    table = LabelledTable(frame, target, task, values, classes, sequences, wild_type, numbering.first, variants,
                          issues)
    if not table.labelled.any():
        raise LabelError(f"no row has both a usable sequence and a value of {target!r}")
    return table


def read_rows(frame: pd.DataFrame, wild_type: str | None, numbering: Numbering, issues: list[str],
              limits: TableLimits = NO_LIMITS) -> tuple[list[str | None], list[Variant | None], str | None]:
    """Each row's protein (None: unusable, said in ``issues``) and, for mutants of a wild type,
    its substitutions; the wild type (given, derived from a ProteinGym table, or None).

    A ``mutant`` column is read against ``wild_type`` (derived from ``mutated_sequence`` when
    None); a ``sequence``/``mutated_sequence`` column is read as proteins, each compared with
    ``wild_type`` when one is given (rows of another length are then left out). The wild type
    (or, for proteins, the longest) is held to ``limits.max_residues`` before any row is applied.
    """
    sequence_column = next((c for c in SEQUENCE_COLUMNS if c in frame.columns), None)
    variants: list[Variant | None] = [None] * len(frame)
    source = "given"
    if MUTANT_COLUMN in frame.columns and wild_type is None:
        wild_type, source = _derived_wild_type(frame, numbering, issues), "derived from mutated_sequence"
    if wild_type is not None:
        check_protein(len(wild_type), f"the wild type ({source})", limits, does="fits predictors on",
                      run="flamino fit", error=LabelError)
    if MUTANT_COLUMN in frame.columns:
        sequences, variants = _mutant_rows(frame[MUTANT_COLUMN], wild_type, numbering, issues)
    elif sequence_column is not None:
        sequences = _sequence_rows(frame[sequence_column], sequence_column, issues)
        check_protein(max((len(s) for s in sequences if s is not None), default=0), "the table's longest sequence",
                      limits, does="fits", run="flamino fit", error=LabelError)
        if wild_type is not None:
            variants = [variant_of(wild_type, s, numbering, row) if s is not None else None
                        for row, s in enumerate(sequences)]
            _report(issues, [s is not None and v is None for s, v in zip(sequences, variants)],
                    f"the {sequence_column} differs in length from the wild type; those rows are left out")
            sequences = [s if v is not None else None for s, v in zip(sequences, variants)]
    else:
        raise LabelError(f"the table needs a {' or '.join(SEQUENCE_COLUMNS)} column (one protein per row) or a "
                         f"{MUTANT_COLUMN} column (A23V, A23V:G45D) with a wild type")
    return sequences, variants, wild_type


def _target(column: pd.Series, task: str, name: str, issues: list[str]):
    text = column.str.strip()
    missing = text.eq("") | text.str.lower().isin(["nan", "na", "n/a", "none", "null"])
    numbers = pd.to_numeric(text.where(~missing), errors="coerce")
    numeric = bool((numbers.notna() | missing).all())
    if task == "auto":
        distinct = numbers.dropna().nunique() if numeric else text[~missing].nunique()
        task = "regression" if numeric and distinct > 2 else "classification"
    if task == "regression":
        bad = ~missing & (numbers.isna() | ~np.isfinite(numbers.fillna(0)))
        _report(issues, bad, f"{name} is not a number; those rows are not trained on")
        _report(issues, missing, f"{name} is missing; those rows are predicted, not trained on")
        return task, numbers.where(~bad).to_numpy(dtype=float), ()
    labels = text.where(~missing)
    if numeric:  # 0/1 and 0.0/1.0 are the same classes
        labels = numbers.map(lambda v: None if pd.isna(v) else f"{v:g}")
    values = np.array([None if pd.isna(v) else str(v) for v in labels], dtype=object)
    present = [v for v in values if v is not None]
    if numeric:
        classes = tuple(sorted(set(present), key=float))
    else:
        classes = tuple(sorted(set(present)))
    if len(classes) < 2:
        raise LabelError(f"{name} has {len(classes)} class{'es' if len(classes) != 1 else ''}; a classifier needs "
                         "at least two (for a numeric target, use --task regression)")
    _report(issues, missing, f"{name} is missing; those rows are predicted, not trained on")
    return task, values, classes


def _derived_wild_type(frame: pd.DataFrame, numbering: Numbering, issues: list[str]) -> str:
    """The wild type of a ProteinGym table, derived as ``flamino dms`` derives it."""
    from flamino_core.variants.dms import DmsError, _derive_wild_type

    try:
        return _derive_wild_type(frame.assign(mutant=frame[MUTANT_COLUMN].str.strip()), numbering, issues)
    except DmsError as err:
        raise LabelError(str(err)) from None


def _mutant_rows(column: pd.Series, wild_type: str, numbering: Numbering, issues: list[str]):
    sequences: list[str | None] = []
    variants: list[Variant | None] = []
    problems: list[tuple[int, str, str]] = []
    for row, mutant in enumerate(column.str.strip()):
        parsed = parse_variant(mutant, wild_type, numbering, row)
        if isinstance(parsed, Variant):
            variants.append(parsed)
            sequences.append(parsed.apply(wild_type))
        else:
            variants.append(None)
            sequences.append(None)
            problems.append((row, parsed.kind, parsed.message))
    if problems:
        kinds = collections.Counter(kind for _, kind, _ in problems)
        row, _, message = problems[0]
        issues.append(f"{len(problems):,} row{'s' if len(problems) > 1 else ''} cannot be used "
                      f"({', '.join(f'{n:,} {k}' for k, n in kinds.items())}); first: line {row + 2}: {message}")
    return sequences, variants


def _sequence_rows(column: pd.Series, name: str, issues: list[str]) -> list[str | None]:
    sequences: list[str | None] = []
    bad = []
    for text in column:
        sequence = "".join(str(text).split()).upper().rstrip("*")
        ok = bool(sequence) and set(sequence) <= _AMINO_ACIDS
        sequences.append(sequence if ok else None)
        bad.append(not ok)
    _report(issues, bad, f"{name} is empty or has letters other than the 20 standard amino acids; "
                         "those rows are left out")
    return sequences


def variant_of(wild_type: str, sequence: str, numbering: Numbering, order: int) -> Variant | None:
    """``sequence`` as substitutions of ``wild_type`` (None when the lengths differ)."""
    if len(sequence) != len(wild_type):
        return None
    substitutions = tuple(Substitution(i, w, m) for i, (w, m) in enumerate(zip(wild_type, sequence)) if w != m)
    mutant = ":".join(f"{s.wt}{numbering.number(s.index)}{s.mt}" for s in substitutions)
    return Variant(order, mutant, mutant, substitutions, numbering.first)


def _report(issues: list[str], mask, message: str) -> None:
    rows = np.flatnonzero(np.asarray(mask, dtype=bool))
    if not len(rows):
        return
    shown = ", ".join(str(r + 2) for r in rows[:_SHOWN])  # the header is line 1
    more = " …" if len(rows) > _SHOWN else ""
    where = f"line {shown}" if len(rows) == 1 else f"{len(rows):,} rows (lines {shown}{more})"
    issues.append(f"{where}: {message}")


def fold_ids(table: LabelledTable, folds: str = RANDOM_FOLDS, seed: int = SEED) -> np.ndarray:
    """(rows,) the cross-validation fold of each labelled row, -1 for rows not evaluated.

    Args:
      table: from ``parse_labelled_table``.
      folds: ``random`` (5 folds, shuffled with ``seed``; stratified by class for a classifier)
        or the name of a column holding each row's fold (ProteinGym's ``fold_random_5``,
        ``fold_modulo_5``, ``fold_contiguous_5``; any labels). A row with no fold value is not
        evaluated.

    Raises:
      LabelError: no such column, fewer than two folds, too few rows.
    """
    from sklearn.model_selection import KFold, StratifiedKFold

    labelled = table.labelled
    ids = np.full(len(table.frame), -1, dtype=np.int64)
    rows = np.flatnonzero(labelled)
    if folds == RANDOM_FOLDS:
        if len(rows) < N_RANDOM_FOLDS:
            raise LabelError(f"{len(rows):,} labelled rows; {N_RANDOM_FOLDS}-fold cross-validation needs at least "
                             f"{N_RANDOM_FOLDS}")
        if table.task == "classification":
            y = table.values[rows].astype(str)
            smallest = min(collections.Counter(y).values())
            if smallest < N_RANDOM_FOLDS:
                raise LabelError(f"a class of {table.target!r} has {smallest} labelled row(s); stratified "
                                 f"{N_RANDOM_FOLDS}-fold cross-validation needs at least {N_RANDOM_FOLDS} of each")
            splits = StratifiedKFold(N_RANDOM_FOLDS, shuffle=True, random_state=seed).split(rows, y)
        else:
            splits = KFold(N_RANDOM_FOLDS, shuffle=True, random_state=seed).split(rows)
        for fold, (_, test) in enumerate(splits):
            ids[rows[test]] = fold
        return ids
    if folds not in table.frame.columns:
        present = [c for c in PROTEINGYM_FOLD_COLUMNS if c in table.frame.columns]
        hint = f" (this table has {', '.join(present)})" if present else ""
        raise LabelError(f"--folds: no column {folds!r}; give 'random' or a fold column{hint}")
    text = table.frame[folds].str.strip()
    given = labelled & text.ne("").to_numpy()
    numbers = pd.to_numeric(text[given], errors="coerce")
    if numbers.notna().all() and (numbers == numbers.round()).all():
        ids[given] = numbers.astype(np.int64).to_numpy()
    else:
        codes = {label: n for n, label in enumerate(sorted(set(text[given])))}
        ids[given] = [codes[label] for label in text[given]]
    if len(set(ids[given])) < 2:
        raise LabelError(f"--folds {folds}: the labelled rows fall in {len(set(ids[given]))} fold(s); "
                         "cross-validation needs at least two")
    return ids
