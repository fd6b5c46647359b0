"""The masked-marginal scan of a page's residue range: its time said before it starts, run in
chunks with progress and a Cancel button of its own, kept as it goes, resumed where it stopped.

A scan is one forward pass per position (a 2,554-residue protein: ~24 minutes on the smallest
model on a laptop CPU). Positions run in chunks of ``CHUNK``; each finished chunk goes into the
process-wide ``scan_store.STORE`` keyed by (model, sequence), so leaving the page, cancelling,
a lost connection or a server too busy for the next chunk loses at most the chunk in flight,
and the next run with that model and sequence (in any session) continues from there. Each
chunk is one heavy job (``results.heavy_slot``): on a busy hosted server other sessions' jobs
run between the chunks of a long scan, first come first served.

Before a scan that would take more than ``AUTO_START_SECONDS`` the page says how long it will
take at the rate measured on this server's earlier chunks (``scan_store.RATES``) and waits for
a click; with no rate measured yet, the first chunk runs and measures it.
"""

from __future__ import annotations

import time

import numpy as np
import streamlit as st

from flamino_core.config import MAX_RESIDUES
from flamino_core.planner import bucket_length

from .heavy_jobs import QueueFull
from .models import load_engine
from .policy import hosted_mode
from .ranges import Shown
from .results import busy_warning, heavy_slot
from .scan_store import RATES, STORE, about

CHUNK = 64  # positions per chunk: the most a cancel or an interruption loses
AUTO_START_SECONDS = 30.0  # scans estimated shorter start at once; longer ones are asked for
STARTED = "_scans_started"  # session state: scans this session asked for (continued without asking)
CANCELLED = "_scans_cancelled"  # session state: scans this session cancelled


def _key(model: str, sequence: str, shown: Shown) -> tuple[str, str, int, int]:
    return model, sequence, shown.start, shown.stop


def row_width(sequence: str) -> int:
    """Padded row width of this sequence's masked passes (what the pass rate depends on)."""
    return bucket_length(min(len(sequence), MAX_RESIDUES) + 2)


def estimate(model: str, sequence: str, positions: int) -> float | None:
    """Seconds for ``positions`` more masked passes at this server's measured rate (None: unmeasured)."""
    return RATES.seconds(model, row_width(sequence), positions)


def masked_scan(model: str, sequence: str, shown: Shown) -> np.ndarray | None:
    """(shown.size, vocab) masked log-probabilities of the shown positions, or None while the scan
    is not complete (the page then says why: asked for, cancelled, busy, or still to start)."""
    positions = range(shown.start, shown.stop)
    complete = STORE.get(model, sequence, positions)
    if complete is not None:
        return complete
    ss = st.session_state
    key = _key(model, sequence, shown)
    missing = STORE.missing(model, sequence, positions)
    done = shown.size - len(missing)
    # Positions kept by other sessions are not said on a hosted server (nor counted in the time):
    # "64 of 700 positions done" told a visitor that someone else had analysed this sequence.
    own = not hosted_mode() or key in ss.get(STARTED, set()) | ss.get(CANCELLED, set())
    progress = f" ({done:,} of {shown.size:,} positions done and kept)" if done and own else ""
    to_run = len(missing) if own else shown.size  # the passes said (and timed) before a start
    seconds = estimate(model, sequence, to_run)
    what = f"The masked scan of {shown.label()}"
    if key in ss.get(CANCELLED, set()):
        left = f": the remaining {len(missing):,} take {about(seconds)}" if seconds is not None else ""
        st.info(f"{what} was cancelled after {done:,} of {shown.size:,} positions; they are kept{left}.",
                icon=":material/pause_circle:")
        st.button("Resume the scan", on_click=_start, args=(key,), icon=":material/play_arrow:")
        return None
    if key not in ss.get(STARTED, set()) and seconds is not None and seconds > AUTO_START_SECONDS:
        rate = seconds / to_run
        st.info(
            f"{what} runs {to_run:,} masked passes, one per position{progress}: {about(seconds)} at this "
            f"server's measured rate ({rate:.2f} s per position). It runs in chunks and can be cancelled; "
            "what is done is kept.",
            icon=":material/schedule:",
        )
        st.button(f"Start the scan ({about(seconds)})", on_click=_start, args=(key,), icon=":material/play_arrow:")
        return None
    if key not in ss.get(STARTED, set()) and seconds is None and len(missing) > CHUNK:
        # No rate measured on this server yet: the first chunk measures it; the next run of the
        # page then knows how long the rest takes, and asks first if that is long.
        _run(model, sequence, shown, key, missing[:CHUNK], remember=False)
        if len(STORE.missing(model, sequence, missing[:CHUNK])) == 0:  # measured (not refused as busy)
            st.rerun()
        return None
    return _run(model, sequence, shown, key, missing)


def _start(key) -> None:
    ss = st.session_state
    ss.setdefault(STARTED, set()).add(key)
    ss.setdefault(CANCELLED, set()).discard(key)


def _cancel(key) -> None:
    # Runs at the start of the rerun the click asks for; the scan itself was stopped by then
    # (Streamlit interrupts a running script at its next element update).
    ss = st.session_state
    ss.setdefault(CANCELLED, set()).add(key)
    ss.setdefault(STARTED, set()).discard(key)


def _run(model: str, sequence: str, shown: Shown, key, missing: list[int], remember: bool = True) -> np.ndarray | None:
    """Scan the ``missing`` positions chunk by chunk, with progress and Cancel, keeping each chunk.

    ``remember``: this scan was asked for (or is short): an interrupted run continues on the
    next run without asking again.
    """
    if remember:
        st.session_state.setdefault(STARTED, set()).add(key)
    engine = load_engine(model)
    width = row_width(sequence)
    panel = st.container()
    with panel:
        bar = st.progress(0.0, text=f"Masked scan of {shown.label()}…")
        st.button("Cancel the scan", on_click=_cancel, args=(key,), icon=":material/stop_circle:", key="scan_cancel")
    total = shown.size
    done = total - len(STORE.missing(model, sequence, range(shown.start, shown.stop)))
    shown_at = [0.0]

    def show(finished: float) -> None:
        now = time.monotonic()
        if now - shown_at[0] < 0.5 and finished < total:
            return  # a few updates a second: each one is a message to the browser
        shown_at[0] = now
        left = estimate(model, sequence, total - int(finished))
        rest = f" · {about(left)} left" if left is not None and finished < total else ""
        bar.progress(min(finished / total, 1.0), text=f"Masked scan of {shown.label()}: "
                     f"{int(finished):,} of {total:,} positions{rest}")

    show(done)
    for first in range(0, len(missing), CHUNK):
        chunk = missing[first:first + CHUNK]

        finished: list[float] = []  # when each of the chunk's batches finished

        def inner(batches_done: int, batches: int, chunk_size: int = len(chunk)) -> None:
            finished.append(time.monotonic())
            show(done + chunk_size * batches_done / batches)

        try:
            with heavy_slot("the masked scan"):
                started = time.monotonic()
                log_probs = engine.masked_log_probs(sequence, chunk, progress=inner)
                _measure(model, width, len(chunk), started, finished)
        except QueueFull as err:
            panel.empty()
            if done:
                kept = f" ({done:,} of {total:,} positions are done and kept)"
                busy_warning("the rest of the masked scan", err, done=kept)
            else:
                busy_warning("the masked scan", err)
            return None
        STORE.add(model, sequence, chunk, log_probs)
        done += len(chunk)
        show(done)
    panel.empty()
    return STORE.get(model, sequence, range(shown.start, shown.stop))


def _measure(model: str, width: int, positions: int, started: float, finished: list[float]) -> None:
    """Record the pass rate of one chunk. Its first batch may include compiling the model for a
    new shape (seconds, once per process): with several batches, time only the later ones."""
    if len(finished) >= 3:
        per_batch = positions / len(finished)
        RATES.record(model, width, round(per_batch * (len(finished) - 1)), finished[-1] - finished[0])
    else:
        RATES.record(model, width, positions, (finished[-1] if finished else time.monotonic()) - started)
