"""The Parquet layout of a batch job's results: the columns of a shard file, and reading them back."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from flamino_core.options import STRATEGIES
from flamino_core.batch.job import MANIFEST, BatchError, Job, shard_path

META_KEY = b"flamino_batch"  # the Parquet footer key of a shard's summary (rows, failures, ...)


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
        if STRATEGIES[job.strategy].per_record:
            fields.append(("pppl", pa.float64()))
        else:
            fields.append(("scores", pa.list_(pa.list_(pa.float32(), 20))))
    return pa.schema(fields)


def fixed_rows(rows: np.ndarray) -> pa.Array:
    """(N, W) floats as N fixed-size lists."""
    rows = np.ascontiguousarray(rows, dtype=np.float32)
    return pa.FixedSizeListArray.from_arrays(pa.array(rows.reshape(-1)), rows.shape[1])


def nested_rows(arrays: list[np.ndarray], width: int) -> pa.Array:
    """Per-record (L_i, W) arrays as lists of fixed-size lists, without a Python loop per residue."""
    lengths = np.array([len(a) for a in arrays], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    flat = np.concatenate(arrays).reshape(-1, width) if arrays else np.zeros((0, width), np.float32)
    return pa.ListArray.from_arrays(pa.array(offsets), fixed_rows(flat))


def chunk_table(schema: pa.Schema, job: Job, records: list[dict], outputs: list[dict], width: dict) -> pa.Table:
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
            columns[name] = fixed_rows(np.stack(values) if values else np.zeros((0, width[name]), np.float32))
        elif schema.field(name).type == pa.float64():  # pppl: one number per record
            columns[name] = pa.array(values, pa.float64())
        else:
            columns[name] = nested_rows(values, width[name])
    return pa.table(columns, schema=schema)


def shard_info(path: Path, key: str) -> dict | None:
    """The footer summary of a finished shard of job ``key``; None if absent or from another job."""
    try:
        metadata = pq.read_metadata(path).metadata or {}
        info = json.loads(metadata[META_KEY])
    except (OSError, KeyError, ValueError, pa.ArrowInvalid):
        return None
    return info if info.get("key") == key else None


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


