"""esm.cpp's measurements (``worker.py esmcpp ...``), run with the interpreter of its own
environment (``.venv-esmcpp``, made by ``make bench``): esm-cpp 0.2.1 requires numpy < 2 and
JAX 0.10 numpy >= 2, so the two cannot share one. Imports neither flamino_core nor JAX: the
inputs come from the work folder's ``workloads.json`` (``common.write_workloads``).

Its documented API, as its README and ``esm_cpp.bench.compare`` use it: ``Tokenizer.encode``
(adds ``<cls>``/``<eos>``), ``Model.load_from_safetensors`` for FP32,
``Model.forward_scheduled`` for a list of proteins (its packed variable-length scheduler),
``Model.forward`` for one, ``forward_with_hidden_states`` for the embedding. INT8 is its
documented W8A8 route (``esm-cpp-quantize``): activation statistics from
``forward_with_observer`` over a calibration set, ``apply_smoothquant(stats, alpha=0.5)``,
``quantize_weights()``, ``save_to_gguf``; the INT8 workers then ``load_from_gguf``.
"""

from __future__ import annotations

import time
import types
from pathlib import Path

import numpy as np

import common
from measure import ARGS, BACKEND, T_PROCESS, cold_result, peer_scan, save_outputs, summary, timed, varlen_logits


def gguf_path(shape: str) -> Path:
    return Path(ARGS.root) / "esmcpp" / f"{common.SHAPES[shape]}-w8a8.gguf"


def _safetensors(shape: str) -> str:
    return str(common.checkpoint_dir(shape, Path(ARGS.root)) / "model.safetensors")


def esmcpp_model(shape: str):
    import esm_cpp

    if ARGS.variant == "int8":
        model = esm_cpp.Model.load_from_gguf(str(gguf_path(shape)))
        assert model.config.weights_quantized
    else:
        model = esm_cpp.Model.load_from_safetensors(_safetensors(shape))
    BACKEND.update(esmcpp_path=f"{ARGS.variant} ({esm_cpp.current_isa()})", esmcpp_version=esm_cpp.__version__,
                   esmcpp_threads=esm_cpp.Model.num_threads)
    return model


def _config(model) -> types.SimpleNamespace:
    """The shape in the names ``common.forward_flops`` reads."""
    c = model.config
    return types.SimpleNamespace(embed_dim=c.hidden_size, ffn_dim=c.intermediate_size, vocab_size=c.vocab_size,
                                 num_layers=c.num_hidden_layers)


def _ids(sequence: str) -> np.ndarray:
    import esm_cpp

    return np.asarray(esm_cpp.Tokenizer().encode(sequence), dtype=np.int32)  # <cls> ... <eos>


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    shifted = x - x.max(axis=-1, keepdims=True)
    return (shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))).astype(np.float32)


def esmcpp_varlen() -> dict:
    model = esmcpp_model(ARGS.shape)
    seqs = common.varlen_set(Path(ARGS.root), ARGS.shape)
    ids = [_ids(s) for s in seqs]
    holder = {}

    def run():
        holder["logits"] = model.forward_scheduled(ids)

    start = time.perf_counter()
    run()  # warm-up: grows its workspace arenas to their peak
    warmup_s = time.perf_counter() - start
    times = timed(run, ARGS.reps)
    logits = holder["logits"]
    assert len(logits) == len(seqs) and all(l.shape == (len(s) + 2, 33) for l, s in zip(logits, seqs))
    save_outputs(**varlen_logits([l[1:-1] for l in logits]))
    lengths = [len(s) for s in seqs]
    cfg = _config(model)
    return {
        **summary(times),
        "warmup_s": warmup_s,
        "residues": sum(lengths),
        "proteins": len(lengths),
        # Its scheduler packs proteins into rows with per-protein attention (cu_seqlens): no
        # padding, so its arithmetic is the useful arithmetic.
        "flops": sum(common.forward_flops(cfg, 1, L + 2) for L in lengths),
        "api": "forward_scheduled (logits)",
    }


def esmcpp_latency() -> dict:
    model = esmcpp_model(ARGS.shape)
    proteins = common.read_workloads(Path(ARGS.root))["latency"]
    cfg = _config(model)
    result = {}
    for length in common.LATENCY_LENGTHS:
        ids = _ids(proteins[str(length)])
        for _ in range(2):
            model.forward(ids)
        times = timed(lambda: model.forward(ids), ARGS.reps)
        result[str(length)] = {**summary(times), "flops": common.forward_flops(cfg, 1, length + 2)}
    result["api"] = "forward (logits)"
    return result


def esmcpp_scan() -> dict:
    """Masked marginals as a user of its API would run them: the L masked copies in batches of
    flamino's rows per batch through ``forward_scheduled``, log-softmax at the masked position."""
    import esm_cpp

    model = esmcpp_model(ARGS.shape)
    cfg = _config(model)
    seq = common.read_workloads(Path(ARGS.root))["scan"]
    base = _ids(seq)
    mask_id = esm_cpp.Tokenizer().mask_id
    rows, L = ARGS.scan_rows, len(seq)

    def scan(positions: list[int]) -> np.ndarray:
        out = []
        for first in range(0, len(positions), rows):
            chunk = positions[first:first + rows]
            batch = []
            for p in chunk:
                ids = base.copy()
                ids[p + 1] = mask_id
                batch.append(ids)
            logits = model.forward_scheduled(batch)
            out.append(_log_softmax(np.stack([l[p + 1] for l, p in zip(logits, chunk)])))
        return np.concatenate(out)

    def flops(n: int) -> float:
        return n * common.forward_flops(cfg, 1, L + 2)

    return {**peer_scan(scan, rows, L, flops), "api": "forward_scheduled (logits)"}


def esmcpp_cold() -> dict:
    """New process to the first per-protein embedding (mean of the final hidden state)."""
    t_spawned = ARGS.t0 or T_PROCESS
    import esm_cpp  # noqa: F401

    t_import = time.time()
    model = esmcpp_model(ARGS.shape)
    t_load = time.time()
    seq = common.read_workloads(Path(ARGS.root))["cold"]
    _, hidden = model.forward_with_hidden_states(_ids(seq))
    embedding = hidden[-1][1:-1].mean(axis=0)  # post-final-LayerNorm, residues only
    assert embedding.shape == (model.config.hidden_size,) and np.isfinite(embedding).all()
    t_done = time.time()
    return cold_result(t_spawned, t_import, t_load, t_done, len(seq))


def esmcpp_quantize() -> dict:
    """Write the shape's W8A8 INT8 GGUF the way ``esm-cpp-quantize`` does (calibrate, then
    SmoothQuant + quantize), from the same random FP32 weights, calibrated on proteins that no
    measurement uses (``workloads.json`` "calibration"; its own UniRef50 set is not here)."""
    import esm_cpp

    start = time.time()
    model = esm_cpp.Model.load_from_safetensors(_safetensors(ARGS.shape))
    common.esmcpp_int8(model, common.read_workloads(Path(ARGS.root))["calibration"])
    path = gguf_path(ARGS.shape)
    path.parent.mkdir(parents=True, exist_ok=True)
    model.save_to_gguf(str(path))
    return {"gguf": str(path), "mib": path.stat().st_size / 2**20, "seconds": time.time() - start,
            "alpha": common.SMOOTHQUANT_ALPHA, "percentile": common.CALIBRATION_PERCENTILE}
