"""Per-sequence embeddings and their metadata in the layout ProtSpace reads.

ProtSpace (github.com/tsenoner/protspace) maps protein sets from an HDF5 file of per-protein
embeddings plus a table of annotations: ``protspace prepare -i OUT.h5 -a OUT_metadata.csv -m
pca2,umap2 -o out``. Its loader (``protspace/data/loaders/h5.py``) and docs ("Use your own
embeddings": "each protein is stored as a dataset named by its identifier") fix the layout:

- one dataset per protein at the file's root, named by its identifier, holding the
  per-protein embedding as a 1-D float32 vector (D,); here each record's final-layer (or
  chosen layer's) residue states averaged, the NPZ's ``mean/{i}``;
- a ``model_name`` attribute on the root, which ProtSpace names the projections after
  (without it ``prepare`` stops and asks for ``-i file.h5:name``);
- the annotation table's first column is ``identifier``, equal to the dataset names; every
  other column is an annotation to colour by.

HDF5 reads ``/`` in a name as a group separator, and ProtSpace refuses such identifiers, so a
``/`` in a record id (Pfam's ``HBB_HUMAN/3-147``) becomes ``_`` in the dataset name; the
record's own id stays in the table's ``record_id`` column and in the dataset's ``original_id``
attribute (the bio_embeddings convention).
"""

from __future__ import annotations

import csv
import io
from os import PathLike
from pathlib import Path
from typing import BinaryIO, Sequence

import numpy as np

from flamino_core.inputs.fasta_records import ProteinRecord, unique_id
from flamino_core.records.metadata import metadata_rows

MODEL_ATTRIBUTE = "model_name"
ORIGINAL_ID_ATTRIBUTE = "original_id"


def dataset_names(ids: Sequence[str]) -> list[str]:
    """HDF5 dataset names for record ids: ``/`` becomes ``_``, kept unique (``_2``, ``_3``)."""
    used: set[str] = set()
    return [unique_id(record_id.replace("/", "_"), used) for record_id in ids]


def model_label(identifier: str) -> str:
    """The model's name for the file: a preset, Hub id or test model as given, a local path by
    its last part (a file shared with others names no folder of the machine it was made on)."""
    local = ("/" in identifier or "\\" in identifier) and Path(identifier).exists()
    return (Path(identifier.rstrip("/\\")).name or identifier) if local else identifier


def write_h5(target: str | PathLike[str] | BinaryIO, ids: Sequence[str], embeddings: np.ndarray,
             model: str) -> list[str]:
    """Write per-protein embeddings in ProtSpace's layout.

    Args:
      target: a path, or a binary file object (the app writes into memory).
      ids: record ids, one per row of ``embeddings``.
      embeddings: (N, D) per-sequence embeddings.
      model: the model's name for the ``model_name`` attribute (``model_label``).

    Returns:
      Notes for the user (ids renamed for HDF5).
    """
    try:
        import h5py
    except ImportError as exc:  # a runtime dependency; say what to install if it is missing
        raise RuntimeError("writing HDF5 needs the h5py package: pip install h5py") from exc
    embeddings = np.asarray(embeddings, dtype=np.float32)
    if embeddings.ndim != 2 or len(embeddings) != len(ids):
        raise ValueError(f"need one embedding vector per id; got {embeddings.shape} for {len(ids)} ids")
    names = dataset_names(ids)
    with h5py.File(target, "w") as handle:
        handle.attrs[MODEL_ATTRIBUTE] = model
        for name, record_id, vector in zip(names, ids, embeddings, strict=True):
            dataset = handle.create_dataset(name, data=vector)
            if name != record_id:
                dataset.attrs[ORIGINAL_ID_ATTRIBUTE] = record_id
    renamed = [(i, n) for i, n in zip(ids, names, strict=True) if i != n]
    if not renamed:
        return []
    shown = ", ".join(f"{i} → {n}" for i, n in renamed[:3]) + (" …" if len(renamed) > 3 else "")
    return [f"HDF5 names cannot hold '/': {len(renamed)} id(s) renamed in the .h5 ({shown}); "
            "the metadata table keeps each record's id in record_id"]


def h5_bytes(ids: Sequence[str], embeddings: np.ndarray, model: str) -> bytes:
    """``write_h5`` into memory: the bytes of the .h5 file."""
    buffer = io.BytesIO()
    write_h5(buffer, ids, embeddings, model)
    return buffer.getvalue()


def metadata_table(records: Sequence[ProteinRecord], extra: dict[str, list] | None = None) -> list[dict[str, object]]:
    """ProtSpace's annotation table: ``identifier`` (the dataset name), ``record_id``, the
    header fields (``record_metadata.metadata_rows``: length, organism, gene ...), then any
    ``extra`` columns (an uploaded table joined on the records), one row per record."""
    names = dataset_names([r.id for r in records])
    rows = []
    for index, (name, row) in enumerate(zip(names, metadata_rows(records), strict=True)):
        record_id = row.pop("id")
        extras = {column: values[index] for column, values in (extra or {}).items()}
        rows.append({"identifier": name, "record_id": record_id, **row, **extras})
    return rows


def metadata_csv(records: Sequence[ProteinRecord], extra: dict[str, list] | None = None) -> str:
    """``metadata_table`` as CSV text (empty cells where a record has no value)."""
    rows = metadata_table(records, extra)
    columns = list(dict.fromkeys(column for row in rows for column in row))
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: ("" if v is None else v) for k, v in row.items()} for row in rows)
    return out.getvalue()


def metadata_path(h5_path: str | PathLike[str]) -> Path:
    """Where ``flamino embed -o OUT.h5`` writes the table: ``OUT_metadata.csv`` beside it."""
    path = Path(h5_path)
    return path.with_name(f"{path.stem}_metadata.csv")
