"""One row per record for a set of sequences: length, header metadata, and what the model says
of each one as a whole (mean entropy, pseudo-perplexity). The app's Records page shows it."""

from __future__ import annotations

from typing import Mapping, Sequence

from flamino_core.inputs.fasta_records import ProteinRecord
from flamino_core.records.metadata import FIELDS, metadata_rows

ENTROPY_COLUMN = "mean entropy (bits)"
PPPL_COLUMN = "pseudo-perplexity"
SHOWN_FIELDS = ("organism", "gene_name", "protein_name", "accession", "start", "end")  # of record_metadata.FIELDS


def summary_rows(
    records: Sequence[ProteinRecord],
    mean_entropies: Mapping[str, float] | None = None,
    pseudo_perplexities: Mapping[str, float] | None = None,
) -> list[dict[str, object]]:
    """One row per record: ``id``, ``length``, the header fields any record has among
    ``SHOWN_FIELDS`` and its headers' own columns (``key=value`` pairs, ``|`` fields: ProteinGym's
    ``taxon``), then the mean entropy and pseudo-perplexity (None where not computed).

    Args:
      records: the records, in input order.
      mean_entropies, pseudo_perplexities: by record id (``passes.RecordOutputs.mean_entropy``,
        ``substitution_maps.pseudo_perplexity``).
    """
    rows = []
    for record, fields in zip(records, metadata_rows(records), strict=True):
        row = {"id": record.id, "length": len(record.sequence)}
        row.update({column: fields[column] for column in SHOWN_FIELDS if column in fields})
        row.update({column: value for column, value in fields.items()
                    if column not in FIELDS and column not in (ENTROPY_COLUMN, PPPL_COLUMN, "id")})
        row[ENTROPY_COLUMN] = (mean_entropies or {}).get(record.id)
        row[PPPL_COLUMN] = (pseudo_perplexities or {}).get(record.id)
        rows.append(row)
    return rows
