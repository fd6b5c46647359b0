"""``flamino fold -m esmfold2 | esmfold2-fast | <folder> | random:esmfold2-tiny``: ESMFold2, for single
chains and complexes. Writes ``DIR/<name>.cif`` (mmCIF, per-atom pLDDT 0-100 in the B-factors),
``DIR/<name>.confidences.json`` (pLDDT per residue, PAE, pTM, ipTM, chain-pair ipTM), with ``--pdb``
also ``DIR/<name>.pdb`` where the complex fits the format, and ``DIR/folds.csv`` (name, chains,
length, mean pLDDT, pTM, ipTM, file).

Complexes, two ways (docs/esmfold.md, "ESMFold2"):
- ``A:B`` notation: a FASTA record whose sequence holds ':' is one complex, each ':'-separated part a
  chain (lettered A, B, ... in order), named after the record;
- ``--complex``: every record of the input is one chain of a single complex (lettered in record
  order, each chain described by its record's id in the mmCIF), named after the input file.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import re
import sys
import tempfile
from pathlib import Path

from flamino_core.atomic import written_atomically
from flamino_core.cli.common import EXIT_OK, EXIT_USAGE, UserError, read_records
from flamino_core.options import FoldPrecision, Precision
from flamino_core.progress import say

TABLE = "folds.csv"
MAX_TOKENS = 2048  # flamino's limit for one fold (residues over all chains): the pair state grows as its square
RANDOM_NOTE = "UNTRAINED TEST MODEL (random weights), not biology"


@dataclasses.dataclass(frozen=True)
class FoldJob:
    name: str
    chains: tuple[str, ...]
    chain_names: tuple[str, ...]


def cmd_fold2(args) -> int:
    from flamino_core.structure.folding.fold_run import run_folds
    from flamino_core.weights.esmfold2_hub import load_fold2_model
    from flamino_core.weights.model_cache import ModelNotAvailableError

    if args.stem_precision != Precision.FP32:
        raise UserError("--stem-precision bf16 is for ESMFold (v1); ESMFold2 runs in fp32")
    if args.fold_precision != FoldPrecision.FP32:
        raise UserError("--fold-precision fast is for ESMFold (v1); ESMFold2 runs in fp32")
    if args.passes is not None and args.passes < 1:
        raise UserError(f"--passes {args.passes}: the trunk runs at least once")
    if args.samples is not None and args.samples < 1:
        raise UserError(f"--samples {args.samples}: at least one diffusion sample")
    jobs, had_errors = read_jobs(args.fasta, allow_dna=args.allow_dna, as_one_complex=args.complex)
    try:
        model, is_random = load_fold2_model(args.model)
    except (ValueError, ModelNotAvailableError) as err:
        raise UserError(str(err)) from None
    if is_random:
        say("note: untrained test model (random weights): the structures are not biology")
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    plan, key = _plan(jobs, out, args)
    for line in plan.lines():
        say(line)
    for name, reason in plan.refused:
        say(f"error: {name}: {reason}: skipped")
    rows = run_folds(plan, out, key, lambda task: _fold_one(model, jobs[task.index], task.file[:-len(".cif")], out,
                                                            is_random, args), say)
    _write_table(out / TABLE, [rows[i] for i in sorted(rows)])
    kept = f" ({len(plan.done)} kept from an earlier run)" if plan.done else ""
    print(f"wrote {len(rows) - len(plan.done)} mmCIF file(s) and {out / TABLE}{kept}")
    return EXIT_USAGE if had_errors or plan.refused else EXIT_OK


def _plan(jobs: list[FoldJob], out: Path, args):
    """The run's plan (``fold_run.plan_run``: lengths, resume; no estimate of ESMFold2 yet) and the
    key its journal notes are kept under: the model and every option that changes a fold."""
    from flamino_core.structure.folding.fold_run import plan_run

    records = [_Record(job.name, ":".join(job.chains)) for job in jobs]
    key = (f"esmfold2|{args.model.text}|seed={args.seed or 0}|samples={args.samples}|steps={args.steps}"
           f"|passes={args.passes}|pdb={bool(args.pdb)}")
    where = "with ESMFold2 (flamino's limit for one fold, over all chains)"
    return plan_run(records, out, None, key, MAX_TOKENS, where, None, "fp32", None, suffix=".cif"), key


@dataclasses.dataclass(frozen=True)
class _Record:
    id: str
    sequence: str


def _fold_one(model, job: FoldJob, stem: str, out: Path, is_random: bool, args) -> dict:
    from flamino_core.engine import hardware
    from flamino_core.engine.fold import fold_complex
    from flamino_core.structure import complex_files

    try:
        folded = fold_complex(model, job.chains, job.name, job.chain_names, seed=args.seed or 0,
                              num_samples=args.samples, num_steps=args.steps,
                              num_loops=None if args.passes is None else args.passes - 1,
                              matmul_precision=hardware.exact_matmul_precision(hardware.detect(), "fp32"))
    except ValueError as err:  # a chain that cannot be featurised, said before any work
        raise UserError(str(err)) from None
    label = f"{args.model.text}: {RANDOM_NOTE}" if is_random else args.model.text
    title = f"ESMFold2 prediction of {job.name} ({label})"
    files = {f"{stem}.cif": complex_files.to_mmcif(folded, title),
             f"{stem}.confidences.json": complex_files.confidences_json(folded, label)}
    if args.pdb:
        problem = complex_files.pdb_problem(folded)
        if problem:
            say(f"note: {job.name}: no PDB file ({problem})")
        else:
            files[f"{stem}.pdb"] = complex_files.to_pdb(folded, title)
    for name, text in files.items():
        with written_atomically(out / name) as tmp:
            Path(tmp).write_text(text)
    several = len(job.chains) > 1
    return {"name": job.name, "chains": ",".join(folded.chain_ids), "length": folded.length,
            "mean_plddt": round(100 * folded.mean_plddt, 2), "ptm": round(folded.ptm, 4),
            # One chain has no interface: no ipTM (the reference's value there is a 0 from an empty mask).
            "iptm": round(folded.iptm, 4) if several else "", "cif": f"{stem}.cif"}


def read_jobs(path: str, *, allow_dna: bool = False, as_one_complex: bool = False) -> tuple[list[FoldJob], bool]:
    """The folds an input asks for and whether any record had errors (each said on stderr): one per
    record, a record with ':' a complex of its parts, or (``as_one_complex``) every record one chain."""
    data = sys.stdin.buffer.read() if path == "-" else None
    text = _text(path, data)
    if text is not None and _has_chain_separators(text):
        jobs, had_errors = _split_records(text, allow_dna)
    else:
        records, had_errors = _read_records(path, data, allow_dna)
        jobs = [FoldJob(r.id, (r.sequence,), (r.id,)) for r in records]
    if not jobs:
        raise UserError(f"{path}: no usable protein sequence")
    if as_one_complex:
        name = "complex" if path == "-" else Path(path).name.split(".")[0] or "complex"
        jobs = [FoldJob(name, tuple(c for job in jobs for c in job.chains),
                        tuple(n for job in jobs for n in job.chain_names))]
    return jobs, had_errors


def _text(path: str, data: bytes | None) -> str | None:
    from flamino_core.inputs.formats import Unreadable, decode_bytes
    from flamino_core.inputs.input_limits import MAX_GUNZIP_BYTES

    try:
        raw = data if data is not None else Path(path).read_bytes()
        return decode_bytes(raw, MAX_GUNZIP_BYTES)[0]
    except (OSError, Unreadable):
        return None  # the ordinary reader says what is wrong with it


def _has_chain_separators(text: str) -> bool:
    """A FASTA text with ':' in a sequence line (the complex notation)."""
    lines = [line for line in text.splitlines() if line.strip()]
    return bool(lines) and lines[0].lstrip().startswith(">") and any(
        ":" in line for line in lines if not line.lstrip().startswith((">", ";")))


def _split_records(text: str, allow_dna: bool) -> tuple[list[FoldJob], bool]:
    """Each FASTA record's chains, each chain checked by the one input reader (as its own record)."""
    from flamino_core.inputs.fasta import parse_fasta_text
    from flamino_core.model.esmfold2.features import CHAIN_IDS

    jobs, had_errors = [], False
    for block in re.split(r"^>", text, flags=re.MULTILINE)[1:]:
        header, _, body = block.partition("\n")
        name = header.split()[0] if header.split() else "record"
        sequence = "".join(line.strip() for line in body.splitlines() if not line.lstrip().startswith(";"))
        parts = sequence.split(":")
        if len(parts) > len(CHAIN_IDS):
            say(f"error: {name}: {len(parts)} chains; flamino letters {len(CHAIN_IDS)} at most: skipped")
            had_errors = True
            continue
        chains = []
        for letter, part in zip(CHAIN_IDS, parts):
            where = f"{name} chain {letter}" if len(parts) > 1 else name
            parsed = parse_fasta_text(f">{name}\n{part}\n", allow_nucleotides=allow_dna)
            for issue in parsed.warnings:
                say(f"warning: {where}: {issue.message}")
            for issue in parsed.errors:
                say(f"error: {where}: {issue.message}")
            if not parsed.records:
                say(f"error: {where}: {'no sequence' if not part else 'refused'}: record skipped")
                had_errors = True
                break
            chains.append(parsed.records[0].sequence)
        else:
            names = (name,) if len(chains) == 1 else tuple(f"{name}:{c}" for c in CHAIN_IDS[:len(chains)])
            jobs.append(FoldJob(name, tuple(chains), names))
    return jobs, had_errors


def _read_records(path: str, data: bytes | None, allow_dna: bool):
    if data is None:
        return read_records(path, allow_dna=allow_dna)
    with tempfile.TemporaryDirectory() as folder:  # standard input, already read: the reader takes a path
        copy = Path(folder) / "stdin"
        copy.write_bytes(data)
        return read_records(str(copy), allow_dna=allow_dna)


def _write_table(path: Path, rows: list[dict]) -> None:
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=["name", "chains", "length", "mean_plddt", "ptm", "iptm", "cif"],
                            lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    with written_atomically(path) as tmp:
        Path(tmp).write_text(text.getvalue())
