"""The heavy-job queue's order and admission (issue #67, ``flamino_core/jobs/queue_order.py``),
on a fake clock with fake work: one slot, jobs arriving at set seconds with an estimate and a true
length, run by the queue's rule as the server runs them (the running job is never stopped). No
threads and no wall clock, except the last test, which runs the real threaded queue on a fake
clock, ordered by events. The first-come and visitor-turn tests of the queue are in
tests/unit/test_hosting.py and tests/integration/test_hosted_attacks.py and hold unchanged.
"""

from __future__ import annotations

import dataclasses
import threading

import pytest

from flamino_core.jobs.heavy_queue import HeavyJobQueue
from flamino_core.jobs.queue_order import WAITING_CAP, QueueFull, QueueOrder

FOLD_400_S, FOLD_60_S = 60.0, 5.0  # the 2-core server's warm folds of the test model, about (docs/reliability.md)
# The rule's factor as queue_order argues it (a job is passed only by jobs queued before its queueing
# plus twice its work): written here, not read from the module, so a module that drops the aging fails.
DUE_FACTOR = 2.0


@dataclasses.dataclass
class Arrival:
    at: float
    visitor: str
    estimate: float | None
    length: float  # the seconds it really takes
    started: float | None = None
    finished: float | None = None
    refused: bool = False


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def simulate(arrivals: list[Arrival], max_waiting: int = 4, per_visitor: int | None = 2) -> list[Arrival]:
    """Run ``arrivals`` through one slot by the queue's rule: events in time order, arrivals before
    an end at the same second. Returns them with their start, end or refusal."""
    clock = Clock()
    order = QueueOrder(workers=1, max_waiting=max_waiting, per_visitor=per_visitor, clock=clock)
    pending = sorted(arrivals, key=lambda a: a.at)
    waiting: dict[int, Arrival] = {}
    running: tuple[int, Arrival] | None = None
    while pending or waiting or running:
        end = running[1].started + running[1].length if running else float("inf")
        if pending and pending[0].at <= end:
            job = pending.pop(0)
            clock.now = job.at
            try:
                kind, number = order.enter(job.visitor, job.estimate)
            except QueueFull:
                job.refused = True
                continue
            if kind == "run":
                job.started, running = clock.now, (number, job)
            else:
                waiting[number] = job
            continue
        clock.now = end
        hold, job = running
        job.finished, running = end, None
        order.leave(hold=hold)
        if waiting:
            ticket = order.order()[0]
            assert order.ready(ticket)
            nxt = waiting.pop(ticket)
            nxt.started, running = clock.now, (order.serve(ticket), nxt)
    return arrivals


def issue_row(victim_at: float) -> list[Arrival]:
    """The issue's first row: five visitors press Predict on a fresh 400-residue sequence (the first
    runs at once), then a sixth folds 60 residues ``victim_at`` seconds after the first press."""
    folds = [Arrival(i * 0.5, f"visitor {i}", FOLD_400_S, FOLD_400_S) for i in range(5)]
    return folds + [Arrival(victim_at, "victim", FOLD_60_S, FOLD_60_S)]


@pytest.mark.parametrize("victim_at", [3.0, 5.0, 30.0, 59.0])
def test_a_60_residue_fold_behind_five_400_residue_folds_finishes_within_one_folds_time(victim_at):
    """Issue #67: the victim, clicked any time while the first 400-residue fold runs, goes next, so it
    is done what is left of that fold plus its own 5 s after its click (the running fold is never
    stopped): within one 400-residue fold's time once the first fold has run the victim's own 5 s
    (the issue's five presses come first), within that plus 5 s before. First come, first served:
    4 more folds, 245+ s."""
    *folds, victim = simulate(issue_row(victim_at))
    assert not victim.refused and victim.started == FOLD_400_S and victim.finished == FOLD_400_S + FOLD_60_S
    assert victim.finished - victim_at <= FOLD_400_S + (FOLD_60_S if victim_at < FOLD_60_S else 0.0)
    # The four waiting folds each waited the victim's 5 s more, in their own order.
    assert [f.started for f in folds] == [0.0, 65.0, 125.0, 185.0, 245.0]


def test_estimates_off_by_half_still_put_the_victim_first():
    """The fold time prior holds within 1.5x (docs/reliability.md): the 400-residue folds said at
    2/3 of their length and the 60-residue one at 1.5x its still order the victim first."""
    row = issue_row(20.0)
    for fold in row[:-1]:
        fold.estimate = FOLD_400_S / 1.5
    row[-1].estimate = FOLD_60_S * 1.5
    victim = simulate(row)[-1]
    assert victim.started == FOLD_400_S and victim.finished - victim.at <= FOLD_400_S


def test_a_400_residue_fold_is_not_starved_by_short_jobs_that_keep_arriving():
    """A 400-residue fold queued behind a running one while 5-second jobs of new visitors arrive every
    3 s for an hour (more work than the slot can do: most are refused by admission). It is passed only
    by jobs queued before its due time (its queueing + 2 x 60 s); it starts once those are done."""
    row = [Arrival(0.0, "first", FOLD_400_S, FOLD_400_S), Arrival(1.0, "long", FOLD_400_S, FOLD_400_S)]
    row += [Arrival(2.0 + 3 * i, f"short {i}", FOLD_60_S, FOLD_60_S) for i in range(1200)]
    done = simulate(row)
    long = done[1]
    due = 1.0 + DUE_FACTOR * FOLD_400_S
    passing = [a for a in done[2:] if not a.refused and a.started < long.started]
    assert long.finished is not None
    assert all(a.at + DUE_FACTOR * a.estimate <= due for a in passing)  # only jobs due before it passed it
    # It starts by its due time plus the jobs then in line before it (at most max_waiting, 5 s each).
    assert long.started <= due + 4 * FOLD_60_S + FOLD_60_S
    assert sum(not a.refused for a in done[2:]) > 500  # the short jobs kept running, after it too


def test_a_short_job_is_let_in_when_only_long_ones_wait():
    """Four 400-residue folds wait (the hosted queue's 4): a fifth is refused, a 60-residue fold that
    would run first is let in (at most max_waiting before it); behind it at most WAITING_CAP x 4 wait."""
    clock = Clock()
    order = QueueOrder(workers=1, max_waiting=4, clock=clock)
    assert order.enter("running", FOLD_400_S)[0] == "run"
    for i in range(4):
        clock.now += 1
        assert order.enter(f"long {i}", FOLD_400_S)[0] == "wait"
    clock.now += 1
    with pytest.raises(QueueFull, match="1 heavy job running, 4 waiting"):
        order.enter("long 4", FOLD_400_S)
    kind, ticket = order.enter("victim", FOLD_60_S)
    assert kind == "wait" and order.place(ticket) == 1
    for i in range(WAITING_CAP * 4 - 5):  # more short jobs, each with fewer than 4 before it
        clock.now += 0.1
        order.enter(f"short {i}", 0.1)
    assert len(order.waiting) == WAITING_CAP * 4
    with pytest.raises(QueueFull):  # the cap in all
        order.enter("one more", 0.0)


def test_a_visitors_second_job_waits_behind_other_visitors_first():
    """Visitor a's second 400-residue fold, pressed while its first runs, goes after b's, queued later
    (a's work counts twice); a 60-residue fold of a, though, still passes b's long one."""
    clock = Clock()
    order = QueueOrder(workers=1, max_waiting=4, clock=clock)
    order.enter("a", FOLD_400_S)
    clock.now = 1
    _, a_second = order.enter("a", FOLD_400_S)
    clock.now = 2
    _, b_first = order.enter("b", FOLD_400_S)
    assert order.order() == [b_first, a_second]
    clock.now = 3
    _, a_short = order.enter("c", FOLD_60_S)
    assert order.order()[0] == a_short


def test_the_threaded_queue_serves_the_victim_first():
    """The real queue (threads, tickets) on a fake clock: five visitors' folds, the first running, then
    the victim's short fold; ordered by events (each job queued before the next), never by sleeping."""
    clock = Clock()
    queue = HeavyJobQueue(workers=1, max_waiting=4, per_visitor=2, clock=clock)
    finished, release, holding = [], threading.Event(), threading.Event()
    names = ["b", "c", "d", "e", "victim"]
    queued = {name: threading.Event() for name in names}

    def first():
        with queue.slot(timeout=30, visitor="a", work=FOLD_400_S):
            holding.set()
            release.wait(30)
        finished.append("a")

    def job(name):
        def on_wait(seconds, place):
            queued[name].set()

        work = FOLD_60_S if name == "victim" else FOLD_400_S
        with queue.slot(timeout=30, on_wait=on_wait, poll=0.005, visitor=name, work=work):
            finished.append(name)

    threads = [threading.Thread(target=first)]
    threads[0].start()
    assert holding.wait(10)
    for name in names:
        clock.now += 1
        threads.append(threading.Thread(target=job, args=(name,)))
        threads[-1].start()
        assert queued[name].wait(10)
    assert queue.place(4) == 1  # the victim's ticket, shown first in line
    release.set()
    for thread in threads:
        thread.join(30)
    assert finished == ["a", "victim", "b", "c", "d", "e"]
    assert queue.running == 0 and queue.waiting == 0
