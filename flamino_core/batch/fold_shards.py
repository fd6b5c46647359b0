"""``flamino batch fold``: a shard of records folded by one model replica, through the same core as
``flamino fold`` (``structure.folding.fold_run`` plans and resumes, ``fold_files.fold_record``
folds a record into its PDB file and its row), so both give the same file names, bytes and rows.

Each actor (``ray_driver.ShardWorker``) holds one ``FoldReplica``: the model loaded once on its
device, and that device's length limit (``fold_files.run_length_limit``, noted in each shard file's
footer; the driver opens no device to say it first). A shard's records are folded bucket by bucket
(one compilation per bucket and actor, kept in the persistent compilation cache); each PDB is
written whole as it finishes and noted in ``OUT/.folds.journal.jsonl``, so a killed actor's retried
shard folds only what is missing. The shard's file ``OUT/shard-XXXXX.parquet`` holds the folded
records' rows (the table's columns beside the batch's own), its footer the refused ones (invalid, or
over the device's limit), which ``failures.jsonl`` lists; the job's end writes ``OUT/folds.csv``
from the shard files in input order.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import pyarrow as pa
import pyarrow.parquet as pq

from flamino_core.atomic import written_atomically
from flamino_core.batch.job import Job, shard_path, spool_path
from flamino_core.batch.results import META_KEY, shard_info

FOLD_SCHEMA = pa.schema([
    ("index", pa.int64()), ("file", pa.string()), ("id", pa.string()), ("description", pa.string()),
    ("seq_sha256", pa.string()), ("length", pa.int32()), ("warnings", pa.string()),
    # the row of folds.csv (fold_files.COLUMNS), as `flamino fold` writes it
    ("name", pa.string()), ("mean_plddt", pa.float64()), ("ptm", pa.float64()), ("pdb", pa.string()),
    ("past_trained_length", pa.string()),
])


class FoldReplica:
    """One model replica on this process's device: loaded once, with the device's length limit
    (its memory before the weights arrive, as ``flamino fold`` plans)."""

    def __init__(self, job: Job, say: Callable[[str], None] = lambda message: None):
        from flamino_core.model.model_id import ModelId
        from flamino_core.options import Precision
        from flamino_core.structure.folding.fold_files import FoldSettings, known_config, run_length_limit
        from flamino_core.structure.folding.prediction import memory_room, model_key
        from flamino_core.weights.esmfold import load_fold_model

        options = job.fold or {}
        self.passes, self.chunk = options.get("passes"), options.get("chunk_size") or None
        self.stem_precision = Precision(options.get("stem_precision", Precision.FP32))
        room = memory_room()
        model = ModelId.parse(job.model)  # a door: the manifest's text, read back in each actor
        self.model, is_random = load_fold_model(model, self.stem_precision)
        self.config = known_config(model) or self.model.config
        self.longest, self.where, self.device = run_length_limit(self.config, room, self.chunk, self.stem_precision,
                                                                 options.get("max_residues"))
        self.key = model_key(model, self.passes or self.config.trunk.max_recycles, self.stem_precision)
        self.settings = FoldSettings(model, is_random, self.passes, self.chunk, self.stem_precision)
        self.say = say


def fold_shard(replica: FoldReplica, job: Job, shard: int) -> dict:
    """Fold shard ``shard`` of ``job`` into its PDB files and its shard file (skipped if complete);
    returns the shard's summary (rows, residues, failures, seconds), kept in the file's footer."""
    from flamino_core.structure.folding.fold_files import fold_record
    from flamino_core.structure.folding.fold_run import plan_run, run_folds
    from flamino_core.structure.folding.fold_time import record_fold_time

    out_file = shard_path(job.out_dir, shard)
    done = shard_info(out_file, job.key)
    if done is not None:  # a retried task whose first attempt finished
        return done
    start, out = time.perf_counter(), Path(job.out_dir)
    spooled = pq.read_table(spool_path(job.out_dir, shard)).to_pylist()
    failures = [_failure(job, r, r["error"]) for r in spooled if r["error"] is not None]
    valid = [r for r in spooled if r["error"] is None]
    records = [SimpleNamespace(id=r["id"], sequence=r["sequence"]) for r in valid]
    plan = plan_run(records, out, replica.config, replica.key, replica.longest, replica.where, replica.chunk,
                    replica.stem_precision, replica.passes, device=replica.device,
                    files=[r["out_file"] for r in valid])
    by_id = {r["id"]: r for r in valid}
    failures += [_failure(job, by_id[name], reason) for name, reason in plan.refused]
    rows = run_folds(plan, out, replica.key, lambda task: fold_record(replica.model, task, out, replica.settings,
                                                                       replica.say),
                     replica.say, folded_in=lambda task, seconds: record_fold_time(
                         replica.config, task.length, replica.key, seconds, passes=replica.passes))
    kept = [(valid[i], rows[i]) for i in sorted(rows)]
    table = pa.table({
        "index": [r["index"] for r, _ in kept], "file": [job.files[r["file"]] for r, _ in kept],
        "id": [r["id"] for r, _ in kept], "description": [r["description"] for r, _ in kept],
        "seq_sha256": [hashlib.sha256(r["sequence"].encode()).hexdigest() for r, _ in kept],
        "length": [len(r["sequence"]) for r, _ in kept], "warnings": [r["warnings"] for r, _ in kept],
        **{name: [row[name] for _, row in kept] for name in ("name", "mean_plddt", "ptm", "pdb",
                                                             "past_trained_length")},
    }, schema=FOLD_SCHEMA)
    failures.sort(key=lambda f: f["index"])
    info = {"key": job.key, "shard": shard, "records": len(spooled), "rows": len(kept),
            "residues": sum(len(r["sequence"]) for r, _ in kept), "failures": failures,
            "seconds": round(time.perf_counter() - start, 3),
            "length_limit": [replica.longest, replica.where, replica.device]}  # this actor's, as its plan said
    with written_atomically(out_file, durable=True) as tmp:
        pq.write_table(table.replace_schema_metadata({META_KEY: json.dumps(info).encode()}), tmp)
    return info


def write_fold_table(out: Path, n_shards: int) -> int:
    """``OUT/folds.csv`` from the job's shard files, in input order (``fold_files.write_table``, the
    table ``flamino fold`` writes); returns its rows."""
    from flamino_core.structure.folding.fold_files import COLUMNS, TABLE, write_table

    rows = []
    for k in range(n_shards):
        rows += pq.read_table(shard_path(out, k), columns=COLUMNS).to_pylist()
    write_table(out / TABLE, rows)
    return len(rows)


def _failure(job: Job, record: dict, reason: str) -> dict:
    """A line of failures.jsonl."""
    return {"index": record["index"], "file": job.files[record["file"]], "id": record["id"], "reason": reason}


def spoken_limit(job: Job) -> str:
    """The run's length limit in words, said before the work. The driver does not open a device to
    measure it (on a TPU host that would hold the chip its actors need): each actor folds to its
    own device's limit (``fold_files.run_length_limit``, the rule of `flamino fold`'s plan),
    noted in each shard file's footer (``length_limit``)."""
    most = (job.fold or {}).get("max_residues")
    cap = f"{most:,} residues at most (--max-residues), less where an actor's device holds less" if most else (
        "each actor's own device's, by the memory estimate (never below the stem's trained 1,022 residues)")
    return f"length limit: {cap}; records over it are refused, in failures.jsonl"
