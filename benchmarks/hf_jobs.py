"""HF transformers' measurements (``worker.py hf ...``): ``EsmForMaskedLM``, fp32, its default
attention, the usual way; and the fp32 matmul peaks of JAX and torch (``jax``/``torch peak``).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np

import common
from measure import ARGS, T_PROCESS, cold_result, peer_scan, save_outputs, summary, timed, varlen_logits

def torch_device() -> str:
    """"cuda" when flamino runs on a GPU (run.py passes JAX's platform) and torch has CUDA, so
    both systems use the same device; otherwise "cpu"."""
    import torch

    return "cuda" if ARGS.device == "gpu" and torch.cuda.is_available() else "cpu"


def hf_model(shape: str):
    import torch
    from transformers import EsmForMaskedLM

    torch.set_num_threads(ARGS.threads)
    model = EsmForMaskedLM.from_pretrained(str(common.checkpoint_dir(shape, Path(ARGS.root)))).eval()
    assert next(model.parameters()).dtype == torch.float32
    return model.to(torch_device())


def hf_embed_logits(model, ids: np.ndarray, lengths: list[int]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Final representation and logits per row, special tokens and padding removed."""
    import torch

    from flamino_core.alphabet import PAD_IDX

    t = torch.from_numpy(ids.astype(np.int64)).to(model.device)
    with torch.inference_mode():
        hidden = model.esm(input_ids=t, attention_mask=(t != PAD_IDX).long()).last_hidden_state
        logits = model.lm_head(hidden)
    hidden, logits = hidden.cpu().numpy(), logits.cpu().numpy()  # .cpu() waits for a GPU
    return [(hidden[i, 1:L + 1], logits[i, 1:L + 1]) for i, L in enumerate(lengths)]


def hf_batches(lengths: list[int], budget: int = common.HF_TOKEN_BUDGET) -> list[list[int]]:
    """Sorted by length, greedily filled while rows x longest <= the token budget."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    for i in order:
        if batches and (len(batches[-1]) + 1) * (lengths[i] + 2) <= budget:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def hf_varlen() -> dict:
    from flamino_core.alphabet import batch_encode

    model = hf_model(ARGS.shape)
    cfg = _config()
    seqs = common.varlen_workload(common.varlen_count(ARGS.shape))
    lengths = [len(s) for s in seqs]
    batches = hf_batches(lengths)

    def run(batches=batches):
        outs = [None] * len(seqs)
        for rows in batches:
            width = max(lengths[i] for i in rows) + 2
            ids = batch_encode([seqs[i] for i in rows], pad_to=width)
            for i, o in zip(rows, hf_embed_logits(model, ids, [lengths[i] for i in rows])):
                outs[i] = o
        return outs

    start = time.perf_counter()
    # Warm-up: the smallest and the largest batch (eager PyTorch compiles nothing per shape;
    # this touches every kernel and grows the allocator to its peak).
    run([batches[0], batches[-1]])
    warmup_s = time.perf_counter() - start
    holder = {}
    times = timed(lambda: holder.update(outs=run()), ARGS.reps)
    save_outputs(**varlen_logits([logits for _, logits in holder["outs"]]))
    shapes = [(len(rows), max(lengths[i] for i in rows) + 2) for rows in batches]
    return {
        **summary(times),
        "warmup_s": warmup_s,
        "residues": sum(lengths),
        "proteins": len(lengths),
        "flops": sum(common.forward_flops(cfg, r, w) for r, w in shapes),
        "batches": [list(s) for s in shapes],
        "padded_tokens": sum(r * w for r, w in shapes),
        "attn_implementation": model.config._attn_implementation,
        "device": str(model.device),
    }


def hf_latency() -> dict:
    from flamino_core.alphabet import batch_encode

    model = hf_model(ARGS.shape)
    cfg = _config()
    result = {}
    for length in common.LATENCY_LENGTHS:
        seq = common.fixed_protein(length)

        def run():
            return hf_embed_logits(model, batch_encode([seq], pad_to=length + 2), [length])

        for _ in range(2):
            run()
        times = timed(run, ARGS.reps)
        result[str(length)] = {**summary(times), "flops": common.forward_flops(cfg, 1, length + 2)}
    result["attn_implementation"] = model.config._attn_implementation
    result["device"] = str(model.device)
    return result


def hf_scan() -> dict:
    """Masked marginals the usual transformers way: L masked copies in batches of the same
    number of rows flamino uses, log-softmax of the logits at each masked position."""
    import torch

    from flamino_core.alphabet import MASK_IDX, encode

    model = hf_model(ARGS.shape)
    cfg = _config()
    seq = common.fixed_protein(common.SCAN_LENGTH)
    base = encode(seq)
    rows = ARGS.scan_rows  # flamino's rows per batch, passed on by run.py
    L = len(seq)

    def scan(positions) -> np.ndarray:
        out = []
        for first in range(0, len(positions), rows):
            chunk = positions[first:first + rows]
            ids = np.tile(base, (len(chunk), 1)).astype(np.int64)
            ids[np.arange(len(chunk)), np.array(chunk) + 1] = MASK_IDX
            t = torch.from_numpy(ids).to(model.device)
            with torch.inference_mode():
                logits = model(input_ids=t, attention_mask=torch.ones_like(t)).logits
                at = logits[torch.arange(len(chunk)), torch.as_tensor(chunk) + 1]
                out.append(torch.log_softmax(at, dim=-1).cpu().numpy())
        return np.concatenate(out)

    def shapes(n: int) -> list[tuple[int, int]]:
        n_full, last = divmod(n, rows)
        return [(rows, L + 2)] * n_full + ([(last, L + 2)] if last else [])

    def flops(n: int) -> float:
        return sum(common.forward_flops(cfg, r, w) for r, w in shapes(n))

    return {**peer_scan(scan, rows, L, flops), "batch_shapes": [list(s) for s in shapes(L)],
            "attn_implementation": model.config._attn_implementation}


def hf_cold() -> dict:
    t_spawned = ARGS.t0 or T_PROCESS
    import torch
    from transformers import EsmForMaskedLM

    from flamino_core.alphabet import batch_encode

    t_import = time.time()
    torch.set_num_threads(ARGS.threads)
    model = EsmForMaskedLM.from_pretrained(str(common.checkpoint_dir(ARGS.shape, Path(ARGS.root)))).eval()
    model = model.to(torch_device())
    t_load = time.time()
    seq = common.real_records()[0][1] if common.real_records() else common.fixed_protein(146)
    ((hidden, _),) = hf_embed_logits(model, batch_encode([seq]), [len(seq)])
    assert np.isfinite(hidden.mean(0)).all()
    t_done = time.time()
    return cold_result(t_spawned, t_import, t_load, t_done, len(seq))


def _config():
    from flamino_core.model.config import ESM2Config

    return ESM2Config.preset(common.SHAPES[ARGS.shape])


# --- matmul peak -------------------------------------------------------------------------------
PEAK_N = 4096


def jax_peak() -> dict:
    import jax
    import jax.numpy as jnp

    a = jax.random.normal(jax.random.key(0), (PEAK_N, PEAK_N), jnp.float32)
    b = jax.random.normal(jax.random.key(1), (PEAK_N, PEAK_N), jnp.float32)
    # True fp32 (on a GPU JAX's default would be TF32), as flamino runs its fp32 model.
    dot = jax.jit(lambda a, b: jnp.dot(a, b, precision="highest"))
    for _ in range(2):
        dot(a, b).block_until_ready()
    times = timed(lambda: dot(a, b).block_until_ready(), ARGS.reps)
    flops = 2.0 * PEAK_N**3
    return {**summary(times), "flops": flops, "gflops_median": flops / statistics.median(times) / 1e9,
            "gflops_best": flops / min(times) / 1e9, "platform": jax.default_backend(),
            "device_kind": getattr(jax.devices()[0], "device_kind", "")}


def torch_peak() -> dict:
    import torch

    torch.set_num_threads(ARGS.threads)
    device = torch_device()
    a, b = torch.randn(PEAK_N, PEAK_N, device=device), torch.randn(PEAK_N, PEAK_N, device=device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def matmul():
        a @ b
        sync()

    for _ in range(2):
        matmul()
    times = timed(matmul, ARGS.reps)
    flops = 2.0 * PEAK_N**3
    return {**summary(times), "flops": flops, "gflops_median": flops / statistics.median(times) / 1e9,
            "gflops_best": flops / min(times) / 1e9, "device": device}
