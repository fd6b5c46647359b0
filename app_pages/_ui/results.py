"""Model results, cached for every session, and the heavy ones queued.

Each result is cached with ``st.cache_data`` keyed by (model identifier, sequence, options), all
plain strings, ints and tuples, so they hash cheaply and are shared by every session. Each takes
the model identifier, not the engine, so results are keyed by model. The entry counts are fixed
at import: smaller on a shared server, where one attention entry of a 650M model at 1022
residues is ~85 MB. Attention maps and contacts of long sequences run through the process-wide
heavy-job queue (``heavy_jobs.py``), as does each chunk of a masked scan (``scans.py``, which keeps
its own results, in ``scan_store.STORE``, which ``masked_scan`` below shares); ``heavy`` turns a full queue into one warning on the page, with a Retry button.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

import numpy as np
import streamlit as st

from flamino_core import scores
from flamino_core.config import MAX_RESIDUES

from .heavy_jobs import HEAVY_RESIDUES, QueueFull, heavy_job_queue, jobs
from .models import load_engine
from .policy import hosted_mode
from .scan_store import STORE
from .widgets import plain

HOSTED = hosted_mode()
LOG = logging.getLogger("flamino")
SCAN_CHUNK = 64  # positions per queued chunk of a whole-sequence scan (as scans.CHUNK)


# --- heavy jobs ------------------------------------------------------------------------------------
def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@contextlib.contextmanager
def heavy_slot(what: str):
    """Run the block in the process-wide heavy-job queue, showing the place in it while waiting.
    The block gets ``give_way()`` to call between chunks of a long job (``heavy_jobs.Turn``).

    Used inside cached functions (only a cache miss queues) and per chunk of a masked scan.
    Updating the note every few seconds is also what stops the wait of a session that was closed
    meanwhile: Streamlit interrupts a stopped script at its next element update.
    """
    queue = heavy_job_queue()
    note = st.empty()
    shown = [None]

    def waiting(seconds: float, place: int) -> None:
        if (int(seconds) // 5, place) == shown[0]:
            return
        shown[0] = (int(seconds) // 5, place)
        ahead = "next in line" if place == 1 else f"{_ordinal(place)} in line"
        note.info(
            f"Waiting for a free slot for {plain(what)}: {ahead} ({jobs(queue.running)} running; "
            f"waited {seconds:.0f} s). Jobs run first come, first served.",
            icon=":material/hourglass_top:",
        )

    try:
        with queue.slot(on_wait=waiting) as turn:
            note.empty()

            def give_way() -> None:  # between chunks of a long job: others waiting run first
                turn.give_way()
                note.empty()

            yield give_way
    except BaseException as exc:  # Streamlit's stop/rerun signals are BaseExceptions
        if type(exc).__name__ in ("StopException", "RerunException"):
            LOG.warning("heavy job abandoned (%s): its session closed or asked for something else", what)
        raise
    finally:
        note.empty()


def busy_warning(what: str, err: QueueFull, done: str = "") -> None:
    """The server-is-busy message, said once, and a Retry button (a click reruns the page)."""
    st.warning(
        f"**The server is busy** ({plain(err)}), so {plain(what)} was not computed this time{plain(done)}. "
        "Everything else on the page works.",
        icon=":material/hourglass_top:",
    )
    st.button("Retry", key=f"retry {what}", icon=":material/refresh:")


def heavy(compute: Callable, *args, what: str):
    """``compute(*args)``, or None with a warning when the server is too busy to queue it."""
    try:
        return compute(*args)
    except QueueFull as err:
        busy_warning(what, err)
        return None


def _maybe_heavy(sequence: str, what: str):
    return heavy_slot(what) if len(sequence) > HEAVY_RESIDUES else contextlib.nullcontext()


def _bar(text: str):
    """A progress bar for a slow cached computation, removed when it is done.

    It is drawn inside the cached function because Streamlit forbids drawing into outside
    elements there; the price is that Streamlit replays its updates on every cache hit. So it
    moves in steps of 5% at most (about 20 updates), and the final ``empty()`` leaves nothing.
    """
    bar = st.progress(0.0, text=text)
    last = [0.0]

    def update(done: int, total: int) -> None:
        fraction = done / max(total, 1)
        if fraction - last[0] >= 0.05 or done == total:
            bar.progress(fraction, text=f"{text} ({done}/{total} batches)")
            last[0] = fraction

    return bar, update


def masked_scan(model: str, sequence: str, what: str = "the masked scan") -> np.ndarray:
    """(L, 33) log-probabilities with each position masked in turn: L forward passes (queued).

    For pages that need a whole sequence's scan (the Records table's pseudo-perplexities, the
    Variants and Structure pages' masked-marginal maps). The positions are kept in the same
    process-wide ``scan_store.STORE`` as the Masked predictions page's own scans (``scans.py``),
    so a position masked once for a model and sequence is never run again, whichever page ran it.
    """
    positions = range(len(sequence))
    kept = STORE.get(model, sequence, positions)
    if kept is not None:
        return kept
    missing = STORE.missing(model, sequence, positions)
    bar = st.progress(0.0, text=f"Masking {len(missing):,} of the {len(sequence):,} positions")
    try:
        for first in range(0, len(missing), SCAN_CHUNK):  # one queue slot per chunk, each chunk kept
            chunk = missing[first:first + SCAN_CHUNK]
            with heavy_slot(what):
                log_probs = load_engine(model).masked_log_probs(sequence, chunk)  # (n, 33)
            STORE.add(model, sequence, chunk, log_probs)
            bar.progress((first + len(chunk)) / len(missing),
                         text=f"Masking {len(missing):,} of the {len(sequence):,} positions ({first + len(chunk):,} done)")
    finally:
        bar.empty()
    return STORE.get(model, sequence, positions)


# --- cached results ----------------------------------------------------------------------------------
@st.cache_data(show_spinner="Running the model…", max_entries=64)
def logits(model: str, sequence: str) -> np.ndarray:
    """(L, 33) LM logits from one unmasked pass."""
    (out,) = load_engine(model).run([sequence], repr_layers=(), logits=True)
    return out.logits


@st.cache_data(show_spinner="Masking the position…", max_entries=256)
def masked_position(model: str, sequence: str, position: int) -> np.ndarray:
    """(33,) log-probabilities at 0-based ``position`` with that residue masked."""
    return load_engine(model).masked_log_probs(sequence, [position])[0]


@st.cache_data(show_spinner="Scoring substitutions…", max_entries=64)
def wt_marginal_scores(model: str, sequence: str) -> np.ndarray:
    return scores.substitution_map(load_engine(model), sequence, "wt-marginals").substitutions


@st.cache_data(show_spinner="Computing embeddings…", max_entries=16 if HOSTED else 64)
def representations(model: str, sequence: str, layer: int) -> np.ndarray:
    """(L, D) hidden states after ``layer`` (0 = token embeddings)."""
    (out,) = load_engine(model).run([sequence], repr_layers=(layer,), logits=False)
    return out.representations[layer]


@st.cache_data(show_spinner=False, max_entries=32)
def mean_embeddings(model: str, sequences: tuple[str, ...], layer: int) -> np.ndarray:
    """(N, D) per-sequence embeddings: each sequence's ``layer`` states averaged over residues."""
    bar, update = _bar(f"Embedding {len(sequences)} sequences")
    try:
        outs = load_engine(model).run(list(sequences), repr_layers=(layer,), logits=False, progress=update)
    finally:
        bar.empty()
    return np.stack([out.representations[layer].mean(axis=0) for out in outs])


@st.cache_data(show_spinner="Computing attention maps…", max_entries=4 if HOSTED else 8)
def attention(model: str, sequence: str, layer: int) -> np.ndarray:
    """(H, T, T) attention of one layer, T = residues + 2 (with ``<cls>``/``<eos>``).

    Only this layer's maps are materialised. Longer than 1022 residues: the first 1022
    (maps cannot be stitched from windows). Long sequences are queued.
    """
    long = "truncate" if len(sequence) > MAX_RESIDUES else "window"
    with _maybe_heavy(sequence, "the attention maps"):
        (out,) = load_engine(model).run(
            [sequence], repr_layers=(), logits=False, attention_layers=(layer,), long=long
        )
    return out.attentions[0]


@st.cache_data(
    show_spinner="Predicting contacts (needs every layer's attention)…", max_entries=8 if HOSTED else 16
)
def contacts(model: str, sequence: str) -> np.ndarray:
    """(L, L) contact probabilities; long sequences in overlapping windows (and queued)."""
    with _maybe_heavy(sequence, "the contact map"):
        (out,) = load_engine(model).run([sequence], repr_layers=(), logits=False, contacts=True, long="window")
    return out.contacts
