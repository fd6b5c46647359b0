"""flamino's measurements (``worker.py flamino ...``): the engine as users get it.

``$FLAMINO_ATTENTION`` / ``$FLAMINO_PRECISION`` (set by ``run.py`` for the kernel-off and
opt-in precision rows) choose the path; the default is the engine's own choice.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

import common
from measure import ARGS, BACKEND, T_PROCESS, save_outputs, summary, timed, varlen_logits

def flamino_engine(shape: str):
    """The engine as users get it; $FLAMINO_ATTENTION (set by run.py) picks the attention path."""
    from flamino_core import Engine, load_weights

    weights = load_weights(str(common.checkpoint_dir(shape, Path(ARGS.root))))
    engine = Engine(weights)
    backend = getattr(engine, "backend", None)
    if backend is not None:
        BACKEND.update(attention_path=backend.attention, backend=backend.describe())
    return engine


class ShapeLog:
    """Records the token shapes an engine's jitted entry points are called with (the padded
    shapes it really runs), by wrapping them on the engine while the block runs; for packed
    rows (a ``segments`` argument) also each row's segment token counts (``segments``)."""

    ENTRY_POINTS = ("_forward", "_masked_log_probs")

    def __init__(self, engine):
        self.engine = engine
        self.shapes: list[tuple[int, int]] = []
        self.segments: list[list[list[int]] | None] = []  # per call: None, or per row its segments' tokens
        self.saved: dict = {}

    def __enter__(self) -> "ShapeLog":
        for name in self.ENTRY_POINTS:
            original = getattr(self.engine, name, None)
            if original is None:
                continue
            self.saved[name] = original

            def wrapper(state, tokens, *args, _original=original, _name=name, **kwargs):
                self.shapes.append(tuple(int(d) for d in tokens.shape))
                segments = args[0] if args and _name == "_forward" else None
                self.segments.append(None if segments is None else
                                     [np.unique(np.asarray(row), return_counts=True)[1].tolist() for row in segments])
                return _original(state, tokens, *args, **kwargs)

            setattr(self.engine, name, wrapper)
        return self

    def __exit__(self, *exc) -> None:
        for name, original in self.saved.items():
            setattr(self.engine, name, original)


def trace_count() -> int:
    """How often flamino's forward pass has been traced (compiled) in this process."""
    from flamino_core.engine import engine as eng

    counts = getattr(eng, "TRACE_COUNTS", None)
    return counts["forward"] if counts is not None else eng._forward._cache_size()


def same_bucket_length(length: int, delta: int) -> int | None:
    """A length ``delta`` residues shorter that pads to the same bucket (None: none)."""
    try:
        from flamino_core.engine.planner import bucket_length
    except ImportError:  # flamino before the second architecture round (#21): the engine held it
        from flamino_core.engine.engine import bucket_length
    return length - delta if bucket_length(length - delta + 2) == bucket_length(length + 2) else None


def flamino_varlen() -> dict:
    engine = flamino_engine(ARGS.shape)
    cfg = engine.config
    seqs = common.varlen_workload(common.varlen_count(ARGS.shape))

    def run():
        outs = engine.run(seqs, repr_layers=(-1,), logits=True)
        assert len(outs) == len(seqs)
        return outs

    start = time.perf_counter()
    with ShapeLog(engine) as log:
        outs = run()  # warm-up: compiles every (rows, bucket) shape of this workload
    warmup_s = time.perf_counter() - start
    traces = trace_count()
    times = timed(run, ARGS.reps)
    traced_while_timed = trace_count() - traces

    # Only what was asked for is materialised: final representation and logits.
    only_requested = all(
        o.attentions is None and o.contacts is None and set(o.representations) == {cfg.num_layers}
        and o.logits is not None
        for o in outs
    )
    # New lengths inside the buckets already compiled: one residue shorter where that keeps the
    # bucket (and so the batch plan) the same.
    recompiles_new_lengths = None
    if not ARGS.no_recompile_check:
        shorter = [s[:-1] if same_bucket_length(len(s), 1) else s for s in seqs]
        before = trace_count()
        engine.run(shorter, repr_layers=(-1,), logits=True)
        recompiles_new_lengths = trace_count() - before

    save_outputs(**varlen_logits([o.logits for o in outs]))
    lengths = [len(s) for s in seqs]
    return {
        **summary(times),
        "warmup_s": warmup_s,
        "residues": sum(lengths),
        "proteins": len(lengths),
        "flops": sum(common.forward_flops(cfg, r, w, segments=seg) for (r, w), seg in zip(log.shapes, log.segments)),
        "useful_flops": sum(common.forward_flops(cfg, 1, L + 2) for L in lengths),
        "batches": [list(s) for s in log.shapes],
        "packed_batches": sum(seg is not None for seg in log.segments),
        "padded_tokens": sum(r * w for r, w in log.shapes),
        "traced_while_timed": traced_while_timed,
        "recompiles_new_lengths": recompiles_new_lengths,
        "only_requested_outputs": only_requested,
    }


def flamino_latency() -> dict:
    engine = flamino_engine(ARGS.shape)
    result = {}
    for length in common.LATENCY_LENGTHS:
        seq = common.fixed_protein(length)
        with ShapeLog(engine) as log:
            engine.run([seq])
        engine.run([seq])
        times = timed(lambda: engine.run([seq]), ARGS.reps)
        result[str(length)] = {
            **summary(times),
            "flops": sum(common.forward_flops(engine.config, r, w) for r, w in log.shapes),
            "shapes": [list(s) for s in log.shapes],
        }
    # New lengths in the same buckets (the shortest of 1-10 residues shorter that pads to the
    # same bucket, e.g. 292 and 302 tokens both pad to 304): no compile.
    new_lengths = [next(filter(None, (same_bucket_length(L, d) for d in range(10, 0, -1))), None)
                   for L in common.LATENCY_LENGTHS]
    before = trace_count()
    for length in filter(None, new_lengths):
        engine.run([common.fixed_protein(length, salt=1)])
    result["recompiles_new_lengths"] = trace_count() - before
    result["new_lengths"] = new_lengths
    return result


class _Stop(Exception):
    pass


def flamino_scan() -> dict:
    engine = flamino_engine(ARGS.shape)
    cfg = engine.config
    seq = common.fixed_protein(common.SCAN_LENGTH)
    L = len(seq)

    def first_batch_only(done, total):
        raise _Stop

    # Warm-up: the scan's first batch, which compiles its batch shape and tells its size.
    start = time.perf_counter()
    with ShapeLog(engine) as log:
        try:
            engine.compute_masked(seq, progress=first_batch_only)
        except _Stop:
            pass
    warmup_s = time.perf_counter() - start
    rows, width = log.shapes[0]
    batches = -(-L // rows)
    timed_positions = min(ARGS.scan_batches * rows, L) if ARGS.scan_batches else L
    out = {}

    def run():
        out["lp"] = engine.compute_masked(seq, positions=range(timed_positions))

    with ShapeLog(engine) as log:
        times = timed(run, ARGS.reps)
    assert out["lp"].shape == (timed_positions, cfg.vocab_size)
    save_outputs(scan=np.asarray(out["lp"], np.float32))
    timed_shapes = log.shapes[: len(log.shapes) // ARGS.reps]
    # Arithmetic flamino really does: the last layer runs queries and MLP at the masked position only.
    timed_flops = sum(common.forward_flops(cfg, r, w, head_positions=1, last_layer_positions=1) for r, w in timed_shapes)
    if timed_positions == L:
        full_shapes = timed_shapes
    else:  # the untimed batches have the shape of the timed ones (the last one padded to it)
        full_shapes = [(rows, width)] * batches
    full_flops = sum(common.forward_flops(cfg, r, w, head_positions=1, last_layer_positions=1) for r, w in full_shapes)
    scale = full_flops / timed_flops
    return {
        **summary([t * scale for t in times]),
        "timed_positions": timed_positions,
        "scale": scale,
        "measured_times_s": times,
        "warmup_s": warmup_s,
        "flops": full_flops,
        "useful_flops": L * common.forward_flops(cfg, 1, L + 2, head_positions=1),
        "batch_shapes": [list(s) for s in full_shapes],
        "rows_per_batch": rows,
    }


def flamino_cold() -> dict:
    """New process to first embedding. FLAMINO_JAX_CACHE names the compile cache (set by run.py)."""
    t_spawned = ARGS.t0 or T_PROCESS
    import flamino_core
    from flamino_core import Engine, enable_compilation_cache, load_weights

    t_import = time.time()
    enable_compilation_cache()  # reads FLAMINO_JAX_CACHE
    weights = load_weights(str(common.checkpoint_dir(ARGS.shape, Path(ARGS.root))))
    t_load = time.time()
    engine = Engine(weights)
    t_engine = time.time()
    seq = common.real_records()[0][1] if common.real_records() else common.fixed_protein(146)
    (out,) = engine.run([seq])
    embedding = out.mean
    assert embedding.shape == (engine.config.embed_dim,) and np.isfinite(embedding).all()
    t_done = time.time()
    del flamino_core
    return {
        "first_embedding_s": t_done - t_spawned,
        "interpreter_s": T_PROCESS - t_spawned,
        "import_s": t_import - T_PROCESS,
        "load_weights_s": t_load - t_import,
        "engine_s": t_engine - t_load,
        "first_run_s": t_done - t_engine,
        "sequence_length": len(seq),
        "cache_files": len(list(Path(os.environ["FLAMINO_JAX_CACHE"]).glob("*"))),
    }


def prepare_checkpoint() -> dict:
    """Write the shape's HF checkpoint, then let flamino convert it once into its cache of converted weights
    (FLAMINO_CACHE), so every later flamino process restores it the way a second start does."""
    start = time.time()
    directory = common.write_checkpoint(ARGS.shape, Path(ARGS.root))
    from flamino_core import load_weights

    load_weights(str(directory))
    return {"checkpoint": str(directory), "seconds": time.time() - start}
