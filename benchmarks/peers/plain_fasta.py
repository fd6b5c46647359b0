"""A FASTA reader for the peers' scripts: (name, sequence) pairs, nothing checked. The benchmark
feeds them files that ``flamino embed`` reads without a warning, so no validation is needed,
and a reader that costs no import keeps the peers' start as short as it can be."""

from __future__ import annotations


def read_fasta(path: str) -> list[tuple[str, str]]:
    records, name, chunks = [], None, []
    for line in open(path):
        line = line.strip()
        if line.startswith(">"):
            if name is not None:
                records.append((name, "".join(chunks)))
            name, chunks = line[1:].split()[0] if line[1:].strip() else "", []
        elif line:
            chunks.append(line.upper())
    if name is not None:
        records.append((name, "".join(chunks)))
    return records
