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
SHARED_FASTA = Path(os.environ.get("FLAMINO_SHARED") or REPO.parent / "shared") / "fasta"  # an accelerator host: a copy
RESULTS = REPO / "benchmarks" / "results"  # gitignored

SHAPES = {
    "t6": "esm2_t6_8M_UR50D",
    "t12": "esm2_t12_35M_UR50D",
    "t30": "esm2_t30_150M_UR50D",
    "t33": "esm2_t33_650M_UR50D",
}
# esm.cpp ships its W8A8 INT8 path (SmoothQuant) for 150M and larger only (its README).
INT8_SHAPES = ("t30", "t33")
VARLEN_COUNT = 64
# t33 (650M) has about four times t30's arithmetic per token, and esm.cpp's fp32 path runs at
# 15% of the matmul peak: 64 proteins would take esm.cpp alone about 20 minutes (its warm-up and
# timed pass), over the half hour a shape may take. At t33 the varlen set is 12 proteins taken
# the same way (evenly spaced ranks of length over the same pool), so its length mix is the
# 64's; the table names the count.
VARLEN_COUNTS = {"t33": 12}


def varlen_count(shape: str) -> int:
    return VARLEN_COUNTS.get(shape, VARLEN_COUNT)


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
    from flamino_core.inputs.fasta import read_fasta

    records = []
    if SHARED_FASTA.is_dir():
        for path in sorted(SHARED_FASTA.glob("*.fa")):
            records += [(r.id, r.sequence) for r in read_fasta(path).records]
    return records


def random_protein(rng: np.random.Generator, length: int) -> str:
    """A random protein with Swiss-Prot's amino-acid composition (latency and scan inputs)."""
    letters = np.array(list(AA_FREQ))
    p = np.array(list(AA_FREQ.values()))
    return "".join(rng.choice(letters, size=length, p=p / p.sum()))


def varlen_workload(count: int = VARLEN_COUNT) -> list[str]:
    """``count`` (64) real proteins of at most 1000 residues from the shared FASTA folder, taken at evenly
    spaced ranks of their lengths (a stratified pick over the set: 37 to 934 residues, median
    193, 17,808 in all for ../shared/fasta as of 2026-12), in a shuffled (not length-sorted)
    order. Fewer real records than that: the rest are random proteins of the missing lengths'
    quantiles of a lognormal with median 300 (what this workload was before ../shared held
    the ProteinGym targets)."""
    rng = np.random.default_rng(WORKLOAD_SEED)
    real = sorted((s for _, s in real_records() if len(s) <= 1000), key=len)
    if len(real) >= count:
        seqs = [real[round(i * (len(real) - 1) / (count - 1))] for i in range(count)]
    else:
        seqs = real + [random_protein(rng, L) for L in _lognormal_lengths(count - len(real))]
    order = rng.permutation(len(seqs))
    return [seqs[i] for i in order]


def _lognormal_lengths(n: int) -> list[int]:
    """n lengths from a lognormal with median 300 (sigma 0.6), taken at evenly spaced quantiles
    (a stratified draw: reproducible, no unlucky samples), spanning exactly 30..1000."""
    from statistics import NormalDist

    z = [NormalDist().inv_cdf((i + 0.5) / n) for i in range(n)]
    lengths = [int(min(1000, max(30, round(300 * np.exp(0.6 * q))))) for q in z]
    if lengths:
        lengths[0], lengths[-1] = 30, 1000
    return lengths


def fixed_protein(length: int, salt: int = 0) -> str:
    return random_protein(np.random.default_rng(WORKLOAD_SEED + 1000 * salt + length), length)


# --- checkpoints -------------------------------------------------------------------------------
def checkpoint_dir(shape: str, root: Path) -> Path:
    return root / "checkpoints" / SHAPES[shape]


def write_checkpoint(shape: str, root: Path) -> Path:
    """The shape's random-weight checkpoint (written once per run) as the Hub publishes ESM-2:
    ``config.json`` + ``model.safetensors`` in the 2022 layout (per-layer rotary ``inv_freq``,
    a stored copy of the tied decoder). All three systems load this one folder: HF with
    ``from_pretrained``, flamino with ``load_weights``, esm.cpp with ``load_from_safetensors``
    (which needs the per-layer ``inv_freq`` that transformers 5.x's ``save_pretrained`` drops)."""
    directory = checkpoint_dir(shape, root)
    if (directory / "config.json").exists():
        return directory
    sys.path.insert(0, str(REPO / "tests"))
    from reference_checkpoints import make_hf_model, write_hf_2022

    from flamino_core.model.config import ESM2Config

    config = ESM2Config.preset(SHAPES[shape])
    model = make_hf_model(config, seed=WEIGHT_SEED)
    tmp = directory.with_name(directory.name + ".tmp")
    write_hf_2022(model, config, tmp)
    tmp.rename(directory)
    return directory


# --- the inputs, once per run, for workers that cannot import flamino_core --------------------
WORKLOADS_FILE = "workloads.json"


def write_workloads(root: Path) -> Path:
    """Every input of every measurement as JSON in the work folder: the esm.cpp workers run
    in their own environment (esm-cpp pins numpy < 2, JAX needs numpy >= 2) without
    flamino_core, and read their inputs from here; the same functions make them for all."""
    records = real_records()
    data = {
        # Keyed by count: the esm.cpp workers read their shape's (varlen_set).
        "varlen": {str(n): varlen_workload(n) for n in sorted({VARLEN_COUNT, *VARLEN_COUNTS.values()})},
        "latency": {str(L): fixed_protein(L) for L in LATENCY_LENGTHS},
        "scan": fixed_protein(SCAN_LENGTH),
        "cold": records[0][1] if records else fixed_protein(146),
        "calibration": calibration_proteins(),
    }
    path = root / WORKLOADS_FILE
    path.write_text(json.dumps(data))
    return path


def calibration_proteins() -> list[str]:
    """SmoothQuant calibration of esm.cpp's INT8 path: proteins that no measurement uses (its own
    UniRef50 calibration set is not on this machine)."""
    return [fixed_protein(L, salt=7) for L in (60, 120, 200, 300, 450, 700)]


SMOOTHQUANT_ALPHA = 0.5  # esm.cpp's default (esm-cpp-quantize --alpha)
CALIBRATION_PERCENTILE = 99.9  # its default (--percentile)


def esmcpp_int8(model, calibration: list[str]) -> None:
    """Quantize an FP32 ``esm_cpp.Model`` in place the way ``esm-cpp-quantize`` does: activation
    statistics from ``forward_with_observer`` over ``calibration``, ``apply_smoothquant``, then
    ``quantize_weights`` (run with esm.cpp's interpreter; ``make bench`` and esmcpp_gates.py)."""
    import esm_cpp

    tokenizer, observer = esm_cpp.Tokenizer(), esm_cpp.ActivationObserver()
    for seq in calibration:
        ids = np.asarray(tokenizer.encode(seq), dtype=np.int32)
        model.forward_with_observer(ids, np.ones_like(ids), observer)
    model.apply_smoothquant(observer.percentile(CALIBRATION_PERCENTILE), SMOOTHQUANT_ALPHA)
    model.quantize_weights()


def read_workloads(root: Path) -> dict:
    return json.loads((root / WORKLOADS_FILE).read_text())


def varlen_set(root: Path, shape: str) -> list[str]:
    """The varlen proteins of ``shape`` from the run's workloads file."""
    return varlen_proteins(root, varlen_count(shape))


def varlen_proteins(root: Path, count: int) -> list[str]:
    """The run's varlen set of ``count`` proteins (``write_workloads``)."""
    return read_workloads(root)["varlen"][str(count)]


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
# The instruction sets that decide both systems' kernels (fp32 FMA width, int8 dot products,
# bf16): every recorded run names them, so tables from different machines are never mixed.
# (As flamino_core.engine.hardware.CPU_FEATURES; not imported here to keep this module light.)
ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8", "amx_tile",
             "asimd", "bf16", "sve")


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
                # The vector extensions that matter to both systems' kernels (as flamino_core.engine.hardware
                # reports them; not imported here to keep this module light).
                flags = " ".join(f for f in ISA_FLAGS if f in have) or "no AVX2"
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
