"""Issue 50 row 2: the first guess of a pass kind never timed for a model, and of a model never
timed here, against recorded real timings.

The timings below were recorded on the shared 2-core AMD EPYC (Zen 4) on 2026-12-06 between 12:05
and 12:08 UTC at load average 3.8-10.4 (other agents' work), by a probe that ran each engine call
twice and timed the second (compiled): random:tiny on 12 ProteinGym targets of 150-300 residues
(the Records job's calls: one record alone, then ``record_groups``'s groups; then every position's
masked pass, 64 a call), random:esm2_t6_8M_UR50D on 4 of 50-90. They are the machine's, not the
cost model's: each row is (batches, MFLOP as ``pass_cost`` plans them, seconds measured). Under
that load a model's rate varies by about 1.3x from minute to minute; the issue's bar is 1.5x.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from flamino_core.jobs import pass_cost
from flamino_core.jobs.rates import Rates

# random:tiny: the Records job's first chunk (one record of 161 residues, alone), its next call (11
# records in two batches), and its set's masked passes (3,018 positions, 134 batches, summed).
TINY_FIRST_RECORD = (1, 14.429, 0.00481)
TINY_GROUP = (2, 740.991, 0.03157)
TINY_SET_MASKED = (134, 65_794.0, 3.359)
# random:esm2_t6_8M_UR50D: a first record alone (87 residues) and its set's masked passes (272 positions).
EIGHT_M_FIRST_RECORD = (1, 1508.045, 0.06944)
EIGHT_M_SET_MASKED = (6, 372_285.0, 22.672)


def engine(name: str) -> SimpleNamespace:
    """What ``pass_cost.seconds`` reads of an engine: its fingerprint and the shapes it compiled
    (every shape here: these tests are of the passes' time, compilations are tests/integration/test_jobs.py's)."""
    config = SimpleNamespace(family=name, num_layers=1, embed_dim=1, attention_heads=1, ffn_dim=1, vocab_size=1)
    return SimpleNamespace(fingerprint=name, compiled_shapes={"shape"}, config=config,
                           backend=SimpleNamespace(attention="-", precision="-"))  # (``pass_cost.architecture``)


def batches(recorded: tuple[int, float, float]) -> list[tuple[str, float]]:
    count, work, _ = recorded
    return [("shape", work / count)] * count


def record(rates: Rates, model: str, kind: str, recorded: tuple[int, float, float]) -> None:
    count, work, seconds = recorded
    pass_cost.record_call(rates, model, kind, work, count, seconds)


def test_a_pseudo_perplexity_is_guessed_from_other_models_masked_passes_not_a_small_unmasked_call(tmp_path):
    """The issue's 6-13x: a set's pseudo-perplexity on a model whose only timed call was the
    Records job's first record alone (its other calls compiled new shapes, so they set no rate)
    borrowed that call's time per MFLOP, mostly fixed cost and an unmasked pass's every-layer
    outputs. The guess now comes from the masked passes timed for another model here, per MFLOP
    (the work scales with the model's size), plus each batch's fixed cost."""
    first_record_rate = TINY_FIRST_RECORD[2] / TINY_FIRST_RECORD[1]  # what the old model borrowed, s per MFLOP
    old_guess = first_record_rate * TINY_SET_MASKED[1]
    actual = TINY_SET_MASKED[2]
    assert old_guess / actual > 1.5  # 21.9 s said for 3.4 s: 6.5x (the issue: 6x and 13x)

    rates = Rates(tmp_path / "rates.json")
    record(rates, "random:tiny", "unmasked", TINY_FIRST_RECORD)
    record(rates, "8M", "masked", EIGHT_M_SET_MASKED)
    guess = pass_cost.seconds(engine("random:tiny"), "masked", batches(TINY_SET_MASKED), rates)
    assert guess.borrowed  # the page says it is a first guess
    assert 1 / 1.5 <= actual / guess <= 1.5  # 4.1 s for 3.4 s


def test_with_no_other_model_timed_the_other_kind_is_borrowed_without_its_fixed_cost(tmp_path):
    """No other model timed masked passes: the guess is this model's unmasked rate, net of each
    batch's fixed cost. For random:tiny that is still about 5x long on this machine (its unmasked
    pass costs more per MFLOP than its masked one: every layer's outputs), so this is the fallback,
    not the rule; the job's own rate replaces it within its first chunks (``BORROWED_SHARE``)."""
    rates = Rates(tmp_path / "rates.json")
    record(rates, "random:tiny", "unmasked", TINY_FIRST_RECORD)
    guess = pass_cost.seconds(engine("random:tiny"), "masked", batches(TINY_SET_MASKED), rates)
    old_guess = TINY_FIRST_RECORD[2] / TINY_FIRST_RECORD[1] * TINY_SET_MASKED[1]
    assert guess.borrowed and guess < old_guess
    # Net of 1 ms: 3.81 of the call's 4.81 ms are its work's.
    assert guess == pytest.approx((TINY_FIRST_RECORD[2] - pass_cost.BATCH_FIXED_S) / TINY_FIRST_RECORD[1]
                                  * TINY_SET_MASKED[1] + TINY_SET_MASKED[0] * pass_cost.BATCH_FIXED_S)


def test_a_model_never_timed_here_is_guessed_from_the_models_that_were(tmp_path):
    """Issue 50: "the cost model predicts a never-measured architecture from the ones measured
    here and its size". The 8M model's set, never timed, from random:tiny's masked passes per
    MFLOP: within 1.5x (the old model had no guess: it ran a first chunk to measure)."""
    rates = Rates(tmp_path / "rates.json")
    assert pass_cost.seconds(engine("8M"), "masked", batches(EIGHT_M_SET_MASKED), rates) is None  # nothing timed
    record(rates, "random:tiny", "masked", TINY_SET_MASKED)
    record(rates, "random:tiny", "unmasked", TINY_GROUP)
    guess = pass_cost.seconds(engine("8M"), "masked", batches(EIGHT_M_SET_MASKED), rates)
    assert guess.borrowed
    assert 1 / 1.5 <= EIGHT_M_SET_MASKED[2] / guess <= 1.5  # 18.2 s for 22.7 s
    # Its own masked passes timed: its own rate, no longer a guess.
    record(rates, "8M", "masked", EIGHT_M_SET_MASKED)
    own = pass_cost.seconds(engine("8M"), "masked", batches(EIGHT_M_SET_MASKED), rates)
    assert not own.borrowed and own == pytest.approx(EIGHT_M_SET_MASKED[2])


def test_a_call_of_nearly_nothing_but_fixed_cost_keeps_a_share_of_its_time_as_work(tmp_path):
    """A call faster than its batches' fixed cost (a fast machine, a tiny record) still records a
    rate (``MIN_WORK_SHARE`` of its time): a rate of zero would call a long job free."""
    rates = Rates(tmp_path / "rates.json")
    pass_cost.record_call(rates, "m", "masked", 10.0, 4, 0.002)  # 4 batches in 2 ms: under 4 ms fixed
    assert rates.seconds("m", "masked", 10.0) == pytest.approx(pass_cost.MIN_WORK_SHARE * 0.002)


def timed_calls(monkeypatch):
    """``MeteredEngine``'s clock frozen, and a maker of engine calls whose batches report one by one
    after the given seconds each (the clock moved by them): recorded times replayed exactly."""
    from flamino_core.jobs import metered as metered_module

    now = [0.0]
    monkeypatch.setattr(metered_module.time, "monotonic", lambda: now[0])

    def calls(times):
        def call(report):
            for done, took in enumerate(times, start=1):
                now[0] += took
                report(done, len(times))
        return call
    return calls


def test_a_groups_second_batch_times_the_rate_when_its_first_compiled(tmp_path, monkeypatch):
    """Why the Records job's first record alone was the model's only rate: each later call (a group
    of records, two batches here) compiled its shape in its first batch, and a call of fewer than
    three batches set no rate. Its second batch, of the shape its first compiled, is timed now
    (``_clean``), so the job's groups replace the first record's rate (running average, 0.3 a
    call). Fake clock; the batch times are the recorded calls' (the group's two batches: half of
    its 31.6 ms each, the first also compiling for 3 s)."""
    from flamino_core.jobs.metered import MeteredEngine

    calls = timed_calls(monkeypatch)
    tiny = engine("random:tiny")
    rates = Rates(tmp_path / "rates.json")
    metered = MeteredEngine(tiny, rates)

    count, work, seconds = TINY_FIRST_RECORD
    tiny.compiled_shapes.add("one")
    metered._timed("unmasked", [("one", work)], calls([seconds]), None)  # the first record, compiled before
    half = TINY_GROUP[1] / 2
    for group in range(10):  # the job's groups, each a shape new to this process
        batches = [(f"group {group}", half)] * 2
        metered._timed("unmasked", batches, calls([3.0 + TINY_GROUP[2] / 2, TINY_GROUP[2] / 2]), None)
        tiny.compiled_shapes.add(f"group {group}")
    said = pass_cost.seconds(tiny, "unmasked", batches, rates)
    assert 1 / 1.5 <= TINY_GROUP[2] / said <= 1.5  # the first record's rate alone: 6.2x


def test_a_sets_unmasked_cost_plans_the_calls_its_job_makes(tmp_path, monkeypatch):
    """A set's unmasked passes run its first record alone, then chunks of ``chunk_residues``
    (``SetOutputs.run``): their batches, so the shapes compiled, are each call's. The cost planned
    the set as one call, whose shape the job never ran: after a fresh job had compiled every shape
    it ran, the same job again was said at 1.3 s for 0.2 s, and the fresh one counted one
    compilation for the two it made (1.2 s said for 2.2 s; the 8M model, quiet, issue 50). Checked
    against the shapes the engine itself notes it ran."""
    import numpy as np

    from flamino_core.jobs.background import Job
    from flamino_core.jobs.plan import SetOutputs
    from flamino_core.engine.engine import Engine
    from flamino_core.weights.loading import load_weights

    monkeypatch.setenv("FLAMINO_CACHE", str(tmp_path))
    real = Engine(load_weights("random:tiny:3"))
    rng = np.random.default_rng(50)
    sequences = tuple("".join(rng.choice(list("ACDEFGHIKLMNPQRSTVWY"), n)) for n in rng.integers(50, 91, 12))
    plan = SetOutputs(real, "random:tiny:3", sequences, 2_000)
    rates = Rates(tmp_path / "rates.json")
    rates.record(real.fingerprint, "unmasked", 1000, 0.01)
    needed = plan.needed()
    real.compiled_shapes.clear()
    before = needed.seconds(real, rates)
    plan.run(Job("Unmasked passes of 12 records", "records"), real)
    ran = set(real.compiled_shapes)
    assert len(ran) >= 2  # the first record alone, then the rest: two shapes at least
    assert before.compiling == pytest.approx(len(ran) * pass_cost.DEFAULT_COMPILE_S["unmasked compile"])
    assert needed.seconds(real, rates).compiling == 0  # all compiled: a rerun compiles nothing
    one_call = pass_cost.unmasked_seconds(real, [n for n, _ in needed.runs], rates)
    assert one_call.compiling > 0  # the old plan's one shape was never run


# Masked passes of a 300-residue sequence (16 rows of 304 tokens a pass), compiled, the fastest of
# 5-7 calls, by benchmarks/size_rates.py on the 2-core AMD EPYC, 2026-12-06 18:01-18:12 (load 1.6
# and 4.7: the fastest call of each model seen that hour): (passes, seconds).
TINY_MASKED_300 = (4, 0.0522)
EIGHT_M_MASKED_300 = (2, 1.2937)


def sized(name: str, config) -> SimpleNamespace:
    """``engine(name)`` with a real model's shape: what ``pass_cost.batch_work`` reads."""
    return SimpleNamespace(**{**vars(engine(name)), "config": config})


def test_a_never_timed_model_of_another_size_is_guessed_from_the_rate_per_unit_of_the_measured_one(tmp_path):
    """Issue 50 item 2, the first guess from "the ones measured here and its size": random:tiny (2
    layers of 32) and ESM-2 8M (6 of 320) ran the same masked passes at 2.24e-5 and 7.8e-6 s per
    MFLOP, so a guess per MFLOP is 2.9x long one way and 0.35 the other (the quiet estimates run:
    the 8M's pseudo-perplexity 0.45). Each token's own cost per layer (``TOKEN_LAYER_MFLOP``),
    most of a narrow model's time, puts both on one rate: each guessed from the other within 1.5x."""
    from flamino_core.model.config import ModelConfig

    tiny = sized("random:tiny", ModelConfig.tiny())
    eight = sized("8M", ModelConfig.preset("esm2_t6_8M_UR50D"))
    shape = (16, 304)

    def plan(model, recorded):
        return [("shape", pass_cost.batch_work(model.config, "masked", *shape))] * recorded[0]

    def mflop(model, recorded):  # the matmuls alone, as the rate was counted before
        return recorded[0] * shape[0] * pass_cost.row_work(model.config, shape[1], 1)

    old = ((TINY_MASKED_300[1] - TINY_MASKED_300[0] * pass_cost.BATCH_FIXED_S) / mflop(tiny, TINY_MASKED_300)
           * mflop(eight, EIGHT_M_MASKED_300))
    assert old / EIGHT_M_MASKED_300[1] > 2.5

    for measured, guessed in ((tiny, eight), (eight, tiny)):
        recorded = {tiny.fingerprint: TINY_MASKED_300, eight.fingerprint: EIGHT_M_MASKED_300}
        rates = Rates(tmp_path / f"{measured.fingerprint}.json")
        count, seconds = recorded[measured.fingerprint]
        pass_cost.record_call(rates, measured.fingerprint, "masked", sum(w for _, w in plan(measured, (count,))),
                              count, seconds)
        guess = pass_cost.seconds(guessed, "masked", plan(guessed, recorded[guessed.fingerprint]), rates)
        assert guess.borrowed
        assert 1 / 1.5 <= recorded[guessed.fingerprint][1] / guess <= 1.5


# Masked passes timed by benchmarks/size_rates.py under load (other agents' work), 2026-12-06
# 18:04-18:12, fastest of 3-5 compiled calls: (passes, rows, width, seconds, load average).
TINY_MASKED_160_LOADED = (4, 32, 176, 0.0451, 5.9)
EIGHT_M_MASKED_160_LOADED = (2, 32, 176, 3.7017, 5.6)
THIRTY_FIVE_M_MASKED_64_LOADED = [(1, 64, 80, 7.4167, 4.5), (1, 64, 80, 5.8282, 3.8)]  # two runs


def test_with_two_sizes_timed_a_third_is_guessed_from_a_fit_on_their_sizes(tmp_path):
    """Under load the wide models' threaded matmuls slow most: random:tiny and the 8M model ran at
    one rate per MFLOP (2.3e-5 and 2.0e-5 s), not the 3x apart a quiet machine measures, so the
    median rate per unit of ``batch_work`` (quiet, the right guess) said ESM-2 35M 2.5-3.2x short. With
    two sizes timed the guess is fitted on their sizes (``pass_cost.sized_guess``): within 1.5x of
    both runs of the 35M model. The models' sizes are kept in the rates' file."""
    from flamino_core.model.config import ModelConfig

    models = {"tiny": (ModelConfig.tiny(), TINY_MASKED_160_LOADED),
              "8M": (ModelConfig.preset("esm2_t6_8M_UR50D"), EIGHT_M_MASKED_160_LOADED)}
    rates = Rates(tmp_path / "rates.json")
    unsized = Rates(tmp_path / "unsized.json")
    for name, (config, (count, rows, width, seconds, _)) in models.items():
        work = count * pass_cost.batch_work(config, "masked", rows, width)
        pass_cost.record_call(rates, name, "masked", work, count, seconds,
                              size=pass_cost.token_layer_share(config, "masked"))
        pass_cost.record_call(unsized, name, "masked", work, count, seconds)
    big = sized("35M", ModelConfig.preset("esm2_t12_35M_UR50D"))
    count, rows, width, _, _ = THIRTY_FIVE_M_MASKED_64_LOADED[0]
    plan = [("shape", pass_cost.batch_work(big.config, "masked", rows, width))] * count
    median = pass_cost.seconds(big, "masked", plan, unsized)
    guess = pass_cost.seconds(big, "masked", plan, Rates(tmp_path / "rates.json"))  # read back from the file
    assert guess.borrowed
    for *_, seconds, _ in THIRTY_FIVE_M_MASKED_64_LOADED:
        assert seconds / median > 2.4  # 2.3 s said for 5.8-7.4 s: 2.5-3.2x short
        assert 1 / 1.5 <= seconds / guess <= 1.5


# Issue 50 item 2's last miss: random:tiny's last 24 masked calls before the warm pseudo-perplexity
# of benchmarks/estimates.py (``--only entropy pppl dms fit``, 2026-12-07 06:59 UTC, load 3.1-3.9:
# other agents' work), each timed by ``MeteredEngine`` as its one clean batch (the call's second):
# the DMS pll's and then the fit's masked passes of 161-residue sequences, 64 positions a call, 32
# rows a batch at width 176, so two calls of 32 + 32 rows and one of 32 + 1. (rows, milliseconds).
TINY_DMS_AND_FIT_CALLS = [(32, 6.61), (32, 6.47), (1, 0.92), (32, 8.07), (32, 4.81), (1, 3.71), (32, 8.83),
                          (32, 8.19), (1, 0.88), (32, 7.89), (32, 10.00), (1, 0.97), (32, 8.61), (32, 8.11),
                          (1, 0.88), (32, 7.80), (32, 7.53), (1, 0.82), (32, 8.86), (32, 9.63), (1, 1.94),
                          (32, 8.88), (32, 8.73), (1, 1.56)]


def tiny_with_rows() -> SimpleNamespace:
    """random:tiny as ``pass_cost`` reads it, with its token budget (``Engine.max_rows``: 32 rows of
    176 tokens a masked pass), so its batches have a class (``pass_cost.is_narrow``)."""
    from flamino_core.model.config import ModelConfig

    tiny = sized("random:tiny", ModelConfig.tiny())
    return SimpleNamespace(**{**vars(tiny), "max_rows": lambda width: 8192 // width})


def test_narrow_batches_are_timed_apart_so_a_full_batch_job_keeps_its_rate(tmp_path, monkeypatch):
    """The warm pseudo-perplexity after a DMS pll and a fit was said 9.3 s for 4.8 s (quiet run,
    docs/reliability.md): one running average per model and kind, each call weighing 0.3 whatever
    its work, followed the 1-row batches of one call in three, whose rate is mostly a millisecond's
    jitter (0.82-3.71 ms here for 49 units of work). Replayed through ``MeteredEngine`` (fake clock,
    every shape compiled before), a job of the same calls' 32-row batches is now said within 1.5x
    of their recorded time; the old single rate said it 1.75x long. The 1-row batches' own rate is
    kept (``masked narrow``) and read for narrow batches."""
    from flamino_core.jobs.metered import MeteredEngine

    call = timed_calls(monkeypatch)
    tiny = tiny_with_rows()
    full, narrow = (planner_key(rows) for rows in (32, 1))
    tiny.compiled_shapes = {full, narrow}
    work = {rows: pass_cost.batch_work(tiny.config, "masked", rows, 176) for rows in (32, 1)}
    assert (pass_cost.is_narrow(tiny, full), pass_cost.is_narrow(tiny, narrow)) == (False, True)
    rates, single = Rates(tmp_path / "rates.json"), Rates(tmp_path / "single.json")
    metered = MeteredEngine(tiny, rates)

    for rows, ms in TINY_DMS_AND_FIT_CALLS:
        batches = [(full, work[32]), (planner_key(rows), work[rows])]
        metered._timed("masked", batches, call([0.009, ms / 1e3]), None)  # the first batch: not timed
        pass_cost.record_call(single, tiny.fingerprint, "masked", work[rows], 1, ms / 1e3)  # the old way

    full_times = [ms / 1e3 for rows, ms in TINY_DMS_AND_FIT_CALLS if rows == 32]
    job = [(full, work[32])] * len(full_times)
    actual = sum(full_times)
    old = pass_cost.running_seconds(tiny, "masked", job, single)
    assert old / actual > 1.5  # 0.226 s said for 0.129 s
    said = pass_cost.seconds(tiny, "masked", job, Rates(tmp_path / "rates.json"))  # read back from the file
    assert not said.borrowed and said.compiling == 0
    assert 1 / 1.5 <= actual / said <= 1.5  # 0.140 s
    # The 1-row batches' rate is theirs: a narrow batch is said at it, a full one is not.
    assert rates.seconds(tiny.fingerprint, "masked narrow", 1) > 2 * rates.seconds(tiny.fingerprint, "masked", 1)
    one_row = pass_cost.running_seconds(tiny, "masked", [(narrow, work[1])], rates)
    assert one_row == pytest.approx(rates.seconds(tiny.fingerprint, "masked narrow", work[1]) + pass_cost.BATCH_FIXED_S)


def planner_key(rows: int) -> str:
    """The shape key of a masked pass of ``rows`` rows of 176 tokens (a 161-residue sequence's)."""
    from flamino_core.engine import planner

    return planner.shape_key("masked", (rows, 176))


def test_a_class_never_timed_reads_the_other_class_then_the_first_guesses(tmp_path):
    """Each batch reads its class's rate; a class this model never ran reads its other class's as it
    is (net of the per-batch cost the two differ under 1.5x in the median: 6.2e-6 and 5.0e-6 s per
    unit for random:tiny's 1- and 32-row batches), and either counts as this model's own (not a
    borrowed first guess). Narrow rates are no other model's first guess (``sized_guess`` and the
    median read full batches only), and a set of a few records, all narrow batches, still lends
    its unmasked rate to its model's first masked job."""
    tiny = tiny_with_rows()
    full, narrow = planner_key(32), planner_key(1)
    tiny.compiled_shapes = {full, narrow}  # the passes' time alone
    job = [(full, 1000.0), (narrow, 100.0)]
    rates = Rates(tmp_path / "rates.json")
    pass_cost.record_call(rates, tiny.fingerprint, "masked", 100.0, 1, 0.001 + 100.0 * 2e-5, narrow=True)
    own_narrow_only = pass_cost.seconds(tiny, "masked", job, rates)
    assert not own_narrow_only.borrowed
    assert own_narrow_only == pytest.approx(1100.0 * 2e-5 + 2 * pass_cost.BATCH_FIXED_S)
    pass_cost.record_call(rates, tiny.fingerprint, "masked", 1000.0, 1, 0.001 + 1000.0 * 5e-6)
    both = pass_cost.seconds(tiny, "masked", job, rates)
    assert both == pytest.approx(1000.0 * 5e-6 + 100.0 * 2e-5 + 2 * pass_cost.BATCH_FIXED_S)

    other = SimpleNamespace(**{**vars(tiny), "fingerprint": "another"})
    assert rates.sized("masked") == []  # no size recorded; the narrow rate is not among them either
    guess = pass_cost.seconds(other, "masked", [(full, 1000.0)], rates)
    assert guess.borrowed and guess == pytest.approx(1000.0 * 5e-6 + pass_cost.BATCH_FIXED_S)  # the full rate

    few = Rates(tmp_path / "few.json")
    pass_cost.record_call(few, tiny.fingerprint, "unmasked", 100.0, 1, 0.001 + 100.0 * 3e-5, narrow=True)
    assert few.seconds(tiny.fingerprint, "masked", 100.0) == pytest.approx(100.0 * 3e-5)


def test_a_rates_file_from_before_the_classes_reads_its_rate_as_the_full_batches(tmp_path):
    """A ``pass_rates.json`` written before the batch classes holds one rate per model and kind:
    read as the full batches' (and, there being no narrow one, the narrow batches' too); the
    narrow keys written beside it end in " narrow", which older code's lookups never match."""
    import json

    path = tmp_path / "pass_rates.json"
    path.write_text(json.dumps({"m masked": 6e-6, "pass_unit": "MFLOP+token-layers"}))
    rates = Rates(path)
    engine = SimpleNamespace(**{**vars(tiny_with_rows()), "fingerprint": "m"})
    assert pass_cost.running_seconds(engine, "masked", [(planner_key(1), 10.0)], rates) == pytest.approx(
        10.0 * 6e-6 + pass_cost.BATCH_FIXED_S)
    pass_cost.record_call(rates, "m", "masked", 10.0, 1, 0.002, narrow=True)
    written = json.loads(path.read_text())
    assert written["m masked"] == 6e-6 and written["m masked narrow"] == pytest.approx(1e-4)
    assert not any(k.endswith(" masked") or k.endswith(" unmasked") for k in written if "narrow" in k)
