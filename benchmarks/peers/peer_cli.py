"""What the peers' scripts share: their command line (``IN.fa MODEL_DIR OUT.npz [--include
...]``) and a FASTA reader giving (name, sequence) pairs with nothing checked. The benchmark
feeds them files that ``flamino embed`` reads without a warning, so no validation is needed,
and a reader that costs no import keeps the peers' start as short as it can be."""

from __future__ import annotations

import argparse


def parse_arguments() -> tuple[argparse.Namespace, list[str], list[tuple[str, str]]]:
    """(arguments, the parts to write, the records of the FASTA file)."""
    p = argparse.ArgumentParser()
    p.add_argument("fasta")
    p.add_argument("model", help="a folder with config.json and model.safetensors")
    p.add_argument("output", help="the NPZ to write, with flamino embed's keys")
    p.add_argument("--include", default="mean,per_tok", help="comma-separated: mean, per_tok, logits")
    args = p.parse_args()
    return args, args.include.split(","), read_fasta(args.fasta)


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
