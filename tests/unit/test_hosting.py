"""The app's policy (hosted-mode limits, which models a server loads and a link may ask for) and
the bounded heavy-job queue."""

from __future__ import annotations

import threading
import time

import pytest

from app_pages._ui.server import heavy_jobs, policy
from app_pages._ui.server.heavy_jobs import HeavyJobQueue, QueueFull
from app_pages._ui.server.policy import LinkModel, current_limits, hosted_mode, model_from_link, weights_permissions
from flamino_core.model.config import PRESETS
from flamino_core.model.model_id import ModelId
from flamino_core.inputs.fasta import parse_fasta_text
from flamino_core.weights.loading import ModelError, load_weights


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
    parsed = parse_fasta_text(text, limits=limits.input_limits())
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
    with pytest.raises(QueueFull, match="1 heavy job running, 1 waiting"):  # the third is refused
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


def test_waiting_is_reported_and_can_be_abandoned():
    """on_wait sees the wait; whatever it raises (a closed session) ends the wait cleanly."""
    queue = HeavyJobQueue(workers=1, max_waiting=2)
    seen = []

    class SessionClosed(Exception):
        pass

    def on_wait(seconds, place):
        seen.append((seconds, place))
        if len(seen) == 3:
            raise SessionClosed

    with queue.slot():
        with pytest.raises(SessionClosed):
            with queue.slot(timeout=10, on_wait=on_wait, poll=0.01):
                pytest.fail("got a slot that was taken")
        assert queue.waiting == 0 and queue.running == 1
    waited = [seconds for seconds, _ in seen]
    assert len(seen) == 3 and waited == sorted(waited) and waited[-1] > 0
    assert [place for _, place in seen] == [1, 1, 1]  # alone in the queue: next in line
    with queue.slot(timeout=0.1, on_wait=on_wait, poll=0.01):  # free: no waiting at all
        assert queue.running == 1
    assert len(seen) == 3 and queue.running == 0


def test_queued_jobs_run_in_arrival_order():
    """Six sessions queue heavy jobs behind a running one: they run first come, first served.

    Deterministic: each job is queued only after the previous one is (``on_wait`` is called as
    soon as a job holds its ticket), and the running job is released only when all six wait.
    """
    queue = HeavyJobQueue(workers=1, max_waiting=6)
    finished, places = [], {}
    release, holding = threading.Event(), threading.Event()
    queued = [threading.Event() for _ in range(6)]

    def first():
        with queue.slot(timeout=30):
            holding.set()
            release.wait(30)
        finished.append("first")

    def job(index):
        def on_wait(seconds, place):
            places.setdefault(index, place)
            queued[index].set()

        with queue.slot(timeout=30, on_wait=on_wait, poll=0.005):  # short polls: many wake-ups
            finished.append(index)

    threads = [threading.Thread(target=first)]
    threads[0].start()
    assert holding.wait(10)  # the first job holds the only slot before anyone queues
    for index in range(6):
        thread = threading.Thread(target=job, args=(index,))
        thread.start()
        threads.append(thread)
        assert queued[index].wait(10)
    assert places == {index: index + 1 for index in range(6)}  # the place each was shown
    assert queue.waiting == 6
    with pytest.raises(QueueFull, match="1 heavy job running, 6 waiting"):  # said once, no "busy" twice
        with queue.slot():
            pass
    release.set()
    for thread in threads:
        thread.join(30)
    assert finished == ["first", 0, 1, 2, 3, 4, 5]
    assert queue.running == 0 and queue.waiting == 0


def test_visitors_take_turns_a_visitors_second_job_after_every_others_first():
    """Issue #67: visitor a runs a job and queues two more, then b, c and d queue one each (arrival
    order a, a, b, c, d). Served in turn: b, c, d (never served) before a's next, then a's last;
    the places shown at queueing say so (a's jobs move back as others arrive). First come, first
    served, a's three folds held every other visitor's work for their whole length."""
    queue = HeavyJobQueue(workers=1, max_waiting=6)
    finished, places = [], {}
    release, holding = threading.Event(), threading.Event()
    arrivals = [("a", 1), ("a", 2), ("b", 1), ("c", 1), ("d", 1)]
    queued = {name: threading.Event() for name in arrivals}

    def first():
        with queue.slot(timeout=30, visitor="a"):
            holding.set()
            release.wait(30)
        finished.append(("a", 0))

    def job(name):
        def on_wait(seconds, place):
            places.setdefault(name, place)
            queued[name].set()

        with queue.slot(timeout=30, on_wait=on_wait, poll=0.005, visitor=name[0]):
            finished.append(name)

    threads = [threading.Thread(target=first)]
    threads[0].start()
    assert holding.wait(10)
    for name in arrivals:
        thread = threading.Thread(target=job, args=(name,))
        thread.start()
        threads.append(thread)
        assert queued[name].wait(10)
    # Shown when each queued: a1 1st; a2 2nd; b1 ahead of both of a's (a was served last): 1st; c, d next.
    assert places == {("a", 1): 1, ("a", 2): 2, ("b", 1): 1, ("c", 1): 2, ("d", 1): 3}
    assert [queue.place(ticket) for ticket in range(5)] == [4, 5, 1, 2, 3]  # where each stands now
    release.set()
    for thread in threads:
        thread.join(30)
    assert finished == [("a", 0), ("b", 1), ("c", 1), ("d", 1), ("a", 1), ("a", 2)]
    assert queue.running == 0 and queue.waiting == 0


def test_a_job_leaving_the_queue_moves_the_others_up():
    queue = HeavyJobQueue(workers=1, max_waiting=3)
    places = {"b": [], "c": []}
    leave = threading.Event()
    queued = {"b": threading.Event(), "c": threading.Event()}

    class Left(Exception):
        pass

    def job(name):
        def on_wait(seconds, place):
            places[name].append(place)
            queued[name].set()
            if name == "b" and leave.is_set():
                raise Left

        try:
            with queue.slot(timeout=30, on_wait=on_wait, poll=0.005):
                pass
        except Left:
            pass

    with queue.slot():
        b = threading.Thread(target=job, args=("b",))
        b.start()
        assert queued["b"].wait(10)
        c = threading.Thread(target=job, args=("c",))
        c.start()
        assert queued["c"].wait(10)
        leave.set()
        b.join(10)  # b gave up its ticket before its thread ended
        assert queue.waiting == 1
        queued["c"].clear()
        assert queued["c"].wait(10) and queue.place(0) == 0  # b's ticket is gone
    c.join(10)
    assert places["c"][0] == 2 and 1 in places["c"]  # second, then first in line
    assert queue.running == 0 and queue.waiting == 0


def test_hosted_mode_offers_only_its_models(monkeypatch):
    monkeypatch.setenv("FLAMINO_HOSTED", "1")
    monkeypatch.setenv("FLAMINO_MODEL", "esm2_t6_8M_UR50D")
    monkeypatch.setenv("FLAMINO_HOSTED_MODELS", "facebook/esm2_t12_35M_UR50D, ")
    limits = current_limits()
    assert limits.allowed_models == {"esm2_t6_8M_UR50D", "esm2_t12_35M_UR50D", "random:tiny"}
    assert limits.check_model(ModelId.parse("facebook/esm2_t12_35M_UR50D")) is None
    assert limits.check_model(ModelId.parse("random:tiny")) is None
    for refused in ("esm2_t48_15B_UR50D", "/srv/models/x", "random:esm2_t48_15B_UR50D", "../etc"):
        message = limits.check_model(ModelId.parse(refused))
        assert message and "esm2_t12_35M_UR50D" in message
        named = refused.startswith("random:") or refused in PRESETS  # model names, not paths
        assert (refused in message) == named, message
    monkeypatch.delenv("FLAMINO_HOSTED_MODELS")
    assert "esm2_t30_150M_UR50D" in current_limits().allowed_models  # small presets by default
    assert "esm2_t33_650M_UR50D" not in current_limits().allowed_models
    monkeypatch.delenv("FLAMINO_HOSTED")
    assert current_limits().check_model(ModelId.parse("/any/path")) is None  # locally: anything


def test_upload_and_paste_size_messages_say_both_sizes(monkeypatch):
    monkeypatch.setenv("FLAMINO_HOSTED", "1")
    monkeypatch.setenv("FLAMINO_MAX_UPLOAD_BYTES", "1500000")
    limits = current_limits()
    assert limits.check_upload(1_500_000) is None
    message = limits.check_upload(2_345_678, "proteins.fa")
    assert message.startswith("proteins.fa is 2.24 MiB; this server accepts up to 1.43 MiB")  # bytes / 2^20
    assert "run flamino locally" in message


def test_the_process_wide_queue_follows_hosted_settings(monkeypatch):
    monkeypatch.setattr(heavy_jobs, "_QUEUE", None)
    monkeypatch.setenv("FLAMINO_HOSTED", "1")
    monkeypatch.setenv("FLAMINO_HEAVY_WORKERS", "2")
    monkeypatch.setenv("FLAMINO_HEAVY_WAITING", "3")
    queue = heavy_jobs.heavy_job_queue()
    assert (queue.workers, queue.max_waiting) == (2, 3)
    assert heavy_jobs.heavy_job_queue() is queue  # one per process, shared by every session


OPERATOR_MODEL = "/opt/flamino/operator-esm2"


@pytest.mark.parametrize(
    "identifier, local, hosted",
    [
        ("esm2_t33_650M_UR50D", "use", "refused"),  # a preset: hosted servers offer small ones only
        ("facebook/esm2_t12_35M_UR50D", "use", "use"),
        ("random:tiny", "use", "use"),
        (OPERATOR_MODEL, "use", "use"),  # FLAMINO_MODEL is the operator's choice
        ("random:esm2_t48_15B_UR50D", "refused", "refused"),  # many GB to build: not from a link
        ("/srv/models/esm2_t33", "local_path", "refused"),  # pre-filled, never opened by a link
        ("../../etc/passwd", "local_path", "refused"),
    ],
)
def test_which_model_a_link_may_switch_to(monkeypatch, identifier, local, hosted):
    monkeypatch.setenv("FLAMINO_MODEL", OPERATOR_MODEL)
    monkeypatch.delenv("FLAMINO_HOSTED_MODELS", raising=False)
    monkeypatch.setattr(policy, "offered_now", lambda identifiers: list(identifiers))  # as if all were here
    for mode, expected in (("0", local), ("1", hosted)):
        monkeypatch.setenv("FLAMINO_HOSTED", mode)
        decision = model_from_link(identifier, current_limits())
        set_fields = [name for name in ("use", "local_path", "refused") if getattr(decision, name)]
        assert set_fields == [expected], (mode, decision)
        if expected == "refused":  # hosted: a path from a link is never echoed back
            assert (identifier in decision.refused) == (mode == "0" or not identifier.startswith(("/", "..")))
        else:
            assert decision == LinkModel(**{expected: identifier})


def test_hosted_links_use_the_operators_public_name_and_only_models_that_load_now(monkeypatch, tmp_path):
    operator = tmp_path / "operator-esm2"
    operator.mkdir()
    monkeypatch.setenv("FLAMINO_HOSTED", "1")
    monkeypatch.setenv("FLAMINO_MODEL", str(operator))
    monkeypatch.setenv("FLAMINO_HOSTED_MODELS", "esm2_t6_8M_UR50D")
    monkeypatch.setenv("FLAMINO_CACHE", str(tmp_path / "cache"))  # nothing fetched
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setattr(policy, "_hub_answer", None)
    limits = current_limits()
    assert policy.public_model_name(str(operator), limits) == "server-model"
    assert model_from_link("server-model", limits) == LinkModel(use=str(operator))
    monkeypatch.setenv("FLAMINO_MODEL_NAME", "lab-esm2")
    assert policy.public_model_name(str(operator), limits) == "lab-esm2"
    assert model_from_link("lab-esm2", limits) == LinkModel(use=str(operator))
    # Allowed but not on this offline machine: not offered, and a link to it is refused.
    assert policy.offered_now([ModelId.parse(m) for m in ("esm2_t6_8M_UR50D", "random:tiny", str(operator))]) \
        == [ModelId.parse("random:tiny"), ModelId.parse(str(operator))]
    assert model_from_link("esm2_t6_8M_UR50D", limits).refused
    monkeypatch.delenv("FLAMINO_HOSTED")
    assert policy.public_model_name(str(operator), current_limits()) == str(operator)  # locally: as it is


def test_weights_are_loaded_without_pickles_or_server_paths_when_hosted(monkeypatch):
    monkeypatch.setenv("FLAMINO_MODEL", OPERATOR_MODEL)
    monkeypatch.delenv("FLAMINO_HOSTED", raising=False)
    assert weights_permissions(ModelId.parse("/any/path"), current_limits()) == {"allow_local_paths": True, "allow_pickle": True}
    monkeypatch.setenv("FLAMINO_HOSTED", "1")
    limits = current_limits()
    assert weights_permissions(ModelId.parse("/any/path"), limits) == {"allow_local_paths": False, "allow_pickle": False}
    assert weights_permissions(ModelId.parse(OPERATOR_MODEL), limits) == {"allow_local_paths": True, "allow_pickle": False}


def test_server_side_downloads_are_bounded_one_per_visitor(monkeypatch):
    """Issue #67: a PDB/AlphaFold DB/UniProt download ran in the visitor's session, unbounded. Hosted,
    two run at once, one per visitor; a visitor's second is refused at once in words, a third
    visitor waits ``FETCH_WAIT_S`` for a turn and is then refused."""
    monkeypatch.setattr(heavy_jobs, "_FETCHES", None)
    monkeypatch.setattr(heavy_jobs, "FETCH_WAIT_S", 0.2)
    monkeypatch.setenv("FLAMINO_HOSTED", "1")
    who = threading.local()
    monkeypatch.setattr(heavy_jobs, "visitor_key", lambda: who.name)
    release, holding = threading.Event(), [threading.Event(), threading.Event()]

    def download(index: int, name: str):
        who.name = name
        with heavy_jobs.fetch_turn():
            holding[index].set()
            release.wait(10)

    threads = [threading.Thread(target=download, args=(i, name)) for i, name in enumerate(("a", "b"))]
    for thread, held in zip(threads, holding):
        thread.start()
        assert held.wait(10)
    who.name = "a"
    with pytest.raises(QueueFull, match="you already have a download from this server running"):
        with heavy_jobs.fetch_turn():
            pytest.fail("a second download of one visitor ran")
    who.name = "c"
    with pytest.raises(QueueFull, match=r"the server is downloading for other visitors \(waited too long"):
        with heavy_jobs.fetch_turn():
            pytest.fail("a third download ran beside two")
    release.set()
    for thread in threads:
        thread.join(10)
    with heavy_jobs.fetch_turn():  # free again
        assert heavy_jobs.fetch_queue().running == 1
