"""Hosted-mode limits and the bounded heavy-job queue."""

from __future__ import annotations

import threading
import time

import pytest

from flamino_core.fasta import parse_fasta_text
from flamino_core.hosting import HeavyJobQueue, QueueFull, current_limits, hosted_mode
from flamino_core.weights import ModelError, load_weights


def test_local_mode_has_no_limits(monkeypatch):
    monkeypatch.delenv("FLAMINO_HOSTED", raising=False)
    limits = current_limits()
    assert not hosted_mode() and limits.max_records is None and limits.allow_pickle


def test_hosted_limits_apply_to_fasta(monkeypatch):
    monkeypatch.setenv("FLAMINO_HOSTED", "1")
    monkeypatch.setenv("FLAMINO_MAX_RECORDS", "3")
    monkeypatch.setenv("FLAMINO_MAX_RESIDUES", "50")
    limits = current_limits()
    text = "".join(f">r{i}\n{'MKV' * (5 if i != 1 else 30)}\n" for i in range(5))
    parsed = parse_fasta_text(text, **limits.fasta_limits())
    assert [r.id for r in parsed.records] == ["r0", "r2"]  # r1 too long, r3/r4 over the count
    messages = " ".join(str(e) for e in parsed.errors)
    assert "r1" in messages and "2" in messages
    assert limits.check_upload(5_000_000, "big.fa") and "big.fa" in limits.check_upload(5_000_000, "big.fa")
    assert limits.check_upload(10) is None


def test_hosted_mode_refuses_server_paths_and_pickles(monkeypatch, tmp_path):
    monkeypatch.setenv("FLAMINO_HOSTED", "1")
    limits = current_limits()
    assert not limits.allow_local_paths and not limits.allow_pickle
    with pytest.raises(ModelError, match="disabled"):
        load_weights(str(tmp_path), allow_local_paths=limits.allow_local_paths)


def test_queue_bounds_running_and_waiting_jobs():
    queue = HeavyJobQueue(workers=1, max_waiting=1)
    release = threading.Event()
    started = []

    def job(name):
        try:
            with queue.slot(timeout=10):
                started.append(name)
                release.wait(5)
        except QueueFull:
            started.append(f"{name}: refused")

    first = threading.Thread(target=job, args=("a",))
    first.start()
    while queue.running < 1:
        time.sleep(0.01)
    second = threading.Thread(target=job, args=("b",))
    second.start()
    while queue.waiting < 1:
        time.sleep(0.01)
    with pytest.raises(QueueFull, match="busy"):  # one running, one waiting: the third is refused
        with queue.slot():
            pass
    release.set()
    first.join(5)
    second.join(5)
    assert started == ["a", "b"]
    assert queue.running == 0 and queue.waiting == 0


def test_queue_times_out_cleanly():
    queue = HeavyJobQueue(workers=1, max_waiting=2)
    with queue.slot():
        with pytest.raises(QueueFull, match="too long"):
            with queue.slot(timeout=0.05):
                pass
    assert queue.running == 0 and queue.waiting == 0
