"""Shared pieces of the benchmark: workloads, checkpoints, FLOP counts, machine facts.

Imported by both ``run.py`` (the orchestrator) and ``worker.py`` (one measurement per process),
so it imports nothing heavy at module level.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHARED_FASTA = REPO.parent / "shared" / "fasta"
RESULTS = REPO / "benchmarks" / "results"  # gitignored

SHAPES = {
    "t6": "esm2_t6_8M_UR50D",
    "t12": "esm2_t12_35M_UR50D",
    "t30": "esm2_t30_150M_UR50D",
}
VARLEN_COUNT = 64
LATENCY_LENGTHS = (100, 300, 1000)
SCAN_LENGTH = 300
WEIGHT_SEED = 0
WORKLOAD_SEED = 20240601
HF_TOKEN_BUDGET = 8192  # same as flamino's DEFAULT_TOKEN_BUDGET

# UniProtKB/Swiss-Prot amino-acid composition (percent), so random sequences look like proteins
# to the tokenizer (all ids are ordinary residue tokens; the model is random anyway).
AA_FREQ = {
    "A": 8.25, "R": 5.53, "N": 4.06, "D": 5.45, "C": 1.37, "Q": 3.93, "E": 6.75, "G": 7.07,
    "H": 2.27, "I": 5.96, "L": 9.66, "K": 5.84, "M": 2.42, "F": 3.86, "P": 4.70, "S": 6.56,
    "T": 5.34, "W": 1.08, "Y": 2.92, "V": 6.87,
}  # fmt: skip


# --- workloads ---------------------------------------------------------------------------------
def real_records() -> list[tuple[str, str]]:
    """(id, sequence) of every record in the shared FASTA folder (validated by flamino's reader)."""
    from flamino_core.fasta import read_fasta

    records = []
    if SHARED_FASTA.is_dir():
        for path in sorted(SHARED_FASTA.glob("*.fa")):
            records += [(r.id, r.sequence) for r in read_fasta(path).records]
    return records


def random_protein(rng: np.random.Generator, length: int) -> str:
    letters = np.array(list(AA_FREQ))
    p = np.array(list(AA_FREQ.values()))
    return "".join(rng.choice(letters, size=length, p=p / p.sum()))


def varlen_lengths(n: int) -> list[int]:
    """n lengths from a lognormal with median 300 (sigma 0.6), taken at evenly spaced quantiles
    (a stratified draw: reproducible, no unlucky samples), spanning exactly 30..1000."""
    from statistics import NormalDist

    z = [NormalDist().inv_cdf((i + 0.5) / n) for i in range(n)]
    lengths = [int(min(1000, max(30, round(300 * np.exp(0.6 * q))))) for q in z]
    lengths[0], lengths[-1] = 30, 1000
    return lengths


def varlen_workload() -> list[str]:
    """64 proteins: the real records of the shared FASTA folder plus random ones with
    realistic lengths (see varlen_lengths), in a shuffled (not length-sorted) order."""
    rng = np.random.default_rng(WORKLOAD_SEED)
    real = [s for _, s in real_records() if len(s) <= 1000][:VARLEN_COUNT]
    seqs = real + [random_protein(rng, L) for L in varlen_lengths(VARLEN_COUNT - len(real))]
    order = rng.permutation(len(seqs))
    return [seqs[i] for i in order]


def fixed_protein(length: int, salt: int = 0) -> str:
    return random_protein(np.random.default_rng(WORKLOAD_SEED + 1000 * salt + length), length)


# --- checkpoints -------------------------------------------------------------------------------
def checkpoint_dir(shape: str, root: Path) -> Path:
    return root / "checkpoints" / SHAPES[shape]


def write_checkpoint(shape: str, root: Path) -> Path:
    """The shape's random-weight checkpoint in the HF 5.x format (written once per run)."""
    directory = checkpoint_dir(shape, root)
    if (directory / "config.json").exists():
        return directory
    sys.path.insert(0, str(REPO / "tests"))
    from reference_checkpoints import make_hf_model, write_hf_5x

    from flamino_core.config import ESM2Config

    model = make_hf_model(ESM2Config.preset(SHAPES[shape]), seed=WEIGHT_SEED)
    tmp = directory.with_name(directory.name + ".tmp")
    write_hf_5x(model, tmp)
    tmp.rename(directory)
    return directory


# --- FLOPs -------------------------------------------------------------------------------------
def forward_flops(
    config, rows: int, width: int, head_positions: int | None = None, last_layer_positions: int | None = None,
    segments: list[list[int]] | None = None,
) -> float:
    """Matmul FLOPs of one forward pass over a (rows, width) token batch.

    Per layer and row: 2*T*(4 D^2 + 2 D F) for the projections and the MLP plus 4*T^2*D for
    QK^T and PV; the LM head adds 2*D*(D+V) per position it runs at (all T by default).
    ``last_layer_positions``: the last layer computes keys and values at all T positions but
    queries, attention output and MLP only at this many (flamino's masked scan).
    ``segments``: packed rows, per row the token count of each segment (the last one with the
    row's padding); each attends only to itself, so attention is 4*D*sum(S^2), not 4*T^2*D.
    """
    D, F, V, n = config.embed_dim, config.ffn_dim, config.vocab_size, config.num_layers
    T = width
    if segments is not None:
        assert len(segments) == rows and all(sum(s) == T for s in segments)
        dense = 2 * T * (4 * D * D + 2 * D * F)
        head = 2 * T * D * (D + V)
        return float(sum(n * (dense + 4 * D * sum(S * S for S in row)) + head for row in segments))
    layer = 2 * T * (4 * D * D + 2 * D * F) + 4 * T * T * D
    if last_layer_positions is None:
        per_row = n * layer
    else:
        P = last_layer_positions
        last = 2 * T * 2 * D * D + 2 * P * (2 * D * D + 2 * D * F) + 4 * P * T * D
        per_row = (n - 1) * layer + last
    per_row += 2 * (T if head_positions is None else head_positions) * D * (D + V)
    return float(rows) * per_row


# --- machine -----------------------------------------------------------------------------------
def machine_info() -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                have = set(line.split(":", 1)[1].split())
                # The vector extensions that matter to both systems' kernels (as flamino_core.hardware
                # reports them; not imported here to keep this module light).
                flags = " ".join(f for f in ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile",
                                             "asimd", "bf16", "sve") if f in have) or "no AVX2"
                break
    except OSError:
        pass
    mem_gb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem_gb = round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    versions = {}
    for pkg in ("jax", "jaxlib", "flax", "torch", "transformers", "numpy"):
        try:
            from importlib.metadata import version

            versions[pkg] = version(pkg)
        except Exception:
            versions[pkg] = "?"
    return {
        "cpu": cpu,
        "cpu_flags": flags,
        "cores": len(os.sched_getaffinity(0)),
        "mem_gb": mem_gb,
        "python": platform.python_version(),
        "kernel": platform.release(),
        "versions": versions,
    }


def load_average() -> tuple[float, float, float]:
    return os.getloadavg()


def git_revision() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "flamino_core"], cwd=REPO, capture_output=True, text=True)
        return rev.stdout.strip() + ("+dirty(flamino_core)" if dirty.stdout.strip() else "")
    except OSError:
        return "?"


def emit(result: dict) -> None:
    """The worker's one machine-readable line on stdout."""
    print("BENCH_JSON " + json.dumps(result), flush=True)
