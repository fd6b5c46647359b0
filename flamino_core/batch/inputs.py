"""Stage 1 of a batch job: the input files read record by record and spooled into shards."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Callable, Iterator, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from flamino_core.atomic import written_atomically
from flamino_core.inputs.fasta import InputIssue, file_problem, iter_records
from flamino_core.batch.job import WORK_DIR, BatchError, Job, spool_path

FASTA_SUFFIXES = (".fa", ".fasta", ".faa", ".fas", ".fna", ".pep")


@dataclasses.dataclass(frozen=True)
class InputRecord:
    """One input record after validation; ``error`` set means it is refused."""

    index: int  # 0-based position over all input files, refused records included
    file: int  # position of its file in the job's input list
    id: str | None
    description: str
    sequence: str | None
    warnings: str  # "; "-joined validator warnings
    error: str | None


@dataclasses.dataclass(frozen=True)
class FileIssue:
    """A problem with a whole input file, at the validator's level.

    An error (not FASTA, unreadable, sequence text before the first header) is a failure of
    the job; a warning (prose before the first header, read as Latin-1) is reported only.
    """

    file: int
    message: str
    level: str = "error"


def fasta_inputs(paths: Sequence[str | os.PathLike]) -> list[Path]:
    """The FASTA files named by ``paths``: files as given, folders expanded to their FASTA files.

    Raises:
      BatchError: a path does not exist, or a folder holds no FASTA file.
    """
    files: list[Path] = []
    for given in paths:
        path = Path(given)
        if str(given) == "-":
            raise BatchError("batch jobs read files, not standard input (a rerun must read the same input)")
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and _is_fasta_name(p.name))
            if not found:
                raise BatchError(f"{path}: no FASTA file ({', '.join(FASTA_SUFFIXES)}, optionally .gz) in this folder")
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise BatchError(f"input {given}: no such file or folder")
    return files


def _is_fasta_name(name: str) -> bool:
    return name.lower().removesuffix(".gz").endswith(FASTA_SUFFIXES)


def read_records(
    paths: Sequence[str | os.PathLike], issues: list[FileIssue] | None = None
) -> Iterator[InputRecord]:
    """Validated records of ``paths`` in order, streaming; bad records come back with ``error``.

    Every file goes through ``fasta.iter_records``, the validator of every other input path,
    with one set of ids over all files (duplicates get ``_2``, ``_3`` suffixes) and records
    numbered over all files (unnamed ones are called ``record_<n>``). A file without any
    '>' header is not read as one bare sequence, as a paste is. Problems with a whole file
    go to ``issues`` (errors and warnings, as the validator rates them).
    """
    issues = [] if issues is None else issues
    used: set[str] = set()
    index = 0
    for file_number, path in enumerate(paths):
        try:
            handle = open(path, "rb")
        except OSError as err:
            issues.append(FileIssue(file_number, file_problem(path, err)))
            continue
        with handle:
            for item in iter_records(handle, bare_sequence=False, used_ids=used, first_number=index + 1):
                if isinstance(item, InputIssue):
                    issues.append(FileIssue(file_number, f"{path}: {item.message}", item.level))
                    continue
                sequence = item.record.sequence if item.record else None
                error = "; ".join(item.errors) or None
                warnings = "; ".join(item.warnings)
                yield InputRecord(index, file_number, item.id, item.description, sequence, warnings, error)
                index += 1


SPOOL_SCHEMA = pa.schema([
    ("index", pa.int64()), ("file", pa.int32()), ("id", pa.string()), ("description", pa.string()),
    ("sequence", pa.string()), ("warnings", pa.string()), ("error", pa.string()),
    ("out_file", pa.string()),  # a fold job's file name for the record (``fold_run.file_name``); else null
])


def spool_shards(
    job: Job, files: Sequence[Path], progress: Callable[[int], None] | None = None
) -> tuple[list[int], list[int], list[FileIssue]]:
    """Stage 1: read and validate every record, write shard inputs under ``OUT/.work/``.

    Returns (records per shard, residues per shard, file issues).
    """
    (Path(job.out_dir) / WORK_DIR).mkdir(parents=True, exist_ok=True)
    records_per_shard: list[int] = []
    residues_per_shard: list[int] = []
    issues: list[FileIssue] = []
    buffer: list[InputRecord] = []
    names: list[str | None] = []
    # A fold job names each valid record's file here, over the whole input in order, as `flamino
    # fold` names them (``fold_run.file_name``): the same names whichever actor folds a shard.
    used: set[str] | None = set() if job.command == "fold" else None

    def flush() -> None:
        shard = len(records_per_shard)
        columns = {name: [getattr(r, name) for r in buffer] for name in SPOOL_SCHEMA.names if name != "out_file"}
        columns["out_file"] = list(names)
        with written_atomically(spool_path(job.out_dir, shard)) as tmp:
            pq.write_table(pa.table(columns, schema=SPOOL_SCHEMA), tmp)
        records_per_shard.append(len(buffer))
        residues_per_shard.append(sum(len(r.sequence or "") for r in buffer))
        buffer.clear()
        names.clear()

    for count, record in enumerate(read_records(files, issues), 1):
        buffer.append(record)
        names.append(_fold_file(record, used))
        if len(buffer) == job.shard_size:
            flush()
        if progress and count % 100_000 == 0:
            progress(count)
    if buffer:
        flush()
    return records_per_shard, residues_per_shard, issues


def _fold_file(record: InputRecord, used: set[str] | None) -> str | None:
    """A fold job's file name for a valid record (None: not a fold job, or a refused record)."""
    if used is None or record.error is not None:
        return None
    from flamino_core.structure.folding.fold_run import file_name

    return file_name(record.id, used)
