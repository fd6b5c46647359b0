"""``flamino batch``: embeddings and scores for whole proteomes on Ray, resumable.

A job runs in two stages.

1. *Read* (driver, one pass, streaming): the FASTA files are read record by record, each
   record is checked by the same validator as everywhere else (``fasta.parse_fasta_text`` on
   that record's text), ids are made unique over the whole input, and the records are cut
   into shards of ``shard_size`` consecutive records. Shard k holds input records
   ``[k * shard_size, (k + 1) * shard_size)`` in input order, valid or not, so the cut never
   depends on the machine or the model. Each shard is spooled to ``OUT/.work/`` as a small
   Parquet file; only one shard is ever in memory.
2. *Compute* (Ray Data): the pending shard numbers become a dataset whose ``map_batches``
   runs on a pool of actors. Each actor loads the model once and turns a shard number into
   ``OUT/shard-XXXXX.parquet``: one row per valid record, in input order, written to a
   temporary name and renamed, so a shard file that exists is complete. The shard's
   failures travel in that file's footer, so rows and failures appear together or not at all.

A rerun with the same manifest (inputs, model, options, shard size) skips every complete
shard; a rerun with different ones is refused unless ``overwrite``. Results depend only on
the record, never on its batch (see ``engine``), so which actor computed a shard and how
many actors there were does not change the numbers.
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
import warnings
import zlib
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence, TextIO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .fasta import parse_fasta_text, unique_id

COMMANDS = ("embed", "score")
EMBED_PARTS = ("mean", "per_tok", "logits")
SCORE_PARTS = ("mean",)
DEFAULT_SHARD_SIZE = 1000
# A worker computes a shard in chunks of about this many residues, each written as one Parquet
# row group, so per-residue outputs of a large shard never sit in memory together.
CHUNK_RESIDUES = 65536
SYSTEMATIC_FAILURES = 8  # this many sequences of a chunk all failing alone stops the job
CAREFUL_AFTER = 2  # unfinished attempts at a shard before it is computed one record at a time
MANIFEST = "manifest.json"
FAILURES = "failures.jsonl"
WORK_DIR = ".work"
FORMAT_VERSION = 1
META_KEY = b"flamino_batch"
LOCAL_OBJECT_STORE_BYTES = 500 * 1024**2
FASTA_SUFFIXES = (".fa", ".fasta", ".faa", ".fas", ".fna", ".pep")
_PREAMBLE_LINES_KEPT = 50  # lines before a file's first '>' kept to say what the file is


class BatchError(ValueError):
    """A job that cannot start or continue; the message says why and what to do."""


# --- reading: one record at a time ---------------------------------------------------------
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
    """A problem with a whole input file (no records could be read from it)."""

    file: int
    message: str


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


def open_fasta(path: str | os.PathLike) -> TextIO:
    """A text handle on a plain or gzipped FASTA file (recognised by its first bytes).

    Invalid UTF-8 becomes U+FFFD, which the validator then reports at its position.
    """
    with open(path, "rb") as probe:
        gzipped = probe.read(2) == b"\x1f\x8b"
    raw = gzip.open(path, "rb") if gzipped else open(path, "rb")
    head = raw.peek(4096)[:4096]
    if b"\x00" in head:
        raw.close()
        raise BatchError(f"{path}: this is a binary or UTF-16 file, not FASTA text; save it as plain (UTF-8) FASTA")
    return io.TextIOWrapper(raw, encoding="utf-8-sig", errors="replace")


def _record_texts(handle: TextIO) -> Iterator[tuple[str | None, str]]:
    """(header line or None for the preamble, text) for each record, read line by line.

    Records start at lines whose first non-blank character is '>', as in ``fasta``.
    The preamble (text before the first header) is yielded once, cut to its first lines.
    """
    header: str | None = None
    lines: list[str] = []
    preamble = True
    for line in handle:
        if line.lstrip().startswith(">"):
            if preamble:
                if any(part.strip() for part in lines):
                    yield None, "".join(lines)
                preamble = False
            else:
                yield header, "".join(lines)
            header, lines = line, [line]
        elif not preamble or len(lines) < _PREAMBLE_LINES_KEPT:
            lines.append(line)
    if preamble:
        if any(part.strip() for part in lines):
            yield None, "".join(lines)
    else:
        yield header, "".join(lines)


def read_records(
    paths: Sequence[str | os.PathLike], issues: list[FileIssue] | None = None
) -> Iterator[InputRecord]:
    """Validated records of ``paths`` in order, streaming; bad records come back with ``error``.

    Each record's text goes through ``fasta.parse_fasta_text`` on its own, so every rule of
    the one validator applies; what needs the whole input is done here the way the validator
    does it for one file: duplicate ids get ``_2``, ``_3`` suffixes, unnamed records are
    called ``record_<n>`` with n counted over all inputs. Problems with a whole file go to
    ``issues``.
    """
    used: set[str] = set()
    index = 0
    for file_number, path in enumerate(paths):
        try:
            handle = open_fasta(path)
        except BatchError as err:
            if issues is not None:
                issues.append(FileIssue(file_number, str(err)))
            continue
        except OSError as err:
            if issues is not None:
                issues.append(FileIssue(file_number, f"{path}: cannot read ({err.strerror or err})"))
            continue
        with handle:
            saw_header, first = False, index
            texts = _record_texts(handle)
            while True:
                try:
                    header, text = next(texts)
                except StopIteration:
                    break
                except (OSError, EOFError, zlib.error) as err:  # a damaged or truncated gzip file
                    if issues is not None:
                        issues.append(FileIssue(file_number, f"{path}: unreadable after {index - first} record(s) "
                                                             f"({err}); those were read"))
                    break
                if header is None:
                    if issues is not None:
                        issues.append(FileIssue(file_number, _preamble_message(path, text)))
                    continue
                yield _validate(text, header, index, file_number, used, first_in_file=not saw_header)
                saw_header = True
                index += 1
            if not saw_header and issues is not None and not any(i.file == file_number for i in issues):
                issues.append(FileIssue(file_number, f"{path}: no sequence found"))


def _preamble_message(path, text: str) -> str:
    parsed = parse_fasta_text(text)  # says what a foreign format is, if it is one
    whole_file = [issue.message for issue in parsed.errors if issue.record is None]
    if whole_file and "no sequence" not in whole_file[0]:
        return f"{path}: {whole_file[0]}"
    return f"{path}: text before the first '>' header was not analysed (no record is read before a '>' line)"


def _parse_alone(text: str, first_in_file: bool):
    """``parse_fasta_text`` on one record's text, judged as it is inside its file.

    The validator recognises foreign formats (e.g. PIR's ``>P1;``) by the first line of the
    input; that first line is the file's, so a later record is parsed behind a placeholder.
    """
    parsed = parse_fasta_text(text)
    if first_in_file or not any(issue.record is None for issue in parsed.errors):
        return parsed
    behind = parse_fasta_text(f">{_PLACEHOLDER}\nA\n{text}")
    return dataclasses.replace(
        behind,
        records=behind.records[1:],
        warnings=tuple(i for i in behind.warnings if i.record != _PLACEHOLDER),
        errors=tuple(i for i in behind.errors if i.record != _PLACEHOLDER),
    )


_PLACEHOLDER = "flamino-batch-placeholder-0f5c2a"


def _validate(text: str, header: str, index: int, file_number: int, used: set[str], first_in_file: bool) -> InputRecord:
    parsed = _parse_alone(text, first_in_file)
    unnamed = not header.strip()[1:].split(None, 1)
    notes = [issue.message for issue in parsed.warnings]
    if parsed.records:
        (record,) = parsed.records
        record_id, description, sequence, error = record.id, record.description, record.sequence, None
    else:
        # A refused record still takes its id, as it does when a whole file is validated.
        header_only = parse_fasta_text(header.strip() + "\nA").records
        record_id = header_only[0].id if header_only else None
        description = header_only[0].description if header_only else ""
        sequence, error = None, "; ".join(issue.message for issue in parsed.errors) or "no sequence found"
        notes = []
    if unnamed and record_id is not None:
        # The single-record text always numbers its unnamed record 1; use the input position.
        notes = [re.sub(r"'record_\d+'", f"'record_{index + 1}'", note) for note in notes]
        record_id = f"record_{index + 1}"
    if record_id is not None:
        unique = unique_id(record_id, used)  # the rule parse_fasta_text applies within a file
        if unique != record_id:
            notes.append(f"the id '{record_id}' was already used; renamed this record '{unique}'")
            record_id = unique
    return InputRecord(index, file_number, record_id, description, sequence, "; ".join(notes), error)


# --- the job: identity, manifest, spool ------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Job:
    """Everything a worker needs to compute a shard; its ``key`` names the job's results."""

    command: str
    out_dir: str
    model: str
    include: tuple[str, ...]
    long: str
    strategy: str | None
    shard_size: int
    token_budget: int
    key: str = ""
    files: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Job":
        data = dict(data)
        data["include"], data["files"] = tuple(data["include"]), tuple(data["files"])
        return cls(**data)


def shard_path(out_dir: str | os.PathLike, shard: int) -> Path:
    return Path(out_dir) / f"shard-{shard:05d}.parquet"


def spool_path(out_dir: str | os.PathLike, shard: int) -> Path:
    return Path(out_dir) / WORK_DIR / f"input-{shard:05d}.parquet"


def _file_fingerprint(path: Path, previous: dict | None = None) -> dict:
    """Size, mtime and SHA-256 of an input file; the hash is reused while size and mtime match."""
    stat = path.stat()
    entry = {"path": str(path), "abs_path": str(path.absolute()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    if previous and previous.get("size") == stat.st_size and previous.get("mtime_ns") == stat.st_mtime_ns:
        entry["sha256"] = previous["sha256"]
        return entry
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    entry["sha256"] = digest.hexdigest()
    return entry


def _identity(job: Job, inputs: list[dict], model_info: dict) -> dict:
    """What must match for a rerun to continue a job (not actors or batching: results don't depend on them)."""
    return {
        "format": FORMAT_VERSION,
        "command": job.command,
        "model": job.model,
        "model_config": model_info,
        "options": {"include": list(job.include), "long": job.long, "strategy": job.strategy},
        "shard_size": job.shard_size,
        "inputs": [{"path": i["abs_path"], "size": i["size"], "sha256": i["sha256"]} for i in inputs],
    }


def _identity_differences(old: dict, new: dict) -> list[str]:
    out = []
    for key in ("format", "command", "model", "model_config", "options", "shard_size"):
        if old.get(key) != new.get(key):
            out.append(f"{key}: {json.dumps(old.get(key))} then, {json.dumps(new.get(key))} now")
    old_inputs, new_inputs = old.get("inputs", []), new.get("inputs", [])
    if [i["path"] for i in old_inputs] != [i["path"] for i in new_inputs]:
        out.append("input files: " + ", ".join(i["path"] for i in old_inputs) + " then, "
                   + ", ".join(i["path"] for i in new_inputs) + " now")
    else:
        out += [f"input {n['path']} has changed since" for o, n in zip(old_inputs, new_inputs) if o != n]
    return out


def _write_json(path: Path, data) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex}")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


def _write_table_atomically(table: pa.Table, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex}")
    pq.write_table(table, tmp)
    os.replace(tmp, path)


SPOOL_SCHEMA = pa.schema([
    ("index", pa.int64()), ("file", pa.int32()), ("id", pa.string()), ("description", pa.string()),
    ("sequence", pa.string()), ("warnings", pa.string()), ("error", pa.string()),
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

    def flush() -> None:
        shard = len(records_per_shard)
        columns = {name: [getattr(r, name) for r in buffer] for name in SPOOL_SCHEMA.names}
        _write_table_atomically(pa.table(columns, schema=SPOOL_SCHEMA), spool_path(job.out_dir, shard))
        records_per_shard.append(len(buffer))
        residues_per_shard.append(sum(len(r.sequence or "") for r in buffer))
        buffer.clear()

    for count, record in enumerate(read_records(files, issues), 1):
        buffer.append(record)
        if len(buffer) == job.shard_size:
            flush()
        if progress and count % 100_000 == 0:
            progress(count)
    if buffer:
        flush()
    return records_per_shard, residues_per_shard, issues


# --- the worker: one shard in, one Parquet file out ------------------------------------------
def _fixed_rows(rows: np.ndarray) -> pa.Array:
    """(N, W) floats as N fixed-size lists."""
    rows = np.ascontiguousarray(rows, dtype=np.float32)
    return pa.FixedSizeListArray.from_arrays(pa.array(rows.reshape(-1)), rows.shape[1])


def _nested_rows(arrays: list[np.ndarray], width: int) -> pa.Array:
    """Per-record (L_i, W) arrays as lists of fixed-size lists, without a Python loop per residue."""
    lengths = np.array([len(a) for a in arrays], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    flat = np.concatenate(arrays).reshape(-1, width) if arrays else np.zeros((0, width), np.float32)
    return pa.ListArray.from_arrays(pa.array(offsets), _fixed_rows(flat))


def output_schema(job: Job, embed_dim: int, vocab: int) -> pa.Schema:
    """Columns of a shard file for ``job`` and a model of width ``embed_dim``."""
    fields = [
        ("index", pa.int64()), ("file", pa.string()), ("id", pa.string()), ("description", pa.string()),
        ("seq_sha256", pa.string()), ("length", pa.int32()), ("warnings", pa.string()),
    ]
    if "mean" in job.include:
        fields.append(("mean", pa.list_(pa.float32(), embed_dim)))
    if "per_tok" in job.include:
        fields.append(("per_tok", pa.list_(pa.list_(pa.float32(), embed_dim))))
    if "logits" in job.include:
        fields.append(("logits", pa.list_(pa.list_(pa.float32(), vocab))))
    if job.command == "score":
        if job.strategy == "pppl":
            fields.append(("pppl", pa.float64()))
        else:
            fields.append(("scores", pa.list_(pa.list_(pa.float32(), 20))))
    return pa.schema(fields)


def _compute(engine, job: Job, sequences: list[str]) -> list[dict]:
    """Outputs for a chunk of sequences (one dict per sequence); raises on any failure."""
    from . import scores

    need_logits = "logits" in job.include or (job.command == "score" and job.strategy == "wt-marginals")
    need_forward = bool({"mean", "per_tok"} & set(job.include)) or need_logits
    outputs: list[dict] = [{} for _ in sequences]
    if need_forward:
        results = engine.run(sequences, repr_layers=(-1,), logits=need_logits, long=job.long)
        for out, res in zip(outputs, results):
            if "mean" in job.include:
                out["mean"] = res.mean
            if "per_tok" in job.include:
                out["per_tok"] = res.final
            if "logits" in job.include:
                out["logits"] = res.logits
            if job.command == "score" and job.strategy == "wt-marginals":
                # scores.wt_marginals for a whole batch at once: the same float64 log-softmax.
                log_probs = scores.log_softmax(res.logits.astype(np.float64)).astype(np.float32)
                out["scores"] = scores.substitution_scores(log_probs, res.sequence)
    if job.command == "score" and job.strategy != "wt-marginals":
        for out, seq in zip(outputs, sequences):
            log_probs = engine.masked_log_probs(seq)
            if job.strategy == "pppl":
                out["pppl"] = scores.pseudo_perplexity(log_probs, seq)
            else:
                out["scores"] = scores.substitution_scores(log_probs, seq)
    return outputs


def _compute_isolating_failures(engine, job: Job, sequences: list[str]) -> tuple[list[dict | None], list[str | None]]:
    """Like ``_compute``, but a sequence that fails fails alone: (outputs, reasons) per sequence.

    If every one of many sequences fails on its own, the fault is not theirs (a bug, a broken
    device): that is raised, so the job stops instead of writing failures for everything.
    """
    try:
        return _compute(engine, job, sequences), [None] * len(sequences)
    except Exception as err:
        if len(sequences) == 1:
            return [None], [_failure_reason(err)]
    outputs: list[dict | None] = []
    reasons: list[str | None] = []
    for seq in sequences:
        try:
            outputs.append(_compute(engine, job, [seq])[0])
            reasons.append(None)
        except Exception as err:
            outputs.append(None)
            reasons.append(_failure_reason(err))
            last_error = err
    if len(sequences) >= SYSTEMATIC_FAILURES and all(reason is not None for reason in reasons):
        raise last_error
    return outputs, reasons


def _failure_reason(err: Exception) -> str:
    return f"the model failed on this sequence ({type(err).__name__}: {str(err)[:300]})"


def _chunk_table(schema: pa.Schema, job: Job, records: list[dict], outputs: list[dict], width: dict) -> pa.Table:
    columns = {
        "index": pa.array([r["index"] for r in records], pa.int64()),
        "file": pa.array([job.files[r["file"]] for r in records], pa.string()),
        "id": pa.array([r["id"] for r in records], pa.string()),
        "description": pa.array([r["description"] for r in records], pa.string()),
        "seq_sha256": pa.array([hashlib.sha256(r["sequence"].encode()).hexdigest() for r in records]),
        "length": pa.array([len(r["sequence"]) for r in records], pa.int32()),
        "warnings": pa.array([r["warnings"] for r in records], pa.string()),
    }
    for name in ("mean", "per_tok", "logits", "scores", "pppl"):
        if name not in schema.names:
            continue
        values = [o[name] for o in outputs]
        if name == "mean":
            columns[name] = _fixed_rows(np.stack(values) if values else np.zeros((0, width[name]), np.float32))
        elif name == "pppl":
            columns[name] = pa.array(values, pa.float64())
        else:
            columns[name] = _nested_rows(values, width[name])
    return pa.table(columns, schema=schema)


def shard_info(path: Path, key: str) -> dict | None:
    """The footer summary of a finished shard of job ``key``; None if absent or from another job."""
    try:
        metadata = pq.read_metadata(path).metadata or {}
        info = json.loads(metadata[META_KEY])
    except (OSError, KeyError, ValueError, pa.ArrowInvalid):
        return None
    return info if info.get("key") == key else None


def process_shard(engine, job: Job, shard: int) -> dict:
    """Compute shard ``shard`` of ``job`` into its Parquet file (skipped if already complete).

    Returns the shard summary (rows, residues, failures, seconds) stored in the file footer.
    A shard whose worker process died ``CAREFUL_AFTER`` times (killed, out of memory) is
    computed one record at a time, and a record in flight at two such deaths is failed alone.
    """
    out = shard_path(job.out_dir, shard)
    done = shard_info(out, job.key)
    if done is not None:  # a retried task whose first attempt finished
        return done
    start = time.perf_counter()
    spooled = pq.read_table(spool_path(job.out_dir, shard)).to_pylist()
    failures = [_failure(job, r, r["error"]) for r in spooled if r["error"] is not None]
    valid = [r for r in spooled if r["error"] is None]
    attempts = _AttemptLog(Path(job.out_dir) / WORK_DIR / f"attempts-{shard:05d}.jsonl")
    careful = attempts.begin() >= CAREFUL_AFTER
    config = engine.config
    width = {"mean": config.embed_dim, "per_tok": config.embed_dim, "logits": config.vocab_size, "scores": 20}
    schema = output_schema(job, config.embed_dim, config.vocab_size)
    rows = residues = 0
    tmp = out.with_name(f".{out.name}.tmp-{uuid.uuid4().hex}")
    try:
        with pq.ParquetWriter(tmp, schema) as writer:
            for chunk in _chunks(valid, 1 if careful else CHUNK_RESIDUES):
                if careful:
                    (record,) = chunk
                    if attempts.deaths_during(record["index"]) >= 2:
                        why = "the worker process died twice while computing this record (out of memory?)"
                        failures.append(_failure(job, record, why))
                        continue
                    attempts.note(record["index"])
                outputs, reasons = _compute_isolating_failures(engine, job, [r["sequence"] for r in chunk])
                kept = [(r, o) for r, o in zip(chunk, outputs) if o is not None]
                failures += [_failure(job, r, why) for r, why in zip(chunk, reasons) if why is not None]
                if kept:
                    writer.write_table(_chunk_table(schema, job, [k[0] for k in kept], [k[1] for k in kept], width))
                rows += len(kept)
                residues += sum(len(k[0]["sequence"]) for k in kept)
            failures.sort(key=lambda f: f["index"])
            info = {"key": job.key, "shard": shard, "records": len(spooled), "rows": rows, "residues": residues,
                    "failures": failures, "seconds": round(time.perf_counter() - start, 3)}
            writer.add_key_value_metadata({META_KEY: json.dumps(info).encode()})
        with open(tmp, "rb") as handle:  # on disk before it gets its final name
            os.fsync(handle.fileno())
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return info


def _failure(job: Job, record: dict, reason: str) -> dict:
    """A line of failures.jsonl."""
    return {"index": record["index"], "file": job.files[record["file"]], "id": record["id"], "reason": reason}


class _AttemptLog:
    """Which attempts at a shard began, and which records careful attempts were computing.

    Lines are appended before the work they announce, so after a worker dies the log says
    how often the shard was tried and what was in flight.
    """

    def __init__(self, path: Path):
        self.path = path
        self.entries = [json.loads(line) for line in path.read_text().splitlines() if line] if path.exists() else []

    def _append(self, entry: dict) -> None:
        with open(self.path, "a") as handle:
            handle.write(json.dumps(entry) + "\n")

    def begin(self) -> int:
        """Note a new attempt; returns how many began before (none of which finished)."""
        before = sum(1 for e in self.entries if "attempt" in e)
        self._append({"attempt": before + 1, "pid": os.getpid()})
        return before

    def deaths_during(self, index: int) -> int:
        """How many earlier attempts died while computing record ``index`` (their last note)."""
        in_flight = []
        for entry in self.entries:
            if "attempt" in entry:
                in_flight.append(None)
            elif in_flight:
                in_flight[-1] = entry["record"]
        return in_flight.count(index)

    def note(self, index: int) -> None:
        self._append({"record": index})


def _chunks(records: list[dict], max_residues: int) -> Iterator[list[dict]]:
    chunk: list[dict] = []
    residues = 0
    for record in records:
        if chunk and residues + len(record["sequence"]) > max_residues:
            yield chunk
            chunk, residues = [], 0
        chunk.append(record)
        residues += len(record["sequence"])
    if chunk:
        yield chunk


class ShardWorker:
    """Ray Data actor: loads the model once, then turns shard numbers into shard files."""

    job: dict = {}  # set on the per-job subclass made by ``_worker_class``
    cores = 0  # CPU actors: cores to pin this actor to (0: GPU actor, no pinning)

    def __init__(self) -> None:
        # Before JAX starts its CPU backend: its thread pool is sized to the cores allowed here.
        self._cores_claim = _pin_to_free_cores(self.cores) if self.cores else None
        from .engine import Engine, enable_compilation_cache
        from .weights import load_weights

        enable_compilation_cache()
        self._job = Job.from_dict(self.job)
        self._engine = Engine(load_weights(self._job.model), token_budget=self._job.token_budget)

    def __call__(self, batch: dict) -> dict:
        infos = [process_shard(self._engine, self._job, int(shard)) for shard in batch["shard"]]
        return {
            "shard": np.array([i["shard"] for i in infos], np.int64),
            "rows": np.array([i["rows"] for i in infos], np.int64),
            "residues": np.array([i["residues"] for i in infos], np.int64),
            "failures": np.array([len(i["failures"]) for i in infos], np.int64),
        }


def _worker_class(job: Job, cores: int) -> type:
    # The job travels inside the class rather than as constructor arguments: Ray keeps those in
    # the object store and warns that a restarted actor could lose them.
    return type("ShardWorker", (ShardWorker,), {"job": job.to_dict(), "cores": cores, "__module__": __name__})


def _pin_to_free_cores(count: int, claims_dir: str | os.PathLike | None = None):
    """Pin this process to ``count`` cores no other flamino actor on this machine holds.

    XLA's CPU backend runs a thread pool as wide as the cores a process may use and ignores
    the old ``--xla_cpu_multi_thread_eigen`` flag, so without this every actor would spread
    over every core. Claims are ``flock``s on one file per core, held while the actor lives
    and released by the kernel when it dies. Returns the open claim files (None: no free
    cores, the process stays unpinned).
    """
    cores = sorted(os.sched_getaffinity(0))
    claims_dir = Path(claims_dir or Path(tempfile.gettempdir()) / "flamino-batch-cores")
    claims_dir.mkdir(exist_ok=True)
    for first in range(0, len(cores) - count + 1, count):
        group = cores[first:first + count]
        held = []
        for core in group:
            handle = open(claims_dir / f"core-{core}.lock", "w")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                break
            held.append(handle)
        if len(held) == count:
            for thread in os.listdir("/proc/self/task"):  # every thread; later ones inherit it
                try:
                    os.sched_setaffinity(int(thread), group)
                except OSError:  # the thread has ended
                    pass
            return held
        for handle in held:
            handle.close()
    return None


# --- the driver --------------------------------------------------------------------------------
@dataclasses.dataclass
class BatchSummary:
    """What a job produced, over all runs, and what this run did."""

    out_dir: str
    records: int
    rows: int
    residues: int
    failures: int
    shards: int
    shards_skipped: int  # already complete when this run started
    shards_run: int
    seconds: float  # compute stage of this run
    residues_run: int  # residues computed by this run
    actors: int

    @property
    def residues_per_s(self) -> float:
        return self.residues_run / self.seconds if self.seconds > 0 else 0.0


class Progress:
    """Shards, sequences, residues/s and an ETA on stderr (in place on a terminal)."""

    def __init__(self, total_residues: int, total_shards: int, stream: TextIO | None = None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.total_residues, self.total_shards = total_residues, total_shards
        self.start = time.monotonic()
        self.last_print = -float("inf")
        self.shards = self.rows = self.residues = 0

    def update(self, rows: int, residues: int) -> None:
        self.shards += 1
        self.rows += rows
        self.residues += residues
        now = time.monotonic()
        finished = self.shards >= self.total_shards
        if self.tty or finished or now - self.last_print >= 30:
            self.last_print = now
            if self.tty:  # rewritten in place; the padding wipes a longer previous line
                print("\r" + self.line(now) + "   ", end="\n" if finished else "", file=self.stream, flush=True)
            else:
                print(self.line(now), file=self.stream, flush=True)

    def line(self, now: float) -> str:
        elapsed = now - self.start
        rate = self.residues / elapsed if elapsed > 0 else 0.0
        left = self.total_residues - self.residues
        if left <= 0:
            eta = "done"
        elif self.shards >= 2 and self.residues >= 0.01 * self.total_residues:  # the first includes compiling
            eta = _duration(left / rate)
        else:
            eta = "?"
        return (f"batch: {self.shards}/{self.total_shards} shards, {self.rows:,} sequences, "
                f"{rate:,.0f} residues/s, ETA {eta}")


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class _DirectoryLock:
    """One job per output folder at a time (an advisory lock, released when the process ends)."""

    def __init__(self, out_dir: Path):
        self.path = out_dir / ".lock"

    def __enter__(self):
        self.handle = open(self.path, "w")
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.handle.close()
            raise BatchError(
                f"another flamino batch job is writing to {self.path.parent}; wait for it or stop it"
            ) from None
        return self

    def __exit__(self, *exc) -> None:
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()


def _say(message: str) -> None:
    print(f"flamino: {message}", file=sys.stderr, flush=True)


def run_batch(
    command: str,
    inputs: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    model: str | None = None,
    *,
    include: Iterable[str] = ("mean",),
    long: str = "window",
    strategy: str | None = None,
    shard_size: int = DEFAULT_SHARD_SIZE,
    token_budget: int | None = None,
    ray_address: str = "local",
    actors: int | None = None,
    cpus_per_actor: float = 1,
    gpus_per_actor: float | None = None,
    overwrite: bool = False,
    say: Callable[[str], None] = _say,
) -> BatchSummary:
    """Run (or continue) a batch job; see the module docstring for what is written where.

    Args:
      command: ``embed`` or ``score``.
      inputs: FASTA files (plain or gzip) or folders of them, read in the order given.
      out_dir: output folder; created if needed; a rerun with the same job continues it.
      model: any identifier ``load_weights`` accepts (each actor loads it once).
      include: ``mean``, ``per_tok``, ``logits`` (``score``: ``mean`` only).
      long: policy for sequences over 1022 residues (see ``Engine.run``).
      strategy: for ``score``: ``masked-marginals``, ``wt-marginals`` or ``pppl``.
      shard_size: records per shard (the unit of work and of resumption).
      token_budget: tokens per forward pass (default: the engine's).
      ray_address: ``local`` starts Ray in this process; ``auto`` or an address joins a cluster.
      actors: number of model actors (default: one per GPU, else one per ``cpus_per_actor`` CPUs).
      cpus_per_actor: CPUs reserved per actor (its XLA threads on CPU).
      gpus_per_actor: GPUs per actor (default: 1 if the cluster has GPUs, else 0).
      overwrite: delete a different job's results in ``out_dir`` instead of refusing.

    Raises:
      BatchError: unusable inputs, options or model, or ``out_dir`` holds another job.
    """
    from .engine import DEFAULT_TOKEN_BUDGET, LONG_POLICIES
    from .scores import STRATEGIES
    from .weights import ModelError, default_model, load_weights

    if command not in COMMANDS:
        raise BatchError(f"unknown batch command {command!r}; choose {' or '.join(COMMANDS)}")
    include = tuple(dict.fromkeys(include))
    allowed = EMBED_PARTS if command == "embed" else SCORE_PARTS
    unknown = [part for part in include if part not in allowed]
    if unknown:
        raise BatchError(f"--include: {', '.join(unknown)} not available for batch {command}; "
                         f"choose from {', '.join(allowed)}")
    if command == "embed" and not include:
        raise BatchError("--include: nothing to compute; choose from " + ", ".join(EMBED_PARTS))
    if long not in LONG_POLICIES:
        raise BatchError(f"--long must be one of {', '.join(LONG_POLICIES)}")
    if command == "score":
        strategy = strategy or STRATEGIES[0]
        if strategy not in STRATEGIES:
            raise BatchError(f"--strategy must be one of {', '.join(STRATEGIES)}")
    else:
        strategy = None
    if shard_size < 1:
        raise BatchError("--shard-size must be at least 1")
    if actors is not None and actors < 1:
        raise BatchError("--actors must be at least 1")
    files = fasta_inputs(inputs)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise BatchError(f"output {out} exists and is not a folder")
    try:
        weights = load_weights(model)  # fails early on a bad name, and fills the cache for the actors
    except ModelError as err:
        raise BatchError(str(err)) from None
    if weights.is_random:
        say("note: untrained test model (random weights): outputs are not biology")
    model_info = weights.config.to_dict()
    model_id = model or default_model()  # resolved here: actors on other nodes lack this environment
    del weights

    out.mkdir(parents=True, exist_ok=True)
    with _DirectoryLock(out):
        for stale in out.glob(".*.tmp-*"):  # left by a killed writer; never a finished file
            stale.unlink(missing_ok=True)
        manifest_path = out / MANIFEST
        old = json.loads(manifest_path.read_text()) if manifest_path.exists() else None
        previous_inputs = {i["abs_path"]: i for i in (old or {}).get("input_files", [])}
        fingerprints = [_file_fingerprint(f, previous_inputs.get(str(f.absolute()))) for f in files]
        job = Job(command, str(out.absolute()), model_id, include, long, strategy, shard_size,
                  token_budget or DEFAULT_TOKEN_BUDGET, files=tuple(str(f) for f in files))
        identity = _identity(job, fingerprints, model_info)
        job = dataclasses.replace(job, key=hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest())
        if old is not None and old.get("key") != job.key:
            if not overwrite:
                changes = _identity_differences(old.get("identity", {}), identity) or ["unreadable manifest"]
                raise BatchError(f"{out} holds the results of a different job ({'; '.join(changes)}); "
                                 "use another output folder, or --overwrite to replace them")
            _clear(out)
            old = None
        elif old is None and any(out.glob("shard-*.parquet")):
            if not overwrite:
                raise BatchError(f"{out} has shard files but no {MANIFEST}; use --overwrite to replace them")
            _clear(out)

        manifest = old or {"identity": identity, "key": job.key, "created": _now()}
        manifest.update(input_files=fingerprints, job=job.to_dict())
        shards = manifest.get("shards")
        pending = [] if shards is None else [
            k for k in range(len(shards["records"])) if shard_info(shard_path(out, k), job.key) is None
        ]
        if not manifest.get("input_complete") or any(not spool_path(out, k).exists() for k in pending):
            manifest["input_complete"] = False
            _write_json(manifest_path, manifest)
            say(f"reading {len(files)} input file(s)")
            records, residues, issues = spool_shards(job, files, progress=lambda n: say(f"read {n:,} records"))
            shards = {"records": records, "residues": residues}
            manifest.update(shards=shards, input_complete=True, records=sum(records),
                            file_issues=[{"file": files[i.file].as_posix(), "reason": i.message} for i in issues])
            for issue in issues:
                say(f"error: {issue.message}")
            _write_json(manifest_path, manifest)
            pending = [k for k in range(len(records)) if shard_info(shard_path(out, k), job.key) is None]

        n_shards = len(shards["records"])
        skipped = n_shards - len(pending)
        if skipped == n_shards:
            say(f"all {n_shards} shards were already done")
        elif skipped:
            say(f"{skipped} of {n_shards} shards already done; computing the other {len(pending)}")
        seconds, residues_run, n_actors = 0.0, 0, 0
        if pending:
            manifest["complete"] = False
            _write_json(manifest_path, manifest)
            seconds, residues_run, n_actors = _run_on_ray(
                job, pending, [shards["residues"][k] for k in pending], ray_address, actors, cpus_per_actor,
                gpus_per_actor, manifest, manifest_path, say,
            )
        return _finish(out, job, manifest, manifest_path, skipped, len(pending), seconds, residues_run, n_actors)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def _clear(out: Path) -> None:
    for path in list(out.glob("shard-*.parquet")) + [out / MANIFEST, out / FAILURES]:
        path.unlink(missing_ok=True)
    shutil.rmtree(out / WORK_DIR, ignore_errors=True)


def _run_on_ray(job, pending, pending_residues, address, actors, cpus_per_actor, gpus_per_actor,
                manifest, manifest_path, say) -> tuple[float, int, int]:
    import logging

    try:
        import ray
        import ray.data
    except ImportError:
        raise BatchError("flamino batch runs on Ray, which is not installed: pip install 'flamino[batch]'") from None

    started_here = False
    if not ray.is_initialized():
        common = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        with warnings.catch_warnings():
            # Ray starts its processes with fork + exec, which is safe next to JAX's threads.
            warnings.filterwarnings("ignore", message="os.fork", category=RuntimeWarning)
            if address in ("local", None):
                ray.init(num_cpus=len(os.sched_getaffinity(0)), object_store_memory=LOCAL_OBJECT_STORE_BYTES, **common)
            else:
                ray.init(address=address, **common)
        started_here = True
    try:
        resources = ray.cluster_resources()
        if gpus_per_actor is None:
            gpus_per_actor = 1.0 if resources.get("GPU", 0) >= 1 else 0.0
        if gpus_per_actor > 0:
            fit = int(resources.get("GPU", 0) // gpus_per_actor)
            if fit < 1:
                raise BatchError(f"the Ray cluster has no GPU for --gpus-per-actor {gpus_per_actor:g}")
        else:
            fit = int(resources.get("CPU", 1) // cpus_per_actor)
        n_actors = max(1, min(actors or fit, len(pending)))
        env = {}
        if 0 < gpus_per_actor < 1:  # several actors share a GPU: JAX must not take 75% each
            env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{0.75 * gpus_per_actor:.3f}"
        cores = 0 if gpus_per_actor else max(1, int(cpus_per_actor))
        device = f"{gpus_per_actor:g} GPU" if gpus_per_actor else f"{cpus_per_actor:g} CPU"
        say(f"{len(pending)} shards on {n_actors} actor(s), {device} each (Ray: {int(resources.get('CPU', 0))} CPUs, "
            f"{int(resources.get('GPU', 0))} GPUs)")

        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        ctx.max_consecutive_actor_init_deaths = 3
        logging.getLogger("ray.data").setLevel(logging.ERROR)
        dataset = ray.data.from_items([{"shard": k} for k in pending], override_num_blocks=len(pending))
        dataset = dataset.map_batches(
            _worker_class(job, cores),
            batch_size=1,
            compute=ray.data.ActorPoolStrategy(size=n_actors),
            num_cpus=cpus_per_actor,
            num_gpus=gpus_per_actor,
            runtime_env={"env_vars": env} if env else None,
        )  # Ray Data restarts a killed actor and retries its shard (see process_shard for repeats)
        progress = Progress(sum(pending_residues), len(pending))
        start = time.monotonic()
        last_save = start
        finished = set(manifest.get("finished_shards", []))
        for row in dataset.iter_rows():
            progress.update(int(row["rows"]), int(row["residues"]))
            finished.add(int(row["shard"]))
            if time.monotonic() - last_save > 10:  # the shard files are the truth; this is for people
                manifest["finished_shards"] = sorted(finished)
                _write_json(manifest_path, manifest)
                last_save = time.monotonic()
        return time.monotonic() - start, progress.residues, n_actors
    except BatchError:
        raise
    except Exception as err:  # Ray wraps worker errors in its own types; the first line says what it was
        first_line = next((line for line in str(err).splitlines() if line.strip()), "")
        raise BatchError(f"the job stopped ({type(err).__name__}: {first_line[:300]}); finished shards are "
                         "kept: rerun the same command to continue") from err
    finally:
        if started_here:
            ray.shutdown()


def _finish(out, job, manifest, manifest_path, skipped, run, seconds, residues_run, n_actors) -> BatchSummary:
    n_shards = len(manifest["shards"]["records"])
    infos = [shard_info(shard_path(out, k), job.key) for k in range(n_shards)]
    missing = [k for k, info in enumerate(infos) if info is None]
    if missing:
        raise BatchError(f"{len(missing)} shard(s) were not written (first: {missing[0]}); rerun the same command")
    failures = [{"index": None, "file": i["file"], "id": None, "reason": i["reason"]}
                for i in manifest.get("file_issues", [])]
    failures += [f for info in infos for f in info["failures"]]
    with open(out / f".{FAILURES}.tmp-{uuid.uuid4().hex}", "w") as handle:
        for failure in failures:
            handle.write(json.dumps(failure) + "\n")
        tmp = Path(handle.name)
    os.replace(tmp, out / FAILURES)
    summary = BatchSummary(
        out_dir=str(out), records=manifest["records"], rows=sum(i["rows"] for i in infos),
        residues=sum(i["residues"] for i in infos), failures=len(failures), shards=n_shards,
        shards_skipped=skipped, shards_run=run, seconds=seconds, residues_run=residues_run, actors=n_actors,
    )
    manifest.update(finished_shards=list(range(n_shards)), complete=True, finished=_now(),
                    summary=dataclasses.asdict(summary) | {"residues_per_s": summary.residues_per_s})
    runs = manifest.setdefault("runs", [])
    runs.append({"finished": _now(), "shards": run, "seconds": round(seconds, 3), "actors": n_actors,
                 "residues": residues_run})
    _write_json(manifest_path, manifest)
    shutil.rmtree(out / WORK_DIR, ignore_errors=True)
    return summary


# --- reading results ----------------------------------------------------------------------------
def read_results(out_dir: str | os.PathLike, columns: Sequence[str] | None = None) -> pa.Table:
    """All rows of a finished job, in input order (one Parquet file per shard, concatenated).

    Raises:
      BatchError: the folder holds no finished job.
    """
    out = Path(out_dir)
    try:
        manifest = json.loads((out / MANIFEST).read_text())
    except (OSError, ValueError):
        raise BatchError(f"{out}: no {MANIFEST}; is this a flamino batch output folder?") from None
    if not manifest.get("complete"):
        raise BatchError(f"{out}: the job is not finished; rerun its command to complete it")
    n_shards = len(manifest["shards"]["records"])
    tables = [pq.read_table(shard_path(out, k), columns=columns) for k in range(n_shards)]
    return pa.concat_tables(tables)


def to_numpy(column: pa.ChunkedArray | pa.Array) -> np.ndarray | list[np.ndarray]:
    """A result column as NumPy: ``mean`` as (N, D); per-residue columns as a list of (L, W) arrays."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_fixed_size_list(array.type):
        return array.flatten().to_numpy(zero_copy_only=False).reshape(len(array), array.type.list_size)
    if pa.types.is_list(array.type) and pa.types.is_fixed_size_list(array.type.value_type):
        width = array.type.value_type.list_size
        values = array.flatten().flatten().to_numpy(zero_copy_only=False).reshape(-1, width)
        offsets = array.offsets.to_numpy()
        offsets = offsets - offsets[0]
        return [values[offsets[i]:offsets[i + 1]] for i in range(len(array))]
    return array.to_numpy(zero_copy_only=False)


# --- command line -----------------------------------------------------------------------------
def add_batch_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``batch embed|score`` to a ``flamino`` subparsers object."""
    from .engine import DEFAULT_TOKEN_BUDGET, LONG_POLICIES
    from .scores import STRATEGIES

    batch = subparsers.add_parser(
        "batch", help="embed or score whole proteomes on Ray, resumably, into Parquet",
        description="Embed or score many sequences on Ray (local by default). Results: one Parquet file "
                    "per shard in OUT_DIR, a manifest, failures.jsonl. Rerun the same command to continue.",
    )
    kinds = batch.add_subparsers(dest="batch_command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("inputs", nargs="+", metavar="INPUT", help="FASTA files (plain or .gz) or folders of them")
    common.add_argument("-m", "--model",
                        help="model identifier, as for embed (default $FLAMINO_MODEL or esm2_t12_35M_UR50D)")
    common.add_argument("-o", "--output", required=True, metavar="OUT_DIR", help="output folder")
    common.add_argument("--ray-address", default="local",
                        help="'local' (default) starts Ray in this process; 'auto' or HOST:PORT joins a cluster")
    common.add_argument("--long", choices=LONG_POLICIES, default="window",
                        help="sequences over 1022 residues (default: overlapping windows)")
    common.add_argument("--shard-size", type=int, default=DEFAULT_SHARD_SIZE,
                        help=f"records per shard, the unit of work and of resumption (default {DEFAULT_SHARD_SIZE})")
    common.add_argument("--actors", type=int,
                        help="model actors (default: one per GPU, else one per --cpus-per-actor CPUs)")
    common.add_argument("--cpus-per-actor", type=float, default=1, help="CPUs per actor (default 1)")
    common.add_argument("--gpus-per-actor", type=float, help="GPUs per actor (default 1 when the cluster has GPUs)")
    common.add_argument("--token-budget", type=int, default=DEFAULT_TOKEN_BUDGET,
                        help=f"tokens per forward pass (default {DEFAULT_TOKEN_BUDGET})")
    common.add_argument("--overwrite", action="store_true", help="replace a different job's results in OUT_DIR")

    embed = kinds.add_parser("embed", parents=[common], help="embeddings to Parquet")
    embed.add_argument("--include", default="mean", help=f"comma-separated: {','.join(EMBED_PARTS)} (default mean)")
    score = kinds.add_parser("score", parents=[common], help="variant scores or pseudo-perplexity to Parquet")
    score.add_argument("--include", default="mean", help="'mean' (default) or 'none'")
    score.add_argument("--strategy", choices=STRATEGIES, default=STRATEGIES[0])
    batch.set_defaults(call=cmd_batch)
    return batch


def cmd_batch(args) -> int:
    """``flamino batch``: 0 when every record was computed, 2 if some failed (see failures.jsonl)."""
    from .cli import UserError

    include = [part.strip() for part in args.include.split(",") if part.strip() and part.strip() != "none"]
    try:
        summary = run_batch(
            args.batch_command, args.inputs, args.output, args.model, include=include, long=args.long,
            strategy=getattr(args, "strategy", None), shard_size=args.shard_size, token_budget=args.token_budget,
            ray_address=args.ray_address, actors=args.actors, cpus_per_actor=args.cpus_per_actor,
            gpus_per_actor=args.gpus_per_actor, overwrite=args.overwrite,
        )
    except BatchError as err:
        raise UserError(str(err)) from None
    print(f"wrote {summary.out_dir}: {summary.rows:,} sequences, {summary.residues:,} residues, "
          f"{summary.shards} shards ({summary.shards_skipped} already done)")
    if summary.shards_run:
        print(f"this run: {summary.shards_run} shards in {_duration(summary.seconds)} on {summary.actors} actor(s), "
              f"{summary.residues_per_s:,.0f} residues/s")
    if summary.failures:
        print(f"failed: {summary.failures:,} (reasons in {Path(summary.out_dir) / FAILURES})")
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m flamino_core.batch embed|score ...``: the same as ``flamino batch ...``."""
    from .cli import UserError

    parser = argparse.ArgumentParser(prog="flamino")
    add_batch_parser(parser.add_subparsers(dest="command", required=True))
    try:
        args = parser.parse_args(["batch", *(sys.argv[1:] if argv is None else argv)])
    except SystemExit as exit_:  # argparse already printed its usage message
        return 2 if exit_.code else 0
    try:
        return args.call(args)
    except UserError as err:
        _say(str(err))
        return 2
    except KeyboardInterrupt:
        _say("interrupted; rerun the same command to continue")
        return 130


if __name__ == "__main__":
    sys.exit(main())
