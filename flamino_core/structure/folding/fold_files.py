"""One record folded into its files (ESMFold v1): the PDB written whole, its row of ``folds.csv``,
and the table itself. ``flamino fold`` (``cli/fold.py``) and ``flamino batch fold``'s actors
(``batch/fold_shards.py``) both fold a record through ``fold_record``, so the two give the same
file names, bytes and rows.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from pathlib import Path
from typing import Callable

from flamino_core.atomic import written_atomically
from flamino_core.model.model_id import ModelId
from flamino_core.options import FoldPrecision, Precision
from flamino_core.structure.folding.fold_run import FoldTask, row_flag

STEM_BF16_NOTE = "stem in bf16 (opt-in fast mode: not the reference's numbers)"
FAST_NOTE = ("fast mode: bf16 products with fp32 accumulation in the trunk and the stem (opt-in: not the "
             "reference's numbers)")
TABLE = "folds.csv"
# The table's columns, in this order (scripts read them): past_trained_length (yes/no) added last.
COLUMNS = ["name", "length", "mean_plddt", "ptm", "pdb", "past_trained_length"]


@dataclasses.dataclass(frozen=True)
class FoldSettings:
    """How every record of a run is folded and labelled: the model's identifier (said in each
    file), whether it is the untrained test model, the trunk passes (None: the model's), the
    pair-state rows per step (None: all at once), the stem's precision and the whole fold's (the
    fast mode: its stem in bf16 too)."""

    model: ModelId
    is_random: bool
    passes: int | None = None
    chunk_size: int | None = 64
    stem_precision: Precision = Precision.FP32
    fold_precision: FoldPrecision = FoldPrecision.FP32

    @property
    def note(self) -> str:
        """What each file says of the precision: the fast mode's note, the bf16 stem's, or '' (fp32)."""
        return precision_note(self.stem_precision, self.fold_precision)


def precision_note(stem_precision: Precision, fold_precision: FoldPrecision = FoldPrecision.FP32) -> str:
    """The fast mode's note, the bf16 stem's, or '' (fp32): said in every file and on stderr."""
    if fold_precision == FoldPrecision.FAST:
        return FAST_NOTE
    return STEM_BF16_NOTE if stem_precision == Precision.BF16 else ""


def fold_record(model, task: FoldTask, out: Path, settings: FoldSettings,
                say: Callable[[str], None]) -> dict:
    """Fold ``task`` with ``model``, write ``out/task.file`` whole (``written_atomically``: a
    kill leaves no half file) and return its table row (``COLUMNS``). A record past the stem's
    trained length gets a second REMARK line before the atoms and a warning on ``say``."""
    from flamino_core.model.esmfold.pdb import to_pdb
    from flamino_core.structure.folding.prediction import PAST_TRAINED_NOTE, fold

    folded = fold(model, task.sequence, passes=settings.passes, chunk_size=settings.chunk_size)
    label = "UNTRAINED TEST MODEL, not biology" if settings.is_random else settings.model.text
    remark = f"flamino ESMFold ({label}): {task.name}"
    if settings.note:
        remark += f"; {settings.note}"
    text = to_pdb(folded, remark=remark)
    if task.past_trained:  # a second REMARK line, before the atoms: viewers and parsers keep it
        text = f"REMARK {len(task.sequence):,} residues: {PAST_TRAINED_NOTE.upper()}\n" + text
        say(f"warning: {task.name}: {len(task.sequence):,} residues, {PAST_TRAINED_NOTE}")
    with written_atomically(out / task.file) as tmp:
        Path(tmp).write_text(text)
    return {"name": task.name, "length": len(task.sequence), "mean_plddt": round(100 * folded.mean_plddt, 2),
            "ptm": round(folded.ptm, 4), "pdb": task.file, "past_trained_length": row_flag(task)}


def write_table(path: Path, rows: list[dict], columns: list[str] | None = None) -> None:
    """``folds.csv``: ``rows`` (in input order) under ``columns`` (default ``COLUMNS``), written whole."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=columns or COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    with written_atomically(path) as tmp:
        Path(tmp).write_text(text.getvalue())


def known_config(model):
    """An ESMFold (v1) model's shape (``model``: a ``ModelId``) before its weights load: the test
    model's, a preset's, a folder's ``config.json``; None where it cannot be read (the loader then
    says why)."""
    from flamino_core.model.esmfold.config import FoldConfig
    from flamino_core.weights.esmfold_hub import FOLD_PRESETS

    if model.is_random and model.fold == "esmfold":
        return FoldConfig.tiny()
    if model.fold_preset in FOLD_PRESETS:
        return FOLD_PRESETS[model.fold_preset].expect()
    try:
        return FoldConfig.from_hf_config(json.loads((Path(model.text) / "config.json").read_text()),
                                         name=Path(model.text).name)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def run_length_limit(config, memory: tuple[int | None, str], chunk_size: int | None, stem_precision: str,
                     max_residues: int | None = None, platform: str | None = None) -> tuple[int, str, str]:
    """(the longest record a run folds here, where that comes from in words, this device's own
    limit in words where ``max_residues`` is lower, else ''): ``prediction.fold_length_limit`` for
    ``memory`` (``prediction.memory_room``: bytes, where), the one rule the plan of ``flamino
    fold``, each actor of ``flamino batch fold`` and the app's Structure page say."""
    from flamino_core.engine import hardware
    from flamino_core.structure.folding.prediction import fold_length_limit

    room, where = memory
    longest, said = fold_length_limit(config, room, where, chunk_size, stem_precision,
                                      platform or hardware.detect().platform)
    if max_residues is not None and max_residues < longest:
        return max_residues, "by --max-residues", f"this device: {longest:,} {said}"
    return longest, said, ""
