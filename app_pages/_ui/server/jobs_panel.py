"""Jobs on the page and in the sidebar: what a long job will cost before it starts, its progress
with a time estimate and its own Cancel while it runs, what became of it when it stopped, and
the session's jobs listed in the sidebar on every page.

``follow_plan`` is what a page calls for model work: the core's plan of it
(``flamino_core/jobs/plan.py``: the passes still needed given the store, their cost, its chunks)
run as a job, its cost the plan's own (``cost_of``); every page's work is a plan. ``_follow``, under it, runs the
plan's work: it finds
the session's job for that work (``background.py``), starts one when the work is quick or was asked
for, or says first what it costs (passes, and their time at the rate this machine measured for this
model) and offers the cheaper strategy where there is one. A job of unknown cost (this model never
ran here) first runs one chunk, which measures the rate (the page waits for it unless it compiles a
model new to the server: then its progress line says so at once); the next run of the page knows
the cost of the rest. A job of known cost is given it (``Job.expect``): its time left leans on it
until the job has measured its own rate, and its predicted and actual times go into the pass-rate
file when it ends.

While a job of the session runs, ``watch`` reruns the app whenever the job has news (at most
every ``WATCH_SECONDS``), so tables fill in and maps gain points without a click.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import weakref
from typing import TYPE_CHECKING, Callable, Hashable

import streamlit as st

from flamino_core.jobs import CANCELLED, DONE, FAILED, Job, MEASURED, STOPPED, about, default_rates

from app_pages._ui.server import background
from app_pages._ui.server.policy import visitor_model_name, visitor_short_name
from app_pages._ui.frame.widgets import counted, plain

if TYPE_CHECKING:  # the plans read the store and the cost model: the pages that only draw jobs do not
    from flamino_core.jobs import Plan

QUICK_SECONDS = 30.0  # work estimated shorter starts at once; longer work is shown with its cost first
MEASURE_SECONDS = 60.0  # how long a page waits for the first chunk that measures this machine's rate
FOLLOW_SECONDS = 1.5  # how long a page waits for a job it started before drawing what it has
WATCH_SECONDS = 1.5  # how often the browser asks whether the session's jobs have news
RECENT_SECONDS = 60.0  # finished jobs stay in the sidebar this long
APPROVED = "_jobs_approved"  # session state: work keys the user asked to run whatever their cost
PACES = "_jobs_paces"  # session state: work key -> the stopped job a Resume goes on from (Job.carry_on)
SEEN = "_jobs_seen"  # session state: each job's change count as the last full run drew it
DRAWN = "_jobs_drawn"  # session state, within a run: the counts of the jobs ``_follow`` drew (job id -> count)
_MODEL_OF: weakref.WeakKeyDictionary[Job, str] = weakref.WeakKeyDictionary()  # job -> the model it runs


@dataclasses.dataclass(frozen=True)
class Cost:
    """What work needs: ``passes`` model passes (``one``/``many``: their name, ``how``: which
    ones) and ``seconds`` at this machine's measured rate (None: no rate measured yet)."""

    passes: int
    one: str
    many: str
    how: str
    seconds: float | None

    def describe(self) -> str:
        return f"{counted(self.passes, self.one, self.many)} ({self.how})"


# --- a page's work ------------------------------------------------------------------------------------------
def _setup(stopped_job: Job | None, cost: Cost) -> Callable[[Job], None]:
    """What a job does before its thread starts: its first report must know these."""
    def setup(job: Job) -> None:
        if stopped_job is not None:
            job.carry_on(stopped_job)
        if cost.seconds is not None:  # the time left leans on the cost model until the job measured its own rate
            job.expect(cost.seconds, log=default_rates().record_job,  # pass_cost.PassSeconds: its parts
                       compiling=getattr(cost.seconds, "compiling", None),
                       borrowed=getattr(cost.seconds, "borrowed", False))
    return setup


def _follow(key: tuple[Hashable, ...], title: str, unit: str, work: Callable[..., object],
           cost: Cost | Callable[[], Cost], *, what: str, model: str | None = None,
           cheaper: tuple[str, Callable[[], None]] | None = None, keeps: bool = True) -> Job | None:
    """The session's job for the work ``key``, drawn on the page; started when it is quick (or
    of unknown cost: then one chunk first, to measure) or was asked for; else None after saying
    what it costs, with a Start button and, when given, ``cheaper`` (label, callback).

    Args:
      key: what identifies the work (kind, model, inputs): one job per key and session.
      title, unit: the job's name and the unit of its progress ("records", "positions").
      work: ``work(job, first_only=False)``: the job's body (``first_only``: one chunk only).
      cost: the work's cost, or a function giving it (only called when no job runs).
      what: what the work is for, as the page names it ("the pseudo-perplexity column").
      model: the model the work runs (``engine_name``), said on the job's sidebar line: two
        models' jobs of one kind read alike without it.
      keeps: a cancelled job's finished units are kept (stored); False: a fit's fits are not.
    """
    job = background.find(key)
    if job is not None and not job.finished:
        running(job, key)
        return job
    if job is not None and job.state in (CANCELLED, FAILED):  # until the user says go on
        _drawn(job)
        stopped(job, key, what, keeps)
        return job
    # A job stopped by a busy server is tried again on the page's next run (as a Retry click would).
    cost = cost() if callable(cost) else cost
    asked = key in st.session_state.get(APPROVED, set())
    if cost.seconds is not None and cost.seconds > QUICK_SECONDS and not asked:
        ask(key, cost, what, cheaper)
        return None
    first_only = cost.seconds is None and not asked  # measure the rate on one chunk first
    stopped_job = st.session_state.get(PACES, {}).pop(key, None)  # a Resume goes on at its pace (approve)
    run = _measuring(work) if first_only else functools.partial(work, first_only=False)
    job = background.submit(key, title, unit, run, setup=_setup(stopped_job, cost))
    if model is not None:
        _MODEL_OF[job] = model
    if first_only:  # one chunk measures the rate: then the page says what the rest costs, or goes on
        # Waited for while it is quick, queued for a slot or stopped by a full queue (the busy
        # warning), not while it compiles a model new to this server (77-91 s of a blank Records
        # page on a busy machine, issue 50): its progress line is drawn at once, the page draws
        # what it has, and the watcher reruns the page when the chunk is in.
        if job.wait_unless_compiling(MEASURE_SECONDS) and job.state in (DONE, MEASURED):
            st.rerun()
    if not (first_only and job.compiles):
        job.wait(FOLLOW_SECONDS)
    if not job.finished:
        running(job, key)
    elif job.state == MEASURED:  # a compiling first chunk came in meanwhile: the page says what the rest costs
        st.rerun()
    elif job.state != DONE:
        _drawn(job)
        stopped(job, key, what, keeps)
    return job


def follow_plan(key: tuple[Hashable, ...], title: str, plan: Plan, engine, *, what: str,
                cheaper: tuple[str, Callable[[], None]] | None = None, keeps: bool = True,
                model: str | None = None) -> Job | None:
    """``_follow`` for a core plan (``flamino_core.jobs.plan``): its cost is the plan's passes (or
    steps) still needed and their seconds here (``cost_of``); its work is ``plan.run`` with
    ``engine`` metered for the job (a heavy-job slot per call, ``slot()`` for its other steps) and a
    Ray cluster's work, or a fit's worker, stopped when the job is cancelled or its tab closed.
    ``keeps``: as ``_follow``'s (a fit's scikit-learn fits are not kept). ``engine`` None: a plan
    whose steps are no engine's (a fold), its job line naming ``model``."""
    return _follow(key, title, plan.unit, functools.partial(_run_plan, plan, engine), lambda: cost_of(plan, engine),
                  what=what, cheaper=cheaper, model=model or engine_name(engine), keeps=keeps)


def _run_plan(plan: Plan, engine, job: Job, first_only: bool = False):
    """A plan's work in its job: the engine metered for it, stopped with it."""
    return plan.run(job, background.metered(engine, job), first_only=first_only,
                    stop=lambda: background.should_stop(job))


def cost_of(plan: Plan, engine) -> Cost:
    """What the page says ``plan`` costs: its passes (or its own steps: ``Needed.steps``) still
    needed, which ones, their seconds here."""
    needed = plan.needed()
    return Cost(needed.passes, needed.one, needed.many, needed.how, needed.seconds(engine))


def _measuring(work):
    """``work`` for one chunk that measures this machine's rate: the job knows it (``measure_only``),
    so it ends as measured, not done, when units are left."""
    def first_chunk(job: Job):
        job.measure_only()
        return work(job, first_only=True)

    return first_chunk


def approve(key: tuple[Hashable, ...]) -> None:
    """The user asked for this work: run it whatever it costs (a stopped job is resumed)."""
    st.session_state.setdefault(APPROVED, set()).add(key)
    stopped_job = background.find(key)
    if stopped_job is not None and stopped_job.pace is not None:  # a Resume goes on at the pace it stopped at
        st.session_state.setdefault(PACES, {})[key] = stopped_job
    background.forget(key)


def ask(key, cost: Cost, what: str, cheaper) -> None:
    """What the work costs, a Start button and the cheaper strategy's."""
    per = cost.seconds / max(cost.passes, 1)
    st.info(
        f"{what[:1].upper()}{what[1:]} needs {plain(cost.describe())}: "
        f"{about(cost.seconds)} {rate_words(cost.seconds)} "
        f"({per:.2g} s per pass). It runs in the background in chunks, can be "
        "cancelled, and keeps what it finished.",
        icon=":material/schedule:",
    )
    row = st.container(horizontal=True)
    with row:
        st.button(f"Start ({about(cost.seconds)})", key=f"start-{_widget(key)}", on_click=approve, args=(key,),
                  icon=":material/play_arrow:")
        if cheaper is not None:
            st.button(cheaper[0], key=f"cheaper-{_widget(key)}", on_click=cheaper[1], icon=":material/bolt:")


def rate_words(seconds: float) -> str:
    """Where a cost's time comes from, after "about X": this kind of pass timed here, or (never
    timed for this model) a borrowed rate, a first guess (``PassSeconds.borrowed``, ``Rates.seconds``)."""
    if getattr(seconds, "borrowed", False):
        return ("as a first guess (this kind of pass is not timed for this model here yet: the rate this machine "
                "measured for other models, by their size, or for this model's other passes stands in, and the "
                "job's own rate replaces it)")
    return "at the rate this machine measured for this model"


def running(job: Job, key: tuple[Hashable, ...]) -> None:
    """The job's progress bar (with the time left at its measured rate) and its Cancel, which is
    the work ``key``'s, not the job's: a click on the button drawn for the first chunk that
    measured the rate reaches the job that runs the rest if the page started it meanwhile (a
    button keyed by the job was gone from the page's last run, and Streamlit dropped the click)."""
    status = job.status()
    st.progress(status.fraction, text=status.line())
    st.button("Cancel", key=f"page-cancel-{_widget(key)}", on_click=cancel_work, args=(key,),
              icon=":material/stop_circle:",
              help="Stops after the chunk in flight; everything finished is kept.",
              disabled=status.phase == "cancelling")


def cancel_work(key: tuple[Hashable, ...]) -> None:
    """Cancel the session's latest job for the work ``key``: running, or a first chunk that
    measured the rate (``Job.cancel``: then it reads as cancelled, and the rest waits for Resume)."""
    job = background.find(key)
    if job is not None:
        job.cancel()


def status_line(job: Job) -> str:
    """The job's state in words (``Job.status``: the one source of every panel's caption)."""
    return job.status().line()


def stopped(job: Job, key, what: str, keeps: bool = True) -> None:
    """What became of a job that did not finish, and the button that goes on from there."""
    done = job.status().count() if job.total else "nothing"
    if job.state == CANCELLED:
        kept = "they are kept" if keeps else "its model passes are kept, its fits start again"
        st.info(f"{plain(job.title)} was cancelled after {done}; {kept}.", icon=":material/pause_circle:")
        label = "Resume"
    elif job.state == STOPPED:
        kept = f" ({done} are done and kept)" if job.done else ""
        st.warning(f"**The server is busy** ({plain(job.error or '')}), so {what} was not computed this time{kept}. "
                   "Everything else on the page works.", icon=":material/hourglass_top:")
        label = "Retry"
    else:
        st.error(f"{plain(job.title)} failed after {done} (kept): {plain(job.error or '')}", icon=":material/error:")
        label = "Retry"
    st.button(label, key=f"resume-{_widget(key)}", on_click=approve, args=(key,), icon=":material/play_arrow:")


# --- the sidebar --------------------------------------------------------------------------------------------
def version() -> dict[int, int]:
    """What the session's jobs have done so far (job id -> its count of changes): ``app.py`` reads
    it before the page draws, so news that arrives while the page draws still reruns it. (A run
    that ``st.rerun`` cut short left its ``_drawn`` counts behind: a new run starts without them.)"""
    st.session_state.pop(DRAWN, None)
    return _version()


def _drawn(job: Job) -> None:
    """``_follow`` drew how ``job`` ended without a result (stopped by a full queue, cancelled,
    failed): its count replaces what ``version()`` said of it before the page drew, so a job the
    page started and that ended at once is no news (counted from before the page drew, it was,
    and every rerun started the next try: AppTest's hosted full-queue runs never ended). Not for
    a job that runs or is done: a page may have drawn its table from what was there before
    ``_follow`` (a Records table of 40 records stayed at 6 when a quick job's end was marked)."""
    st.session_state.setdefault(DRAWN, {})[job.id] = job.version


def sidebar_panel(seen: dict[int, int] | None = None) -> None:
    """The session's running and recently finished jobs, on every page; and the watcher that
    reruns the app when they have news.

    ``seen``: ``version()`` before the page drew. A job that finished while the page was drawing
    (a first chunk measuring the rate, a quick set) left the page showing it running: the
    watcher then reruns at once, though no job runs any more."""
    import time

    now = time.monotonic()
    shown = [job for job in background.session_jobs()
             if not job.finished or now - (job.finished_at or now) < RECENT_SECONDS]
    if shown:
        active = sum(not job.finished for job in shown)
        st.caption(f"Jobs ({active:,} running)" if active else "Jobs")
        for job in shown:
            status = job.status()
            line = sidebar_line(job, status)
            if status.ended:
                st.caption(plain(line))
            else:
                st.progress(status.fraction, text=line)
                st.button("Cancel", key=f"sidebar-cancel-{job.id}", on_click=job.cancel, type="tertiary",
                          icon=":material/stop_circle:", disabled=status.phase == "cancelling")
    drawn = st.session_state.pop(DRAWN, {})
    baseline = _version() if seen is None else {**seen, **drawn}
    st.session_state[SEEN] = baseline
    if any(not job.finished for job in background.session_jobs()) or has_news(baseline, _version()):
        _watch()


def sidebar_line(job: Job, status) -> str:
    """The job's line in the sidebar: its state (``Status.line``), the model passes a finished
    scoring took when its unit is not passes (a pll list counts variants: "done (12 variants)"
    after 2,007 passes), and the model it ran."""
    line = status.line()
    passes = getattr(job.value, "passes", None) if status.phase == "done" else None  # VariantScores, DmsScores
    if isinstance(passes, int) and job.unit != "passes":
        line += f" · {passes:,} model passes"
    return line + (f" · {_MODEL_OF[job]}" if job in _MODEL_OF else "")


def _version() -> dict[int, int]:
    return {job.id: job.version for job in background.session_jobs()}


def has_news(seen: dict[int, int], now: dict[int, int]) -> bool:
    """Whether a job changed since ``seen``: a job not in it, or one whose count moved (a job
    dropped is no news). Per job, not a sum of the counts: a job replaced by the next under the
    same key (a set's first chunks, one record each, while no rate is measured) starts its count
    again and ends on the same number, so a second first chunk that finished while the page drew
    read as no news, no watcher reran the page, and the Records table of 186 records stopped
    after 11 (a fresh clone, 2026-12-07)."""
    return any(seen.get(job) != count for job, count in now.items())


@st.fragment(run_every=WATCH_SECONDS)
def _watch() -> None:
    """Rerun the whole app when a job of this session has news (the page redraws what arrived);
    each of its runs says the session's browser is still there (``background.browser_run``)."""
    with background.browser_run():
        changed = has_news(st.session_state.get(SEEN, {}), _version())
    if changed:
        st.rerun(scope="app")


def engine_name(engine) -> str:
    """The model an engine runs as a job line names it: a preset by its name, a checkpoint by its
    file or folder name (the sidebar shows its path), the untrained model as such; hosted, the
    operator's checkpoint by its public name."""
    if engine.weights.is_random:
        return engine.weights.name  # "untrained test model (tiny)"
    return visitor_short_name(engine.weights.name)


def quick(seconds: float | None) -> bool:
    """Whether work of this estimated length starts without asking."""
    return seconds is None or seconds <= QUICK_SECONDS



def _widget(key: tuple[Hashable, ...]) -> str:
    """A widget key for the work ``key`` (the same in every run; not ``hash()``, which is salted)."""
    return hashlib.sha256(repr(key).encode()).hexdigest()[:16]
