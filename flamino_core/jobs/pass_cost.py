"""What model passes cost on this machine before they run: the engine's own plan (the batches
``Engine.run`` and ``Engine.compute_masked`` will run, as ``planner`` cuts them, grouped and
chunked as ``store/passes.py`` calls the engine), its work (``batch_work``: the rows' matmul
MFLOPs, attention's width-squared part included, ``row_work``, and each token's own cost per
layer, ``TOKEN_LAYER_MFLOP``) times the measured seconds per unit of it (``Rates``), plus the
compilations the plan needs.

Why a cost per token and layer: on this CPU the matmuls are not all of a layer's time, and the
rest (layer norms, activations, the calls between kernels) grows with the tokens, not the width
squared: per MFLOP alone a 32-wide model ran 3x slower than a 320-wide one, so a model never
timed here, guessed from another size's rate, was said 2.2x long or short (issue 50). Counted
per token-layer too, the two run at one rate, and so does a model of a size between them.

Why work, not tokens: a token's cost grows with its row's width (attention), most for narrow
models. For random:tiny on the Intel Xeon (2026-12-05) the measured seconds per token of masked
passes went from 1.1e-6 (161-residue rows) to 2.6e-5 (rows of up to 512) between two jobs, so
each job's prediction was 5-20x off by the other's rate; per MFLOP the widths are accounted for.

Compilations: each batch shape (``planner.shape_key``) the process has not run yet is compiled
once by XLA, seconds each against milliseconds per batch of a small model: on a fresh server
process they were most of a short job (a set's unmasked passes predicted 14-52x short without
them, docs/reliability.md). The engine notes the shapes it ran (``Engine.compiled_shapes``); a
shape this machine compiled in an earlier process (the shapes index kept beside the rates, read
only when JAX's persistent compilation cache is on) loads from that cache instead, about five
times cheaper. Seconds per compilation are measured per architecture (``architecture``) by
``MeteredEngine`` as the seconds a compiling call took beyond its tokens at the measured rate;
before any measurement, ``DEFAULT_COMPILE_S``.

A fixed cost per batch: each batch is one call into XLA, whose dispatch, copies and per-call
numpy cost about a millisecond whatever its work (``BATCH_FIXED_S``). Rates are per MFLOP of the
rest (``record_call``), so a rate timed on a small call (a set's first record alone, mostly that
fixed cost) is not extrapolated over a long job of big batches; estimates add it back per batch.

Full and narrow batches (``is_narrow``: under half the rows their width allows, the last batch of
a chunk, a record's last positions, a short set's records) are timed into rates of their own and
each batch is estimated at its class's. A narrow batch is little work, its measured rate mostly
jitter: random:tiny's 1-row masked batches (width 176, load 2-4, 2026-12-07) took 0.8-4.2 ms,
1.2 median: net of the fixed cost 6.2e-6 s per unit in the median, 4.7e-6 to 1.2e-5 from the
10th to the 90th percentile, up to 6.6e-5; its 32-row batches 5.0e-6, 4.4-7.5e-6. With one
running average per model and kind, each call weighing 0.3 whatever its work, a DMS pll's and a
fit's 1-row batches (one call in three: 161 positions, 64 a call, 32 rows a batch) moved the
masked rate from 5.8e-6 to 1.7e-5, and the warm pseudo-perplexity after them, almost all in full
batches, was said 9.3 s for 4.8 s (docs/reliability.md). In medians the batches follow one law,
~1 ms per batch plus 0.24 ms a row at width 176: ``BATCH_FIXED_S`` and the rate.

A first guess for a pass kind never timed for a model: with models of two sizes or more timed
here, their rates fitted on their sizes (``sized_guess``: it follows a loaded machine, where the
wide models slow most); else the same kind's median rate on the other models timed here
(``Rates.seconds``, per unit of ``batch_work``, which scales with the model's size), else this
model's other kind. Issue 50: a pseudo-perplexity borrowed from random:tiny's unmasked passes, whose
calls are 2-6x a masked pass's time per MFLOP (every layer kept, and that fixed cost), was
announced 6-13x long.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Sequence

from flamino_core.engine import planner, windows
from flamino_core.jobs.rates import NARROW
from flamino_core.store.passes import CHUNK, record_groups

if TYPE_CHECKING:  # model.stack imports JAX; the pages that show costs must not (tests/app/test_app.py)
    from flamino_core.model.stack import Capture

# Seconds per compilation before this machine measured any, for a new shape of each pass kind and
# for one found in the persistent cache. A masked pass compiles more than an unmasked one (its
# masking and the scan over chunks of positions). Measured quiet on the 2-core AMD EPYC (Zen 4),
# 2026-12-06, as the app's jobs measure them (benchmarks/estimates.py's fresh process): random:tiny
# unmasked 0.70-0.83 s, masked 1.62 s; random:esm2_t6_8M_UR50D unmasked 0.89 s, masked 1.16 s. Under
# load (1.4-10) probes took 3.4-6.7 s new and 0.6-1.3 s cached: a loaded machine measures its own
# after its first compiling call. One 5 s for both kinds (the loaded figure) said a fresh process's
# first unmasked job at 15.2 s for 2.6 s (issue 50). The layers are one nnx.scan, so the model's
# depth barely changes it; wider models are measured.
DEFAULT_COMPILE_S = {"unmasked compile": 0.8, "masked compile": 1.6, "cached compile": 1.0}
# Seconds per unit of ``batch_work``, either kind, where nothing was timed on this machine yet and
# a job must say its time before it runs (``first_guess=True``: a fit's model passes, which the
# Predict page counts in the time it says beside its button). Measured on the 2-core AMD EPYC:
# random:tiny and ESM-2 8M 7.5-8.0e-6 quiet (2026-12-06), random:tiny 6.3-6.7e-6 in a fresh
# process (2026-12-07). Without it a machine's first fit said 10.5 s (its fits alone) and took
# 23.2 s, 10.9 s of them the 1,083 model passes it had not counted (issue 50).
DEFAULT_SECONDS_PER_UNIT = 8e-6

# Seconds each batch (one compiled call) costs beyond its work. Measured on the 2-core AMD EPYC at
# load 3-5 (2026-12-06, /tmp probe: medians of 30 compiled calls of near-zero work): random:tiny
# 0.96 ms for a 10-residue record's unmasked pass keeping every layer, 0.64 ms for one masked
# position; random:esm2_t6_8M_UR50D's 10-residue call 10.5 ms, of which its 242 MFLOP at its
# masked rate (1.8e-5 s per MFLOP) are about 4.3. A machine-wide constant, not measured per machine.
BATCH_FIXED_S = 1e-3
# What a token costs per layer beyond its matmuls (layer norms, activations, softmax, rotary, the
# calls between a layer's fused kernels), in MFLOP at the pass kind's rate: a cost per token that
# does not grow with the model's width, so the smaller the model, the more of its time it is. Per
# MFLOP alone, random:tiny (32 wide) took 2.9e-5 s and ESM-2 8M (320 wide) 9.0e-6 (the quiet
# benchmarks/estimates.py run of 2026-12-06 15:45), so the 8M model's first pseudo-perplexity,
# guessed at tiny's rate, was said 2.2x long (issue 50). Measured on the 2-core AMD EPYC with
# benchmarks/size_rates.py (compiled passes, fastest of 5), 2026-12-06 18:02-18:13 at load 1-6
# (other agents' work; each model's fastest call kept): masked passes of random:tiny at 64-300
# residues 2.2-3.1e-5 s per MFLOP, the 8M model's 7.8e-6; unmasked ones 0.95-1.8e-5 and
# 5.9-6.5e-6. Tiny's rows have 7-38 token-layers per MFLOP, the 8M's 0.26-0.39: 0.1 (masked) and
# 0.2 (unmasked) bring both to one rate per unit, masked 6.5-8.0e-6 and 7.5e-6 s, unmasked
# 3.9-7.7e-6 and 5.5-6.2e-6 (the quiet run's job rates, 2.9e-5 and 9.0e-6 per MFLOP, give 0.105).
# A model's own measured rate absorbs a family's other constants (the tiny ESM C test model, its MLP 8x
# wider than tiny's, measured 3.8-4.6e-6 per unit: a first guess across families is up to 2x off).
TOKEN_LAYER_MFLOP = {"masked": 0.1, "unmasked": 0.2}
REFERENCE_WIDTH = 256  # tokens of the row a model's size is read at (``token_layer_share``)
SIZE_SPREAD = 2.0  # the models a guess is fitted on differ at least this much in token_layer_share
# A call's time beyond its batches' fixed cost, at least this share of it, is its work's
# (``record_call``): a call of nearly nothing but fixed cost says little of the rate, and a
# rate of zero would say a long job is free.
MIN_WORK_SHARE = 0.25


def architecture(engine) -> str:
    """The key compilations are measured and indexed by: what decides the compiled code (sizes,
    family, attention path, precision), not the weights' values."""
    c, backend = engine.config, engine.backend
    return (f"{c.family} {c.num_layers}x{c.embed_dim}x{c.attention_heads}x{c.ffn_dim}x{c.vocab_size} "
            f"{backend.attention} {backend.precision}")


def record_outputs_capture(engine) -> Capture:
    """What ``passes.record_outputs``' passes keep: every layer and the logits."""
    from flamino_core.model.stack import Capture  # here, not at the top: JAX (see TYPE_CHECKING above)

    return Capture(hidden=tuple(range(engine.config.num_layers + 1)), logits=True)


def row_work(config, width: int, head_positions: int) -> float:
    """The matmul work of one row of ``width`` tokens, in MFLOP: per layer 2W(4D^2 + 2DF) for the
    projections and the MLP and 4W^2 D for attention's scores and mixing, plus the LM head 2D(D + V)
    at ``head_positions`` tokens (a masked pass: the masked one; an unmasked pass: every token).
    The count docs/benchmarks.md uses for efficiency; a family's own layers (ESM C's gated MLP)
    differ by a constant factor, which the model's measured rate absorbs."""
    d, f, v = config.embed_dim, config.ffn_dim, config.vocab_size
    per_layer = 2 * width * (4 * d * d + 2 * d * f) + 4 * width * width * d
    return (config.num_layers * per_layer + head_positions * 2 * d * (d + v)) / 1e6


def batch_work(config, kind: str, rows: int, width: int) -> float:
    """A batch's work as rates are per (``Rates``): its matmul MFLOP (``row_work``; a masked row's
    LM head at its one masked position, an unmasked row's at every token) plus ``TOKEN_LAYER_MFLOP``
    of its kind per token and layer, in MFLOP-equivalents."""
    head = 1 if kind == "masked" else width
    return rows * (row_work(config, width, head) + TOKEN_LAYER_MFLOP[kind] * width * config.num_layers)


def token_layer_share(config, kind: str) -> float:
    """Token-layers per matmul MFLOP of one row of ``REFERENCE_WIDTH`` tokens of ``kind``: the
    model's size as the first guess reads it (``sized_guess``), large for a narrow model, ~0 for a
    wide one."""
    head = 1 if kind == "masked" else REFERENCE_WIDTH
    return REFERENCE_WIDTH * config.num_layers / row_work(config, REFERENCE_WIDTH, head)


def sized_guess(engine, kind: str, rates) -> float | None:
    """Seconds per unit of ``batch_work`` of ``kind`` passes for a model never timed here, fitted on
    the models timed here of at least two sizes (``Rates.sized``; None: fewer, then the median of
    their rates per unit, ``Rates.seconds``). The fit is seconds per MFLOP = b + c x, x the
    model's ``token_layer_share``, weighed by relative error. Quiet, c/b is ``TOKEN_LAYER_MFLOP``
    and this is the median's guess; under load the wide models' threaded matmuls slow most (at
    load 5.6-5.9 random:tiny and the 8M model ran at 2.3e-5 and 2.0e-5 s per MFLOP, where quiet
    they differ 3x), c falls, and the fit follows: ESM-2 35M, guessed from those two, is said
    within 1.5x where the median said 2.5-3.2x short (``tests/integration/test_first_guess.py``). c < 0 (a
    narrow model faster per MFLOP) is held at 0: one rate per MFLOP."""
    points = rates.sized(kind, exclude=engine.fingerprint)
    k = TOKEN_LAYER_MFLOP[kind]
    if len(points) < 2 or max(x for _, x in points) < SIZE_SPREAD * min(x for _, x in points):
        return None
    rho = [r * (1 + k * x) for r, x in points]  # each model's seconds per MFLOP of its reference row
    xs, w = [x for _, x in points], [1 / y ** 2 for y in rho]  # least squares of the relative error
    sw, sx, sy = sum(w), sum(a * x for a, x in zip(w, xs)), sum(a * y for a, y in zip(w, rho))
    sxx, sxy = sum(a * x * x for a, x in zip(w, xs)), sum(a * x * y for a, x, y in zip(w, xs, rho))
    c = max((sw * sxy - sx * sy) / (sw * sxx - sx * sx), 0.0)
    b = (sy - c * sx) / sw
    if b <= 0:
        return None
    x = token_layer_share(engine.config, kind)
    return (b + c * x) / (1 + k * x)


def masked_position_work(engine, length: int) -> float:
    """The work of one masked position of a sequence of ``length`` residues (one row of its
    masked passes), in MFLOP: what a job's own rate weighs its positions by (``Job.progress``)."""
    return batch_work(engine.config, "masked", 1, planner.masked_width(length))


def record_work(engine, length: int) -> float:
    """The work of one record's unmasked pass (``passes.record_outputs``), in MFLOP: what a set's
    job weighs its records by (``Job.progress``). A record's tokens attend only to their own
    sequence whether it is packed with others or not; a record beyond ``MAX_RESIDUES`` is read in
    overlapping windows (``windows.window_starts``), each its own row."""
    starts = windows.window_starts(length)
    width = min(length, windows.MAX_RESIDUES) + 2
    return len(starts) * batch_work(engine.config, "unmasked", 1, width)


def unmasked_batches(engine, lengths: Sequence[int], grouped: bool = True,
                     chunks: Sequence[Sequence[int]] | None = None) -> list[tuple[str, float]]:
    """(shape key, work in MFLOP) of each batch the unmasked passes over sequences of ``lengths`` run:
    in ``passes.record_outputs``' groups (``grouped``; else one ``Engine.run`` call), each cut
    into windows and planned as ``Engine.run`` plans them (packed rows where the engine packs).
    ``chunks``: the lengths of each ``record_outputs`` call the job makes (``plan.SetOutputs``),
    grouped call by call (instead of ``lengths`` in one call)."""
    capture = record_outputs_capture(engine)
    calls = [["A" * n for n in chunk] for chunk in chunks] if chunks is not None else [["A" * n for n in lengths]]
    groups = [g for call in calls for g in record_groups(engine, call)] if grouped else [calls[0]]
    out = []
    for group in groups:
        cut = [len(w.residues) for w in windows.windows(group, True)]
        for batch in planner.plan(cut, engine.max_rows, pack=engine.backend.packing):
            shape = (len(batch.rows), batch.width)
            out.append((planner.shape_key("forward", shape, batch.shared, capture),
                        batch_work(engine.config, "unmasked", *shape)))
    return out


def masked_batches(engine, need: Iterable[tuple[int, int]], chunk: int | None = CHUNK) -> list[tuple[str, float]]:
    """(shape key, work in MFLOP) of each pass the masked passes run for ``need``, (sequence length,
    positions) pairs: ``passes.masked_log_probs`` hands the engine ``chunk`` positions a call
    (None: all in one call), each call cut into passes of ``Engine.masked_pass_shape``."""
    out = []
    for length, positions in need:
        max_rows, width = engine.masked_pass_shape(length)
        step = chunk or max(positions, 1)
        for first in range(0, positions, step):
            for rows in planner.masked_batch_rows(min(step, positions - first), max_rows):
                key = planner.shape_key("masked", (rows, width))
                out.append((key, batch_work(engine.config, "masked", rows, width)))
    return out


def new_shapes(engine, batches: Iterable[tuple[str, int]], rates) -> tuple[int, int]:
    """(shapes never compiled on this machine, shapes in the persistent cache) among ``batches``
    not yet compiled in this process."""
    missing = {key for key, _ in batches} - engine.compiled_shapes
    cached = rates.compiled(architecture(engine)) & missing if persistent_cache_on() else set()
    return len(missing) - len(cached), len(cached)


class PassSeconds(float):
    """Seconds for some passes, with the part of them that is compilations (``compiling``): a
    job's time left keeps compilations out of its time per unit (``Job.expect``). ``borrowed``:
    the passes' kind was never timed for this model, and its rate is the other kind's
    (``Rates.seconds``), a first guess the job's own rate soon replaces: for random:tiny on the
    Intel Xeon an unmasked pass capturing every layer took 2.97e-5 s per token and a masked
    pass 1.6e-6 s, so a pseudo-perplexity borrowed from the Records table's entropies said
    "about 20 seconds" for 5 s of work (Chromium, 2026-12-05)."""

    compiling: float
    borrowed: bool

    def __new__(cls, seconds: float, compiling: float = 0.0, borrowed: bool = False) -> PassSeconds:
        value = super().__new__(cls, seconds)  # (the defaults: unpickling)
        value.compiling, value.borrowed = compiling, borrowed
        return value


def seconds(engine, kind: str, batches: list[tuple[str, float]], rates,
            first_guess: bool = False) -> PassSeconds | None:
    """Seconds for ``batches`` of ``kind`` passes (``masked``/``unmasked``) here: their work at
    the measured rate and their fixed cost (``running_seconds``), plus their new shapes'
    compilations (None: no rate to go by, unless ``first_guess``: then
    ``DEFAULT_SECONDS_PER_UNIT``, said as borrowed)."""
    running = running_seconds(engine, kind, batches, rates, first_guess)
    if running is None:
        return None
    compiling = compilations_seconds(engine, kind, *new_shapes(engine, batches, rates), rates)
    return PassSeconds(running + compiling, compiling, borrowed=not measured(engine, kind, rates))


def running_seconds(engine, kind: str, batches: list[tuple[str, float]], rates,
                    first_guess: bool = False) -> float | None:
    """Seconds ``batches`` of ``kind`` passes take once compiled: each batch's work at its class's
    rate (``unit_rate``: full and narrow batches are measured apart) plus ``BATCH_FIXED_S`` each
    (None: no rate)."""
    work = 0.0
    for narrow in (False, True):
        total = sum(w for key, w in batches if is_narrow(engine, key) == narrow)
        if total:
            rate = unit_rate(engine, kind, rates, narrow, first_guess)
            if rate is None:
                return None
            work += rate * total
    return work + len(batches) * BATCH_FIXED_S


def unit_rate(engine, kind: str, rates, narrow: bool = False, first_guess: bool = False) -> float | None:
    """Seconds per unit of ``batch_work`` of ``kind`` passes of one class (``is_narrow``) of this
    model: its own measured rate of that class, else of the other class as it is, else a first
    guess (``sized_guess``, else ``Rates.seconds``'s borrowed rate), else with ``first_guess``
    ``DEFAULT_SECONDS_PER_UNIT`` (None: no rate). Unscaled across classes: net of ``BATCH_FIXED_S``
    the two differ less than the 1.5x bar in the median (random:tiny's 1-row masked batches
    6.2e-6 s per unit, its 32-row ones 5.0e-6, at width 176; the per-batch cost is what a narrow
    batch loses, and it is counted apart); they differ in spread (``Rates.NARROW``)."""
    model = engine.fingerprint
    for key in ((narrow_kind(kind), kind) if narrow else (kind, narrow_kind(kind))):
        if rates.measured(model, key):
            return rates.seconds(model, key, 1.0)
    rate = sized_guess(engine, kind, rates)
    rate = rates.seconds(model, kind, 1.0) if rate is None else rate
    return DEFAULT_SECONDS_PER_UNIT if rate is None and first_guess else rate


def measured(engine, kind: str, rates) -> bool:
    """Whether ``kind`` passes of this model were timed here, in batches of either class."""
    return rates.measured(engine.fingerprint, kind) or rates.measured(engine.fingerprint, narrow_kind(kind))


def narrow_kind(kind: str) -> str:
    """The rates' kind of ``kind`` passes in narrow batches (``Rates.KINDS``): ``masked narrow``."""
    return f"{kind} {NARROW}"


def is_narrow(engine, key: str) -> bool:
    """Whether the batch of shape ``key`` (``planner.shape_key``) holds under half the rows a batch
    of its width may (``Engine.max_rows``, the power of two ``planner`` fills): its rate is the
    narrow batches' (``Rates.NARROW``). A key or an engine that says no rows and width: full."""
    try:
        rows, width = (int(n) for n in key.split()[1].split("x"))
        return 2 * rows < planner.pow2_at_most(engine.max_rows(width))
    except (AttributeError, IndexError, TypeError, ValueError):
        return False


def record_call(rates, model: str, kind: str, work: float, batches: int, seconds: float,
                size: float | None = None, narrow: bool = False) -> None:
    """Record a call's ``seconds`` for ``batches`` batches of ``work`` MFLOP as the rate of its
    work: the seconds beyond the batches' fixed cost, at least ``MIN_WORK_SHARE`` of them;
    ``size``: the model's ``token_layer_share`` (what ``sized_guess`` fits on); ``narrow``: the
    batches were narrow (``is_narrow``), their rate is kept apart (and not fitted on)."""
    rate_kind, size = (narrow_kind(kind), None) if narrow else (kind, size)
    rates.record(model, rate_kind, work, max(seconds - batches * BATCH_FIXED_S, MIN_WORK_SHARE * seconds), size=size)


def compilations_seconds(engine, passes: str, fresh: int, cached: int, rates) -> float:
    """Seconds for ``fresh`` new compilations of ``passes`` (``masked``/``unmasked``) and ``cached``
    ones from the persistent cache here."""
    return (fresh * compile_seconds(engine, compile_kind(passes, cached=False), rates)
            + cached * compile_seconds(engine, compile_kind(passes, cached=True), rates))


def compile_kind(passes: str, cached: bool) -> str:
    """The rate's kind of a compilation of ``passes``: ``masked compile``, ``unmasked compile``, or
    (either, loaded from the persistent cache) ``cached compile``."""
    return "cached compile" if cached else f"{passes} compile"


def compile_seconds(engine, kind: str, rates) -> float:
    """Seconds one compilation of ``kind`` (``compile_kind``) takes here: measured for this
    architecture; else its other kind of pass measured (``OTHER_PASSES``), scaled by the
    defaults' ratio; else the median of the other architectures measured on this machine; else
    ``DEFAULT_COMPILE_S`` (the 8M model's first jobs on the Intel Xeon were predicted at the Zen
    4's 5 s a compilation where random:tiny had measured 0.2-1 s: 1.9x long, docs/reliability.md)."""
    measured = rates.seconds(architecture(engine), kind, 1)
    other = OTHER_PASSES.get(kind)
    if measured is None and other is not None:
        # A server's first pseudo-perplexity after its Records table: the table's entropies
        # measured 0.17-0.31 s an unmasked compilation of random:tiny, and the default's 1.6 s for
        # each of the job's 28 masked shapes said 44.8 s of compilations where 29 took 5.8 s;
        # its time left stayed ~40 s high to the end (Chromium, 2026-12-07). Measured here
        # together: masked 0.40-0.75 s against unmasked 0.17-0.31 s, near the defaults' 2x.
        borrowed = rates.seconds(architecture(engine), other, 1)
        if borrowed is not None:
            measured = borrowed * DEFAULT_COMPILE_S[kind] / DEFAULT_COMPILE_S[other]
    if measured is None:
        measured = rates.typical(kind)
    return DEFAULT_COMPILE_S[kind] if measured is None else measured


# A fresh compilation of one kind of pass, and the other kind's, whose measured time it borrows.
OTHER_PASSES = {"masked compile": "unmasked compile", "unmasked compile": "masked compile"}


def persistent_cache_on() -> bool:
    import jax

    return bool(jax.config.jax_compilation_cache_dir)


def masked_seconds(engine, need: Iterable[tuple[int, int]], rates=None,
                   first_guess: bool = False) -> PassSeconds | None:
    """Seconds for the masked passes of ``need``, (sequence length, positions) pairs, here."""
    from flamino_core.jobs.rates import default_rates

    return seconds(engine, "masked", masked_batches(engine, need), rates or default_rates(), first_guess)


def unmasked_seconds(engine, lengths: Sequence[int], rates=None, chunks: Sequence[Sequence[int]] | None = None,
                     first_guess: bool = False) -> PassSeconds | None:
    """Seconds for the unmasked passes (``passes.record_outputs``) over sequences of ``lengths`` here
    (``chunks``: in those calls, ``unmasked_batches``)."""
    from flamino_core.jobs.rates import default_rates

    batches = unmasked_batches(engine, lengths, chunks=chunks)
    return seconds(engine, "unmasked", batches, rates or default_rates(), first_guess)
