"""The app's set-level jobs on Ray (``FLAMINO_RAY_ADDRESS``), against the run's Ray head bound to
127.0.0.1 (``ray_fixtures.ray_head``: its processes die with it, on every exit path):
outputs equal the in-process engine's, land in the app's result store as they arrive, and a
cancel keeps what arrived."""

from __future__ import annotations

import time

import numpy as np
import pytest

from flamino_core import Engine, load_weights

from flamino_core.jobs import background as jobs, on_ray as jobs_ray

from flamino_core.store import passes
from flamino_core.store.result_store import NullStore, ResultStore

pytest.importorskip("ray")
MODEL = "random:tiny:4"


@pytest.fixture(scope="module")
def engine():
    return Engine(load_weights(MODEL))


@pytest.fixture
def on_ray(ray_head, monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv(jobs_ray.ADDRESS, ray_head)
    monkeypatch.setenv("FLAMINO_RAY_CPUS_PER_ACTOR", "1")
    monkeypatch.setenv("FLAMINO_RAY_ACTORS", "1")  # the chunks arrive in order; a cancel finds one in flight


@pytest.mark.slow
def test_a_sets_outputs_and_masked_passes_on_ray_equal_the_engine_and_stream_into_the_store(
        on_ray, engine, tmp_path, real_sequences):
    sequences = [real_sequences["HBB_HUMAN"], *short(real_sequences)[:2]] + ["MKTAYIAKQRQISFVKSHFSRQ"] * 2
    store = ResultStore(tmp_path / "results.sqlite")
    arrived = []
    jobs_ray.record_outputs_on_ray(MODEL, engine.fingerprint, engine.config.num_layers, sequences, store=store,
                                   on_record=lambda s, r: arrived.append(s))
    assert arrived == list(dict.fromkeys(sequences))  # the repeat runs once
    # The reference: the in-process engine, nothing stored. Stored values are what Ray computed.
    reference = passes.record_outputs(engine, list(dict.fromkeys(sequences)), store=NullStore())
    for sequence, expected in zip(dict.fromkeys(sequences), reference):
        (got,) = passes.record_outputs(Refusing(engine), [sequence], store=store)  # from the store alone
        np.testing.assert_allclose(got.entropy, expected.entropy, atol=1e-5)
        for layer, mean in expected.means.items():
            np.testing.assert_allclose(got.means[layer], mean, atol=1e-5)

    hbb = real_sequences["HBB_HUMAN"]
    chunks = []
    jobs_ray.masked_on_ray(MODEL, engine.fingerprint, [(hbb, list(range(100)))], store=store,
                           on_chunk=lambda s, p: chunks.append(p))
    assert chunks == [list(range(64)), list(range(64, 100))]  # a chunk of 64 per actor call
    stored = passes.masked_log_probs(Refusing(engine), hbb, range(100), store=store)
    np.testing.assert_allclose(stored, engine.compute_masked(hbb, range(100)), atol=1e-5)


@pytest.mark.slow
def test_the_apps_set_job_goes_to_ray_and_a_cancel_keeps_what_arrived(on_ray, engine, monkeypatch, tmp_path,
                                                                      real_sequences):
    """The Records/Embeddings job of the app (``set_results``), run as the app runs it, without
    Streamlit: with FLAMINO_RAY_ADDRESS set its records come from the cluster."""
    from app_pages._ui.records import set_results

    monkeypatch.setenv("FLAMINO_CACHE", str(tmp_path / "cache"))
    local = []
    monkeypatch.setattr(Engine, "run", lambda self, *a, **k: local.append(a) or pytest.fail("ran in-process"))
    sequences = tuple(short(real_sequences)[:10])
    job = jobs.start(lambda job: set_results.outputs_plan(engine, MODEL, sequences).run(job, engine), "records", "records")
    assert job.wait(600) and job.state == jobs.DONE, job.error
    assert job.done == job.total == len(set(sequences)) and not local
    assert set(set_results.stored_outputs(engine, sequences, "entropy")) == set(sequences)

    more = tuple(short(real_sequences)[10:30])
    job = jobs.start(lambda job: set_results.outputs_plan(engine, MODEL, more).run(job, engine), "records", "records")
    deadline = time.monotonic() + 600
    while job.done == 0 and not job.finished:  # the first group of records is in
        assert time.monotonic() < deadline
        time.sleep(0.2)
    job.cancel()
    assert job.wait(600) and job.state in (jobs.CANCELLED, jobs.DONE)
    kept = set(set_results.stored_outputs(engine, more, "entropy"))
    assert set(job.value) <= kept and len(kept) >= jobs_ray.RECORDS_PER_ITEM  # what arrived is stored


def short(real_sequences) -> list[str]:
    """Real sequences of under 300 residues (ProteinGym targets), in a fixed order."""
    return [s for _, s in sorted(real_sequences.items()) if len(s) < 300]


class Refusing:
    """An engine that must not be asked for anything: the results come from the store."""

    def __init__(self, engine):
        self.config, self.fingerprint = engine.config, engine.fingerprint

    def run(self, *args, **kwargs):
        raise AssertionError("ran the model: the store should have had it")

    def compute_masked(self, *args, **kwargs):
        raise AssertionError("ran the model: the store should have had it")
