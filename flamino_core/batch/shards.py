"""Stage 2 of a batch job, one shard: its records computed in chunks, each failure kept to its record.

A worker turns a shard number into ``OUT/shard-XXXXX.parquet``: the spooled records of the
shard, computed ``CHUNK_RESIDUES`` at a time (each chunk one Parquet row group, so the
per-residue outputs of a large shard never sit in memory together), written under a
temporary name and renamed. A record the model fails on fails alone; a shard whose worker
process died ``CAREFUL_AFTER`` times is computed one record at a time.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Iterator

import pyarrow.parquet as pq

from flamino_core.variants import substitution_maps as scores
from flamino_core.atomic import open_own_file, written_atomically
from flamino_core.options import STRATEGIES
from flamino_core.batch.job import WORK_DIR, Job, shard_path, spool_path
from flamino_core.batch.results import META_KEY, chunk_table, output_schema, shard_info

CHUNK_RESIDUES = 65536
SYSTEMATIC_FAILURES = 8  # this many sequences of a chunk all failing alone stops the job
CAREFUL_AFTER = 2  # unfinished attempts at a shard before it is computed one record at a time


def _compute(engine, job: Job, sequences: list[str]) -> list[dict]:
    """Outputs for a chunk of sequences (one dict per sequence); raises on any failure.

    Masked strategies read and keep their passes in the result store (``passes``), so a record
    scored before by any command, page or job runs no masked pass, and a killed shard's finished
    positions are not masked again. Per-residue outputs of the unmasked pass stay out of the
    store: they are written to the shard and are too large to keep twice at proteome scale.
    """
    scoring = job.command == "score"
    need_logits = "logits" in job.include or (scoring and scores.uses_unmasked_logits(job.strategy))
    store = _store(job) if scoring else None
    need_forward = bool({"mean", "per_tok"} & set(job.include)) or need_logits
    outputs: list[dict] = [{} for _ in sequences]
    results = engine.run(sequences, repr_layers=(-1,), logits=need_logits, long=job.long) if need_forward else None
    for i, (out, seq) in enumerate(zip(outputs, sequences)):
        unmasked = results[i] if results else None
        if unmasked is not None:
            if "mean" in job.include:
                out["mean"] = unmasked.mean
            if "per_tok" in job.include:
                out["per_tok"] = unmasked.final
            if "logits" in job.include:
                out["logits"] = unmasked.logits
        if scoring:  # wt-marginals reuses the pass above; the masked strategies run their own
            scored = scores.substitution_map(engine, seq, job.strategy, long=job.long, store=store,
                                             unmasked=unmasked if need_logits else None)
            if STRATEGIES[job.strategy].per_record:
                out["pppl"] = scored.pppl
            else:
                out["scores"] = scored.substitutions
    return outputs


def _store(job: Job):
    from flamino_core.store.result_store import NullStore, default_store

    return default_store() if job.store else NullStore()


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
    # The logits the engine returns, not the model's vocabulary: a structure-aware family's
    # (SaProt: 446 tokens) are each amino acid's log-probability in the alphabet's 33 columns.
    logits_width = engine.family.masked_width
    width = {"mean": config.embed_dim, "per_tok": config.embed_dim, "logits": logits_width, "scores": 20}
    schema = output_schema(job, config.embed_dim, logits_width)
    rows = residues = 0
    with written_atomically(out, durable=True) as tmp, pq.ParquetWriter(tmp, schema) as writer:
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
                writer.write_table(chunk_table(schema, job, [k[0] for k in kept], [k[1] for k in kept], width))
            rows += len(kept)
            residues += sum(len(k[0]["sequence"]) for k in kept)
        failures.sort(key=lambda f: f["index"])
        info = {"key": job.key, "shard": shard, "records": len(spooled), "rows": rows, "residues": residues,
                "failures": failures, "seconds": round(time.perf_counter() - start, 3)}
        writer.add_key_value_metadata({META_KEY: json.dumps(info).encode()})
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
        self.entries = []
        if path.exists() or path.is_symlink():
            with open_own_file(path, "r") as handle:  # never a link's target (OSError: refused)
                self.entries = [json.loads(line) for line in handle.read().splitlines() if line]

    def _append(self, entry: dict) -> None:
        with open_own_file(self.path, "a") as handle:
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


