"""Model results a page needs for one record, and the heavy ones queued.

What the result store keeps (``flamino_core.store.passes``) is read from it: a record's unmasked
outputs (logits, with every layer's mean embedding and the entropy computed in the same pass)
and single masked positions. What it does not keep (per-residue representations, attention
maps, contacts) is cached with ``st.cache_data``, keyed by the model's fingerprint and the
sequence, shared by every session; the entry counts are fixed at import, smaller on a shared
server, where one attention entry of a 650M model at 1022 residues is ~85 MB. Attention maps and
contacts of long sequences run through the process-wide heavy-job queue (``heavy_jobs.py``);
``heavy`` turns a full queue into one warning on the page, with a Retry button. Masked scans
and a set's work are background jobs (``scans.py``, ``set_results.py``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

import numpy as np
import streamlit as st

from flamino_core.store import masked_log_probs, record_outputs

from flamino_core.variants import from_log_probs
from flamino_core.analysis import log_softmax
from flamino_core.model import MAX_RESIDUES

from app_pages._ui.server.heavy_jobs import HEAVY_RESIDUES, TURNS, QueueFull, heavy_job_queue, jobs, ordinal
from app_pages._ui.server.policy import hosted_mode
from app_pages._ui.frame.widgets import plain

LOG = logging.getLogger("flamino")


# --- heavy jobs ------------------------------------------------------------------------------------
@contextlib.contextmanager
def heavy_slot(what: str):
    """Run the block in the process-wide heavy-job queue, showing the place in it while waiting.
    The block gets ``give_way()`` to call between chunks of a long job (``heavy_jobs.Turn``).

    Used inside cached functions (only a cache miss queues). Updating the note every few seconds
    is also what stops the wait of a session that was closed meanwhile: Streamlit interrupts a
    stopped script at its next element update.
    """
    queue = heavy_job_queue()
    note = st.empty()
    shown = [None]

    def waiting(seconds: float, place: int) -> None:
        if (int(seconds) // 5, place) == shown[0]:
            return
        shown[0] = (int(seconds) // 5, place)
        ahead = "next in line" if place == 1 else f"{ordinal(place)} in line"
        note.info(
            f"Waiting for a free slot for {plain(what)}: {ahead} ({jobs(queue.running)} running; "
            f"waited {seconds:.0f} s). The {TURNS}.",
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


# --- through the result store -------------------------------------------------------------------------
def logits(engine, sequence: str) -> np.ndarray:
    """(L, 33) LM logits of one unmasked pass (which also stores the record's mean embeddings and
    entropy for the Records and Embeddings pages)."""
    with st.spinner("Running the model…"):
        (out,) = record_outputs(engine, [sequence], logits=True)
    return out.logits


def masked_position(engine, sequence: str, position: int) -> np.ndarray:
    """(33,) log-probabilities at 0-based ``position`` with that residue masked."""
    with st.spinner("Masking the position…"):
        return masked_log_probs(engine, sequence, [position])[0]


def wt_marginal_scores(engine, sequence: str) -> np.ndarray:
    """(L, 20) wt-marginal substitution scores, from the stored unmasked pass's logits."""
    log_probs = log_softmax(logits(engine, sequence).astype(np.float64)).astype(np.float32)
    return from_log_probs(log_probs, sequence, "wt-marginals").substitutions


# --- cached here (the store keeps no per-residue maps) -----------------------------------------------
def representations(engine, sequence: str, layer: int) -> np.ndarray:
    """(L, D) hidden states after ``layer`` (0 = token embeddings)."""
    return _representations(engine.fingerprint, sequence, layer, engine)


@st.cache_data(show_spinner="Computing embeddings…", max_entries=16 if hosted_mode() else 64)
def _representations(model: str, sequence: str, layer: int, _engine) -> np.ndarray:
    (out,) = _engine.run([sequence], repr_layers=(layer,), logits=False)
    return out.representations[layer]


def attention(engine, sequence: str, layer: int) -> np.ndarray:
    """(H, T, T) attention of one layer, T = residues + 2 (with ``<cls>``/``<eos>``).

    Only this layer's maps are materialised. Longer than 1022 residues: the first 1022
    (maps cannot be stitched from windows). Long sequences are queued.
    """
    return _attention(engine.fingerprint, sequence, layer, engine)


@st.cache_data(show_spinner="Computing attention maps…", max_entries=4 if hosted_mode() else 8)
def _attention(model: str, sequence: str, layer: int, _engine) -> np.ndarray:
    long = "truncate" if len(sequence) > MAX_RESIDUES else "window"
    with _maybe_heavy(sequence, "the attention maps"):
        (out,) = _engine.run([sequence], repr_layers=(), logits=False, attention_layers=(layer,), long=long)
    return out.attentions[0]


def contacts(engine, sequence: str) -> np.ndarray:
    """(L, L) contact probabilities; long sequences in overlapping windows (and queued)."""
    return _contacts(engine.fingerprint, sequence, engine)


@st.cache_data(
    show_spinner="Predicting contacts (needs every layer's attention)…", max_entries=8 if hosted_mode() else 16
)
def _contacts(model: str, sequence: str, _engine) -> np.ndarray:
    with _maybe_heavy(sequence, "the contact map"):
        (out,) = _engine.run([sequence], repr_layers=(), logits=False, contacts=True, long="window")
    return out.contacts
